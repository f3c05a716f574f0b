package proxy

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// waitCount runs WAIT numreplicas timeoutMs on the primary (for the client's
// last write) and returns how many replicas it counted.
func waitCount(t *testing.T, pc *redistest.Client, replicas, ms int) int {
	t.Helper()
	v, err := pc.Do("WAIT", replicas, ms)
	if err != nil {
		t.Fatalf("WAIT %d %d: %v", replicas, ms, err)
	}
	return v.Integer()
}

// ackPolicySetup runs a primary whose only replica is the proxy (started with
// args) and two real replicas of the proxy, all in sync.
func ackPolicySetup(t *testing.T, args ...string) (pc, xc *redistest.Client, reps []*redistest.Server) {
	t.Helper()
	primary, pc := startPrimary(t)
	_, xc = startProxyOf(t, primary, args...)
	reps, rcs := redistest.StartReplicas(t, 2, xc.Addr())
	redistest.WaitSynced(t, pc, rcs...)
	t.Cleanup(func() {
		for _, r := range reps {
			if r.Pid() != 0 {
				r.Resume()
			}
		}
	})
	if n := pc.InfoInt(t, "replication", "connected_slaves"); n != 1 {
		t.Fatalf("the primary has %d replicas, want 1 (the proxy)", n)
	}
	return pc, xc, reps
}

// configGet returns CONFIG GET name's value.
func configGet(t *testing.T, c *redistest.Client, name string) string {
	t.Helper()
	v := c.MustDo(t, "CONFIG", "GET", name).Array()
	if len(v) != 2 {
		t.Fatalf("CONFIG GET %s = %v", name, v)
	}
	return v[1].String()
}

// TestAckPolicyReplicasWait, against real Redis:
// with `ack-policy replicas 2` and two replicas behind the proxy, WAIT on the
// primary counts the proxy only once both replicas have the write; with one
// of them frozen (SIGSTOP) it returns 0, and 1 again once it resumes.
func TestAckPolicyReplicasWait(t *testing.T) {
	pc, xc, reps := ackPolicySetup(t, "--ack-policy", "replicas", "2")
	if got := configGet(t, xc, "ack-policy"); got != "replicas 2" {
		t.Fatalf("CONFIG GET ack-policy = %q, want %q", got, "replicas 2")
	}
	// Five times in a row, well inside the periodic ACK's second: the
	// replicas' ACKs reach the primary at once (Link.AckChanged).
	for i := range 5 {
		pc.MustDo(t, "SET", "k", i)
		if n := waitCount(t, pc, 1, 500); n != 1 {
			t.Fatalf("write %d: WAIT 1 500 with both replicas up = %d, want 1", i, n)
		}
	}

	reps[0].Pause()
	pc.MustDo(t, "SET", "k", "frozen")
	if n := waitCount(t, pc, 1, 500); n != 0 {
		t.Fatalf("WAIT 1 500 with one replica of two frozen = %d, want 0", n)
	}
	if n := waitCount(t, pc, 1, 500); n != 0 {
		t.Fatalf("WAIT 1 500 again, the replica still frozen = %d, want 0", n)
	}
	reps[0].Resume()
	redistest.WaitFor(t, 10*time.Second, "WAIT 1 500 = 1 after the replica resumed", func() bool {
		return waitCount(t, pc, 1, 500) == 1
	})
}

// TestAckPolicyReceivedWait: under the default `ack-policy received` the
// proxy acknowledges what it received, as any replica: WAIT 1 counts it even
// with a replica behind it frozen. CONFIG SET ack-policy replicas 2 then
// takes effect at once, and back to received acknowledges everything again.
func TestAckPolicyReceivedWait(t *testing.T) {
	pc, xc, reps := ackPolicySetup(t)
	reps[0].Pause()
	pc.MustDo(t, "SET", "k", "1")
	if n := waitCount(t, pc, 1, 500); n != 1 {
		t.Fatalf("WAIT 1 500 under ack-policy received, a replica frozen = %d, want 1", n)
	}

	xc.MustDo(t, "CONFIG", "SET", "ack-policy", "replicas 2")
	if got := configGet(t, xc, "ack-policy"); got != "replicas 2" {
		t.Fatalf("CONFIG GET ack-policy = %q after CONFIG SET, want %q", got, "replicas 2")
	}
	pc.MustDo(t, "SET", "k", "2")
	if n := waitCount(t, pc, 1, 500); n != 0 {
		t.Fatalf("WAIT 1 500 after CONFIG SET ack-policy replicas 2, a replica frozen = %d, want 0", n)
	}

	xc.MustDo(t, "CONFIG", "SET", "ack-policy", "received")
	redistest.WaitFor(t, 5*time.Second, "WAIT 1 500 = 1 back under ack-policy received", func() bool {
		return waitCount(t, pc, 1, 500) == 1
	})
}

// TestAckPolicyMinReplicasToWrite: a primary with min-replicas-to-write 1
// judges its replicas by the age of their last ACK (min-replicas-max-lag),
// not by offset. Under `ack-policy received` the proxy's ACKs keep the
// primary writable with a replica behind it frozen; under `ack-policy
// replicas 2` the proxy goes quiet once one of its two replicas stops
// acknowledging, the primary refuses writes with -NOREPLICAS, and accepts
// them again once the replica resumes.
func TestAckPolicyMinReplicasToWrite(t *testing.T) {
	pc, xc, reps := ackPolicySetup(t)
	pc.MustDo(t, "CONFIG", "SET", "min-replicas-max-lag", "2")
	pc.MustDo(t, "CONFIG", "SET", "min-replicas-to-write", "1")
	set := func() error {
		_, err := pc.Do("SET", "k", "v")
		return err
	}
	redistest.WaitFor(t, 10*time.Second, "the primary writable with min-replicas-to-write 1", func() bool {
		return set() == nil
	})

	reps[0].Pause()
	// Until the proxy has not heard from the frozen replica for longer than
	// min-replicas-max-lag plus the primary's once-a-second count: had the
	// proxy gone quiet with it, the primary would refuse by now.
	frozen := "port=" + strconv.Itoa(reps[0].Port()) + ","
	redistest.WaitFor(t, 15*time.Second, "the proxy to see the frozen replica silent 4 s", func() bool {
		for k, v := range xc.Info(t, "replication") {
			if strings.HasPrefix(k, "slave") && strings.Contains(v, frozen) {
				// By name: lag is not the line's last field (the proxy's
				// unsent_ms and unacked_ms follow Redis's).
				for _, kv := range strings.Split(v, ",") {
					if s, ok := strings.CutPrefix(kv, "lag="); ok {
						lag, _ := strconv.Atoi(s)
						return lag >= 4
					}
				}
			}
		}
		return false
	})
	if err := set(); err != nil {
		t.Fatalf("SET under ack-policy received, a replica frozen 4 s: %v, want OK", err)
	}

	xc.MustDo(t, "CONFIG", "SET", "ack-policy", "replicas 2")
	var last error
	redistest.WaitFor(t, 15*time.Second, "-NOREPLICAS under ack-policy replicas 2, a replica frozen", func() bool {
		last = set()
		return last != nil
	})
	if !strings.HasPrefix(last.Error(), "NOREPLICAS") {
		t.Fatalf("SET with the proxy quiet: %v, want -NOREPLICAS", last)
	}
	reps[0].Resume()
	redistest.WaitFor(t, 15*time.Second, "the primary writable again after the replica resumed", func() bool {
		return set() == nil
	})
}
