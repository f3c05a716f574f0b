package proxy

import (
	"fmt"

	"github.com/replproxy/replproxy/proxy/wire"
)

// sentinelHello is the channel Sentinel publishes its hello messages on, on
// every master and replica it monitors, and subscribes to on each of them.
const sentinelHello = "__sentinel__:hello"

// Sentinel keeps two links to every replica, the proxy included: commands
// (PING, INFO, PUBLISH of its hello every 2 s, SLAVEOF) and Pub/Sub
// (SUBSCRIBE __sentinel__:hello). Its client library drops the Pub/Sub link
// on an error reply to SUBSCRIBE, and Sentinel then counts the replica as
// disconnected and skips it when it moves replicas to a promoted primary, so
// a proxy that refused SUBSCRIBE was moved only after failover-timeout. The
// proxy therefore accepts the hello channel, and only it: SUBSCRIBE confirms
// and then delivers nothing, PUBLISH reaches no subscriber (:0). It relays no
// hellos; Sentinels find each other through the primary, which relays them.

// cmdSubscribe is SUBSCRIBE, for Sentinel's hello channel only.
func (s *Server) cmdSubscribe(c *client, args [][]byte) bool {
	if !helloOnly(c, "subscribe", args[1:]) {
		return false
	}
	for _, ch := range args[1:] {
		c.helloSubscribed = true
		c.out = appendPubSubReply(c.out, c.proto(), "subscribe", ch, 1)
	}
	return false
}

// cmdUnsubscribe is UNSUBSCRIBE: with no channel it leaves every channel.
func (s *Server) cmdUnsubscribe(c *client, args [][]byte) bool {
	if !helloOnly(c, "unsubscribe", args[1:]) {
		return false
	}
	chans := args[1:]
	if len(chans) == 0 {
		if !c.helloSubscribed {
			c.out = c.proto().AppendPushHeader(c.out, 3)
			c.out = wire.AppendBulkString(c.out, "unsubscribe")
			c.out = c.proto().AppendNull(c.out)
			c.out = wire.AppendInt(c.out, 0)
			return false
		}
		chans = [][]byte{[]byte(sentinelHello)}
	}
	for _, ch := range chans {
		c.helloSubscribed = false
		c.out = appendPubSubReply(c.out, c.proto(), "unsubscribe", ch, 0)
	}
	return false
}

// cmdPublish is PUBLISH on Sentinel's hello channel: no one receives it.
func (s *Server) cmdPublish(c *client, args [][]byte) bool {
	if !helloOnly(c, "publish", args[1:2]) {
		return false
	}
	c.out = wire.AppendInt(c.out, 0)
	return false
}

// helloOnly reports whether every channel is Sentinel's hello channel, and
// otherwise appends the refusal every command the proxy does not serve gets.
func helloOnly(c *client, cmd string, chans [][]byte) bool {
	for _, ch := range chans {
		if string(ch) != sentinelHello {
			c.out = wire.AppendError(c.out, fmt.Sprintf(
				"ERR replproxy relays replication only; '%s' is served for channel %s only (send it to the primary)", cmd, sentinelHello))
			return false
		}
	}
	return true
}

// appendPubSubReply appends a (un)subscribe confirmation: kind, the channel,
// and how many channels the client is subscribed to now; a push in RESP3, as
// Redis's addReplyPubsubSubscribed writes it.
func appendPubSubReply(b []byte, p wire.Proto, kind string, ch []byte, n int64) []byte {
	b = p.AppendPushHeader(b, 3)
	b = wire.AppendBulkString(b, kind)
	b = wire.AppendBulk(b, ch)
	return wire.AppendInt(b, n)
}
