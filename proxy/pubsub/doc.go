// Package pubsub holds Pub/Sub as a replica serves it: the channels, their
// subscribers, and each subscriber's outbox, the ordered queue of the
// replies and messages to be written to it, under client-output-buffer-limit
// pubsub.
//
// A replica serves SUBSCRIBE, UNSUBSCRIBE and PUBLISH on any channel,
// delivered to its own subscribers only (it relays nothing it is published
// to its primary, and neither does the proxy). The proxy serves them for
// Sentinel, which keeps a subscribed link to every replica on
// __sentinel__:hello and publishes its hello there every 2 s through its
// command link: a Sentinel that hears nothing on its subscribed link for 6 s
// (once the link is 15 s old) drops and reopens it, and Sentinels that reach
// each other only through the proxy find each other by the hellos it
// delivers. Patterns (PSUBSCRIBE) and shard channels are not served. The
// commands themselves, their replies and the client's own list of channels
// are package proxy's; this package is what they share between clients.
//
// # What it owns
//
//   - Channels: each channel with subscribers and who they are. Subscribe
//     queues a client's confirmations and adds it to its channels in one
//     hold of the lock, so that a publish comes either before both or after
//     both; Publish queues a message for every subscriber of a channel,
//     encoded at most once per protocol (an array in RESP2, a push in
//     RESP3), and returns the subscribers it found over their limit.
//   - Outbox: one subscriber's output, replies and messages in the order
//     they were made. Put applies client-output-buffer-limit pubsub to what
//     is then pending (Redis's default is 32mb 8mb 60) and returns its
//     verdict (Over) with the pending figure; the caller closes the client
//     and counts it, with no lock held. WriteLoop writes the outbox to the
//     connection.
//   - The bounds, since any client may subscribe: MaxSubscriptions channels
//     per client, each name at most MaxChannelLen bytes.
//
// # Goroutines
//
// This package starts none. A subscriber's own goroutine (the one that reads
// its commands) puts its replies into its outbox and subscribes and
// unsubscribes it; any client's goroutine publishes, putting into other
// subscribers' outboxes; one goroutine per outbox, started by the caller,
// runs WriteLoop, the only writer of that subscriber's connection, until
// Stop and the outbox is empty, or a write fails. Stop and Done may be used
// from any goroutine.
//
// # Locks
//
// Channels' lock → Outbox's lock, and no other: Subscribe and Publish put
// into outboxes under the channels' lock, Put takes an outbox's lock alone.
// Nothing under either blocks, logs or touches a socket: WriteLoop writes
// with neither held, and a subscriber over its limit is returned, not
// closed. The caller holds none of its own locks when it calls in.
package pubsub
