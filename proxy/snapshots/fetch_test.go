package snapshots

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/replbuf"
)

// fakeSource is a Source whose fetches the test scripts: each attempt calls
// attempt, which may hand out a snapshot (start) and fail after.
type fakeSource struct {
	mu        sync.Mutex
	connected bool
	attempt   func(n int, start func() error) error
	attempts  int
	froms     []string // the source of each attempt ("": the primary)
	// position, when set, is the +FULLRESYNC of an attempt from the
	// source from; otherwise the stream's replid at offset 0.
	position func(from string) (replID string, offset int64)
	hist     *history.History
	pool     *replbuf.Pool
}

func (s *fakeSource) FetchSnapshot(ctx context.Context, from string, position func(string, int64, bool) error,
	started func(*replbuf.Snapshot, int64) (upstream.PayloadSink, error)) (*replbuf.Snapshot, error) {
	s.mu.Lock()
	s.attempts++
	n := s.attempts
	s.froms = append(s.froms, from)
	s.mu.Unlock()
	replID, offset := s.hist.Identity().ReplID, int64(0)
	if s.position != nil {
		replID, offset = s.position(from)
	}
	if position != nil { // where the source says it stands, before the PSYNC
		if err := position(replID, offset, false); err != nil {
			return nil, err
		}
	}
	var sn *replbuf.Snapshot
	start := func() error {
		if position != nil {
			if err := position(replID, offset, true); err != nil {
				return err
			}
		}
		sn = replbuf.NewSnapshot(replID, offset, s.pool, time.Now())
		if _, err := started(sn, int64(len(testRDB))); err != nil {
			return err
		}
		if err := sn.Append(testRDB); err != nil {
			return err
		}
		return sn.Complete()
	}
	if err := s.attempt(n, start); err != nil {
		return nil, err
	}
	return sn, nil
}

func (s *fakeSource) FetchFiltered(ctx context.Context, from, filter string, limit int64) (*replbuf.Snapshot, error) {
	return nil, errors.New("not scripted")
}

func (s *fakeSource) Connected() bool { return s.connected }

// testRDB is an RDB as far as the snapshot checks one: its last 8 bytes
// are the CRC64 trailer, 0 for none.
var testRDB = []byte("REDIS0011\xff\x00\x00\x00\x00\x00\x00\x00\x00")

// fakeHost is a Host with no memory counted and no stream log; the
// changes of the history it is told of go to changed, when it is set.
type fakeHost struct{ changed chan<- history.Change }

func (fakeHost) CountedMemory() int64                      { return 0 }
func (fakeHost) LogBounds() (first, last int64, live bool) { return 0, 0, false }

func (h fakeHost) HistoryChanged(c history.Change) {
	if h.changed != nil {
		h.changed <- c
	}
}

// testPrimary is the primary the tests' Keepers are configured with.
const testPrimary = "127.0.0.1:6379"

// newHistory is a history with counters of its own and a 1 MiB backlog.
func newHistory(pool *replbuf.Pool) *history.History {
	var evicted, evictedBytes atomic.Int64
	return history.New(pool, 1<<20, history.Counters{EvictedSnapshots: &evicted, EvictedBytes: &evictedBytes}, hclog.NewNullLogger())
}

// newTestKeeper is a Keeper over a new history, fetching from src, with a
// backoff of a millisecond.
func newTestKeeper(t *testing.T, src *fakeSource) *Keeper {
	t.Helper()
	src.pool = replbuf.NewPool(0)
	src.hist = newHistory(src.pool)
	t.Cleanup(src.hist.Close)
	return New(Options{History: src.hist, Source: src, Host: fakeHost{},
		Settings: Settings{Primary: testPrimary, Dir: t.TempDir()},
		Backoff:  func(time.Duration) time.Duration { return time.Millisecond }})
}

