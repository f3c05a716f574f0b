package proxy

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/replid"
)

// TestLinkRefusesHostileReplies: a main link whose primary answers what
// Redis never sends (a replid that is a path, or uppercase, or short; an
// offset past 2^62 or negative; a payload length past 2^50; an EOF mark that
// is not 40 bytes; +CONTINUE to PSYNC ? -1 or with a bad replid) fails with
// upstream.ErrBadReply, installs nothing and keeps the proxy's replication ID.
func TestLinkRefusesHostileReplies(t *testing.T) {
	rdb := linkRDB(t)
	hs := linkHandshakeReplies(false)
	sized := "$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb)
	full := func(id, off string) string { return "+FULLRESYNC " + id + " " + off + "\r\n" }
	good := strconv.Itoa(linkOffset)
	for _, tc := range []struct {
		name    string
		replies string
		after   bool // after a good session: the proxy asks to continue
	}{
		{"replid with ../", hs + full(hostileDotsReplID, good) + sized, false},
		{"replid uppercase", hs + full(strings.ToUpper(linkReplID), good) + sized, false},
		{"replid of 39 characters", hs + full(linkReplID[:39], good) + sized, false},
		{"offset MaxInt64", hs + full(linkReplID, strconv.FormatInt(math.MaxInt64, 10)) + sized, false},
		{"offset past 2^62", hs + full(linkReplID, strconv.FormatInt(replid.MaxOffset+1, 10)) + sized, false},
		{"offset negative", hs + full(linkReplID, "-5") + sized, false},
		{"offset with a sign", hs + full(linkReplID, "+5") + sized, false},
		{"payload length MaxInt64", hs + full(linkReplID, good) + "$9223372036854775807\r\n" + string(rdb), false},
		{"payload length past 2^50", hs + full(linkReplID, good) + "$1125899906842625\r\n" + string(rdb), false},
		{"EOF mark of 39 bytes", hs + full(linkReplID, good) + "$EOF:" + linkEOFMark[:39] + "\r\n" + string(rdb) + linkEOFMark[:39], false},
		{"EOF mark of 41 bytes", hs + full(linkReplID, good) + "$EOF:" + linkEOFMark + "x\r\n" + string(rdb) + linkEOFMark + "x", false},
		{"CONTINUE to PSYNC ? -1", hs + "+CONTINUE\r\n" + fakePing, false},
		{"CONTINUE with replid to PSYNC ? -1", hs + "+CONTINUE " + linkReplID + "\r\n" + fakePing, false},
		{"CONTINUE replid with ../", hs + "+CONTINUE " + hostileDotsReplID + "\r\n" + fakePing, true},
		{"CONTINUE replid uppercase", hs + "+CONTINUE " + strings.ToUpper(linkReplIDNew) + "\r\n" + fakePing, true},
		{"CONTINUE replid of 39 characters", hs + "+CONTINUE " + linkReplIDNew[:39] + "\r\n" + fakePing, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := linkNewServer(t, hclog.Info)
			wantID := srv.hist.Identity().ReplID
			if tc.after {
				base := linkFullSized(rdb)
				res := linkSession(t, srv, linkPipe, "", "", linkTimeout, func(f *fakeLink) error { return base.play(f, nil) })
				if res.scriptErr != nil || !res.wasUp {
					t.Fatalf("first session: %v %v", res.err, res.scriptErr)
				}
				wantID = linkReplID
			}
			before := srv.Snapshot()
			res := linkSession(t, srv, linkPipe, "", "", linkTimeout, linkReplies(tc.replies))
			t.Logf("serve: %v", res.err)
			if res.wasUp || !errors.Is(res.err, upstream.ErrBadReply) {
				t.Errorf("serve = (%v, %v), want (false, upstream.ErrBadReply)", res.wasUp, res.err)
			}
			if sn := srv.Snapshot(); sn != before {
				t.Errorf("the refused session installed snapshot %s/%d", sn.ReplID(), sn.Offset())
			}
			if id := srv.hist.Identity().ReplID; id != wantID {
				t.Errorf("replid %q after the refused session, want %q", id, wantID)
			}
		})
	}
}

