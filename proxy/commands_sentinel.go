package proxy

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/replproxy/replproxy/proxy/pubsub"
	"github.com/replproxy/replproxy/proxy/wire"
)

// sentinelHello is the channel Sentinel publishes its hello messages on, on
// every master and replica it monitors, and subscribes to on each of them.
const sentinelHello = "__sentinel__:hello"

// Sentinel keeps two links to every replica, the proxy included: commands
// (PING, INFO, PUBLISH of its hello every 2 s, SLAVEOF) and Pub/Sub (CLIENT
// SETNAME, then SUBSCRIBE __sentinel__:hello). Its client library drops the
// Pub/Sub link on an error reply to SUBSCRIBE, and Sentinel reopens a link
// that has carried no message for 6 s once it is 15 s old; either way it
// counts the replica as disconnected meanwhile and skips it when it moves
// replicas to a promoted primary. So the proxy serves Pub/Sub as a replica
// does (package pubsub): a PUBLISH reaches the proxy's subscribers,
// Sentinel's own hello comes back on its subscribed link, which therefore
// stays up, and Sentinels that reach each other only through the proxy hear
// each other's hellos.

// cmdSubscribe is SUBSCRIBE channel [channel ...]: each channel confirmed
// with the count of the client's subscriptions, as Redis replies. Over the
// proxy's bounds (pubsub.MaxSubscriptions, pubsub.MaxChannelLen) nothing is
// subscribed.
func (s *Server) cmdSubscribe(c *client, args [][]byte) bool {
	var added []string
	n := len(c.subs)
	for _, ch := range args[1:] {
		if len(ch) > pubsub.MaxChannelLen {
			c.out = wire.AppendError(c.out, fmt.Sprintf("ERR replproxy serves channel names of at most %d bytes", pubsub.MaxChannelLen))
			return false
		}
		if _, ok := c.subs[string(ch)]; !ok && !slices.Contains(added, string(ch)) {
			added = append(added, string(ch))
		}
	}
	if n+len(added) > pubsub.MaxSubscriptions {
		c.out = wire.AppendError(c.out, fmt.Sprintf("ERR replproxy serves at most %d channels per client", pubsub.MaxSubscriptions))
		return false
	}
	if c.subs == nil {
		c.subs = make(map[string]struct{})
	}
	for _, ch := range args[1:] {
		c.subs[string(ch)] = struct{}{}
		c.out = pubsub.AppendConfirm(c.out, c.proto(), "subscribe", ch, int64(len(c.subs)))
	}
	c.subCount.Store(int32(len(c.subs)))
	// The confirmations go into the outbox with the client added to the
	// channels (one hold of the channels' lock), so that no message overtakes
	// them and none published after them is missed.
	c.startOutbox()
	lim := s.config().ClientOutputBufferLimit.PubSub
	c.queuedOut(s.pubsub.Subscribe(c, added, c.out, lim, time.Now()))
	return false
}

// cmdUnsubscribe is UNSUBSCRIBE [channel ...]: with no channel it leaves
// every channel, and with none subscribed it answers one confirmation with
// a null channel, as Redis does.
func (s *Server) cmdUnsubscribe(c *client, args [][]byte) bool {
	chans := args[1:]
	if len(chans) == 0 {
		if len(c.subs) == 0 {
			c.out = c.proto().AppendPushHeader(c.out, 3)
			c.out = wire.AppendBulkString(c.out, "unsubscribe")
			c.out = c.proto().AppendNull(c.out)
			c.out = wire.AppendInt(c.out, 0)
			return false
		}
		for ch := range c.subs {
			chans = append(chans, []byte(ch))
		}
	}
	var removed []string
	for _, ch := range chans {
		if _, ok := c.subs[string(ch)]; ok {
			delete(c.subs, string(ch))
			removed = append(removed, string(ch))
		}
		c.out = pubsub.AppendConfirm(c.out, c.proto(), "unsubscribe", ch, int64(len(c.subs)))
	}
	c.subCount.Store(int32(len(c.subs)))
	if len(removed) > 0 {
		s.pubsub.Unsubscribe(c, removed)
	}
	return false
}

// cmdPublish is PUBLISH channel message: delivered to the proxy's
// subscribers of channel, answered with how many there were.
func (s *Server) cmdPublish(c *client, args [][]byte) bool {
	if c.box != nil {
		// A subscriber publishing to its own channel gets its earlier
		// replies before the message, and the count after it, as in Redis.
		c.queueOut()
	}
	lim := s.config().ClientOutputBufferLimit.PubSub
	n, victims := s.pubsub.Publish(args[1], args[2], lim, time.Now())
	for _, v := range victims {
		v.Sub.closedByPubSubLimit(v.Over, v.Pending)
	}
	c.out = wire.AppendInt(c.out, n)
	return false
}

// subscribedOnly is Redis's rule for a RESP2 client subscribed to a
// channel: only these commands may run, the rest are refused
// (subscribedRefusal). Under RESP3 Redis lets a subscribed client run every
// command (replies and pushes are told apart by type), so dispatch applies
// it to RESP2 clients only.
var subscribedOnly = map[string]bool{
	"subscribe": true, "unsubscribe": true, "psubscribe": true, "punsubscribe": true,
	"ssubscribe": true, "sunsubscribe": true, "ping": true, "quit": true, "reset": true,
}

// subscribedRefusal is Redis 7.0's reply to any other command from a
// subscribed RESP2 client; fullname is the command's name as Redis 7 shows
// it ("client|list").
func subscribedRefusal(fullname string) string {
	return fmt.Sprintf("ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", fullname)
}

// cmdPingSubscribed is PING from a subscribed RESP2 client: ["pong", arg or
// ""], as Redis answers it there.
func cmdPingSubscribed(c *client, args [][]byte) {
	if len(args) > 2 {
		c.out = wire.AppendError(c.out, "ERR wrong number of arguments for 'ping' command")
		return
	}
	c.out = wire.AppendArrayHeader(c.out, 2)
	c.out = wire.AppendBulkString(c.out, "pong")
	if len(args) == 2 {
		c.out = wire.AppendBulk(c.out, args[1])
	} else {
		c.out = wire.AppendBulkString(c.out, "")
	}
}

// stopOutbox leaves every channel and ends c's outbox's writing, waiting for
// it to write what is pending (QUIT's +OK). serveClient, before it closes
// the connection: a peer that has gone fails the write at once, and one
// that stopped reading holds it at most clientWriteTimeout.
func (s *Server) stopOutbox(c *client) {
	if c.box == nil {
		return
	}
	s.pubsub.Unsubscribe(c, slices.Collect(maps.Keys(c.subs)))
	c.box.Stop()
	<-c.box.Done()
}
