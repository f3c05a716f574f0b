package redistest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// StartSentinel starts redis-server in Sentinel mode on a free port of 127.0.0.1, with
// conf (lines such as "sentinel monitor m 127.0.0.1 6379 1") as its config file, which
// Sentinel requires and rewrites; args are added to its command line as for
// [StartServer]. It returns once the Sentinel answers PING, and is stopped when the test
// ends like any [Server].
func StartSentinel(t testing.TB, conf []string, args ...string) *Server {
	t.Helper()
	return startSentinel(t, nil, "", conf, args)
}

// StartSentinelIn is [StartSentinel] inside network namespace ns, listening on
// host, as [StartServerIn] is [StartServer]: a Sentinel of a region, which must
// reach the servers it monitors there.
func StartSentinelIn(t testing.TB, ns Namespace, host string, conf []string, args ...string) *Server {
	t.Helper()
	return startSentinel(t, ns, host, conf, args)
}

// startSentinel is StartSentinel, inside ns on host when ns is not nil.
func startSentinel(t testing.TB, ns Namespace, host string, conf []string, args []string) *Server {
	t.Helper()
	bin, _ := Require(t)
	dir := t.TempDir()
	s := &Server{
		t:       t,
		bin:     bin,
		dir:     dir,
		logPath: filepath.Join(dir, "sentinel.log"),
		conf:    filepath.Join(dir, "sentinel.conf"),
		args:    append([]string{"--sentinel"}, args...),
		ns:      ns,
		host:    host,
	}
	if err := os.WriteFile(s.conf, []byte(strings.Join(conf, "\n")+"\n"), 0o644); err != nil {
		t.Fatalf("redistest: write sentinel config: %v", err)
	}
	t.Cleanup(s.cleanup)
	startOnFreePort(t, "the sentinel", &s.port, s.start)
	return s
}