// TestUpstreamRefusesBadReplID: a running proxy whose primary answers
// +FULLRESYNC with replids Redis never makes refuses each link (it never
// acknowledges the sync, nor shows the replid), counts and logs the failure,
// and keeps trying until the primary answers well.
func TestUpstreamRefusesBadReplID(t *testing.T) {
	bad := []string{hostileDotsReplID, strings.ToUpper(linkReplID), "3e6f7fa1b2ac2025fc6edcca60effe8ade39892Z"}
	accepted := make(chan string, len(bad))
	h := startFakePrimary(t, func(hc *fakeLink) error {
		if hc.n > len(bad) {
			return fakeGoodMain(0)(hc)
		}
		id := bad[hc.n-1]
		if err := hc.write("+FULLRESYNC " + id + " " + strconv.Itoa(linkOffset) + "\r\n" + hc.payload()); err != nil {
			return err
		}
		if hc.awaitHangup() {
			accepted <- id
		}
		return nil
	}, nil)
	p := startProxy(t, append(h.replicaOf(), "--repl-timeout", "1")...)
	redistest.WaitFor(t, 15*time.Second, "proxy link up after the bad replies", func() bool {
		return p.up.State() == upstream.StateConnected && int(h.mains.Load()) > len(bad)
	})
	close(accepted)
	for id := range accepted {
		t.Errorf("the proxy acknowledged a sync with replid %q", id)
	}
	if id := p.hist.Identity().ReplID; id != linkReplID {
		t.Errorf("replid %q, want the good primary's %q", id, linkReplID)
	}
	if got := p.stats.UpstreamLinkFailures.Load(); got < int64(len(bad)) {
		t.Errorf("%d link failures counted, want at least %d", got, len(bad))
	}
	if !p.Log.Contains("not 40 lowercase hex digits") {
		t.Errorf("no log line says why the replids were refused")
	}
}

// hostileBurst is what a main link streams at once after its sync: four
// times the 16 KiB backlog, so that the proxy's snapshot is no longer
// servable and a full sync needs a fetch.
const hostileBurst = 64 << 10

// TestFetchRetried: a snapshot fetch that fails before its snapshot is handed
// out (the primary goes silent after +FULLRESYNC, answers a replid that is a
// path, or an offset past 2^62) is counted and tried again while the replica
// waits, which then gets its full sync once the primary answers well.
func TestFetchRetried(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (about 3 s): each case waits out fetch retries' backoff")
	}
	for _, tc := range []struct {
		name string
		bad  func(hc *fakeLink) error
	}{
		{"silent after FULLRESYNC", func(hc *fakeLink) error {
			if err := hc.write(hc.fullResync()); err != nil {
				return err
			}
			hc.awaitHangup() // the proxy must give up first: repl-timeout is 1 s, the harness waits 10
			return nil
		}},
		{"replid with ../", func(hc *fakeLink) error {
			return hc.write("+FULLRESYNC " + hostileDotsReplID + " " + strconv.Itoa(linkOffset) + "\r\n" + hc.payload())
		}},
		{"offset MaxInt64", func(hc *fakeLink) error {
			return hc.write("+FULLRESYNC " + hc.primary.replID + " " + strconv.FormatInt(math.MaxInt64, 10) + "\r\n" + hc.payload())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startFakePrimary(t, fakeGoodMain(hostileBurst), func(hc *fakeLink) error {
				if hc.n == 1 {
					err := tc.bad(hc)
					hc.awaitHangup()
					return err
				}
				return hc.goodFetch()
			})
			// No stream log: with it, the proxy's own snapshot stays
			// servable from disk and no fetch is needed.
			p := startHostileProxy(t, h, "--repl-log-size", "0")
			waitSnapshotUnservable(t, p)
			r := dialRawReplica(t, p, false)
			start := time.Now()
			if err := r.fullSync(h, "?", "-1"); err != nil {
				t.Fatalf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
			}
			t.Logf("full sync after %v", time.Since(start).Round(time.Millisecond))
			if n := h.sides.Load(); n != 2 {
				t.Errorf("%d side links, want 2 (the failed fetch and its retry)", n)
			}
			xc := redistest.Dial(t, p.AddrString())
			if got := xc.InfoInt(t, "proxy", "snapshot_fetch_failures"); got != 1 {
				t.Errorf("snapshot_fetch_failures:%d, want 1", got)
			}
			// The fetch is counted once its payload is whole, which may be
			// after the replica, following it as it arrived, has it all.
			redistest.WaitFor(t, 5*time.Second, "snapshot_fetches:1", func() bool {
				return xc.InfoInt(t, "proxy", "snapshot_fetches") == 1
			})
		})
	}
}

