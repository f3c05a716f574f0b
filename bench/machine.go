package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// machine is what RESULTS.md says about where the figures were taken.
type machine struct {
	cores     int
	cpu       string // model name from /proc/cpuinfo
	kernel    string
	goVersion string
	redis     string // redis-server --version
	proxy     string // replproxy --version
	commit    string // git describe of the tree measured (-root), when known
	harness   string // git describe of the harness's own tree, when known
	loadStart string // /proc/loadavg when the run began
}

// readMachine reads the machine, the tools, and the trees: root's, whose
// proxy is proxyBin, and the harness's (the working directory).
func readMachine(ctx context.Context, goCmd, root, proxyBin string) machine {
	m := machine{
		cores:     runtime.NumCPU(),
		cpu:       cpuModel(),
		kernel:    firstLine(readFile("/proc/sys/kernel/osrelease")),
		goVersion: firstLine(output(ctx, goCmd, "env", "GOVERSION")),
		redis:     firstLine(output(ctx, "redis-server", "--version")),
		proxy:     firstLine(output(ctx, proxyBin, "--version")),
		commit:    firstLine(output(ctx, "git", "-C", root, "describe", "--always", "--dirty")),
		harness:   firstLine(output(ctx, "git", "describe", "--always", "--dirty")),
		loadStart: loadAverage(),
	}
	return m
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// loadAverage is the 1, 5 and 15 minute load averages.
func loadAverage() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// output runs a command and returns its combined output, "" on failure.
func output(ctx context.Context, name string, args ...string) string {
	b, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return ""
	}
	return string(b)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if s == "" {
		return "unknown"
	}
	return s
}
