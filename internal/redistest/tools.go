package redistest

import (
	"context"
	"net"
	"os/exec"
	"testing"
	"time"
)

const (
	// CLITimeout bounds one [RedisCLI] run.
	CLITimeout = 30 * time.Second
	// BenchmarkTimeout bounds one [RunBenchmark] run.
	BenchmarkTimeout = 2 * time.Minute
)

// RedisCLI runs redis-cli with args (give it -p PORT) and returns its combined output.
// It fails the test if redis-cli exits non-zero or runs longer than [CLITimeout].
// NB: redis-cli exits 0 on most error replies; check the output.
func RedisCLI(t testing.TB, args ...string) string {
	t.Helper()
	_, cli := Require(t)
	return run(t, CLITimeout, cli, args...)
}

// RunBenchmark runs redis-benchmark -h HOST -p PORT -q args... against addr and returns
// its output. It fails the test if redis-benchmark is missing (skips outside CI, like
// [Require]), exits non-zero, or runs longer than [BenchmarkTimeout]; keep -n small.
func RunBenchmark(t testing.TB, addr string, args ...string) string {
	t.Helper()
	bin := RequireTool(t, "redis-benchmark")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("redistest: benchmark address %q: %v", addr, err)
	}
	return run(t, BenchmarkTimeout, bin, append([]string{"-h", host, "-p", port, "-q"}, args...)...)
}

// run runs bin with a timeout and returns its combined output.
func run(t testing.TB, timeout time.Duration, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = time.Second // do not wait for children holding the output pipe
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("redistest: %s %q: killed after %v: %v\noutput:\n%s", bin, args, time.Since(start).Round(time.Millisecond), ctx.Err(), out)
	}
	if err != nil {
		t.Fatalf("redistest: %s %q: %v\noutput:\n%s", bin, args, err, out)
	}
	return string(out)
}
