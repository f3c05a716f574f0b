package history

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
	"github.com/replproxy/replproxy/streamlog"
)

// syncFaultFS fails every Sync of the log's files while failing is set.
type syncFaultFS struct {
	streamlog.FS
	mu      sync.Mutex
	failing bool
}

var errSyncInjected = errors.New("injected: sync failed")

func (f *syncFaultFS) set(on bool) { f.mu.Lock(); f.failing = on; f.mu.Unlock() }

func (f *syncFaultFS) broken() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.failing }

func (f *syncFaultFS) OpenFile(name string, flag int, perm fs.FileMode) (streamlog.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return syncFaultFile{file, f}, nil
}

type syncFaultFile struct {
	streamlog.File
	fs *syncFaultFS
}

func (f syncFaultFile) Sync() error {
	if f.fs.broken() {
		return errSyncInjected
	}
	return f.File.Sync()
}

// TestFollower: the follower appends what the stream publishes to the log
// under the stream's identity, and the log serves plans; a failed sync
// (everysec, after an append, nothing appended after it) stops the log at
// once, counted and with its error; Run returns once its context ends.
func TestFollower(t *testing.T) {
	ffs := &syncFaultFS{}
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	ffs.FS = streamlog.RootFS{Root: root}
	l, _, err := streamlog.Open(streamlog.Options{FS: ffs, MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	a := replid.New()
	h := newTestHistory(t, a, 100) // a sync completed: the stream from 101 on
	h.SetLog(l)
	f := NewFollower(h, l, hclog.NewNullLogger(), FollowerConfig{
		Fsync:       func() Fsync { return FsyncEverySec },
		BehindLimit: func() int64 { return 0 },
		Retry:       time.Hour, // one outage: no retry within the test
		SyncEvery:   10 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-done
		}
	}()

	if err := h.Stream().Append([]byte("*1\r\n$4\r\nPING\r\n")); err != nil { // offsets 101..114
		t.Fatal(err)
	}
	redistest.WaitFor(t, 10*time.Second, "the log to hold the stream", func() bool { _, last := l.Bounds(); return last == 114 })
	if id := l.Identity(); id.ReplID != a {
		t.Fatalf("log under replid %s, want the stream's %s", id.ReplID, a)
	}
	if plan, r := h.PlanPartial(a, 101, false); r != PartialAccepted {
		t.Fatalf("PlanPartial from the log's first byte: %s", r)
	} else if plan.Cursor != nil {
		plan.Cursor.Close()
	} else if plan.FromLog != nil {
		plan.FromLog.Close()
	}
	if f.Down() || f.Errors() != 0 {
		t.Fatalf("down %v with %d errors before any fault", f.Down(), f.Errors())
	}

	// A sync follows an append: the first one after the disk fails
	// stops the log, with nothing appended after it.
	ffs.set(true)
	if err := h.Stream().Append([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 10*time.Second, "the failed sync to stop the log", f.Down)
	if f.Errors() != 1 || !strings.Contains(f.LastError(), "sync failed") || !strings.Contains(f.LastError(), "injected") {
		t.Fatalf("%d errors, last %q; want one, the failed sync's", f.Errors(), f.LastError())
	}
	cancel()
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Fatalf("Run returned %v once its context ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return once its context ended")
	}
}

// gateFS holds every write of the log's segment files while closed: a disk
// that takes nothing until the test lets it.
type gateFS struct {
	streamlog.FS
	mu   sync.Mutex
	open chan struct{} // closed while writes go through
	held chan struct{} // receives once a write waits at the gate
}

func newGateFS(inner streamlog.FS) *gateFS {
	g := &gateFS{FS: inner, open: make(chan struct{}), held: make(chan struct{}, 1)}
	close(g.open)
	return g
}

// shut makes the next writes wait; let lets them (and those waiting) go.
func (g *gateFS) shut() { g.mu.Lock(); g.open = make(chan struct{}); g.mu.Unlock() }
func (g *gateFS) let() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *gateFS) gate() <-chan struct{} { g.mu.Lock(); defer g.mu.Unlock(); return g.open }

func (g *gateFS) OpenFile(name string, flag int, perm fs.FileMode) (streamlog.File, error) {
	file, err := g.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".seg") {
		return file, err
	}
	return gateFile{file, g}, nil
}

