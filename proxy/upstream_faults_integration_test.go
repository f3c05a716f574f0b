package proxy

import (
	"bytes"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// Fault tests: a real redis-server primary, the proxy, and between them a
// relay that breaks chosen connections. After each fault the same proxy,
// never restarted, must get back to master_link_status:up at the primary's
// offset, as the primary's one replica.

// faultPlan is what the relay does to one connection.
type faultPlan struct {
	// cutInPayload > 0: forward that many bytes after the primary's "$" payload
	// line, then close both sides: a primary lost mid-RDB.
	cutInPayload int64
	// garbageReply: send "+GARBAGE\r\n" instead of the primary's PSYNC reply,
	// then close both sides.
	garbageReply bool
}

// faultStartRelay starts a relay from the proxy to a primary that breaks
// each connection according to the plan for its number (1 for the first).
func faultStartRelay(t testing.TB, addr, target string, plan func(n int) faultPlan) *redistest.Relay {
	t.Helper()
	return redistest.StartRelay(t, addr, target, func(n int, down io.Writer, up io.Reader) bool {
		return faultCopyDown(down, up, plan(n))
	})
}

// faultCopyDown relays primary → proxy through a faultTap; it reports
// whether it cut the connection.
func faultCopyDown(down io.Writer, up io.Reader, plan faultPlan) (cut bool) {
	tap := faultTap{plan: plan}
	if plan == (faultPlan{}) {
		tap.state = faultTapPass
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			out, cut := tap.filter(buf[:n])
			if len(out) > 0 {
				if _, werr := down.Write(out); werr != nil {
					return false
				}
			}
			if cut {
				return true
			}
		}
		if err != nil {
			return false
		}
	}
}

// faultTap follows the primary's side of a connection far enough to place a
// fault: reply lines up to the PSYNC reply, then the payload header, then a
// count of payload bytes.
type faultTap struct {
	plan  faultPlan
	state int
	line  []byte // the start of a reply line whose LF has not come yet
	left  int64  // payload bytes still to forward before the cut
}

const (
	faultTapReplies = iota // handshake replies and keepalives, up to the PSYNC reply
	faultTapHeader         // after +FULLRESYNC: keepalives, then the "$" line
	faultTapPayload        // payload bytes, counted down to the cut
	faultTapPass           // everything else, untouched
)

// filter returns what to forward of p, the next bytes from the primary, and
// whether to cut the connection after forwarding it.
func (f *faultTap) filter(p []byte) (out []byte, cut bool) {
	for len(p) > 0 {
		switch f.state {
		case faultTapPass:
			return append(out, p...), false
		case faultTapPayload:
			n := min(int64(len(p)), f.left)
			f.left -= n
			return append(out, p[:n]...), f.left == 0
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			f.line = append(f.line, p...)
			return out, false
		}
		line := append(f.line, p[:i+1]...)
		f.line, p = nil, p[i+1:]
		full := bytes.HasPrefix(line, []byte("+FULLRESYNC"))
		switch {
		case f.state == faultTapReplies && (full || bytes.HasPrefix(line, []byte("+CONTINUE"))):
			if f.plan.garbageReply {
				return append(out, "+GARBAGE\r\n"...), true
			}
			f.state = faultTapPass
			if full && f.plan.cutInPayload > 0 {
				f.state = faultTapHeader
			}
		case f.state == faultTapHeader && line[0] == '$':
			f.state, f.left = faultTapPayload, f.plan.cutInPayload
		}
		out = append(out, line...)
	}
	return out, false
}

// faultWrite writes n keys of a few types on the primary.
func faultWrite(t testing.TB, pc *redistest.Client, prefix string, n int) {
	t.Helper()
	for i := range n {
		k := prefix + strconv.Itoa(i)
		pc.MustDo(t, "SET", k, "v"+strconv.Itoa(i))
		pc.MustDo(t, "RPUSH", k+":list", "a", "b")
		pc.MustDo(t, "INCRBY", prefix+":counter", i)
	}
}

// faultWaitRecovered checks that the proxy is back: link up, offsets equal to
// the primary's after a write, and the proxy the primary's only replica.
func faultWaitRecovered(t testing.TB, pc, xc *redistest.Client) {
	t.Helper()
	waitLinkUp(t, xc)
	faultWrite(t, pc, "after", 20)
	waitOffsetsEqual(t, pc, xc)
	redistest.WaitFor(t, 10*time.Second, "the primary to report exactly one replica", func() bool {
		return pc.InfoInt(t, "replication", "connected_slaves") == 1
	})
	if info := xc.Info(t, "replication"); info["master_link_status"] != "up" {
		t.Fatalf("proxy link %s after recovery", info["master_link_status"])
	}
}

