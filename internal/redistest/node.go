package redistest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	// NodeRedis is the node-redis release the RESP3 tests read the proxy with (the npm
	// package redis; v5 is the first to speak RESP3, with createClient's RESP: 3).
	NodeRedis = "redis@5.12.1"
	// NPMInstallTimeout bounds one npm install of a test's package.
	NPMInstallTimeout = 5 * time.Minute
	// NodeTimeout bounds one [RunNode] run.
	NodeTimeout = time.Minute
)

// NodeModules returns a directory whose node_modules holds the npm package spec
// ("redis@5.12.1") and its dependencies, for scripts run by [RunNode]. It installs it with
// npm from the registry the first time, into the user's cache directory
// (os.UserCacheDir()/replproxy-test/npm/<spec>), and reuses that install afterwards; an
// install goes to a temporary directory beside it, renamed into place when complete, so
// that two test binaries installing at once never see a half-installed one.
//
// node and npm are looked up as [RequireTool] does: missing, the test is skipped, or fails
// under CI=true; -short or [SkipEnv]=skip skips it. A failed install fails the test under
// CI=true and skips it otherwise (a machine without the registry cannot run it).
func NodeModules(t testing.TB, spec string) string {
	t.Helper()
	paths := requireBinaries(t, "node", "npm")
	npm := paths[1]
	name, _, _ := strings.Cut(strings.TrimPrefix(spec, "@"), "@")
	if strings.HasPrefix(spec, "@") {
		name = "@" + name
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "replproxy-test", "npm")
	dir := filepath.Join(root, strings.ReplaceAll(spec, "/", "+"))
	installed := func() bool {
		_, err := os.Stat(filepath.Join(dir, "node_modules", name, "package.json"))
		return err == nil
	}
	if installed() {
		return dir
	}
	failed := func(format string, args ...any) {
		t.Helper()
		if isCI(os.Getenv) {
			t.Fatalf("redistest: "+format+" (CI=true: the test must not be skipped)", args...)
		}
		t.Skipf("redistest: skipping: "+format, args...)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		failed("npm install %s: %v", spec, err)
	}
	tmp, err := os.MkdirTemp(root, ".install-")
	if err != nil {
		failed("npm install %s: %v", spec, err)
	}
	defer os.RemoveAll(tmp) // empty once renamed
	ctx, cancel := context.WithTimeout(t.Context(), NPMInstallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-save", "--no-package-lock",
		"--no-audit", "--no-fund", "--loglevel=error", spec)
	cmd.WaitDelay = time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		failed("npm install %s: %v after %v\n%s", spec, err, time.Since(start).Round(time.Millisecond), out)
	}
	t.Logf("redistest: npm installed %s in %v", spec, time.Since(start).Round(time.Millisecond))
	if err := os.Rename(tmp, dir); err != nil && !installed() {
		// Not another binary's install in place of ours: a real failure.
		failed("npm install %s: %v", spec, err)
	}
	return dir
}

// RunNode runs node with the ES module script (its source text) in dir, which holds the
// node_modules it imports ([NodeModules]), and returns what it printed on stdout. It fails
// the test if node exits non-zero (with its stderr) or runs longer than [NodeTimeout].
func RunNode(t testing.TB, dir, script string, args ...string) string {
	t.Helper()
	node := requireBinaries(t, "node")[0]
	f, err := os.CreateTemp(dir, ".script-*.mjs") // beside node_modules, so imports resolve
	if err != nil {
		t.Fatalf("redistest: node script: %v", err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	if _, err := f.WriteString(script); err != nil {
		t.Fatalf("redistest: node script: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("redistest: node script: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), NodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{f.Name()}, args...)...)
	cmd.Dir = dir
	cmd.WaitDelay = time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("redistest: node %q: killed after %v: %v\nstdout:\n%s\nstderr:\n%s", args, NodeTimeout, ctx.Err(), out, stderr.String())
	}
	if err != nil {
		t.Fatalf("redistest: node %q: %v\nstdout:\n%s\nstderr:\n%s", args, err, out, stderr.String())
	}
	return string(out)
}