// TestRunFetch: a fetch's attempts that fail before the snapshot is handed
// out are retried (each counted) while a replica waits, from the same
// primary, and while the Keeper runs; a failure after the hand-out ends the
// fetch, not retried; otherwise the fetch is given up, and its waiters get
// the last attempt's error.
func TestRunFetch(t *testing.T) {
	errAttempt := errors.New("attempt failed")
	cases := []struct {
		name     string
		fails    int  // attempts that fail before the hand-out, then one succeeds
		late     bool // the first attempt fails after the hand-out
		unwanted bool // the replica leaves during the first attempt
		retarget bool // the primary changes during the first attempt
		cancel   bool // the Keeper's context ends during the first attempt
		attempts int
		fetched  bool // the fetch completed and was counted
	}{
		{name: "retried until it succeeds", fails: 2, attempts: 3, fetched: true},
		{name: "failed after the hand-out", late: true, attempts: 1},
		{name: "nobody waits", fails: 1, unwanted: true, attempts: 1},
		{name: "replicaof changed", fails: 1, retarget: true, attempts: 1},
		{name: "server stopping", fails: 1, cancel: true, attempts: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			src := &fakeSource{connected: true}
			k := newTestKeeper(t, src)
			var f *history.Fetch
			src.attempt = func(n int, start func() error) error {
				switch {
				case tc.unwanted:
					src.hist.LeaveFetch(f)
				case tc.retarget:
					k.Configure(Settings{Primary: "127.0.0.1:6380"})
				case tc.cancel:
					cancel()
				}
				if tc.late {
					if err := start(); err != nil {
						return err
					}
					return errAttempt
				}
				if n <= tc.fails {
					return errAttempt
				}
				return start()
			}
			plan, err := k.PlanFull()
			if err != nil {
				t.Fatal(err)
			}
			f = plan.Fetch
			if f == nil {
				t.Fatal("no fetch planned")
			}
			done := make(chan error, 1)
			go func() { done <- k.Run(ctx) }()
			select {
			case <-f.Ready():
			case <-time.After(10 * time.Second):
				t.Fatal("the fetch never ended")
			}
			if tc.late {
				// The hand-out came first; the failure follows it.
				waitFor(t, func() bool { return k.Counts().Failures == 1 })
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			c := k.Counts()
			if src.attempts != tc.attempts {
				t.Errorf("%d attempts, want %d", src.attempts, tc.attempts)
			}
			if want := int64(min(tc.fails, tc.attempts) + btoi(tc.late)); c.Failures != want {
				t.Errorf("%d failures counted, want %d", c.Failures, want)
			}
			if got := c.Fetches == 1 && c.ByReason[history.FetchReplicaNeeded] == 1; got != tc.fetched {
				t.Errorf("counts %+v; fetched %v, want %v", c, got, tc.fetched)
			}
			gaveUp := tc.unwanted || tc.retarget || tc.cancel
			if gaveUp != (f.Err() != nil) || (gaveUp && !errors.Is(f.Err(), errAttempt)) {
				t.Errorf("the fetch's error %v; given up: %v", f.Err(), gaveUp)
			}
			if !gaveUp && f.Snapshot() == nil {
				t.Error("the fetch handed out no snapshot")
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

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
	}
}

// TestEmptyFilterWrittenHere: the empty filter (redis-cli --replica's) is
// answered with an RDB of no keys and no functions written here, complete
// with its CRC64, at the stream's end under its replid: the primary is not
// asked (no fork) and no fetch is counted.
func TestEmptyFilterWrittenHere(t *testing.T) {
	src := &fakeSource{connected: true}
	k := newTestKeeper(t, src)
	src.hist.Stream().Append([]byte("*1\r\n$4\r\nPING\r\n"))
	sn, err := k.FetchFiltered(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Release()
	if sn.State() != replbuf.SnapshotComplete || sn.ReplID() != src.hist.Identity().ReplID || sn.Offset() != src.hist.Stream().Offset() {
		t.Fatalf("snapshot %s at %s:%d, want complete at the stream's end %s:%d", sn.State(), sn.ReplID(), sn.Offset(),
			src.hist.Identity().ReplID, src.hist.Stream().Offset())
	}
	if c := k.Counts(); c.Fetches != 0 || c.Failures != 0 {
		t.Fatalf("counts %+v: the empty RDB is no fetch", c)
	}
	plan := src.hist.PlanFiltered()
	if err := src.hist.AttachFiltered(sn, &plan, false); err != nil {
		t.Fatalf("the empty RDB does not continue the stream: %v", err)
	}
	if plan.Cursor != nil {
		plan.Cursor.Close()
	}
	if plan.FromLog != nil {
		plan.FromLog.Close()
	}
	plan.Reader.Close()
	// Any other filter is the primary's.
	if _, err := k.FetchFiltered(t.Context(), "functions"); err == nil || k.Counts().Failures != 1 {
		t.Fatalf("filter functions: %v, counts %+v; want the source asked", err, k.Counts())
	}
}

// TestFetchBackoffShared: a fetch that fails after its snapshot was handed
// out (its replicas dropped) holds back the next fetch, planned at once by
// the replicas coming back, by the backoff; each failure in a row waits
// longer. A completed fetch does not start the wait over, a completed full
// sync does, and a failed one holds back the next fetch as a failed fetch
// does.
func TestFetchBackoffShared(t *testing.T) {
	src := &fakeSource{connected: true}
	k := newTestKeeper(t, src)
	step := 50 * time.Millisecond
	k.backoff = func(prev time.Duration) time.Duration { return max(2*prev, step) }
	errLate := errors.New("payload cut")
	var mu sync.Mutex
	var starts, failed []time.Time // guarded by mu
	succeed := false               // guarded by mu
	src.attempt = func(n int, start func() error) error {
		mu.Lock()
		starts = append(starts, time.Now())
		ok := succeed
		mu.Unlock()
		if err := start(); err != nil {
			return err
		}
		if ok {
			return nil
		}
		mu.Lock()
		failed = append(failed, time.Now()) // before the Keeper records it
		mu.Unlock()
		return errLate
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	// Three fetches fail in a row, each planned as soon as the last
	// failed (a replica dropped and back at once); the fourth completes.
	for i := range 4 {
		mu.Lock()
		succeed = i == 3
		mu.Unlock()
		plan, err := k.PlanFull()
		if err != nil {
			t.Fatal(err)
		}
		if plan.Fetch == nil {
			t.Fatalf("fetch %d: none planned", i+1)
		}
		<-plan.Fetch.Ready()
		waitFor(t, func() bool { c := k.Counts(); return c.Failures+c.Fetches == int64(i+1) })
		src.hist.LeaveFetch(plan.Fetch)
	}
	cancel()
	<-done
	if len(starts) != 4 || len(failed) != 3 {
		t.Fatalf("%d attempts and %d failures, want 4 and 3", len(starts), len(failed))
	}
	for i := 1; i < 4; i++ {
		want := step << (i - 1) // 50, 100, 200 ms after the failure before it
		if gap := starts[i].Sub(failed[i-1]); gap < want {
			t.Errorf("attempt %d started %v after the failure before it, want at least %v", i+1, gap, want)
		}
	}
	if k.retry.last == 0 {
		t.Error("a completed fetch reset the backoff: replicas failing to load every snapshot would fork again at once")
	}
	k.FullSyncEnded(true)
	if d := k.retry.wait(time.Now()); d != 0 || k.retry.last != 0 {
		t.Errorf("after a completed full sync the backoff holds %v (last %v), want none", d, k.retry.last)
	}
	// A replica's full sync that failed holds back the next fetch too.
	k.FullSyncEnded(false)
	if d := k.retry.wait(time.Now()); d <= 0 || d > step {
		t.Errorf("after a failed full sync the next fetch waits %v, want (0, %v]", d, step)
	}
}
