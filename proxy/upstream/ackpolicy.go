package upstream

import (
	"cmp"
	"slices"
	"time"
)

// ack-policy: what the proxy acknowledges to its primary.
//
// Under `ack-policy received` (the default) the upstream link acknowledges
// what it has applied, as any replica does. Under `ack-policy replicas <n>`
// it acknowledges the highest offset at least n of the proxy's own replicas
// have acknowledged (QuorumAck), so that WAIT and min-replicas-to-write on
// the primary count replicas that have the data, not the proxy. The answer
// to the primary's REPLCONF GETACK follows the same rule: WAIT sends GETACK
// and counts the ACKs at or above its offset, and an answer from the proxy's
// own offset would count replicas that have nothing yet.
//
// Which replicas count is the host's: online ones (a replica in a full sync
// has acknowledged nothing of the stream), not rdb-only ones, of its
// current history. A replica's ACK is an offset of the primary's stream, which the proxy
// relays with the primary's offsets, so the two compare directly. Upstream,
// the session raises the result to what it acknowledged before and never
// acknowledges more than it received (Host.AckOffset).
//
// min-replicas-to-write on the primary counts a replica whose last ACK, of
// any offset, is at most min-replicas-max-lag seconds old. So under
// ack-policy replicas the link also goes quiet (Ack.Quiet) while
// fewer than n counted replicas acknowledged within ackFresh: the proxy's
// ACKs then age on the primary as its replicas' do, and the primary stops
// counting it. A keepalive ACK every half repl-timeout keeps the primary from
// dropping the link meanwhile, so min-replicas-max-lag must stay below half
// of repl-timeout for this to show (defaults: 10 and 60 s).

// QuorumAck is what ack-policy replicas <n> acknowledges (see above): given
// the counted replicas' ACK offsets and the times of their last ACKs (unix
// nanoseconds; both reordered), the highest offset at least n of them
// reached, capped at applied (-1 for none), held, and quiet when fewer than n
// acknowledged within ackFresh of now.
func QuorumAck(offs, times []int64, n int, applied int64, now time.Time) Ack {
	heard := nthLatest(times, n)
	return Ack{
		Off:   quorumOffset(offs, n, applied),
		Held:  true,
		Quiet: heard < 0 || now.Sub(time.Unix(0, heard)) > ackFresh,
	}
}

// quorumOffset returns the highest offset at least n of acks have reached
// (the n-th highest), capped at applied, or -1 when fewer than n replicas
// acknowledged. acks is reordered.
func quorumOffset(acks []int64, n int, applied int64) int64 {
	if n < 1 || len(acks) < n {
		return -1
	}
	slices.SortFunc(acks, func(a, b int64) int { return cmp.Compare(b, a) })
	return min(acks[n-1], applied)
}

// ackFresh is how recent the n-th latest replica ACK must be for the link to
// keep acknowledging under ack-policy replicas <n>. Replicas acknowledge
// once a second; the slack covers their timer's jitter.
const ackFresh = 2 * time.Second

// nthLatest returns the n-th latest of times (unix nanoseconds), or -1 when
// there are fewer than n. times is reordered.
func nthLatest(times []int64, n int) int64 {
	if n < 1 || len(times) < n {
		return -1
	}
	slices.SortFunc(times, func(a, b int64) int { return cmp.Compare(b, a) })
	return times[n-1]
}