// TestFetchKeepalivesRenewTimeout: newlines from the primary before the
// payload (a disk-based sync writing its RDB) keep the side link alive for
// longer than repl-timeout.
func TestFetchKeepalivesRenewTimeout(t *testing.T) {
	h := startFakePrimary(t, fakeGoodMain(hostileBurst), func(hc *fakeLink) error {
		if err := hc.write(hc.fullResync()); err != nil {
			return err
		}
		for range 8 { // 2 s of newlines, twice repl-timeout
			time.Sleep(250 * time.Millisecond) // the pace of the keepalives: what is tested
			if err := hc.write("\n"); err != nil {
				return err
			}
		}
		if err := hc.write(hc.payload()); err != nil {
			return err
		}
		hc.awaitHangup()
		return nil
	})
	// No stream log: with it, the proxy's own snapshot stays servable from
	// the log and no fetch is needed.
	p := startHostileProxy(t, h, "--repl-log-size", "0")
	waitSnapshotUnservable(t, p)
	r := dialRawReplica(t, p, true)
	if err := r.fullSync(h, "?", "-1"); err != nil {
		t.Fatal(err)
	}
	xc := redistest.Dial(t, p.AddrString())
	if got := xc.InfoInt(t, "proxy", "snapshot_fetch_failures"); got != 0 {
		t.Errorf("snapshot_fetch_failures:%d, want 0", got)
	}
}

// TestFetchRetryEnds: the retries of a failing fetch end, and the fetch with
// them, once no replica waits for it, when replicaof changes, and when the
// server stops.
func TestFetchRetryEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (about 3.5 s): each case waits out fetch retries' backoff")
	}
	refuse := func(hc *fakeLink) error { return hc.write("-ERR BGSAVE failed\r\n") }
	setup := func(t *testing.T) (*fakePrimary, *testProxy, *rawReplica) {
		h := startFakePrimary(t, fakeGoodMain(hostileBurst), refuse)
		// No stream log: with it, the proxy's own snapshot stays servable
		// from disk and no fetch is needed.
		p := startHostileProxy(t, h, "--repl-log-size", "0")
		waitSnapshotUnservable(t, p)
		r := dialRawReplica(t, p, true)
		if err := r.send("PSYNC", "?", "-1"); err != nil {
			t.Fatal(err)
		}
		redistest.WaitFor(t, 10*time.Second, "a second fetch attempt", func() bool { return h.sides.Load() >= 2 })
		return h, p, r
	}

	t.Run("no replica waits", func(t *testing.T) {
		_, p, r := setup(t)
		r.conn.Close()
		redistest.WaitFor(t, 10*time.Second, "the fetch to end", func() bool { return !fetchInFlight(p) })
		if !p.Log.Contains("no replica waits") {
			t.Errorf("no log line says why the fetch ended")
		}
	})
	t.Run("replicaof changes", func(t *testing.T) {
		_, p, r := setup(t)
		other := startFakePrimary(t, func(hc *fakeLink) error { hc.awaitHangup(); return nil }, refuse)
		admin := redistest.Dial(t, p.AddrString())
		admin.MustDo(t, append([]any{"REPLICAOF"}, other.replicaOf()[1], other.replicaOf()[2])...)
		redistest.WaitFor(t, 10*time.Second, "the fetch to end", func() bool { return !fetchInFlight(p) })
		if rest, err := r.rest(); err != nil || strings.Trim(rest, "\n") != "" {
			t.Errorf("the waiting replica got %q, %v; want keepalives, then a hang-up", rest, err)
		}
		if n := other.sides.Load(); n != 0 {
			t.Errorf("%d fetches from the new primary, want 0 (the replica waited for the old one)", n)
		}
	})
	t.Run("server stops", func(t *testing.T) {
		h, p, _ := setup(t)
		// Four failures: the next attempt is 2 s away.
		redistest.WaitFor(t, 10*time.Second, "a fourth fetch attempt", func() bool { return h.sides.Load() >= 4 })
		start := time.Now()
		if err := p.stop(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("the proxy took %v to stop: the fetch retry did not see it", took)
		}
	})
}

