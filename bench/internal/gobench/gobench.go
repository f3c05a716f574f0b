// Package gobench parses the output of `go test -bench` and summarises the
// runs of each benchmark (`-count`) by their median.
//
// A result line is
//
//	BenchmarkName/sub=1-2   200   10205 ns/op   1605.56 MB/s   0 B/op   0 allocs/op
//
// that is: the name with a -GOMAXPROCS suffix (absent when GOMAXPROCS is 1),
// the iteration count, then value–unit pairs. Every other line (goos, PASS,
// logs) is skipped.
package gobench

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/replproxy/replproxy/bench/internal/sample"
)

// Result is one line of output: one run of one benchmark.
type Result struct {
	Name    string             // without the "Benchmark" prefix and the -procs suffix
	Procs   int                // GOMAXPROCS, 1 when the suffix is absent
	N       int64              // iterations
	Metrics map[string]float64 // by unit: "ns/op", "MB/s", "B/op", "allocs/op", custom units
}

// Parse reads every result line from r.
func Parse(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if res, ok := parseLine(sc.Text()); ok {
			out = append(out, res)
		}
	}
	return out, sc.Err()
}

func parseLine(line string) (Result, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
		return Result{}, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return Result{}, false
	}
	res := Result{Name: strings.TrimPrefix(f[0], "Benchmark"), Procs: 1, N: n, Metrics: map[string]float64{}}
	if i := strings.LastIndexByte(res.Name, '-'); i >= 0 {
		if p, err := strconv.Atoi(res.Name[i+1:]); err == nil {
			res.Name, res.Procs = res.Name[:i], p
		}
	}
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return Result{}, false
		}
		res.Metrics[f[i+1]] = v
	}
	return res, true
}

// Summary is every run of one benchmark, summarised per unit.
type Summary struct {
	Name    string
	Runs    int
	Metrics map[string]sample.Summary
}

// Summarise groups results by name, in the order each name first appears.
func Summarise(results []Result) []Summary {
	var order []string
	values := map[string]map[string][]float64{}
	runs := map[string]int{}
	for _, r := range results {
		if values[r.Name] == nil {
			values[r.Name] = map[string][]float64{}
			order = append(order, r.Name)
		}
		runs[r.Name]++
		for unit, v := range r.Metrics {
			values[r.Name][unit] = append(values[r.Name][unit], v)
		}
	}
	out := make([]Summary, 0, len(order))
	for _, name := range order {
		s := Summary{Name: name, Runs: runs[name], Metrics: map[string]sample.Summary{}}
		for unit, vs := range values[name] {
			s.Metrics[unit] = sample.Of(vs)
		}
		out = append(out, s)
	}
	return out
}

// Find returns the summary named name.
func Find(ss []Summary, name string) (Summary, error) {
	for _, s := range ss {
		if s.Name == name {
			return s, nil
		}
	}
	return Summary{}, fmt.Errorf("gobench: no benchmark %q in the output", name)
}
