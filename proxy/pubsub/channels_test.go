package pubsub

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/wire"
)

// sub is a subscriber as Channels sees one.
type sub struct {
	proto wire.Proto
	box   *Outbox
	size  atomic.Int64

	// held, when set, is the Channels whose lock must be held whenever the
	// subscriber's outbox is asked for; unheld counts the times it was not.
	held   *Channels[*sub]
	unheld atomic.Int32
}

func newSub(p wire.Proto) *sub {
	s := &sub{proto: p}
	s.box = NewOutbox(&s.size)
	return s
}

func (s *sub) Proto() wire.Proto { return s.proto }

func (s *sub) Outbox() *Outbox {
	if s.held != nil && s.held.mu.TryLock() {
		s.held.mu.Unlock()
		s.unheld.Add(1)
	}
	return s.box
}

// drain takes what s's outbox holds.
func (s *sub) drain() []byte {
	s.box.mu.Lock()
	defer s.box.mu.Unlock()
	b := s.box.pending
	s.box.pending = nil
	s.box.size.Store(0)
	return b
}

var noLimit config.OutputBufferLimit

func confirm(p wire.Proto, chans ...string) []byte {
	var b []byte
	for i, ch := range chans {
		b = AppendConfirm(b, p, "subscribe", []byte(ch), int64(i+1))
	}
	return b
}

// TestSubscribeThenPublish: a subscriber receives its confirmations, then
// what is published on its channels, in its own protocol, and nothing
// published before it subscribed or on other channels.
func TestSubscribeThenPublish(t *testing.T) {
	p := New[*sub]()
	a, b := newSub(wire.RESP2), newSub(wire.RESP3)
	if n, _ := p.Publish([]byte("x"), []byte("early"), noLimit, time.Now()); n != 0 {
		t.Fatalf("Publish with no subscriber counted %d", n)
	}
	for _, s := range []*sub{a, b} {
		if over, _ := p.Subscribe(s, []string{"x", "y"}, confirm(s.proto, "x", "y"), noLimit, time.Now()); over != Within {
			t.Fatalf("Subscribe: %v", over)
		}
	}
	if n, v := p.Publish([]byte("x"), []byte("hi"), noLimit, time.Now()); n != 2 || v != nil {
		t.Fatalf("Publish on x = %d, %v; want 2 receivers, no victim", n, v)
	}
	if n, _ := p.Publish([]byte("z"), []byte("nobody"), noLimit, time.Now()); n != 0 {
		t.Fatalf("Publish on z counted %d", n)
	}
	for _, s := range []*sub{a, b} {
		want := AppendMessage(confirm(s.proto, "x", "y"), s.proto, []byte("x"), []byte("hi"))
		if got := s.drain(); !bytes.Equal(got, want) {
			t.Errorf("RESP%d subscriber got %q, want %q", s.proto, got, want)
		}
	}
	if got, want := string(AppendMessage(nil, wire.RESP3, []byte("x"), []byte("hi"))), ">3\r\n$7\r\nmessage\r\n$1\r\nx\r\n$2\r\nhi\r\n"; got != want {
		t.Errorf("RESP3 message %q, want %q", got, want)
	}
	if got, want := string(AppendConfirm(nil, wire.RESP2, "unsubscribe", []byte("x"), 0)), "*3\r\n$11\r\nunsubscribe\r\n$1\r\nx\r\n:0\r\n"; got != want {
		t.Errorf("RESP2 confirmation %q, want %q", got, want)
	}

	// The protocol is the subscriber's at the publish.
	a.proto = wire.RESP3
	p.Publish([]byte("y"), []byte("again"), noLimit, time.Now())
	if got, want := a.drain(), AppendMessage(nil, wire.RESP3, []byte("y"), []byte("again")); !bytes.Equal(got, want) {
		t.Errorf("after switching to RESP3 got %q, want %q", got, want)
	}
}

