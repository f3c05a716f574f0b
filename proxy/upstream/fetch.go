package upstream

import (
	"context"
	"time"
)

// A FetchJob is one shared snapshot fetch as FetchLoop retries it: the
// caller's attempt (FetchSnapshot with what it does once the snapshot is
// handed out), whether anyone still wants it, and what a failed attempt
// counts.
type FetchJob struct {
	// Attempt makes one attempt. started reports whether the snapshot was
	// handed out (the primary answered +FULLRESYNC); a failure before that
	// may be retried, one after it is not.
	Attempt func(ctx context.Context) (started bool, err error)
	// Wanted reports whether a replica still waits for the fetch.
	Wanted func() bool
	// Failed is called after every failed attempt.
	Failed func()
}

// FetchStopError ends a fetch given up before the primary answered: Err is
// the last attempt's failure, Reason why it is not retried.
type FetchStopError struct {
	Reason string
	Err    error
}

func (e *FetchStopError) Error() string { return e.Err.Error() + " (not retried: " + e.Reason + ")" }
func (e *FetchStopError) Unwrap() error { return e.Err }

// FetchLoop makes attempts at job until one starts, and returns nil once
// the snapshot has arrived, or the error that ended it. An attempt that
// fails before the snapshot was handed out (the primary refused, went
// silent, or answered what Redis never sends) is retried after a wait by
// the main link's backoff rule (nextBackoff), as long as ctx lasts, the
// configured primary is the one the fetch began with and job.Wanted;
// otherwise FetchLoop returns a *FetchStopError. A failure after the
// snapshot was handed out is not retried here: the replicas following it
// fail with it and come back for a new one.
func (l *Link) FetchLoop(ctx context.Context, job FetchJob) error {
	primary := l.host.Target().Addr
	var backoff time.Duration
	for {
		started, err := job.Attempt(ctx)
		if err == nil {
			return nil
		}
		job.Failed()
		if started {
			return err
		}
		why := fetchStopReason(ctx, l.host.Target().Addr, primary, job.Wanted)
		if why == "" {
			backoff = nextBackoff(backoff)
			l.log.Warn("snapshot fetch failed", "error", err, "retry-in-ms", backoff.Milliseconds())
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			// The wait may have changed everything: look again.
			why = fetchStopReason(ctx, l.host.Target().Addr, primary, job.Wanted)
		}
		if why != "" {
			return &FetchStopError{Reason: why, Err: err}
		}
	}
}

// fetchStopReason says why a failed fetch must not be tried again, or ""
// when it should be: ctx ended (the server stops), the configured primary
// (now) is not the one the fetch began with, or nobody wants it any more.
func fetchStopReason(ctx context.Context, now, began string, wanted func() bool) string {
	if ctx.Err() != nil {
		return "server stopping"
	}
	if now != began || now == "" {
		return "replicaof changed"
	}
	if !wanted() {
		return "no replica waits"
	}
	return ""
}
