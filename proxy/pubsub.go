package proxy

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/wire"
)

// Pub/Sub as a replica serves it: SUBSCRIBE, UNSUBSCRIBE and PUBLISH on any
// channel, delivered to the proxy's own subscribers only (a replica relays
// nothing it is published to its primary, and neither does the proxy). It
// exists for Sentinel, which keeps a subscribed link to every replica on
// __sentinel__:hello and publishes its hello there every 2 s through its
// command link: a Sentinel that hears nothing on its subscribed link for 6 s
// (once the link is 15 s old) drops and reopens it, and Sentinels that reach
// each other only through the proxy find each other by the hellos it
// delivers. Patterns (PSUBSCRIBE) and shard channels are not served.
//
// Bounds, since any client may subscribe: at most maxSubscriptions channels
// per client, each name at most maxChannelLen bytes; a subscribed client's
// output (replies and messages alike) is held in its outbox, under
// client-output-buffer-limit pubsub (Redis's default 32mb 8mb 60), past
// which it is closed as Redis closes it.

// maxSubscriptions is the most channels one client may be subscribed to.
// Redis has no such bound; Sentinel needs one channel.
const maxSubscriptions = 128

// maxChannelLen is the longest channel name a client may subscribe to, so
// that a client's subscriptions hold at most 64 KiB of names.
const maxChannelLen = 512

// A pubsub is the set of channels with subscribers, and who they are.
//
// Its lock is a leaf but for the subscribers' outboxes (pubsub.mu →
// outbox.mu): publish queues a message into each subscriber's outbox under
// it, subscribe a client's confirmations into its own, and nothing under it
// blocks, logs or touches a socket. It is never held with the registry's or
// the history's lock.
type pubsub struct {
	mu       sync.Mutex
	channels map[string]map[*client]struct{} // guarded by mu; no empty sets
}

func newPubsub() *pubsub {
	return &pubsub{channels: make(map[string]map[*client]struct{})}
}

// subscribe queues confirm (SUBSCRIBE's confirmations) into c's outbox
// and adds c to each channel, in one hold of the lock: a publish comes
// either before both (c is no receiver yet) or after both (its message
// follows the confirmations), so that a client that has read its
// confirmation receives every later publish, as in Redis. It returns what
// the outbox's put did, for the caller to act on with no lock held. c.box
// must be set.
func (p *pubsub) subscribe(c *client, chans []string, confirm []byte, lim config.OutputBufferLimit, now time.Time) (downstream.CloseReason, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	reason, pending := c.box.put(confirm, lim, now)
	if reason != downstream.CloseNone {
		return reason, pending
	}
	for _, ch := range chans {
		set := p.channels[ch]
		if set == nil {
			set = make(map[*client]struct{})
			p.channels[ch] = set
		}
		set[c] = struct{}{}
	}
	return reason, pending
}

// unsubscribe removes c from each channel.
func (p *pubsub) unsubscribe(c *client, chans []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ch := range chans {
		if set := p.channels[ch]; set != nil {
			delete(set, c)
			if len(set) == 0 {
				delete(p.channels, ch)
			}
		}
	}
}

// A pubsubVictim is a subscriber a publish found over its output limit: it
// is closed after the lock is released.
type pubsubVictim struct {
	c       *client
	reason  downstream.CloseReason
	pending int64
}

// publish queues the message (ch, payload) for every subscriber of ch and
// returns how many there were, as Redis's PUBLISH counts them. Subscribers
// over lim are returned to be closed by the caller, with no lock held.
//
// Each subscriber gets the message in its own protocol (an array in RESP2,
// a push in RESP3): at most two encodings, each made once, on the first
// receiver that needs it, so a publish costs the same for any number of
// subscribers in one protocol.
func (p *pubsub) publish(ch, payload []byte, lim config.OutputBufferLimit, now time.Time) (int64, []pubsubVictim) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var victims []pubsubVictim
	var enc [2][]byte // by protocol: RESP2, RESP3
	set := p.channels[string(ch)]
	for c := range set {
		proto, i := c.proto(), 0
		if proto == wire.RESP3 {
			i = 1
		}
		if enc[i] == nil {
			enc[i] = appendPubSubMessage(nil, proto, ch, payload)
		}
		if reason, pending := c.box.put(enc[i], lim, now); reason != downstream.CloseNone {
			victims = append(victims, pubsubVictim{c, reason, pending})
		}
	}
	return int64(len(set)), victims
}

// An outbox holds what is to be written to a subscribed client, replies and
// messages in the order they were made, for its writeLoop. The client's own
// goroutine and publishers put into it; writeLoop alone writes the socket.
type outbox struct {
	mu        sync.Mutex
	pending   []byte    // guarded by mu: bytes not yet taken by writeLoop
	inflight  int64     // guarded by mu: bytes writeLoop is writing
	overSince time.Time // guarded by mu: since when the output is at or over the soft limit; zero below it
	closed    bool      // guarded by mu: writeLoop ended or is told to; nothing more is queued

	size *atomic.Int64 // the client's boxBytes: pending + inflight; written under mu
	wake chan struct{} // one token: pending has bytes, or closed was set
	done chan struct{} // closed when writeLoop returns
}