type gateFile struct {
	streamlog.File
	fs *gateFS
}

func (f gateFile) Write(p []byte) (int, error) {
	ch := f.fs.gate()
	select {
	case <-ch:
	default:
		select {
		case f.fs.held <- struct{}{}:
		default:
		}
		<-ch
	}
	return f.File.Write(p)
}

// gatedFollower is a follower of a fresh history (a sync at offset 100,
// a 1 MiB backlog) writing its log through a gateFS, running until the
// test ends, and a 16 KB SET to append to the stream.
type gatedFollower struct {
	t   *testing.T
	h   *History
	l   *streamlog.Log
	f   *Follower
	gfs *gateFS
	cmd []byte
}

// startGatedFollower starts a gatedFollower with limit as its BehindLimit.
func startGatedFollower(t *testing.T, limit int64) *gatedFollower {
	t.Helper()
	var gfs *gateFS
	h, l, f := runFollower(t, streamlog.Options{MaxBytes: 64 << 20},
		func(fs streamlog.FS) streamlog.FS { gfs = newGateFS(fs); return gfs },
		FollowerConfig{
			Fsync:       func() Fsync { return FsyncNo },
			BehindLimit: func() int64 { return limit },
			Retry:       10 * time.Millisecond,
			SyncEvery:   time.Hour,
		}, func() { gfs.let() })
	return &gatedFollower{t: t, h: h, l: l, f: f, gfs: gfs, cmd: setCommand16K}
}

// setCommand16K is a SET of a 16,000-byte value.
var setCommand16K = []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$16000\r\n" + strings.Repeat("v", 16000) + "\r\n")

