package deploy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/internal/chaos"
	"github.com/replproxy/replproxy/internal/netns"
	"github.com/replproxy/replproxy/internal/redistest"
)

// TestLayOut: a proxy's three addresses are its host with each of its
// ports, its log and stderr are named for it in the run's folder, and so is
// its dir unless it has one of its own.
func TestLayOut(t *testing.T) {
	d := testDeployment(t)
	d.pki = &redistest.PKI{CACert: "ca.crt"}
	ns := netns.Namespace{Name: "b"}
	upstream := func() []string { return nil }
	p := d.layOut("proxy-b", ns, "10.1.2.2", proxyPorts{plain: 7001, tls: 7002, metrics: 7003}, proxyOpts{}, upstream)
	for _, c := range []struct{ what, got, want string }{
		{"addr", p.addr, "10.1.2.2:7001"},
		{"tlsAddr", p.tlsAddr, "10.1.2.2:7002"},
		{"metricsAddr", p.metricsAddr, "10.1.2.2:7003"},
		{"dir", p.dir, filepath.Join("run", "proxy-b")},
		{"logfile", p.logfile, filepath.Join("run", "proxy-b.log")},
		{"stderr", p.stderr, filepath.Join("run", "proxy-b.stderr")},
		{"caFile", p.caFile, "ca.crt"},
		{"name", p.name, "proxy-b"},
		{"ns", p.ns.Name, "b"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if p.port != 7001 {
		t.Errorf("port = %d, want 7001", p.port)
	}
	own := d.layOut("proxy-a", ns, "10.1.2.1", proxyPorts{plain: 1, tls: 2, metrics: 3}, proxyOpts{dir: filepath.Join("fs", "dir")}, upstream)
	if own.dir != filepath.Join("fs", "dir") || own.logfile != filepath.Join("run", "proxy-a.log") {
		t.Errorf("with a dir of its own: dir %q, log %q; want the dir given and the log in the run's folder", own.dir, own.logfile)
	}
}

// TestProxyArgs: a proxy's command line listens on its host (and its
// second address), names its ports, dir, log and certificate, holds every
// proxy to the run's repl-timeout and maxmemory, and ends with its own
// directives and then its upstream's, asked at each start.
func TestProxyArgs(t *testing.T) {
	d := testDeployment(t)
	d.pki = &redistest.PKI{CACert: "ca.crt"}
	primary := "10.1.2.1 6379"
	p := d.layOut("proxy-a", netns.Namespace{Name: "a"}, "10.1.2.1", proxyPorts{plain: 7001, tls: 7002, metrics: 7003},
		proxyOpts{extra: []string{"--repl-log-size", "128mb"}, alsoBind: "10.1.2.5"},
		func() []string { return append([]string{"--replicaof"}, strings.Fields(primary)...) })
	p.certFile, p.keyFile = "a.crt", "a.key"

	args := p.args()
	line := " " + strings.Join(args, " ") + " "
	for _, want := range []string{
		" --bind 10.1.2.1 10.1.2.5 --port 7001 ",
		" --tls-port 7002 --tls-cert-file a.crt --tls-key-file a.key --tls-ca-cert-file ca.crt ",
		" --metrics-port 7003 --metrics-bind 10.1.2.1 ",
		" --dir " + p.dir + " --logfile " + p.logfile + " ",
		" --repl-timeout 10 ",
		" --maxmemory 268435456 --maxmemory-policy evict-snapshots ",
		" --repl-log-size 128mb --replicaof 10.1.2.1 6379 ",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("args %q lack %q", args, strings.TrimSpace(want))
		}
	}
	if !strings.HasSuffix(line, " --replicaof 10.1.2.1 6379 ") {
		t.Errorf("args %q do not end with the upstream's directives", args)
	}
	// The upstream is asked again at the next start: after a failover it
	// is another server.
	primary = "10.1.2.1 6380"
	if again := p.args(); !slices.Equal(again[len(again)-3:], []string{"--replicaof", "10.1.2.1", "6380"}) {
		t.Errorf("args after the primary moved end with %q", again[len(again)-3:])
	}
	plain := d.layOut("standby", netns.Namespace{Name: "a"}, "10.1.2.1", proxyPorts{plain: 7004, tls: 7005, metrics: 7006}, proxyOpts{}, func() []string { return nil })
	if got := plain.args()[:3]; !slices.Equal(got, []string{"--bind", "10.1.2.1", "--port"}) {
		t.Errorf("a proxy with no second address starts %q", got)
	}
}

// TestParseResources: a proxy's goroutines and descriptors are read from
// its /metrics among every other series, and a page without both is an
// error, not a zero.
func TestParseResources(t *testing.T) {
	page := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 37
go_gc_duration_seconds{quantile="0.5"} 1.5e-05
go_goroutines_other 99
# HELP process_open_fds Number of open file descriptors.
process_open_fds 2.1e+01
process_max_fds 1.048576e+06
`
	got, err := parseResources(strings.NewReader(page))
	if err != nil || got != (chaos.Resources{Goroutines: 37, FDs: 21}) {
		t.Errorf("parseResources = %+v, %v; want 37 goroutines and 21 descriptors", got, err)
	}
	for _, bad := range []string{
		"go_goroutines 37\n",
		"process_open_fds 21\n",
		"go_goroutines 37\ngo_goroutines 38\n", // twice the one, never the other
		"go_goroutines many\nprocess_open_fds 21\n",
		"",
	} {
		if got, err := parseResources(strings.NewReader(bad)); err == nil {
			t.Errorf("parseResources(%q) = %+v, nil; want an error", bad, got)
		}
	}
}
