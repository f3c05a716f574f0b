package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/replproxy/replproxy/bench/internal/gobench"
	"github.com/replproxy/replproxy/bench/internal/sample"
)

// What the RDB check costs a full sync: every payload the proxy takes in is
// walked as it arrives (package rdbcheck), on the link's goroutine, before
// replicas see it. rdbcheck's BenchmarkWalker walks its payloads in 16 KiB
// pieces, as the link reads them, and BenchmarkCRC64 sums the same bytes:
// the cost a check of the trailer alone had.

// walkPayloads are BenchmarkWalker's payloads, in the order the report
// lists them, with what each is.
var walkPayloads = []struct{ name, what string }{
	{"mixed", "180,000 small keys of 9 kinds (strings, integers, LZF strings, listpack hashes and sorted sets, intsets, quicklists, sets, hashes), as a cache holds them"},
	{"large-strings", "64 strings of 256 KiB, incompressible"},
	{"large-lzf-strings", "64 LZF-compressed strings of 128 KiB"},
}

// walkRow is one payload's figures.
type walkRow struct {
	payload, what string
	walk, crc     sample.Summary // MB/s
	walkAllocs    sample.Summary // allocs/op
	runs          int
}

type walkResult struct {
	command string
	rows    []walkRow
}

func walkArgs(o *options) []string {
	return []string{"test", "-run", "^$", "-bench", "^Benchmark(Walker|CRC64)$", "-benchmem",
		"-count", fmt.Sprint(o.benchCount), "-benchtime", o.benchTime, "./rdbcheck/"}
}

// runWalk runs rdbcheck's benchmarks in o.root; a tree without the RDB
// check (an older one, measured for comparison) has none: nil.
func runWalk(ctx context.Context, o *options) (*walkResult, error) {
	if _, err := os.Stat(filepath.Join(o.root, "rdbcheck")); err != nil {
		logf("fullsync: %s has no rdbcheck: the RDB check's cost is not measured", o.root)
		return nil, nil
	}
	results, command, err := goBench(ctx, o, walkArgs(o))
	if err != nil {
		return nil, err
	}
	ss := gobench.Summarise(results)
	r := &walkResult{command: command}
	for _, p := range walkPayloads {
		walk, err := gobench.Find(ss, "Walker/"+p.name)
		if err != nil {
			return nil, err
		}
		crc, err := gobench.Find(ss, "CRC64/"+p.name)
		if err != nil {
			return nil, err
		}
		r.rows = append(r.rows, walkRow{payload: p.name, what: p.what, walk: walk.Metrics["MB/s"], crc: crc.Metrics["MB/s"],
			walkAllocs: walk.Metrics["allocs/op"], runs: min(walk.Runs, crc.Runs)})
	}
	return r, nil
}

// cpuPerGB is the CPU seconds one GB (10^9 bytes) costs at mbs MB/s.
func cpuPerGB(mbs float64) float64 {
	if mbs <= 0 {
		return 0
	}
	return 1000 / mbs
}

func (r *results) walkMarkdown(p printer) {
	w := r.walk
	if w == nil || len(w.rows) == 0 {
		return
	}
	p("")
	p("### What the RDB check costs")
	p("")
	p("Every snapshot the proxy takes in (its own full sync, a fetch, from the primary or a")
	p("`snapshot-from` source) is walked as it arrives, on the link's goroutine, before a replica")
	p("sees a byte of it ([the RDB check](../docs/durable-history.md#the-rdb-check)). The walk in")
	p("16 KiB pieces, as the link reads them, against the CRC-64 of the same bytes (the check of the")
	p("trailer the walk replaced, which it includes). One core; medians of %d runs: `%s`.", w.rows[0].runs, w.command)
	p("")
	p("| payload | walk MB/s | CPU-s per GB walked | CRC-64 alone MB/s | CPU-s per GB, CRC-64 alone | walk allocs per payload |")
	p("|---|---:|---:|---:|---:|---:|")
	for _, row := range w.rows {
		p("| %s: %s | %.0f | %.2f | %.0f | %.2f | %.0f |", row.payload, row.what, row.walk.Median, cpuPerGB(row.walk.Median),
			row.crc.Median, cpuPerGB(row.crc.Median), row.walkAllocs.Median)
	}
}