// runFollower opens a log with opts in a fresh directory, through wrap's
// file layer when wrap is given, makes a history (a sync at offset 100) that
// serves plans from it, and runs a follower of it with cfg until the test
// ends; release, when given, lets a held follower go before it is joined.
func runFollower(t *testing.T, opts streamlog.Options, wrap func(streamlog.FS) streamlog.FS, cfg FollowerConfig,
	release func()) (*History, *streamlog.Log, *Follower) {
	t.Helper()
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	opts.FS = streamlog.RootFS{Root: root}
	if wrap != nil {
		opts.FS = wrap(opts.FS)
	}
	l, _, err := streamlog.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	h := newTestHistory(t, replid.New(), 100)
	h.SetLog(l)
	f := NewFollower(h, l, hclog.NewNullLogger(), cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() { // before the log's Close: cleanups run last first
		cancel()
		if release != nil {
			release()
		}
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return h, l, f
}

// appendSETs appends n of g's SETs to the stream.
func (g *gatedFollower) appendSETs(n int) {
	g.t.Helper()
	for range n {
		if err := g.h.Stream().Append(g.cmd); err != nil {
			g.t.Fatal(err)
		}
	}
}

// TestFollowerRestartsBehind: a follower whose disk holds its write while
// the stream runs on reports its lag in bytes and seconds; once it falls
// behind by more than BehindLimit it lets go of the stream's blocks (the
// stream trims to its backlog), counts a restart (not an error), and after
// Retry the log starts again as a new generation from the memory backlog
// and catches up: lag 0.
func TestFollowerRestartsBehind(t *testing.T) {
	const limit = 2 << 20
	g := startGatedFollower(t, limit)
	l, f, gfs, st := g.l, g.f, g.gfs, g.h.Stream()
	appendN, cmdLen := g.appendSETs, len(g.cmd)
	appendN(4)
	redistest.WaitFor(t, 10*time.Second, "the log to hold the stream", func() bool { _, last := l.Bounds(); return last == st.Offset() })
	if lag, age := f.Lag(time.Now()); lag != 0 || age != 0 {
		t.Fatalf("lag %d bytes, %s caught up; want 0", lag, age)
	}
	firstBefore, _ := l.Bounds()

	// The disk stops taking writes: the follower waits in one, holding its
	// cursor, while the stream runs on past the limit.
	gfs.shut()
	appendN(1)
	<-gfs.held
	appendN(8 * limit / cmdLen)
	var lag int64
	var age time.Duration
	redistest.WaitFor(t, 10*time.Second, "the lag's age above 0 while the write waits", func() bool {
		lag, age = f.Lag(time.Now())
		return age > 0
	})
	if lag < 8*limit {
		t.Fatalf("lag %d bytes while the disk holds a write, want at least %d", lag, 8*limit)
	}
	if f.Restarts() != 0 || f.Down() {
		t.Fatal("restarted before the write returned")
	}
	gfs.let()
	redistest.WaitFor(t, 10*time.Second, "a restart for falling behind", func() bool { return f.Restarts() == 1 })
	// Let go: the next publish trims the stream to its backlog (1 MiB).
	appendN(1)
	if u := st.Usage(); u.Total > 2<<20 {
		t.Fatalf("the stream holds %d bytes after the follower let go, want its 1 MiB backlog", u.Total)
	}
	redistest.WaitFor(t, 10*time.Second, "the log restarted and caught up", func() bool {
		first, last := l.Bounds()
		lag, _ := f.Lag(time.Now())
		return !f.Down() && last == st.Offset() && first > firstBefore && lag == 0
	})
	memFirst, _ := st.Backlog()
	if first, _ := l.Bounds(); first < memFirst-1<<20 || f.Errors() != 0 {
		t.Fatalf("log from %d (memory from %d), %d errors: want a new generation from the memory backlog, no error", first, memFirst, f.Errors())
	}
}

// TestLagMarks: the age is measured from the first mark past what the log
// holds, marks it no longer needs are dropped, a new generation forgets
// them, and a full ring skips marks (the age errs low, never high).
func TestLagMarks(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var m lagMarks
	start := func() int64 { return 50 }
	if b, age := m.lag(1, 300, t0, start); b != 0 || age != 0 {
		t.Fatalf("before any append: %d, %s", b, age)
	}
	m.appendedTo(1, 100)
	m.mark(1, 200, t0)
	m.mark(1, 200, t0.Add(time.Second)) // nothing new: the earlier mark stays
	m.mark(2, 250, t0)                  // another generation's: dropped
	m.mark(1, 300, t0.Add(time.Second))
	for _, tc := range []struct {
		appended  int64
		wantBytes int64
		wantAge   time.Duration
	}{
		{100, 200, 3 * time.Second},
		{150, 150, 3 * time.Second},
		{200, 100, 2 * time.Second},
		{300, 0, 0},
	} {
		m.appendedTo(1, tc.appended)
		if b, age := m.lag(1, 300, t0.Add(3*time.Second), start); b != tc.wantBytes || age != tc.wantAge {
			t.Fatalf("appended %d: lag %d, %s; want %d, %s", tc.appended, b, age, tc.wantBytes, tc.wantAge)
		}
	}
	if b, _ := m.lag(2, 300, t0, start); b != 250 {
		t.Fatalf("another generation: lag %d, want all of it (250)", b)
	}
	m.appendedTo(2, 10)
	if m.n != 0 {
		t.Fatalf("%d marks kept into a new generation", m.n)
	}
	for i := range lagMarkCount + 10 {
		m.mark(2, int64(11+i), t0.Add(time.Duration(i)*time.Second))
	}
	if m.n != lagMarkCount {
		t.Fatalf("%d marks, want the ring's %d", m.n, lagMarkCount)
	}
	m.appendedTo(2, int64(10+lagMarkCount))
	if b, age := m.lag(2, int64(20+lagMarkCount), t0.Add(time.Hour), start); b != 10 || age != 0 {
		t.Fatalf("past the ring: lag %d, %s; want 10 bytes, no age (no mark covers them)", b, age)
	}
}

// TestFollowerLogStartsAtInstall: right after a full sync the primary sends
// what it buffered meanwhile at once; while the follower is still busy (here
// a segment write held by the disk), megabytes go past the 1 MiB backlog.
// The new generation's first byte stays pinned from Install until the
// follower takes it, so that the log starts where the new snapshot's
// stream does and a replica synced from that snapshot can be served.
func TestFollowerLogStartsAtInstall(t *testing.T) {
	g := startGatedFollower(t, 64<<20)
	h, l, gfs, st := g.h, g.l, g.gfs, g.h.Stream()
	appendN, cmdLen := g.appendSETs, len(g.cmd)
	appendN(1)
	redistest.WaitFor(t, 10*time.Second, "the log to hold the stream", func() bool { _, last := l.Bounds(); return last == st.Offset() })

	// The follower is held in a write of the old generation.
	gfs.shut()
	appendN(1)
	<-gfs.held

	// A new full sync, then 4 MiB at once, past the backlog.
	id := replid.New()
	sn := replbuf.NewSnapshot(id, 5000, replbuf.NewPool(0), time.Now())
	if err := sn.Append(testRDB(t)); err != nil {
		t.Fatal(err)
	}
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	h.Install(sn)
	appendN((4 << 20) / cmdLen)
	if st.Offset()-5000 <= 2<<20 {
		t.Fatalf("%d bytes since the install: the test needs well over the 1 MiB backlog", st.Offset()-5000)
	}
	gfs.let()
	redistest.WaitFor(t, 10*time.Second, "the log to hold the new generation", func() bool {
		_, last := l.Bounds()
		return l.Identity().ReplID == id && last == st.Offset()
	})
	if first, _ := l.Bounds(); first != 5001 {
		t.Fatalf("the new generation's log starts at %d; want 5001, the snapshot's next byte", first)
	}
	plan, start := h.PlanFull()
	if start != nil || plan.Snapshot != sn || (plan.Cursor == nil && plan.FromLog == nil) {
		t.Fatalf("PlanFull: snapshot %v, fetch %v: want the new snapshot with its stream, no fetch", plan.Snapshot == sn, start != nil)
	}
	plan.Reader.Close()
	if plan.Cursor != nil {
		plan.Cursor.Close()
	}
	if plan.FromLog != nil {
		plan.FromLog.Close()
	}
}

// TestFollowerSyncsSealedAtOnce: under everysec, a segment sealed is synced
// by the syncer at once (streamlog's SealedReady), not at its next period
// nor by the follower a few rolls later: with a period of an hour, the
// synced offset still moves past the sealed segments as they are sealed.
func TestFollowerSyncsSealedAtOnce(t *testing.T) {
	h, l, _ := runFollower(t, streamlog.Options{MaxBytes: 64 << 20, SegmentBytes: 64 << 10}, nil, FollowerConfig{
		Fsync:       func() Fsync { return FsyncEverySec },
		BehindLimit: func() int64 { return 0 },
		Retry:       time.Hour,
		SyncEvery:   time.Hour,
	}, nil)
	for range 13 { // about 200 KiB: three segments sealed
		if err := h.Stream().Append(setCommand16K); err != nil {
			t.Fatal(err)
		}
	}
	end := h.Stream().Offset()
	redistest.WaitFor(t, 10*time.Second, "the log to hold the stream", func() bool { _, last := l.Bounds(); return last == end })
	redistest.WaitFor(t, 10*time.Second, "the sealed segments to be synced", func() bool { return l.Stats().Synced > 100+2*(64<<10) })
}

// writeCountFS counts the writes to the log's segment files, and their
// syncs.
type writeCountFS struct {
	streamlog.FS
	writes, syncs atomic.Int64
}

func (c *writeCountFS) OpenFile(name string, flag int, perm fs.FileMode) (streamlog.File, error) {
	file, err := c.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".seg") {
		return file, err
	}
	return countedFile{file, c}, nil
}

// countedFile is a segment file seen by writeCountFS. It hides the
// *os.File, so the log writes it slice by slice: a write per record slice.
type countedFile struct {
	streamlog.File
	c *writeCountFS
}

func (f countedFile) Write(p []byte) (int, error) {
	f.c.writes.Add(1)
	return f.File.Write(p)
}

func (f countedFile) Sync() error {
	f.c.syncs.Add(1)
	return f.File.Sync()
}

// TestSyncerIdle: under everysec the syncer syncs what the follower
// appended, once, and then nothing while nothing is appended: an idle
// log makes no system call and no wake-up for its sync.
func TestSyncerIdle(t *testing.T) {
	var cfs *writeCountFS
	h, l, _ := runFollower(t, streamlog.Options{MaxBytes: 64 << 20},
		func(fs streamlog.FS) streamlog.FS { cfs = &writeCountFS{FS: fs}; return cfs },
		FollowerConfig{
			Fsync:       func() Fsync { return FsyncEverySec },
			BehindLimit: func() int64 { return 0 },
			Retry:       time.Hour,
			SyncEvery:   10 * time.Millisecond,
		}, nil)
	st := h.Stream()
	if err := st.Append([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 10*time.Second, "the stream synced", func() bool { return l.Stats().Synced == st.Offset() })
	synced := cfs.syncs.Load()
	time.Sleep(20 * 10 * time.Millisecond) // twenty periods
	if n := cfs.syncs.Load(); n != synced {
		t.Fatalf("%d segment syncs in twenty idle periods, want none", n-synced)
	}
}

// TestFollowerGathersPacedStream: a stream published a small command at a
// time, hundreds of times a second, is appended about once per
// AppendEvery, not once per publish; a Nudge once gatherBytes are pending
// wakes a follower that would otherwise sleep for an hour; and the log
// holds every byte in the end.
func TestFollowerGathersPacedStream(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every time.Duration
	}{{"paced", 50 * time.Millisecond}, {"nudged", time.Hour}} {
		t.Run(tc.name, func(t *testing.T) {
			var cfs *writeCountFS
			h, l, f := runFollower(t, streamlog.Options{MaxBytes: 64 << 20},
				func(fs streamlog.FS) streamlog.FS { cfs = &writeCountFS{FS: fs}; return cfs },
				FollowerConfig{
					Fsync:       func() Fsync { return FsyncEverySec },
					BehindLimit: func() int64 { return 0 },
					Retry:       time.Hour,
					SyncEvery:   time.Hour,
					AppendEvery: tc.every,
				}, nil)
			st := h.Stream()
			cmd := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n")
			if tc.name == "paced" {
				const publishes = 300
				for range publishes {
					if err := st.Append(cmd); err != nil {
						t.Fatal(err)
					}
					time.Sleep(time.Millisecond)
				}
				redistest.WaitFor(t, 10*time.Second, "the log to hold the stream", func() bool {
					_, last := l.Bounds()
					return last == st.Offset()
				})
				// 300 ms or more of publishes: about 6 appends at 50 ms;
				// each is one segment write (or two, a record cut at a
				// block's end), whatever a loaded machine stretches.
				if n := cfs.writes.Load(); n > publishes/10 {
					t.Fatalf("%d segment writes for %d publishes: the follower did not gather", n, publishes)
				}
				t.Logf("%d segment writes for %d publishes", cfs.writes.Load(), publishes)
				return
			}
			// The follower is gathering (it sleeps for an hour) once a
			// first publish woke it; a Nudge with gatherBytes pending ends
			// its sleep.
			if err := st.Append(cmd); err != nil {
				t.Fatal(err)
			}
			redistest.WaitFor(t, 10*time.Second, "the follower to gather", func() bool { return f.gathering.Load() > 0 })
			big := make([]byte, 0, gatherBytes+len(cmd))
			for len(big) < gatherBytes {
				big = append(big, cmd...)
			}
			if err := st.Append(big); err != nil {
				t.Fatal(err)
			}
			f.Nudge(st.Offset())
			redistest.WaitFor(t, 10*time.Second, "the nudged follower to append", func() bool {
				_, last := l.Bounds()
				return last == st.Offset()
			})
		})
	}
}
