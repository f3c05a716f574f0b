package proxy

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
	"github.com/replproxy/replproxy/streamlog"
)

// writeTestLog leaves in dir a stream log holding n bytes after offset start
// under replID, as a previous run would.
func writeTestLog(t *testing.T, dir, replID string, start int64, n int) {
	t.Helper()
	sub := filepath.Join(dir, logDirName)
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(sub)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	l, _, err := streamlog.Open(streamlog.Options{FS: streamlog.RootFS{Root: root}, MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Reset(streamlog.Identity{ReplID: replID, ReplID2: replid.None, SecondOffset: -1}, start); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(make([]byte, n), true); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPlanPartialLogOfOldGeneration: once an upstream full sync has started a
// new generation of the stream (the primary keeping its replid, at a later
// offset), the stream log still holds the old generation's bytes until its
// follower resets it. A replica asking for one of them must get a full
// sync, not a +CONTINUE from a log about to be reset under it, which would
// drop it with nothing to continue into (and count a partial resync that
// was never served).
func TestPlanPartialLogOfOldGeneration(t *testing.T) {
	a := replid.New()
	dir := t.TempDir()
	writeTestLog(t, dir, a, 100, 1000) // offsets 101..1100
	s := newTestProxy(t, proxySetup{idle: true, args: []string{"--dir", dir}}).Server
	h := s.hist

	plan, r := h.planPartial(a, 500, false)
	if r != partialAccepted || plan.fromLog == nil {
		t.Fatalf("before the full sync: %s (from the log %v), want a partial resync from the log", r, plan.fromLog != nil)
	}
	plan.fromLog.Close()

	// The primary forced a full sync and kept its replid: the stream starts
	// again at 5000, and the follower has not reset the log yet.
	sn := replbuf.NewSnapshot(a, 5000, h.pool, time.Now())
	if err := sn.Append(linkRDB(t)); err != nil {
		t.Fatal(err)
	}
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	h.install(sn)
	plan, r = h.planPartial(a, 500, false)
	if r == partialAccepted {
		var sent error
		if plan.fromLog != nil {
			h.disk.Reset(streamlog.Identity{ReplID: a, ReplID2: replid.None, SecondOffset: -1}, 5000) // the follower's next round
			_, sent = plan.fromLog.WriteTo(discard{}, 1<<20)
			plan.fromLog.Close()
		}
		if plan.cursor != nil {
			plan.cursor.Close()
		}
		t.Fatalf("after the full sync at 5000, offset 500 was accepted for a partial resync (from the log %v; its first read then: %v)",
			plan.fromLog != nil, sent)
	}
	if r != fullSyncOffsetOutOfRange {
		t.Fatalf("after the full sync at 5000, offset 500: %s, want offset_out_of_range", r)
	}
}

// discard is io.Discard without the io.ReaderFrom a log reader would use.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestLogReaderAtCarriesGeneration: a replica whose cursor is of a stream
// generation the stream has left (an upstream full sync that kept the
// replid, before the disconnection reaches the replica) is never moved to
// the stream log, even once the log follows the new generation over the
// same offsets: those are other bytes under the same name. The log serves
// the position of a cursor of the generation it follows.
func TestLogReaderAtCarriesGeneration(t *testing.T) {
	a := replid.New()
	dir := t.TempDir()
	writeTestLog(t, dir, a, 100, 1000) // offsets 101..1100
	s := newTestProxy(t, proxySetup{idle: true, args: []string{"--dir", dir}}).Server
	h := s.hist
	old := h.stream().Generation()
	if rd := h.logReaderAt(old, 500); rd == nil {
		t.Fatal("the log of the stream's own generation refused offset 500")
	} else {
		rd.Close()
	}

	// The primary forced a full sync at 4000 and kept its replid; the
	// follower has reset the log for the new generation and appended to it.
	sn := replbuf.NewSnapshot(a, 4000, h.pool, time.Now())
	if err := sn.Append(linkRDB(t)); err != nil {
		t.Fatal(err)
	}
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	h.install(sn)
	gen := h.stream().Generation()
	if err := h.disk.Reset(streamlog.Identity{ReplID: a, ReplID2: replid.None, SecondOffset: -1}, 4000); err != nil {
		t.Fatal(err)
	}
	if err := h.disk.Append(make([]byte, 2000), true); err != nil { // 4001..6000
		t.Fatal(err)
	}
	if !h.logFollows(gen) {
		t.Fatal("logFollows refused the stream's generation")
	}

	// A cursor of the old generation at 5000: its replica got the old
	// generation's bytes up to 4999 and must not get the new one's from
	// 5000 on.
	if rd := h.logReaderAt(old, 5000); rd != nil {
		rd.Close()
		t.Fatal("a cursor of the generation the stream left was handed the new generation's log")
	}
	if rd := h.logReaderAt(gen, 5000); rd == nil {
		t.Fatal("a cursor of the log's own generation was refused")
	} else {
		rd.Close()
	}
}
