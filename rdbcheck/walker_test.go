package rdbcheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// mixed is a payload with n keys of each kind.
func mixed(n int) []byte {
	r := newRDB(10).withAux().raw(opSelectDB).len(0).raw(opResizeDB).len(uint64(9 * n)).len(0)
	for i := range n {
		k := func(kind string) string { return fmt.Sprint(kind, ":", i) }
		r.raw(opExpireTimeMS).u64(1700000000000).key(typeString, k("s")).str("value")
		r.key(typeString, k("n")).intStr(int64(i), 4)
		r.key(typeString, k("z")).lzf(strings.Repeat("compressible ", 10))
		r.key(typeHashListpack, k("h")).blob(listpack("f1", "v1", "f2", 2))
		r.key(typeZsetListpack, k("zs")).blob(listpack("m1", "1.5", "m2", 2))
		r.key(typeSetIntset, k("i")).blob(intset(2, 1, 2, 3))
		r.key(typeListQuicklist2, k("l")).len(1).len(containerPacked).blob(listpack("a", "b", 3))
		r.key(typeSet, k("set")).len(3).strs("a", "b", "c")
		r.key(typeHash, k("hash")).len(2).strs("f", "v", "g", "w")
	}
	return r.end()
}

func TestWalkerSticky(t *testing.T) {
	b := newRDB(10).key(200, "k").str("v").end()
	w := NewWalker()
	n, err := w.Write(b)
	var ce *CorruptError
	if !errors.As(err, &ce) || n != 9 || ce.Offset != 9 || w.Walked() != 9 {
		t.Fatalf("Write = %d, %v; Walked %d", n, err, w.Walked())
	}
	if n, again := w.Write([]byte("more")); n != 0 || again != err {
		t.Fatalf("then Write = %d, %v", n, again)
	}
	if cerr := w.Close(); cerr != err {
		t.Fatalf("Close = %v", cerr)
	}
	if n, again := w.Write([]byte("more")); n != 0 || again != err {
		t.Fatalf("Write after Close = %d, %v", n, again)
	}
}

func TestWalkerClose(t *testing.T) {
	b := mixed(3)
	w := NewWalker()
	if _, err := w.Write(b[:100]); err != nil {
		t.Fatal(err)
	}
	err := w.Close()
	var ce *CorruptError
	if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.As(err, &ce) || ce.Offset != 100 {
		t.Fatalf("Close of a truncated RDB = %v", err)
	}
	if again := w.Close(); again != err {
		t.Fatalf("Close again = %v", again)
	}
	if w.Ended() {
		t.Fatal("Ended after a truncated RDB")
	}

	w = NewWalker()
	if n, err := w.Write(b); n != len(b) || err != nil || !w.Ended() {
		t.Fatalf("Write = %d, %v; Ended %v", n, err, w.Ended())
	}
	if n, err := w.Write(nil); n != 0 || err != nil {
		t.Fatalf("Write(nil) after the end = %d, %v", n, err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close again = %v", err)
	}
	if _, err := w.Write([]byte{0}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close = %v", err)
	}
}

func TestWalkerTrailing(t *testing.T) {
	b := mixed(1)
	w := NewWalker()
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	n, err := w.Write([]byte("x"))
	var ce *CorruptError
	if n != 0 || !errors.As(err, &ce) || ce.Offset != int64(len(b)) || ce.rule != ruleTrailing {
		t.Fatalf("a byte after the end: %d, %v", n, err)
	}
	if !w.Ended() {
		t.Fatal("the RDB ended before the byte after it")
	}
	if w.Close() != err {
		t.Fatal("Close forgot the error")
	}
}

// TestWalkerKeepsNothing: what Write was given may change after it
// returns.
func TestWalkerKeepsNothing(t *testing.T) {
	b := mixed(5)
	w := NewWalker()
	for i := 0; i < len(b); i += 7 {
		piece := bytes.Clone(b[i:min(i+7, len(b))])
		if _, err := w.Write(piece); err != nil {
			t.Fatal(err)
		}
		for j := range piece {
			piece[j] = 0xaf
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWalkerAllocs: a walk allocates its sets as they fill, up to their
// bounds, and nothing per value: once the sets are full (16384 keys), more
// values of the same kinds cost nothing more.
func TestWalkerAllocs(t *testing.T) {
	allocs := func(b []byte) float64 {
		return testing.AllocsPerRun(3, func() {
			w := NewWalker()
			for i := 0; i < len(b); i += 4096 {
				if _, err := w.Write(b[i:min(i+4096, len(b))]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
	full, fuller := allocs(mixed(2000)), allocs(mixed(4000))
	if fuller != full {
		t.Fatalf("a walk of 36000 keys allocates %v times, of 18000: %v", fuller, full)
	}
	if small := allocs(mixed(1)); small >= full {
		t.Fatalf("a walk of 9 keys allocates %v times, of 18000: %v", small, full)
	}
}

// TestWalkerDropped: a Walker dropped in the middle of a walk, without
// Close, does not leave its walk behind.
func TestWalkerDropped(t *testing.T) {
	b := mixed(2)
	before := runtime.NumGoroutine()
	for range 50 {
		w := NewWalker()
		if _, err := w.Write(b[:len(b)/2]); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left of %d", runtime.NumGoroutine()-before, 50)
		}
		runtime.GC()
		runtime.Gosched()
	}
}

func TestCheck(t *testing.T) {
	b := mixed(50)
	if err := Check(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if err := Check(bytes.NewReader(b[:len(b)-1])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a truncated RDB: %v", err)
	}
	boom := errors.New("disk on fire")
	if err := Check(io.MultiReader(bytes.NewReader(b[:10]), iotestErr{boom})); !errors.Is(err, boom) {
		t.Fatalf("a read error: %v", err)
	}
}

type iotestErr struct{ err error }

func (r iotestErr) Read([]byte) (int, error) { return 0, r.err }

func TestMixed(t *testing.T) {
	if v := walkEverySplit(t, mixed(3)); v.err != nil {
		t.Fatal(v)
	}
}

// TestRedisFiles walks the RDBs a real redis-server 7.0 saved (testdata,
// written by the agreement test with -update) at every split.
func TestRedisFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no RDB in testdata")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if v := walkEverySplit(t, b); v.err != nil {
			t.Errorf("%s: %v", f, v)
		}
	}
}

// TestWalkerMemory: a walk of more keys, members and pending IDs than its
// sets remember allocates within the fuzzer's bound.
func TestWalkerMemory(t *testing.T) {
	r := newRDB(10)
	for i := range 20000 {
		r.key(typeString, fmt.Sprint(i)).str("")
	}
	r.key(typeSet, "set").len(5000)
	for i := range 5000 {
		r.str(fmt.Sprint(i))
	}
	s := oneNode(1)
	for i := range 3000 {
		s.groups = append(s.groups, testGroup{name: fmt.Sprint("g", i%200)})
	}
	s.groups = s.groups[:200]
	var pel []string
	for i := range 3000 {
		pel = append(pel, streamID16(uint64(i), 0))
	}
	s.groups[0] = testGroup{name: "g0", pel: pel, consumers: []testConsumer{{"c", pel}}}
	r.key(typeStreamListpacks2, "x")
	s.write(r, typeStreamListpacks2)
	v, allocated := walkAllocs(r.end())
	if v.err != nil {
		t.Fatal(v)
	}
	if allocated > walkMemoryBound {
		t.Fatalf("the walk allocated %d bytes", allocated)
	}
	t.Logf("the walk allocated %d bytes", allocated)
}
