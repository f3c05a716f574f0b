package downstream

import (
	"errors"
	"time"

	"github.com/replproxy/replproxy/replbuf"
)

// A replica's limits (client-output-buffer-limit replica, repl-timeout),
// judged by the replica on what it owns; the monitor reads the limits once
// a round and closes the replicas over them.

// The causes for dropping a replica over a limit, for its log line.
var (
	errReplicaHardLimit  = errors.New("output buffer over the hard limit (client-output-buffer-limit replica)")
	errReplicaSoftLimit  = errors.New("output buffer over the soft limit for too long (client-output-buffer-limit replica)")
	errReplicaAckTimeout = errors.New("timeout: no REPLCONF ACK for longer than repl-timeout")
)

// Limits are the limits in force and the figures every replica is judged
// against in one round of the monitor.
type Limits struct {
	Hard, Soft int64         // the output buffer's limits (the hard one raised to the backlog); 0: none
	SoftPeriod time.Duration // how long over the soft limit closes
	Timeout    time.Duration // repl-timeout: how long an online replica may go without an ACK
	Live       bool          // the stream log follows the stream
	End        int64         // the stream's end
}

// OverLimit judges the replica against lim at now, and returns the reason
// and the error to close it for, or CloseNone. A replica's output buffer is
// what its cursor pins (Redis's formula), or its lag (judgedOutput). Called
// by the monitor alone, which owns softSince.
func (r *Replica) OverLimit(now time.Time, lim Limits) (CloseReason, error) {
	cob := judgedOutput(r.cursor.Load(), lim.Live, r.onDisk.Load(), r.diskOff.Load(), lim.End)
	switch {
	case lim.Hard > 0 && cob >= lim.Hard:
		return CloseOutputHardLimit, errReplicaHardLimit
	case lim.Soft > 0 && cob >= lim.Soft:
		if r.softSince.IsZero() {
			r.softSince = now
		} else if now.Sub(r.softSince) > lim.SoftPeriod {
			return CloseOutputSoftLimit, errReplicaSoftLimit
		}
	default:
		r.softSince = time.Time{}
	}
	if r.State() == Online && !r.legacy && !r.hs.RDBOnly &&
		now.Sub(time.Unix(0, r.ackTime.Load())) > lim.Timeout {
		return CloseReplicaTimeout, errReplicaAckTimeout
	}
	return CloseNone, nil
}

// judgedOutput is what a replica's limits are held against: the memory its
// cursor c pins (Redis's formula), or, while the stream log runs, how far
// behind the stream's end it is, since replicas then pin at most the
// window. A replica reading the log (onDisk, at diskOff; no cursor) is
// judged by its lag even while the log is down: its reader then fails or
// ends, it holds no memory to be judged by, and its lag is what it would
// pin back in memory.
func judgedOutput(c *replbuf.Cursor, live, onDisk bool, diskOff, end int64) int64 {
	switch {
	case c != nil && live:
		return c.Lag()
	case c != nil:
		return c.OutputBufferSize()
	case onDisk:
		return max(end+1-diskOff, 0)
	}
	return 0
}
