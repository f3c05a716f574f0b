package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/wire"
)

// TestFullSyncReleasesSnapshot: a replica that finished its full sync no
// longer holds the snapshot, so evict-snapshots can evict it while that
// replica stays connected, and the replica goes on receiving the stream.
func TestFullSyncReleasesSnapshot(t *testing.T) {
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 20000, "key", 100)
	// Without the stream log, which would write the snapshot to dir at
	// once instead of by eviction.
	p, xc := startProxyOf(t, primary, "--dir", t.TempDir(), "--repl-log-size", "0")
	_, rc := memStartReplica(t, p, pc)
	redistest.WaitFor(t, 10*time.Second, "replica online", func() bool {
		return strings.Contains(xc.Info(t, "replication")["slave0"], "state=online")
	})
	if n := xc.InfoInt(t, "stats", "evicted_snapshots"); n != 0 {
		t.Fatalf("evicted_snapshots %d before maxmemory is set", n)
	}

	xc.MustDo(t, "CONFIG", "SET", "maxmemory-policy", "evict-snapshots")
	xc.MustDo(t, "CONFIG", "SET", "maxmemory", "1mb")
	redistest.WaitFor(t, 10*time.Second, "snapshot evicted with the synced replica connected", func() bool {
		return xc.InfoInt(t, "stats", "evicted_snapshots") >= 1
	})
	if n := xc.InfoInt(t, "replication", "connected_slaves"); n != 1 {
		t.Fatalf("connected_slaves %d after the eviction, want 1", n)
	}
	pc.MustDo(t, "SET", "after-eviction", "x")
	redistest.WaitSynced(t, pc, rc)
}

// heldEOFFetch is a side link script: +FULLRESYNC at linkOffset and an
// EOF-marked payload whose first bytes come at once and the rest, with the
// mark, only once release is closed.
func heldEOFFetch(release <-chan struct{}) func(hc *fakeLink) error {
	return func(hc *fakeLink) error {
		rdb := hc.primary.rdb
		if err := hc.write("+FULLRESYNC " + linkReplID + " " + strconv.Itoa(linkOffset) + "\r\n$EOF:" + linkEOFMark + "\r\n" + string(rdb[:20])); err != nil {
			return err
		}
		select {
		case <-release:
		case <-hc.primary.done:
			return nil
		}
		if err := hc.write(string(rdb[20:]) + linkEOFMark); err != nil {
			return err
		}
		hc.awaitHangup()
		return nil
	}
}