func newOutbox(size *atomic.Int64) *outbox {
	return &outbox{size: size, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// put queues b (copied) unless the box is closed, and applies lim to what
// the client then has pending, as Redis's checkClientOutputBufferLimits
// does after each reply: at or over Hard (b is then not queued), or at or
// over Soft for longer than SoftPeriod, it returns the reason to close the
// client and how much was pending. Any goroutine.
func (o *outbox) put(b []byte, lim config.OutputBufferLimit, now time.Time) (downstream.CloseReason, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return downstream.CloseNone, 0
	}
	used := int64(len(o.pending)) + o.inflight + int64(len(b))
	if lim.Hard > 0 && used >= lim.Hard {
		// Not queued: the client is closed, so a large message costs no
		// copy per slow subscriber.
		return downstream.CloseOutputHardLimit, used
	}
	o.pending = append(o.pending, b...)
	o.size.Store(used)
	select {
	case o.wake <- struct{}{}:
	default:
	}
	if lim.Soft > 0 && used >= lim.Soft {
		if o.overSince.IsZero() {
			o.overSince = now
		} else if now.Sub(o.overSince) > lim.SoftPeriod {
			return downstream.CloseOutputSoftLimit, used
		}
	} else {
		o.overSince = time.Time{}
	}
	return downstream.CloseNone, used
}

// stop tells writeLoop to end once it has written what is pending, or at
// once if its connection is closed. Any goroutine; idempotent.
func (o *outbox) stop() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// take waits for pending bytes and takes them, handing back spare (the
// buffer last written) for reuse. It returns nil once the box is closed and
// empty.
func (o *outbox) take(spare []byte) []byte {
	for {
		o.mu.Lock()
		if n := len(o.pending); n > 0 {
			b := o.pending
			o.pending = spare[:0]
			o.inflight = int64(n)
			o.mu.Unlock()
			return b
		}
		closed := o.closed
		o.mu.Unlock()
		if closed {
			return nil
		}
		<-o.wake
	}
}

// written records that writeLoop wrote what it took.
func (o *outbox) written() {
	o.mu.Lock()
	o.inflight = 0
	o.size.Store(int64(len(o.pending)))
	o.mu.Unlock()
}

// closeWriter marks the box closed for good: writeLoop can write no more.
func (o *outbox) closeWriter() {
	o.mu.Lock()
	o.closed = true
	o.pending = nil
	o.inflight = 0
	o.size.Store(0)
	o.mu.Unlock()
}

// writeLoop writes c's outbox to its connection until the box is stopped
// and empty, or a write fails (which closes the connection, so that the
// client's goroutine ends too). Started by the client's goroutine on its
// first SUBSCRIBE and waited for by serveClient.
func (c *client) writeLoop() error {
	o := c.box
	defer close(o.done)
	var spare []byte
	for {
		b := o.take(spare)
		if b == nil {
			return nil
		}
		for p := b; len(p) > 0; {
			c.conn.SetWriteDeadline(time.Now().Add(clientWriteTimeout))
			n, err := c.conn.Write(p[:min(len(p), flushChunk)])
			c.srv.stats.netOutputBytes.Add(int64(n))
			p = p[n:]
			if err != nil {
				o.closeWriter()
				if !errors.Is(err, net.ErrClosed) {
					c.closeFor(downstream.CloseWriteError)
				}
				return err
			}
		}
		o.written()
		// Redis counts a write to a client as an interaction too: a
		// subscriber that receives messages is not idle in CLIENT LIST.
		c.lastUse.Store(time.Now().UnixNano())
		if cap(b) <= 1<<20 {
			spare = b // don't keep a huge buffer around
		} else {
			spare = nil
		}
	}
}

// startOutbox gives c an outbox and its writeLoop, on its first SUBSCRIBE:
// from then on every reply to c goes through it (flush), so that replies
// and messages reach it in order. The client's goroutine only.
func (c *client) startOutbox() {
	if c.box != nil {
		return
	}
	c.box = newOutbox(&c.boxBytes)
	go func() {
		if err := c.writeLoop(); err != nil {
			c.log.Debug("subscriber write failed", "error", err)
		}
	}()
}

// stopOutbox leaves every channel and ends c's writeLoop, waiting for it
// to write what is pending (QUIT's +OK). serveClient, before it closes the
// connection: a peer that has gone fails the write at once, and one that
// stopped reading holds it at most clientWriteTimeout.
func (s *Server) stopOutbox(c *client) {
	if c.box == nil {
		return
	}
	s.pubsub.unsubscribe(c, subscribedChannels(c))
	c.box.stop()
	<-c.box.done
}

// queueOut moves the replies gathered in c.out into c's outbox, closing c
// if that takes it over client-output-buffer-limit pubsub. The client's
// goroutine only.
func (c *client) queueOut() {
	if len(c.out) == 0 {
		return
	}
	lim := c.srv.config().ClientOutputBufferLimit.PubSub
	c.queuedOut(c.box.put(c.out, lim, time.Now()))
}

// queuedOut closes c if putting c.out into its outbox took it over
// client-output-buffer-limit pubsub, and empties c.out. The client's
// goroutine only, with no lock held.
func (c *client) queuedOut(reason downstream.CloseReason, pending int64) {
	if reason != downstream.CloseNone {
		c.srv.closedByPubSubLimit(c, reason, pending)
	}
	if cap(c.out) > 1<<20 {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
	c.outCap.Store(int64(cap(c.out)))
}

// closedByPubSubLimit counts and logs a subscribed client closed for its
// output buffer, and closes it. Any goroutine.
func (s *Server) closedByPubSubLimit(c *client, reason downstream.CloseReason, pending int64) {
	which := "hard"
	if reason == downstream.CloseOutputSoftLimit {
		which = "soft"
	}
	s.stats.outputLimitDisconnects.Add(1)
	if ok, n := s.limitLog.allow(time.Now(), logEvery); ok {
		c.log.Warn("client closed: output buffer over client-output-buffer-limit pubsub",
			"limit-class", which, "pending-bytes", pending, "suppressed", n)
	}
	c.closeFor(reason)
}

// subscribedChannels lists c's channels. The client's goroutine only.
func subscribedChannels(c *client) []string {
	list := make([]string, 0, len(c.subs))
	for ch := range c.subs {
		list = append(list, ch)
	}
	return list
}