// TestSubscribeOrder: a subscribe and publishes running at once: the
// confirmations come before every message, and every message published
// after the first one that counted the subscriber reaches it, in order.
func TestSubscribeOrder(t *testing.T) {
	for round := range 200 {
		p := New[*sub]()
		s := newSub(wire.RESP2)
		const msgs = 50
		counted := make([]int64, msgs)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range msgs {
				counted[i], _ = p.Publish([]byte("ch"), []byte(strconv.Itoa(i)), noLimit, time.Now())
			}
		}()
		conf := confirm(wire.RESP2, "ch")
		p.Subscribe(s, []string{"ch"}, conf, noLimit, time.Now())
		wg.Wait()

		got := s.drain()
		if !bytes.HasPrefix(got, conf) {
			t.Fatalf("round %d: outbox does not start with the confirmation: %q", round, got)
		}
		var want []byte
		first := -1
		for i, n := range counted {
			if n == 1 && first < 0 {
				first = i
			}
			if first >= 0 {
				if n != 1 {
					t.Fatalf("round %d: publish %d counted %d after publish %d counted the subscriber", round, i, n, first)
				}
				want = AppendMessage(want, wire.RESP2, []byte("ch"), []byte(strconv.Itoa(i)))
			}
		}
		if rest := got[len(conf):]; !bytes.Equal(rest, want) {
			t.Fatalf("round %d: after the confirmation got %q, want the messages from %d on: %q", round, rest, first, want)
		}
	}
}

// TestPutUnderLock: Subscribe and Publish put into an outbox under the
// channels' lock, so that no publish falls between a subscriber's
// confirmations and its joining the channels.
func TestPutUnderLock(t *testing.T) {
	p := New[*sub]()
	s := newSub(wire.RESP2)
	s.held = p
	p.Subscribe(s, []string{"ch"}, confirm(wire.RESP2, "ch"), noLimit, time.Now())
	if n := s.unheld.Load(); n != 0 {
		t.Errorf("Subscribe asked for the outbox %d times without the lock", n)
	}
	p.Publish([]byte("ch"), []byte("m"), noLimit, time.Now())
	if n := s.unheld.Load(); n != 0 {
		t.Errorf("Publish asked for the outbox %d times without the lock", n)
	}
}

// TestPublishEncodesOncePerProtocol: a publish costs the same allocations
// for one subscriber as for many in one protocol, and at most twice that
// for both protocols: each encoding is made once and copied into every
// outbox.
func TestPublishEncodesOncePerProtocol(t *testing.T) {
	allocs := func(n2, n3 int) float64 {
		p := New[*sub]()
		var subs []*sub
		for i := range n2 + n3 {
			s := newSub(wire.RESP2)
			if i >= n2 {
				s.proto = wire.RESP3
			}
			p.Subscribe(s, []string{"ch"}, nil, noLimit, time.Now())
			s.box.pending = make([]byte, 0, 4096) // puts copy without growing
			subs = append(subs, s)
		}
		payload := bytes.Repeat([]byte("p"), 100)
		now := time.Now()
		return testing.AllocsPerRun(20, func() {
			if n, _ := p.Publish([]byte("ch"), payload, noLimit, now); n != int64(n2+n3) {
				panic(fmt.Sprintf("Publish counted %d of %d", n, n2+n3))
			}
			for _, s := range subs {
				s.box.pending = s.box.pending[:0]
			}
		})
	}
	one := allocs(1, 0)
	if one == 0 {
		t.Fatal("a publish allocated nothing: its encoding is not measured")
	}
	if many := allocs(100, 0); many > one {
		t.Errorf("a publish to 100 RESP2 subscribers allocated %v times, to one %v", many, one)
	}
	if many := allocs(0, 100); many > one {
		t.Errorf("a publish to 100 RESP3 subscribers allocated %v times, to one RESP2 %v", many, one)
	}
	if both := allocs(50, 50); both > 2*one {
		t.Errorf("a publish to 50 RESP2 and 50 RESP3 subscribers allocated %v times, to one %v", both, one)
	}
}