// TestFaultRelay: the relay breaks the first connection (a primary lost
// mid-RDB in either payload form, a garbage PSYNC reply) or a streaming link;
// the proxy reconnects by itself and catches up.
func TestFaultRelay(t *testing.T) {
	const cut = 256 << 10
	for _, tc := range []struct {
		name     string
		diskless string
		plan     faultPlan
		drop     bool   // instead of a plan: drop the link once it streams
		log      string // the proxy must have logged this
	}{
		{name: "mid-RDB cut eof-mark", diskless: "yes", plan: faultPlan{cutInPayload: cut}, log: "primary closed the link mid-payload"},
		{name: "mid-RDB cut sized", diskless: "no", plan: faultPlan{cutInPayload: cut}, log: "primary closed the link after"},
		{name: "garbage PSYNC reply", diskless: "yes", plan: faultPlan{garbageReply: true}, log: "GARBAGE"},
		{name: "link dropped while streaming", diskless: "yes", drop: true, log: "link to primary lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary, pc := startPrimary(t, "--repl-diskless-sync", tc.diskless)
			pc.MustDo(t, "DEBUG", "POPULATE", 200000, "key", 100)
			relay := faultStartRelay(t, "127.0.0.1:0", primary.Addr(), func(n int) faultPlan {
				if n == 1 {
					return tc.plan
				}
				return faultPlan{}
			})
			p := startProxy(t, "--replicaof", "127.0.0.1", strconv.Itoa(relay.Port()), "--repl-log-size", "0") // the snapshot checked is in memory
			xc := redistest.Dial(t, p.AddrString())
			if tc.drop {
				waitLinkUp(t, xc)
				faultWrite(t, pc, "before", 20)
				waitOffsetsEqual(t, pc, xc)
				relay.DropAll()
				faultWrite(t, pc, "during", 20) // into the primary's backlog while the link is down
			}
			faultWaitRecovered(t, pc, xc)

			accepted, faults := relay.Stats()
			if !tc.drop && faults != 1 {
				t.Errorf("relay injected %d faults, want 1 (the RDB may be smaller than the cut)", faults)
			}
			if accepted != 2 {
				t.Errorf("relay saw %d connections, want 2: one broken, one good", accepted)
			}
			if !p.Log.Contains(tc.log) {
				t.Errorf("proxy log does not mention %q", tc.log)
			}
			if n := p.stats.UpstreamLinkFailures.Load(); n != 1 {
				t.Errorf("upstream link failures %d, want 1", n)
			}
			full, partial := p.stats.UpstreamFullSyncs.Load(), p.stats.UpstreamPartialSyncs.Load()
			if tc.drop {
				// The primary still holds the bytes from the proxy's offset on.
				if full != 1 || partial != 1 {
					t.Errorf("full syncs %d, partial syncs %d; want 1 and 1", full, partial)
				}
			} else if full != 1 || partial != 0 {
				t.Errorf("full syncs %d, partial syncs %d; want 1 and 0", full, partial)
			}
			if sn := p.Snapshot(); sn == nil || sn.Size() <= cut {
				t.Errorf("snapshot %v: want one larger than the %d bytes cut at", sn, cut)
			}
		})
	}
}

// TestFaultConnectionRefused: a proxy started before anything listens at its
// primary's address logs the refused connection, keeps retrying, and comes
// up once the primary is there.
func TestFaultConnectionRefused(t *testing.T) {
	primary, pc := startPrimary(t)
	port := redistest.FreePort(t) // nothing listens here until the relay does
	p := startProxy(t, "--replicaof", "127.0.0.1", strconv.Itoa(port))
	xc := redistest.Dial(t, p.AddrString())
	redistest.WaitFor(t, 5*time.Second, "two refused attempts", func() bool {
		return p.stats.UpstreamLinkFailures.Load() >= 2
	})
	if !p.Log.Contains("connection refused") || !p.Log.Contains("retry-in") {
		t.Errorf("proxy log does not show a refused connection being retried")
	}
	if info := xc.Info(t, "replication"); info["master_link_status"] != "down" {
		t.Errorf("master_link_status:%s with nothing listening, want down", info["master_link_status"])
	}

	relay := faultStartRelay(t, "127.0.0.1:"+strconv.Itoa(port), primary.Addr(), func(int) faultPlan { return faultPlan{} })
	faultWaitRecovered(t, pc, xc)
	if accepted, _ := relay.Stats(); accepted != 1 {
		t.Errorf("relay saw %d connections, want 1", accepted)
	}
}