// TestEOFReplicaWithoutAckTimesOut: after an EOF-marked payload the proxy
// waits for the replica's first REPLCONF ACK, but no longer than
// repl-timeout, as Redis does; newlines from a replica still loading the
// payload renew the timeout. A replica that never ACKs is dropped and
// counted in replicas_dropped.
func TestEOFReplicaWithoutAckTimesOut(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (about 5 s): each case waits out a repl-timeout")
	}
	const timeout = time.Second
	for _, tc := range []struct {
		name      string
		newlines  time.Duration // how long the replica sends newlines after the payload
		minOnline time.Duration // it must stay connected at least this long after the payload
	}{
		{"silent", 0, 0},
		{"newlines renew the timeout", 2500 * time.Millisecond, 2500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The main link gets a sized full sync at linkOffset and then a
			// PING every 100 ms, within any repl-timeout.
			release := make(chan struct{})
			h := startFakePrimary(t, fakeGoodMain(0), heldEOFFetch(release))
			// No stream log: with it, a fetched EOF-marked payload may go
			// to dir and is sent only once whole, never as "$EOF:".
			p := startProxy(t, append(h.replicaOf(), "--repl-timeout", "1", "--repl-log-size", "0")...)
			xc := redistest.Dial(t, p.AddrString())
			waitLinkUp(t, xc)
			// No servable snapshot: the replica's full sync fetches one,
			// which the fake primary sends EOF-marked and holds.
			p.hist.Retire(p.hist.Newest(), false)

			conn, err := net.Dial("tcp", p.AddrString())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			conn.Write(wire.AppendCommand(nil, "REPLCONF", "capa", "eof", "capa", "psync2"))
			conn.Write(wire.AppendCommand(nil, "PSYNC", "?", "-1"))
			br := bufio.NewReader(conn)
			expectLine := func(prefix string) string {
				t.Helper()
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						t.Fatalf("waiting for %q: %v", prefix, err)
					}
					if line == "\n" {
						continue // keepalive while the fetch starts
					}
					if !strings.HasPrefix(line, prefix) {
						t.Fatalf("got %q, want %q...", line, prefix)
					}
					return line
				}
			}
			expectLine("+OK")
			expectLine("+FULLRESYNC " + linkReplID)
			header := expectLine("$EOF:")
			mark := strings.TrimSpace(strings.TrimPrefix(header, "$EOF:"))
			close(release)
			payload := make([]byte, len(h.rdb)+len(mark))
			if _, err := io.ReadFull(br, payload); err != nil {
				t.Fatal(err)
			}
			if string(payload[len(h.rdb):]) != mark {
				t.Fatalf("payload ends with %q, want the mark %q", payload[len(h.rdb):], mark)
			}
			sent := time.Now()
			for time.Since(sent) < tc.newlines {
				if _, err := conn.Write([]byte("\n")); err != nil {
					t.Fatal(err)
				}
				time.Sleep(200 * time.Millisecond) // the replica's pace, not synchronisation
			}
			closed := make(chan error, 1)
			go func() {
				_, err := br.ReadByte()
				closed <- err
			}()
			select {
			case err := <-closed:
				if !errors.Is(err, io.EOF) {
					t.Fatalf("replica connection: %v, want closed by the proxy", err)
				}
			case <-time.After(5*timeout + tc.newlines):
				t.Fatal("replica that never ACKs its EOF payload still connected")
			}
			if online := time.Since(sent); online < tc.minOnline {
				t.Fatalf("replica dropped %v after the payload, while it sent newlines for %v", online, tc.newlines)
			}
			redistest.WaitFor(t, 5*time.Second, "replicas_dropped counted", func() bool {
				return xc.InfoInt(t, "proxy", "replicas_dropped") >= 1
			})
		})
	}
}

// TestFailedFullSyncsBackOff: replicas that fail every full sync (they
// hang up as soon as the payload starts, as a replica killed by the OOM
// killer, or too slow under contention, would) while every full sync needs
// a new snapshot do not each cost the primary a fork: each failed full sync
// holds back the next fetch by one more backoff step, so that over a window
// the primary forks at most once per step.
func TestFailedFullSyncsBackOff(t *testing.T) {
	t.Parallel()
	const window = 10 * time.Second
	h := startFakePrimary(t, fakeGoodMain(0), func(hc *fakeLink) error { return hc.goodFetch() })
	p := startHostileProxy(t, h, "--repl-log-size", "0")
	start := time.Now()
	attempts := 0
	for time.Since(start) < window {
		p.hist.Retire(p.hist.Newest(), false) // every full sync needs a new snapshot
		r := dialRawReplica(t, p, true)
		line, err := r.psync("?", "-1")
		if err != nil || !strings.HasPrefix(line, "+FULLRESYNC") {
			t.Fatalf("PSYNC ? -1: %q %v", line, err)
		}
		r.conn.Close() // the full sync fails: the replica is gone before it has loaded it
		attempts++
		redistest.WaitFor(t, 5*time.Second, "the proxy saw the replica go", func() bool {
			return len(p.clients.replicaList()) == 0
		})
	}
	elapsed := time.Since(start)
	fetches := int(h.sides.Load())
	bound := backoffSteps(elapsed) + 1
	t.Logf("%d full syncs failed in %v: %d fetches, at most %d allowed", attempts, elapsed, fetches, bound)
	if fetches > bound {
		t.Errorf("%d fetches for %d failed full syncs in %v, want at most %d: one per backoff step", fetches, attempts, elapsed, bound)
	}
}
