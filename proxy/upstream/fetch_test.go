package upstream

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/replbuf"
)

// TestFetchLoop: a fetch's attempts that fail before the snapshot is handed
// out are retried (each counted) while it is wanted, from the same primary,
// and the loop lasts; a failure after the hand-out is returned, not retried;
// otherwise the loop gives up with a *FetchStopError saying why.
func TestFetchLoop(t *testing.T) {
	errAttempt := errors.New("attempt failed")
	cases := []struct {
		name     string
		fails    int  // attempts that fail before the hand-out, then one succeeds
		late     bool // the first attempt fails after the hand-out
		unwanted bool
		retarget bool // the primary changes during the first attempt
		cancel   bool // the loop's context ends during the first attempt
		attempts int
		stop     string // the FetchStopError's reason; "" for none
		err      error
	}{
		{name: "retried until it succeeds", fails: 2, attempts: 3},
		{name: "failed after the hand-out", late: true, attempts: 1, err: errAttempt},
		{name: "nobody waits", fails: 1, unwanted: true, attempts: 1, stop: "no replica waits"},
		{name: "replicaof changed", fails: 1, retarget: true, attempts: 1, stop: "replicaof changed"},
		{name: "server stopping", fails: 1, cancel: true, attempts: 1, stop: "server stopping"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestHost(t, Target{Addr: "127.0.0.1:6379"})
			l := New(h, Options{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			attempts, failed := 0, 0
			err := l.FetchLoop(ctx, FetchJob{
				Attempt: func(context.Context) (bool, error) {
					attempts++
					if tc.retarget {
						h.retarget("127.0.0.1:6380")
					}
					if tc.cancel {
						cancel()
					}
					if tc.late {
						return true, errAttempt
					}
					if attempts <= tc.fails {
						return false, errAttempt
					}
					return true, nil
				},
				Wanted: func() bool { return !tc.unwanted },
				Failed: func() { failed++ },
			})
			if attempts != tc.attempts {
				t.Errorf("%d attempts, want %d", attempts, tc.attempts)
			}
			if want := min(tc.fails, tc.attempts) + btoi(tc.late); failed != want {
				t.Errorf("%d failures counted, want %d", failed, want)
			}
			var stop *FetchStopError
			switch {
			case tc.stop != "":
				if !errors.As(err, &stop) || stop.Reason != tc.stop || !errors.Is(err, errAttempt) {
					t.Fatalf("FetchLoop = %v, want a stop (%s) wrapping the last attempt's error", err, tc.stop)
				}
			case err != tc.err:
				t.Fatalf("FetchLoop = %v, want %v", err, tc.err)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// filterPrimary is a fake primary that serves side links as a primary
// does a filtered fetch: filterReply to REPLCONF rdb-filter-only (the
// handshake's other commands get +OK), and +FULLRESYNC and payload to
// PSYNC. It returns the primary and the filters it was sent.
func filterPrimary(t *testing.T, filterReply, payload string) (*redistest.FakePrimary, <-chan string) {
	t.Helper()
	filters := make(chan string, 1)
	p := redistest.StartFakePrimary(t, redistest.FakeOptions{
		Reply: func(cmd string) (string, bool) {
			filter, ok := strings.CutPrefix(cmd, "REPLCONF rdb-filter-only ")
			if !ok {
				return "", false
			}
			select {
			case filters <- filter:
			default: // a second fetch: the test fails on the first one
			}
			return filterReply + "\r\n", true
		},
		Side: func(l *redistest.FakeLink) error {
			if err := l.Write(l.FullResync() + payload); err != nil {
				return err
			}
			l.AwaitHangup()
			return nil
		},
	})
	return p, filters
}

// TestFetchFiltered: a filtered fetch sends the filter as the replica sent
// it and returns the primary's RDB, checked; a primary that refuses the
// filter (Redis before 7.0) is a *RefusedError with its reply; a payload
// over the limit is refused.
func TestFetchFiltered(t *testing.T) {
	rdb := testRDB(t)
	sized := "$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb)
	mark := strings.Repeat("m", 40)
	for _, tc := range []struct {
		name, filterReply, payload string
		limit                      int64
		refused                    string // the RefusedError's reply, or ""
		fails                      bool
	}{
		{name: "sized", filterReply: "+OK", payload: sized, limit: 1 << 20},
		{name: "EOF-marked", filterReply: "+OK", payload: "$EOF:" + mark + "\r\n" + string(rdb) + mark, limit: 1 << 20},
		{name: "filter refused", filterReply: "-ERR Unrecognized REPLCONF option: rdb-filter-only", refused: "-ERR Unrecognized REPLCONF option: rdb-filter-only"},
		{name: "over the limit", filterReply: "+OK", payload: sized, limit: 10, fails: true},
		{name: "EOF-marked over the limit", filterReply: "+OK", payload: "$EOF:" + mark + "\r\n" + string(rdb) + mark, limit: 10, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, filters := filterPrimary(t, tc.filterReply, tc.payload)
			l, _ := newTestLink(t, Target{Addr: p.Addr(), Timeout: 10 * time.Second}, Options{})
			sn, err := l.FetchFiltered(t.Context(), "functions", tc.limit)
			select {
			case got := <-filters:
				if got != "functions" {
					t.Fatalf("the primary was sent filter %q", got)
				}
			default:
				t.Fatalf("the primary was sent no filter (%v)", err)
			}
			var refused *RefusedError
			switch {
			case tc.refused != "":
				if !errors.As(err, &refused) || refused.Reply != tc.refused {
					t.Fatalf("FetchFiltered = %v, want the primary's refusal", err)
				}
			case tc.fails:
				if err == nil {
					sn.Release()
					t.Fatal("a payload over the limit was taken")
				}
			case err != nil:
				t.Fatal(err)
			default:
				defer sn.Release()
				if sn.State() != replbuf.SnapshotComplete || sn.Size() != int64(len(rdb)) || sn.Offset() != redistest.FakeOffset {
					t.Fatalf("snapshot %s of %d bytes at %d, want the complete RDB at %d", sn.State(), sn.Size(), sn.Offset(), redistest.FakeOffset)
				}
			}
		})
	}
}
