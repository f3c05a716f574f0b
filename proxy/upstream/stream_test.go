package upstream

import (
	"net"
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/wire"
)

// TestAckHeldNeverGoesBack: what the session acknowledges under a policy
// that holds the offset back (ack-policy replicas) never goes back, is never
// above what was applied, and with onlyIfRisen is sent only when it rose;
// without one (ack-policy received) the host's offset is sent as it is.
func TestAckHeldNeverGoesBack(t *testing.T) {
	l, h := newTestLink(t)
	proxySide, primarySide := net.Pipe()
	defer proxySide.Close()
	defer primarySide.Close()
	c := &session{l: l, conn: proxySide, timeout: 5 * time.Second}
	sent := make(chan string, 16)
	go func() {
		rd := wire.NewCommandReader(primarySide, wire.Limits{})
		for {
			cmd, err := rd.ReadCommand()
			if err != nil {
				close(sent)
				return
			}
			sent <- string(cmd.Args[2])
		}
	}()

	var quorum int64 // what the replicas acknowledged, -1 for too few
	h.ack = func(applied int64) (int64, bool) {
		if quorum < 0 {
			return -1, true
		}
		return min(quorum, applied), true
	}
	for _, step := range []struct {
		name        string
		quorum      int64
		applied     int64
		onlyIfRisen bool
		want        string // "" for nothing sent
	}{
		{"too few replicas at the start: 0", -1, 100, false, "0"},
		{"quorum", 80, 100, false, "80"},
		{"quorum capped at applied", 150, 120, false, "120"},
		{"quorum lower: not back", 90, 130, false, "120"},
		{"too few replicas: not back", -1, 130, false, "120"},
		{"nudge, not risen: nothing", 100, 130, true, ""},
		{"nudge, risen", 125, 130, true, "125"},
		{"received policy: as is", 0, 140, false, "140"},
	} {
		quorum = step.quorum
		if step.name == "received policy: as is" {
			h.ack = nil
		}
		if err := c.ack(step.applied, step.onlyIfRisen); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if step.want == "" {
			select {
			case got := <-sent:
				t.Fatalf("%s: sent ACK %s, want nothing", step.name, got)
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		select {
		case got := <-sent:
			if got != step.want {
				t.Fatalf("%s: sent ACK %s, want %s", step.name, got, step.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no ACK sent", step.name)
		}
	}
}
