package pubsub

import (
	"sync"
	"time"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/wire"
)

// MaxSubscriptions is the most channels one client may be subscribed to.
// Redis has no such bound; Sentinel needs one channel.
const MaxSubscriptions = 128

// MaxChannelLen is the longest channel name a client may subscribe to, so
// that a client's subscriptions hold at most 64 KiB of names.
const MaxChannelLen = 512

// A Subscriber is what Channels needs of a client: its protocol at the
// moment of a publish, and its outbox, which is set before it first
// subscribes and stays until it has left every channel. Both are called
// under the channels' lock, and must neither block nor take a lock.
type Subscriber interface {
	comparable
	Proto() wire.Proto
	Outbox() *Outbox
}

// Channels is the set of channels with subscribers, and who they are.
type Channels[S Subscriber] struct {
	mu       sync.Mutex
	channels map[string]map[S]struct{} // guarded by mu; no empty sets
}

// New returns Channels with no channel.
func New[S Subscriber]() *Channels[S] {
	return &Channels[S]{channels: make(map[string]map[S]struct{})}
}

// Subscribe puts confirm (SUBSCRIBE's confirmations) into s's outbox and
// adds s to each channel, in one hold of the lock: a publish comes either
// before both (s is no receiver yet) or after both (its message follows the
// confirmations), so that a client that has read its confirmation receives
// every later publish, as in Redis. It returns what the outbox's Put
// returned; s is added to no channel when that is over the limit.
func (p *Channels[S]) Subscribe(s S, chans []string, confirm []byte, lim config.OutputBufferLimit, now time.Time) (Over, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	over, pending := s.Outbox().Put(confirm, lim, now)
	if over != Within {
		return over, pending
	}
	for _, ch := range chans {
		set := p.channels[ch]
		if set == nil {
			set = make(map[S]struct{})
			p.channels[ch] = set
		}
		set[s] = struct{}{}
	}
	return over, pending
}

// Unsubscribe removes s from each channel; a channel left with no
// subscriber is forgotten.
func (p *Channels[S]) Unsubscribe(s S, chans []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ch := range chans {
		if set := p.channels[ch]; set != nil {
			delete(set, s)
			if len(set) == 0 {
				delete(p.channels, ch)
			}
		}
	}
}

// Refused returns the subscribers, among those keep selects, subscribed to
// a channel allowed refuses: the clients a change of ACL rules disconnects,
// as Redis disconnects a user's subscribers whose channels it no longer
// allows. keep and allowed are called under the lock, and must neither
// block nor take a lock.
func (p *Channels[S]) Refused(keep func(S) bool, allowed func(channel string) bool) []S {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := make(map[S]bool)
	var out []S
	for ch, set := range p.channels {
		for s := range set {
			if seen[s] || !keep(s) || allowed(ch) {
				continue
			}
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// A Victim is a subscriber a publish found over its output limit, for the
// caller to close with no lock held.
type Victim[S Subscriber] struct {
	Sub     S
	Over    Over  // OverHard or OverSoft
	Pending int64 // what it had pending, the message included
}

// Publish puts the message (ch, payload) into the outbox of every subscriber
// of ch and returns how many there were, as Redis's PUBLISH counts them,
// and those over lim.
//
// Each subscriber gets the message in its own protocol (an array in RESP2,
// a push in RESP3): at most two encodings, each made once, on the first
// receiver that needs it, so a publish costs the same for any number of
// subscribers in one protocol.
func (p *Channels[S]) Publish(ch, payload []byte, lim config.OutputBufferLimit, now time.Time) (int64, []Victim[S]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var victims []Victim[S]
	var enc [2][]byte // by protocol: RESP2, RESP3
	set := p.channels[string(ch)]
	for s := range set {
		proto, i := s.Proto(), 0
		if proto == wire.RESP3 {
			i = 1
		}
		if enc[i] == nil {
			enc[i] = AppendMessage(nil, proto, ch, payload)
		}
		if over, pending := s.Outbox().Put(enc[i], lim, now); over != Within {
			victims = append(victims, Victim[S]{s, over, pending})
		}
	}
	return int64(len(set)), victims
}

// AppendConfirm appends a (un)subscribe confirmation: kind ("subscribe" or
// "unsubscribe"), the channel, and how many channels the client is
// subscribed to now: a push in RESP3, as Redis's addReplyPubsubSubscribed
// writes it, an array in RESP2.
func AppendConfirm(b []byte, p wire.Proto, kind string, ch []byte, n int64) []byte {
	b = p.AppendPushHeader(b, 3)
	b = wire.AppendBulkString(b, kind)
	b = wire.AppendBulk(b, ch)
	return wire.AppendInt(b, n)
}

// AppendMessage appends a message as a subscriber in protocol p receives
// it: ["message", channel, payload], a push in RESP3 as Redis's
// addReplyPubsubMessage writes it, an array in RESP2.
func AppendMessage(b []byte, p wire.Proto, ch, payload []byte) []byte {
	b = p.AppendPushHeader(b, 3)
	b = wire.AppendBulkString(b, "message")
	b = wire.AppendBulk(b, ch)
	return wire.AppendBulk(b, payload)
}
