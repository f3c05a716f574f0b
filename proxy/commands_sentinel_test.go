package proxy

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/pubsub"
	"github.com/replproxy/replproxy/proxy/wire"
)

// A pubsubStep is one step of a Pub/Sub exchange: args sent on connection
// conn, then reads replies read there and compared; a step without args
// only reads (a message pushed to a subscriber). reads3 is the count for a
// RESP3 subscriber where it differs, and shape3 compares the replies' types
// only in RESP3 (a command a RESP2 subscriber is refused runs there, and
// its content is the proxy's own).
type pubsubStep struct {
	conn   int
	args   []string // nil: read one more reply without sending
	reads  int      // how many replies to read (default 1)
	reads3 int      // the same for a RESP3 subscriber, if not reads
	shape3 bool
}

// TestPubSubMatchesRedis runs one Pub/Sub exchange on three connections
// against a real redis-server and against the proxy, and requires the same
// bytes from both: confirmations and their counts, messages delivered to
// the subscriber, PUBLISH's receiver count, PING and the refusal of other
// commands in subscribed mode, UNSUBSCRIBE of all and of a channel never
// subscribed. It runs with the subscriber (connection 0) in RESP2 and in
// RESP3, where confirmations and messages are pushes and every command is
// allowed; connections 1 and 2 stay in RESP2, so that in the RESP3 run a
// publish reaches subscribers of both protocols.
func TestPubSubMatchesRedis(t *testing.T) {
	r := redistest.StartServer(t)
	p := startProxy(t)
	steps := []pubsubStep{
		{conn: 1, args: []string{"UNSUBSCRIBE"}},
		{conn: 0, args: []string{"UNSUBSCRIBE"}},
		{conn: 0, args: []string{"SUBSCRIBE", sentinelHello, "news"}, reads: 2},
		{conn: 0, args: []string{"SUBSCRIBE", "news"}},
		{conn: 1, args: []string{"PUBLISH", sentinelHello, "127.0.0.1,26379,id,0,m,127.0.0.1,6379,0"}},
		{conn: 0}, // the message
		{conn: 1, args: []string{"PUBLISH", "news", "x"}},
		{conn: 0},
		{conn: 1, args: []string{"PUBLISH", "nobody", "x"}},
		{conn: 0, args: []string{"PING"}},
		{conn: 0, args: []string{"PING", "hi"}},
		{conn: 0, args: []string{"INFO"}, shape3: true},
		{conn: 0, args: []string{"CLIENT", "LIST"}, shape3: true},
		{conn: 0, args: []string{"ECHO", "e"}},
		// In RESP3 the subscriber's own message comes before the count.
		{conn: 0, args: []string{"PUBLISH", "news", "x"}, reads3: 2},
		{conn: 0, args: []string{"UNSUBSCRIBE", "never"}},
		{conn: 0, args: []string{"UNSUBSCRIBE", "news"}},
		{conn: 1, args: []string{"PUBLISH", "news", "x"}},
		{conn: 1, args: []string{"PUBLISH", sentinelHello, "y"}},
		{conn: 0},
		{conn: 0, args: []string{"UNSUBSCRIBE"}},
		{conn: 0, args: []string{"PING"}},
		{conn: 0, args: []string{"UNSUBSCRIBE"}},
		{conn: 1, args: []string{"PUBLISH", sentinelHello, "z"}},
		{conn: 1, args: []string{"PUBLISH", sentinelHello}},
		{conn: 0, args: []string{"SUBSCRIBE"}},
		// One publish to a subscriber of each protocol (in the RESP3 run).
		{conn: 2, args: []string{"SUBSCRIBE", "news"}},
		{conn: 0, args: []string{"SUBSCRIBE", "news"}},
		{conn: 1, args: []string{"PUBLISH", "news", "both"}},
		{conn: 0},
		{conn: 2},
		{conn: 0, args: []string{"UNSUBSCRIBE"}},
		{conn: 2, args: []string{"UNSUBSCRIBE"}},
	}
	run := func(addr, proto string) []string {
		var conns [3]*adminConn
		for i := range conns {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			conns[i] = &adminConn{t: t, conn: c, rd: bufio.NewReader(c)}
		}
		// HELLO's reply holds the server's version and the client's id,
		// which differ by nature: not compared.
		conns[0].do("HELLO", proto)
		var out []string
		for _, st := range steps {
			a := conns[st.conn]
			a.conn.SetDeadline(time.Now().Add(5 * time.Second))
			if st.args != nil {
				if _, err := a.conn.Write(wire.AppendCommand(nil, st.args...)); err != nil {
					t.Fatal(err)
				}
			}
			reads := max(st.reads, 1)
			if proto == "3" && st.conn == 0 && st.reads3 > 0 {
				reads = st.reads3
			}
			for range reads {
				reply := a.reply()
				if proto == "3" && st.shape3 {
					reply = respShape(t, reply)
				}
				out = append(out, reply)
			}
		}
		return out
	}
	for _, proto := range []string{"2", "3"} {
		want, got := run(r.Addr(), proto), run(p.AddrString(), proto)
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("RESP%s: reply %d: proxy %q, redis-server %q", proto, i, got[i], want[i])
			}
		}
	}
}

