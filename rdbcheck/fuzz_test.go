package rdbcheck

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// fuzzSeeds are every hand-built case, the real RDBs in testdata and a
// mixed payload.
func fuzzSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, cases := range allCases() {
		for _, c := range cases {
			if len(c.rdb) <= 4096 {
				seeds = append(seeds, c.rdb)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return append(seeds, mixed(2))
}

// allCases are the unit tests' cases, for the fuzzer's seeds and the
// agreement test.
func allCases() map[string][]walkCase {
	return map[string][]walkCase{
		"header": casesHeader(), "end": casesEnd(), "opcodes": casesOpcodes(),
		"types by version": casesTypesByVersion(), "duplicate keys": casesDuplicateKeys(),
		"lengths": casesLengths(), "string encodings": casesStringEncodings(),
		"list": casesList(), "set": casesSet(), "zset": casesZset(), "hash": casesHash(),
		"hash metadata": casesHashMetadata(), "quicklist": casesQuicklist(), "encoded empty": casesEncodedEmpty(),
		"listpack encodings": casesListpackEncodings(), "listpack structure": casesListpackStructure(),
		"listpack roles": casesListpackRoles(), "ziplist": casesZiplist(), "intset": casesIntset(),
		"zipmap": casesZipmap(), "stream": casesStream(), "module": casesModule(), "aux": casesAux(),
	}
}

// walkAllocs walks b whole and returns the verdict and the bytes the walk
// allocated.
func walkAllocs(b []byte) (verdict, uint64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w := NewWalker()
	_, err := w.Write(b)
	if err == nil {
		err = w.Close()
	}
	runtime.ReadMemStats(&after)
	return verdictOf(err), after.TotalAlloc - before.TotalAlloc
}

// walkMemoryBound is the most a walk may allocate over its life, whatever
// its payload claims: the sets grown to their largest (each size on the
// way), the LZF window, the Walker.
const walkMemoryBound = 1 << 20

// FuzzWalker walks any payload whole, cut in three at any two offsets, and
// through Check: the walk must not panic, must allocate no more than its
// bound whatever lengths the payload claims, and must give the same
// verdict, at the same offset, however the payload is cut.
func FuzzWalker(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, uint16(len(s)/3), uint16(len(s)/2))
	}
	f.Fuzz(func(t *testing.T, b []byte, c1, c2 uint16) {
		whole, allocated := walkAllocs(b)
		if errors.Is(whole.err, errInternal) {
			t.Fatalf("the walk panicked: %v", whole.err)
		}
		if allocated > walkMemoryBound {
			t.Fatalf("the walk allocated %d bytes", allocated)
		}
		i, j := int(c1)%(len(b)+1), int(c2)%(len(b)+1)
		if i > j {
			i, j = j, i
		}
		cut := walkPieces(t, b, i, j)
		checked := verdictOf(Check(bytes.NewReader(b)))
		for _, v := range []verdict{cut, checked} {
			if (v.err == nil) != (whole.err == nil) || v.offset != whole.offset ||
				v.err != nil && v.err.Error() != whole.err.Error() {
				t.Fatalf("cut at %d and %d: %v; whole: %v; Check: %v", i, j, cut, whole, checked)
			}
		}
	})
}
