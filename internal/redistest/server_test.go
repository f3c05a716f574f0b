package redistest

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReplicaSync(t *testing.T) {
	t.Parallel()
	primary := StartServer(t, "--repl-diskless-sync-delay", "0")
	replica := StartServer(t)
	pc := Dial(t, primary.Addr())
	rc := Dial(t, replica.Addr())

	for _, kv := range [][2]string{{"save", ""}, {"bind", "127.0.0.1"}, {"appendonly", "no"}} {
		if got := pc.MustDo(t, "CONFIG", "GET", kv[0]).Array(); len(got) != 2 || got[1].String() != kv[1] {
			t.Errorf("CONFIG GET %s = %v, want %q", kv[0], got, kv[1])
		}
	}

	rc.MustDo(t, "REPLICAOF", "127.0.0.1", primary.Port())
	const n = 200
	for i := range n {
		if err := pc.Send("SET", fmt.Sprintf("key:%d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pc.Do("PING"); err == nil {
		t.Errorf("Do with pipelined replies pending: no error")
	}
	if err := pc.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if v, err := pc.Receive(); err != nil || v.String() != "OK" {
			t.Fatalf("reply %d = %q, %v", i, v.String(), err)
		}
	}
	pc.MustDo(t, "HSET", "h", "f", "v")
	WaitSynced(t, pc, rc)

	if pd, rd := pc.Digest(t), rc.Digest(t); pd != rd || pd == strings.Repeat("0", 40) {
		t.Errorf("digests: primary %s, replica %s", pd, rd)
	}
	if got := pc.InfoInt(t, "replication", "connected_slaves"); got != 1 {
		t.Errorf("connected_slaves = %d, want 1", got)
	}
	if got := rc.Info(t, "replication")["master_replid"]; got != pc.Info(t, "replication")["master_replid"] {
		t.Errorf("replica master_replid %s differs from the primary's", got)
	}
	var replicaClients int
	for _, c := range pc.ClientList(t) {
		if strings.Contains(c["flags"], "S") {
			replicaClients++
		}
	}
	if replicaClients != 1 {
		t.Errorf("CLIENT LIST on primary has %d replica clients, want 1", replicaClients)
	}

	// Writes made while the replica is frozen arrive once it is resumed.
	replica.Pause()
	pc.MustDo(t, "SET", "while-paused", "x")
	replica.Resume()
	WaitSynced(t, pc, rc)
	if got := rc.MustDo(t, "GET", "while-paused").String(); got != "x" {
		t.Errorf("replica GET while-paused = %q", got)
	}
}

func TestInfoIntNotInteger(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	c := Dial(t, s.Addr())
	c.MustDo(t, "SET", "k", "v")
	f := newFakeTB(t)
	// db0 is "keys=1,expires=0,avg_ttl=0".
	f.run(func(tb testing.TB) { c.InfoInt(tb, "keyspace", "db0") })
	if !f.Failed() || !strings.Contains(f.output(), "not an integer") {
		t.Errorf("InfoInt on db0: failed=%v, log:\n%s", f.Failed(), f.output())
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	s.Pause()
	c, err := DialOpts(t, s.Addr(), DialOptions{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("dial paused server: %v (the kernel should still accept)", err)
	}
	_, err = c.Do("PING")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("PING to paused server: err = %v, want a timeout", err)
	}
	s.Resume()
	if got := Dial(t, s.Addr()).MustDo(t, "PING").String(); got != "PONG" {
		t.Errorf("PING after Resume = %q", got)
	}
}

func TestRestart(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	c := Dial(t, s.Addr())
	c.MustDo(t, "SET", "k", "v")
	port, pid := s.Port(), s.Pid()
	replID := c.Info(t, "replication")["master_replid"]

	s.Restart()
	if s.Port() != port || s.Pid() == pid || s.Pid() == 0 {
		t.Errorf("after Restart: port %d pid %d; before: port %d pid %d", s.Port(), s.Pid(), port, pid)
	}
	if _, err := c.Do("PING"); err == nil {
		t.Errorf("old connection still works after Restart")
	}
	c = Dial(t, s.Addr())
	if got := c.Info(t, "replication")["master_replid"]; got == replID || len(got) != 40 {
		t.Errorf("master_replid after Restart = %q, before %q; want a new one", got, replID)
	}
	if v := c.MustDo(t, "GET", "k"); !v.IsNull() {
		t.Errorf("GET k after Restart = %q, want nil (no persistence)", v.String())
	}
	if n := strings.Count(readFrom(s.LogPath(), 0), "Ready to accept connections"); n != 2 {
		t.Errorf("log has %d starts, want 2", n)
	}
}

func TestStopKill(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		stop func(*Server)
	}{
		{"Stop", (*Server).Stop},
		{"Kill", (*Server).Kill},
		{"Stop paused", func(s *Server) { s.Pause(); s.Stop() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := StartServer(t)
			pid := s.Pid()
			start := time.Now()
			tt.stop(s)
			if d := time.Since(start); d > StopTimeout/2 {
				t.Errorf("%s took %v", tt.name, d)
			}
			if s.Pid() != 0 {
				t.Errorf("Pid after %s = %d, want 0", tt.name, s.Pid())
			}
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process %d after %s: kill -0: %v, want ESRCH", pid, tt.name, err)
			}
			if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
				t.Errorf("%s still accepts connections after %s", s.Addr(), tt.name)
			}
			s.Stop() // idempotent
			s.Kill()
		})
	}
}

