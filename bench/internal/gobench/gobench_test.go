package gobench

import (
	"strings"
	"testing"
)

const output = `goos: linux
goarch: amd64
pkg: github.com/replproxy/replproxy/replbuf
cpu: AMD EPYC
BenchmarkFanout/replicas=1-2         	     200	     10205 ns/op	1605.56 MB/s	       0 B/op	       0 allocs/op
BenchmarkFanout/replicas=1-2         	     300	     10000 ns/op	1700.00 MB/s	       0 B/op	       0 allocs/op
BenchmarkFanout/replicas=1-2         	     250	     12000 ns/op	1500.00 MB/s	       0 B/op	       0 allocs/op
BenchmarkRawWritev/replicas=64-2     	     200	    417350 ns/op	2512.46 MB/s	     968 B/op	       2 allocs/op
BenchmarkSingle 	 1000	 5 ns/op
BenchmarkBroken-2 	 x	 5 ns/op
Benchmark log line that is not a result
PASS
ok  	github.com/replproxy/replproxy/replbuf	0.940s
`

func TestParse(t *testing.T) {
	rs, err := Parse(strings.NewReader(output))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 5 {
		t.Fatalf("got %d results, want 5: %+v", len(rs), rs)
	}
	r := rs[3]
	if r.Name != "RawWritev/replicas=64" || r.Procs != 2 || r.N != 200 ||
		r.Metrics["ns/op"] != 417350 || r.Metrics["MB/s"] != 2512.46 || r.Metrics["allocs/op"] != 2 {
		t.Errorf("result = %+v", r)
	}
	if s := rs[4]; s.Name != "Single" || s.Procs != 1 || s.Metrics["ns/op"] != 5 {
		t.Errorf("no -procs suffix: %+v", s)
	}
}

func TestSummarise(t *testing.T) {
	rs, _ := Parse(strings.NewReader(output))
	ss := Summarise(rs)
	if len(ss) != 3 || ss[0].Name != "Fanout/replicas=1" || ss[1].Name != "RawWritev/replicas=64" {
		t.Fatalf("summaries = %+v", ss)
	}
	f, err := Find(ss, "Fanout/replicas=1")
	if err != nil {
		t.Fatal(err)
	}
	mb := f.Metrics["MB/s"]
	if f.Runs != 3 || mb.Median != 1605.56 || mb.Min != 1500 || mb.Max != 1700 {
		t.Errorf("Fanout/replicas=1 = %+v", f)
	}
	if _, err := Find(ss, "Nope"); err == nil {
		t.Error("Find of a missing name: no error")
	}
}
