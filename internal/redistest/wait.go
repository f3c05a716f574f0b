package redistest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

const (
	// SyncTimeout is how long [WaitSynced] waits.
	SyncTimeout = 15 * time.Second
	// pollInterval is how often [WaitFor] and [WaitSynced] check their condition.
	pollInterval = 25 * time.Millisecond
)

// WaitFor calls cond every 25 ms until it returns true, and fails the test naming what
// if that takes longer than timeout. cond runs on the test goroutine, so it may call
// t.Fatal (through [Client.MustDo], say).
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("redistest: timed out after %v waiting for %s", timeout, what)
	}
}

// Poll calls cond every pollInterval until it returns true or timeout passes, and
// reports whether it did; it calls cond at least once, and once more at the deadline.
// For a wait whose failure states the figures cond last saw.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(min(pollInterval, max(time.Until(deadline), time.Millisecond)))
	}
}

// WaitSynced waits up to [SyncTimeout] until every replica has master_link_status:up,
// the primary's master_repl_offset, and the primary's DEBUG DIGEST. On timeout it fails
// the test with each node's link status, offset and digest.
//
// REQUIRES: nothing writes to the primary meanwhile, or the offsets may never meet.
// The primary may be the proxy, if it answers INFO replication and DEBUG DIGEST.
func WaitSynced(t testing.TB, primary *Client, replicas ...*Client) {
	t.Helper()
	WaitSyncedWithin(t, SyncTimeout, primary, replicas...)
}

// WaitSyncedWithin is [WaitSynced] with a timeout.
func WaitSyncedWithin(t testing.TB, timeout time.Duration, primary *Client, replicas ...*Client) {
	t.Helper()
	var report string
	var fatal error // a network error: the client is broken, so waiting is pointless
	synced := Poll(timeout, func() bool {
		var ok bool
		ok, report, fatal = syncState(primary, replicas)
		return ok || fatal != nil
	})
	if fatal != nil {
		t.Fatalf("redistest: waiting for replicas to sync: %v\n%s", fatal, report)
	}
	if !synced {
		t.Fatalf("redistest: replicas not synced after %v:\n%s", timeout, report)
	}
}

// syncState reports whether all replicas are in sync with primary, with a table of
// what it saw. Error replies (-LOADING during a full sync) just mean "not yet"; other
// errors are returned as fatal.
func syncState(primary *Client, replicas []*Client) (ok bool, report string, fatal error) {
	var b strings.Builder
	ok = true
	note := func(err error) {
		ok = false
		var re *ReplyError
		if !errors.As(err, &re) && fatal == nil {
			fatal = err
		}
	}
	offsetOf := func(c *Client) (link, offset string) {
		info, err := c.info("replication")
		if err != nil {
			note(err)
			return "?", fmt.Sprintf("error: %v", err)
		}
		link = info["master_link_status"]
		if info["role"] == "master" {
			link = "(master)"
		}
		return link, info["master_repl_offset"]
	}
	_, primaryOffset := offsetOf(primary)
	links := make([]string, len(replicas))
	offsets := make([]string, len(replicas))
	for i, r := range replicas {
		links[i], offsets[i] = offsetOf(r)
		if links[i] != "up" || offsets[i] != primaryOffset {
			ok = false
		}
	}
	// DEBUG DIGEST is O(dataset): only compute it once the offsets agree.
	digests := make([]string, len(replicas)+1)
	if ok {
		for i, c := range append([]*Client{primary}, replicas...) {
			d, err := c.digest()
			if err != nil {
				note(err)
				d = fmt.Sprintf("error: %v", err)
			}
			digests[i] = d
			if d != digests[0] {
				ok = false
			}
		}
	}
	fmt.Fprintf(&b, "  primary  %-21s offset=%s digest=%s\n", primary.Addr(), primaryOffset, orNone(digests[0]))
	for i, r := range replicas {
		fmt.Fprintf(&b, "  replica  %-21s link=%s offset=%s digest=%s\n", r.Addr(), links[i], offsets[i], orNone(digests[i+1]))
	}
	return ok, b.String(), fatal
}

func orNone(s string) string {
	if s == "" {
		return "(not compared)"
	}
	return s
}