// TestPublishVictims: subscribers a publish takes over their limit are
// returned with the limit and their figure, counted as receivers all the
// same; the others receive the message.
func TestPublishVictims(t *testing.T) {
	p := New[*sub]()
	slow, full, fine := newSub(wire.RESP2), newSub(wire.RESP2), newSub(wire.RESP3)
	lim := config.OutputBufferLimit{Hard: 1000, Soft: 500, SoftPeriod: time.Second}
	t0 := time.Now()
	for _, s := range []*sub{slow, full, fine} {
		p.Subscribe(s, []string{"ch"}, nil, lim, t0)
	}
	slow.box.Put(make([]byte, 600), lim, t0) // over soft from t0
	full.box.Put(make([]byte, 990), lim, t0)
	msg := AppendMessage(nil, wire.RESP2, []byte("ch"), []byte("m"))

	n, victims := p.Publish([]byte("ch"), []byte("m"), lim, t0.Add(2*time.Second))
	if n != 3 {
		t.Fatalf("Publish counted %d, want 3", n)
	}
	got := map[*sub]Victim[*sub]{}
	for _, v := range victims {
		got[v.Sub] = v
	}
	if v, ok := got[slow]; !ok || v.Over != OverSoft || v.Pending != 600+int64(len(msg)) {
		t.Errorf("slow subscriber: %+v, %v; want OverSoft with %d pending", v, ok, 600+len(msg))
	}
	if v, ok := got[full]; !ok || v.Over != OverHard || v.Pending != 990+int64(len(msg)) {
		t.Errorf("full subscriber: %+v, %v; want OverHard with %d pending", v, ok, 990+len(msg))
	}
	if _, ok := got[fine]; ok || len(victims) != 2 {
		t.Errorf("victims %+v; want slow and full only", victims)
	}
	if got, want := fine.drain(), AppendMessage(nil, wire.RESP3, []byte("ch"), []byte("m")); !bytes.Equal(got, want) {
		t.Errorf("the subscriber within its limit got %q, want %q", got, want)
	}
	if full.size.Load() != 990 {
		t.Errorf("the subscriber over its hard limit holds %d bytes; want 990 (the message not queued)", full.size.Load())
	}
}

// TestSubscribeOverLimit: confirmations that reach the hard limit are not
// queued and the subscriber joins no channel.
func TestSubscribeOverLimit(t *testing.T) {
	p := New[*sub]()
	s := newSub(wire.RESP2)
	conf := confirm(wire.RESP2, "a", "b")
	over, pending := p.Subscribe(s, []string{"a", "b"}, conf, config.OutputBufferLimit{Hard: int64(len(conf))}, time.Now())
	if over != OverHard || pending != int64(len(conf)) {
		t.Fatalf("Subscribe = %v, %d; want OverHard, %d", over, pending, len(conf))
	}
	if len(p.channels) != 0 {
		t.Fatalf("channels %v after a refused subscribe; want none", p.channels)
	}
}

// TestUnsubscribe: a subscriber leaves the channels named, a channel left
// with no subscriber is forgotten, and leaving one it was not in changes
// nothing.
func TestUnsubscribe(t *testing.T) {
	p := New[*sub]()
	a, b := newSub(wire.RESP2), newSub(wire.RESP2)
	p.Subscribe(a, []string{"x", "y"}, nil, noLimit, time.Now())
	p.Subscribe(b, []string{"x"}, nil, noLimit, time.Now())

	p.Unsubscribe(a, []string{"y", "z"})
	if _, ok := p.channels["y"]; ok {
		t.Errorf("channel y kept with no subscriber")
	}
	if n, _ := p.Publish([]byte("x"), []byte("m"), noLimit, time.Now()); n != 2 {
		t.Errorf("Publish on x counted %d, want 2", n)
	}
	p.Unsubscribe(a, []string{"x"})
	p.Unsubscribe(a, []string{"x"})
	if n, _ := p.Publish([]byte("x"), []byte("m"), noLimit, time.Now()); n != 1 {
		t.Errorf("Publish on x counted %d after a left, want 1", n)
	}
	p.Unsubscribe(b, []string{"x"})
	if len(p.channels) != 0 {
		t.Errorf("channels %v once every subscriber left; want none", p.channels)
	}
	if n, _ := p.Publish([]byte("x"), []byte("m"), noLimit, time.Now()); n != 0 {
		t.Errorf("Publish on x counted %d with no subscriber", n)
	}
}