// TestCleanup checks what StartServer's cleanup does at the end of a failed test whose
// server was left paused: it resumes and stops it promptly and shows the log's tail.
func TestCleanup(t *testing.T) {
	t.Parallel()
	Require(t) // the fake TB below would turn a skip into a failure
	f := newFakeTB(t)
	var pid int
	f.run(func(tb testing.TB) {
		s := StartServer(tb)
		pid = s.Pid()
		s.Pause()
		tb.Errorf("the test fails")
	})
	start := time.Now()
	f.runCleanups()
	if d := time.Since(start); d > StopTimeout/2 {
		t.Errorf("cleanup of a paused server took %v", d)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d after cleanup: kill -0: %v, want ESRCH", pid, err)
	}
	out := f.output()
	for _, want := range []string{"last 40 lines of", "Ready to accept connections", "Redis is now ready to exit"} {
		if !strings.Contains(out, want) {
			t.Errorf("cleanup log lacks %q:\n%s", want, out)
		}
	}
}

func TestStartServerErrors(t *testing.T) {
	t.Parallel()
	Require(t) // the fake TB below would turn a skip into a failure
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad directive", []string{"--no-such-directive", "1"}, "Bad directive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeTB(t)
			f.run(func(tb testing.TB) { StartServer(tb, tt.args...) })
			f.runCleanups()
			if !f.Failed() || !strings.Contains(f.output(), tt.want) {
				t.Errorf("StartServer(%q): failed=%v, log:\n%s", tt.args, f.Failed(), f.output())
			}
		})
	}
}

func TestStartServerPortTaken(t *testing.T) {
	t.Parallel()
	// A server whose start fails with "Address already in use" on its first port must
	// retry on another: simulate the race by binding the port StartServer would get.
	// FreePort cannot be steered, so check the detection through start directly.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bin, _ := Require(t)
	dir := t.TempDir()
	s := &Server{t: t, bin: bin, dir: dir, logPath: dir + "/redis.log", port: l.Addr().(*net.TCPAddr).Port}
	if err := s.start(); !errors.Is(err, errAddrInUse) {
		t.Errorf("start on a taken port: err = %v, want errAddrInUse", err)
	}
	if s.proc != nil {
		t.Errorf("failed start left a process")
		s.Kill()
	}
}

func TestRequirePass(t *testing.T) {
	t.Parallel()
	s := StartServer(t, "--requirepass", "sekrit")
	_, err := Dial(t, s.Addr()).Do("PING")
	var re *ReplyError
	if !errors.As(err, &re) || re.Prefix() != "NOAUTH" {
		t.Errorf("PING without AUTH: err = %v, want NOAUTH", err)
	}
	if _, err := DialOpts(t, s.Addr(), DialOptions{Password: "wrong"}); !errors.As(err, &re) || re.Prefix() != "WRONGPASS" {
		t.Errorf("DialOpts with a wrong password: err = %v, want WRONGPASS", err)
	}
	c, err := DialOpts(t, s.Addr(), DialOptions{Password: "sekrit"})
	if err != nil {
		t.Fatal(err)
	}
	c.MustDo(t, "SET", "k", "v")
}

func TestWaitSyncedFailure(t *testing.T) {
	t.Parallel()
	primary := StartServer(t)
	other := StartServer(t) // never told to replicate
	pc, oc := Dial(t, primary.Addr()), Dial(t, other.Addr())
	f := newFakeTB(t)
	f.run(func(tb testing.TB) { WaitSyncedWithin(tb, 200*time.Millisecond, pc, oc) })
	out := f.output()
	if !f.Failed() || !strings.Contains(out, "not synced after 200ms") || !strings.Contains(out, other.Addr()) || !strings.Contains(out, "link=(master)") {
		t.Errorf("WaitSynced with a non-replica: failed=%v, log:\n%s", f.Failed(), out)
	}
}

func TestWaitFor(t *testing.T) {
	t.Parallel()
	calls := 0
	WaitFor(t, time.Second, "third call", func() bool { calls++; return calls == 3 })
	f := newFakeTB(t)
	f.run(func(tb testing.TB) { WaitFor(tb, 60*time.Millisecond, "never", func() bool { return false }) })
	if !f.Failed() || !strings.Contains(f.output(), "waiting for never") {
		t.Errorf("WaitFor timeout: failed=%v, log:\n%s", f.Failed(), f.output())
	}
}

func TestTools(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	if got := strings.TrimSpace(RedisCLI(t, "-p", strconv.Itoa(s.Port()), "PING")); got != "PONG" {
		t.Errorf("redis-cli PING = %q", got)
	}
	out := RunBenchmark(t, s.Addr(), "-n", "2000", "-t", "set,get")
	if !strings.Contains(out, "SET: ") || !strings.Contains(out, "GET: ") {
		t.Errorf("redis-benchmark output:\n%s", out)
	}
	if n := Dial(t, s.Addr()).MustDo(t, "DBSIZE").Integer(); n != 1 {
		t.Errorf("DBSIZE after benchmark = %d, want 1 (key:__rand_int__)", n)
	}
}
