package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/replproxy/replproxy/bench/internal/gobench"
	"github.com/replproxy/replproxy/bench/internal/sample"
)

// engineSizes are the replica counts of replbuf's BenchmarkFanout and
// BenchmarkRawWritev.
var engineSizes = []int{1, 8, 64}

// engineRow compares the engine with raw writev at one replica count.
type engineRow struct {
	replicas      int
	fanout, raw   sample.Summary // MB/s
	fanoutAllocs  sample.Summary // allocs/op
	fanoutBytesOp sample.Summary // B/op
	fanoutRead    sample.Summary // blocks/read: the producer's blocks per FillBuffers
	rawAllocs     sample.Summary
	ratio         float64 // median fanout MB/s ÷ median raw MB/s
	runs          int     // -count
}

type engineResult struct {
	command string
	rows    []engineRow
}

func engineArgs(o *options) []string {
	return []string{"test", "-run", "^$", "-bench", "^Benchmark(Fanout|RawWritev)$", "-benchmem",
		"-count", fmt.Sprint(o.benchCount), "-benchtime", o.benchTime, "./replbuf/"}
}

func runEngine(ctx context.Context, o *options) (*engineResult, error) {
	results, command, err := goBench(ctx, o, engineArgs(o))
	if err != nil {
		return nil, err
	}
	return engineFrom(results, command)
}

// goBench runs go with args (a go test -bench of a package of the
// product's) in o.root, the product's module rather than this one, and
// returns the benchmarks' results and the command as the report names it.
func goBench(ctx context.Context, o *options, args []string) ([]gobench.Result, string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, o.goCmd, args...)
	cmd.Dir = o.root
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, "", fmt.Errorf("%s %s: %w\n%s", o.goCmd, strings.Join(args, " "), err, out.String())
	}
	results, err := gobench.Parse(&out)
	if err != nil {
		return nil, "", err
	}
	return results, "go " + strings.Join(args, " "), nil
}

// engineFrom pairs each BenchmarkFanout result with BenchmarkRawWritev's.
func engineFrom(results []gobench.Result, command string) (*engineResult, error) {
	ss := gobench.Summarise(results)
	r := &engineResult{command: command}
	for _, n := range engineSizes {
		fanout, err := gobench.Find(ss, fmt.Sprintf("Fanout/replicas=%d", n))
		if err != nil {
			return nil, err
		}
		raw, err := gobench.Find(ss, fmt.Sprintf("RawWritev/replicas=%d", n))
		if err != nil {
			return nil, err
		}
		row := engineRow{
			replicas:      n,
			fanout:        fanout.Metrics["MB/s"],
			raw:           raw.Metrics["MB/s"],
			fanoutAllocs:  fanout.Metrics["allocs/op"],
			fanoutBytesOp: fanout.Metrics["B/op"],
			fanoutRead:    fanout.Metrics["blocks/read"],
			rawAllocs:     raw.Metrics["allocs/op"],
			runs:          min(fanout.Runs, raw.Runs),
		}
		row.ratio = row.fanout.Median / row.raw.Median
		r.rows = append(r.rows, row)
	}
	return r, nil
}
