package upstream

import (
	"net"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/wire"
)

// TestAckHeldNeverGoesBack: what the session acknowledges under a policy
// that holds the offset back (ack-policy replicas) never goes back, is never
// above what was applied, and with onlyIfRisen is sent only when it rose;
// without one (ack-policy received) the host's offset is sent as it is.
// While the policy is quiet, nothing is sent but in the warm-up and as a
// keepalive every half repl-timeout.
func TestAckHeldNeverGoesBack(t *testing.T) {
	l, h := newTestLink(t, Target{}, Options{})
	proxySide, primarySide := net.Pipe()
	defer proxySide.Close()
	defer primarySide.Close()
	c := &session{l: l, conn: proxySide, timeout: 5 * time.Second}
	f := redistest.NewFakeLink(primarySide)
	// sent returns the offset of the next ACK the primary read, waiting up
	// to 5 s.
	sent := func() (string, error) {
		args, err := f.Take(time.Now().Add(5 * time.Second))
		if err != nil {
			return "", err
		}
		return args[2], nil
	}

	var quorum int64 // what the replicas acknowledged, -1 for too few
	var quiet bool   // too few replicas acknowledged lately
	h.ack = func(applied int64) Ack {
		if quorum < 0 {
			return Ack{Off: -1, Held: true, Quiet: quiet}
		}
		return Ack{Off: min(quorum, applied), Held: true, Quiet: quiet}
	}
	setTimes := func(lastAckAgo, warmLeft time.Duration) func() {
		return func() {
			c.writeMu.Lock()
			c.lastAck, c.warmEnd = time.Now().Add(-lastAckAgo), time.Now().Add(warmLeft)
			c.writeMu.Unlock()
		}
	}
	for _, step := range []struct {
		name        string
		quorum      int64
		applied     int64
		onlyIfRisen bool
		quiet       bool
		before      func() // sets the session's clocks; nil leaves them
		want        string // "" for nothing sent
	}{
		{"too few replicas at the start: 0", -1, 100, false, false, nil, "0"},
		{"quorum", 80, 100, false, false, nil, "80"},
		{"quorum capped at applied", 150, 120, false, false, nil, "120"},
		{"quorum lower: not back", 90, 130, false, false, nil, "120"},
		{"too few replicas: not back", -1, 130, false, false, nil, "120"},
		{"nudge, not risen: nothing", 100, 130, true, false, nil, ""},
		{"nudge, risen", 125, 130, true, false, nil, "125"},
		{"quiet: nothing", 125, 130, false, true, setTimes(time.Second, -time.Second), ""},
		{"quiet in the warm-up: sent", 125, 130, false, true, setTimes(time.Second, time.Second), "125"},
		{"quiet past half repl-timeout: keepalive", 125, 130, false, true, setTimes(3*time.Second, -time.Second), "125"},
		{"quiet right after the keepalive: nothing", 125, 130, false, true, nil, ""},
		{"received policy: as is", 0, 140, false, false, nil, "140"},
	} {
		quorum, quiet = step.quorum, step.quiet
		if step.before != nil {
			step.before()
		}
		if step.name == "received policy: as is" {
			h.ack = nil
		}
		if err := c.ack(step.applied, step.onlyIfRisen); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if step.want == "" {
			// A fence instead of a wait: the pipe keeps order and ack has
			// returned, so an ACK it sent is read before the fence.
			if _, err := proxySide.Write(wire.AppendCommand(nil, "REPLCONF", "ACK", "fence")); err != nil {
				t.Fatal(err)
			}
			if got, err := sent(); err != nil || got != "fence" {
				t.Fatalf("%s: sent ACK %s (%v), want nothing", step.name, got, err)
			}
			continue
		}
		if got, err := sent(); err != nil {
			t.Fatalf("%s: no ACK sent: %v", step.name, err)
		} else if got != step.want {
			t.Fatalf("%s: sent ACK %s, want %s", step.name, got, step.want)
		}
	}
}