// TestFailedSnapshotNeverSendsEOFToPlainReplica: a fetched snapshot that fails
// while arriving, followed by a replica that never said capa eof, ends that
// replica's sync without a payload header (it could not parse "$EOF:"); the
// replica then syncs again from the next fetch.
func TestFailedSnapshotNeverSendsEOFToPlainReplica(t *testing.T) {
	rdb := linkRDB(t)
	fullresyncSeen := make(chan struct{})
	h := startFakePrimary(t, fakeGoodMain(hostileBurst), func(hc *fakeLink) error {
		if hc.n > 1 {
			return hc.goodFetch()
		}
		if err := hc.write(hc.fullResync() + "$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb[:len(rdb)/2])); err != nil {
			return err
		}
		select { // the replica follows the snapshot; now it fails
		case <-fullresyncSeen:
		case <-time.After(fakeIOTimeout):
		}
		return nil
	})
	// No stream log: with it, the proxy's own snapshot stays servable from
	// the log and no fetch is needed.
	p := startHostileProxy(t, h, "--repl-log-size", "0")
	waitSnapshotUnservable(t, p)
	r := dialRawReplica(t, p, false)
	line, err := r.psync("?", "-1")
	if err != nil || !strings.HasPrefix(line, "+FULLRESYNC "+h.replID) {
		t.Fatalf("PSYNC ? -1 answered %q, %v", line, err)
	}
	close(fullresyncSeen)
	rest, err := r.rest()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Trim(rest, "\n") != "" {
		t.Errorf("after the snapshot failed, a replica without capa eof got %q; want keepalives, then a hang-up", clip(rest, 80))
	}
	xc := redistest.Dial(t, p.AddrString())
	if got := xc.InfoInt(t, "proxy", "snapshot_fetch_failures"); got != 1 {
		t.Errorf("snapshot_fetch_failures:%d, want 1", got)
	}
	// A real replica then reconnects and syncs again.
	r = dialRawReplica(t, p, false)
	if err := r.fullSync(h, "?", "-1"); err != nil {
		t.Fatal(err)
	}
}

// TestDownstreamPSyncHostileArgs: PSYNC with a replid Redis never makes (a
// path, our own in uppercase, too short) or an offset out of bounds gets a full
// sync, never +CONTINUE nor an error; REPLCONF ACK with an offset out of
// bounds is ignored.
func TestDownstreamPSyncHostileArgs(t *testing.T) {
	h := startFakePrimary(t, fakeGoodMain(0), nil)
	p := startHostileProxy(t, h)
	next := strconv.FormatInt(p.hist.Stream().Offset()+1, 10)

	r := dialRawReplica(t, p, true)
	if line, err := r.psync(linkReplID, next); err != nil || line != "+CONTINUE "+linkReplID {
		t.Fatalf("a good PSYNC answered %q, %v; want +CONTINUE", line, err)
	}
	for _, off := range []string{"9223372036854775807", strconv.FormatInt(replid.MaxOffset+1, 10), "-5"} {
		if err := r.send("REPLCONF", "ACK", off); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.send("REPLCONF", "ACK", "7"); err != nil { // a good one, to know the others were read
		t.Fatal(err)
	}
	redistest.WaitFor(t, 10*time.Second, "the good ACK", func() bool {
		return strings.Contains(p.Info("replication"), ",offset=7,")
	})

	for _, tc := range []struct{ name, replID, offset string }{
		{"replid with ../", hostileDotsReplID, next},
		{"replid uppercase", strings.ToUpper(linkReplID), next},
		{"replid of 39 characters", linkReplID[:39], next},
		{"replid with a NUL", linkReplID[:39] + "\x00", next},
		{"offset MaxInt64", linkReplID, "9223372036854775807"},
		{"offset past 2^62", linkReplID, strconv.FormatInt(replid.MaxOffset+1, 10)},
		{"offset negative", linkReplID, "-5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRawReplica(t, p, true)
			if err := r.fullSync(h, tc.replID, tc.offset); err != nil {
				t.Fatal(err)
			}
		})
	}
}
