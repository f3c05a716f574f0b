package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/replproxy/replproxy/bench/internal/cluster"
)

// profileLines is how many lines of perf report RESULTS.md quotes.
const profileLines = 25

// profileResult is the proxy's CPU profile at one streaming point, or why
// there is none.
type profileResult struct {
	point   streamPoint
	command string // how the profile was taken
	report  string // the top of perf report; "" when skipped
	skipped string // why there is no profile
	run     streamRun
}

// profileN and profileSize are the point the TLS profile is taken at (and
// the variants chart drawn at): the TLS row's N and size, which default to
// N=4 and 16 KiB.
func profileN(o *options) int    { return cmp.Or(o.tlsN, 4) }
func profileSize(o *options) int { return o.tlsSize }

// logOnProfiles are the points the proxy is profiled at with its defaults
// (log on, plain), whatever -sizes and -replicas say, so that runs on
// different days compare: 512 B values to one replica, where the relay pays
// for wake-ups more than for bytes, and 16 KiB values to four, where it
// pays for the copies and the stream log.
var logOnProfiles = []streamPoint{{proxied, logOn.name, 1, 512}, {proxied, logOn.name, 4, 16384}}

// profilePoints are the proxied points profiled: logOnProfiles, then the
// TLS row's point over TLS when the run has the TLS row.
func profilePoints(o *options) []streamPoint {
	pts := slices.Clone(logOnProfiles)
	if o.tlsN > 0 {
		pts = append(pts, streamPoint{proxied, withTLS.name, profileN(o), profileSize(o)})
	}
	return pts
}

// runProfiles profiles the proxy at each of profilePoints.
func runProfiles(ctx context.Context, o *options, proxyBin, tmp string) []*profileResult {
	var out []*profileResult
	for i, pt := range profilePoints(o) {
		out = append(out, runProfile(ctx, o, proxyBin, filepath.Join(tmp, fmt.Sprintf("perf-%d.data", i)), pt))
	}
	return out
}

// runProfile runs one more streaming run at pt under perf record (the
// proxy has no pprof endpoint; perf sees Go symbols in the unstripped
// binary), writing to data, and keeps the top of perf report. It never
// fails the harness: without perf, or when perf fails, it says why.
func runProfile(ctx context.Context, o *options, proxyBin, data string, pt streamPoint) *profileResult {
	res := &profileResult{point: pt}
	perf, err := exec.LookPath("perf")
	if err != nil {
		res.skipped = "perf is not installed (it comes with the linux-tools or perf package)"
		logf("profile: skipped: %s", res.skipped)
		return res
	}
	var recErr error
	var recOut bytes.Buffer
	watch := func(relay *cluster.Process) func() {
		cmd := exec.Command(perf, "record", "-g", "-o", data, "-p", fmt.Sprint(relay.PID()))
		cmd.Stdout, cmd.Stderr = &recOut, &recOut
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if recErr = cmd.Start(); recErr != nil {
			return func() {}
		}
		// perf needs a moment to attach before the load starts.
		time.Sleep(300 * time.Millisecond)
		return func() {
			cmd.Process.Signal(os.Interrupt)
			if err := cmd.Wait(); err != nil && recErr == nil && !isInterrupt(err) {
				recErr = err
			}
		}
	}
	logf("profile: proxied (%s) N=%d %s under perf record", pt.variant, pt.replicas, sizeName(pt.valueSize))
	res.run, err = streamOnce(ctx, o, proxyBin, pt, int64(o.streamMB)<<20, watch)
	if err == nil && recErr != nil {
		err = fmt.Errorf("perf record: %w: %s", recErr, strings.TrimSpace(recOut.String()))
	}
	if err != nil {
		res.skipped = fmt.Sprintf("the profiled run failed: %v", err)
		logf("profile: skipped: %s", res.skipped)
		return res
	}
	// Two views: the share of each binary (the kernel's is the system
	// calls: socket and log-file writes), then self time by symbol.
	var lines []string
	for _, sortBy := range []string{"overhead,dso", "overhead,dso,sym"} {
		args := []string{"report", "-i", data, "--stdio", "--no-children", "--sort", sortBy, "-g", "none", "--percent-limit", "0.5"}
		out, err := exec.CommandContext(ctx, perf, args...).Output()
		if err != nil {
			res.skipped = fmt.Sprintf("perf report: %v", err)
			logf("profile: skipped: %s", res.skipped)
			return res
		}
		if len(lines) > 0 {
			lines = append(lines, "")
		}
		lines = append(lines, reportTop(string(out), profileLines)...)
	}
	if len(lines) == 0 {
		res.skipped = fmt.Sprintf("perf report found no samples (perf record: %s)", strings.TrimSpace(recOut.String()))
		logf("profile: skipped: %s", res.skipped)
		return res
	}
	res.command = "perf record -g -p <proxy pid> (the streaming window); perf report --stdio --no-children -g none --percent-limit 0.5 --sort overhead,dso (then overhead,dso,sym)"
	res.report = strings.Join(lines, "\n")
	return res
}

// reportTop is the column header and the first n entries of a perf report.
func reportTop(out string, n int) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimRight(l, " ")
		switch {
		case l == "" || strings.HasPrefix(l, "# ."):
		case strings.HasPrefix(l, "#") && !strings.Contains(l, "Overhead"):
		default:
			lines = append(lines, l)
		}
		if len(lines) == n+1 {
			break
		}
	}
	return lines
}

// isInterrupt reports whether err is perf exiting on the SIGINT that
// stopped it.
func isInterrupt(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && (ws.Signaled() && ws.Signal() == syscall.SIGINT || ws.ExitStatus() == 130)
}