// TestPubSubClientList: a subscribed client shows flags=P and its count in
// sub= in CLIENT LIST, as in Redis, and is of CLIENT KILL's type pubsub.
func TestPubSubClientList(t *testing.T) {
	p := startProxy(t)
	sub := adminDial(t, p)
	admin := redistest.Dial(t, p.AddrString())
	sub.do("CLIENT", "SETNAME", "subscriber")
	sub.do("SUBSCRIBE", sentinelHello)
	line := func(name string) map[string]string {
		for _, c := range admin.ClientList(t) {
			if c["name"] == name {
				return c
			}
		}
		return nil
	}
	if c := line("subscriber"); c["flags"] != "P" || c["sub"] != "1" || c["cmd"] != "subscribe" {
		t.Errorf("subscribed client: flags=%s sub=%s cmd=%s, want P 1 subscribe", c["flags"], c["sub"], c["cmd"])
	}
	if got := admin.MustDo(t, "CLIENT", "KILL", "TYPE", "pubsub", "SKIPME", "yes").String(); got != "1" {
		t.Errorf("CLIENT KILL TYPE pubsub answered %s, want 1", got)
	}
	// Another name: the one killed may be listed until its goroutine ends.
	sub = adminDial(t, p)
	sub.do("CLIENT", "SETNAME", "subscriber2")
	sub.do("SUBSCRIBE", sentinelHello)
	sub.do("UNSUBSCRIBE")
	if c := line("subscriber2"); c["flags"] != "N" || c["sub"] != "0" {
		t.Errorf("unsubscribed client: flags=%s sub=%s, want N 0", c["flags"], c["sub"])
	}
	if got := admin.MustDo(t, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").String(); got != "1" {
		t.Errorf("CLIENT KILL TYPE normal answered %s, want 1 (the client that unsubscribed)", got)
	}
}

// TestPubSubBounds: the proxy's bounds on subscriptions, and a subscriber
// that does not read is closed at client-output-buffer-limit pubsub's hard
// limit while PUBLISH goes on answering.
func TestPubSubBounds(t *testing.T) {
	p := startProxy(t, "--client-output-buffer-limit", "pubsub", "256kb", "0", "0")
	a := adminDial(t, p)
	if got := a.do("SUBSCRIBE", strings.Repeat("x", pubsub.MaxChannelLen+1)); !strings.HasPrefix(got, "-ERR replproxy serves channel names of at most") {
		t.Errorf("a long channel name answered %q", got)
	}
	many := []string{"SUBSCRIBE"}
	for i := range pubsub.MaxSubscriptions + 1 {
		many = append(many, "c"+itoa(int64(i)))
	}
	if got := a.do(many...); !strings.HasPrefix(got, "-ERR replproxy serves at most") {
		t.Errorf("%d channels answered %q", pubsub.MaxSubscriptions+1, got)
	}

	// A subscriber that never reads: its socket buffers fill, then its
	// outbox reaches the hard limit and it is closed.
	slow := adminDial(t, p)
	slow.do("SUBSCRIBE", "flood")
	pub := adminDial(t, p)
	payload := strings.Repeat("v", 64<<10)
	closed := false
	for i := 0; i < 4096 && !closed; i++ {
		switch got := pub.do("PUBLISH", "flood", payload); got {
		case ":1\r\n":
		case ":0\r\n":
			closed = true
		default:
			t.Fatalf("PUBLISH answered %q", got)
		}
	}
	if !closed {
		t.Fatal("a subscriber that does not read was never closed")
	}
	if !p.Log.Contains("client closed: output buffer over client-output-buffer-limit pubsub") {
		t.Error("no log line for the subscriber closed at its output limit")
	}
}
