//go:build unix

package main

import (
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy"
)

// reservedFDs are the descriptors kept beside one per client (the budget is
// proxy.ReservedFDs's): Redis's CONFIG_MIN_RESERVED_FDS of 32 for
// listeners, log and snapshot files, and the monitoring server's share.
const reservedFDs = proxy.ReservedFDs

// fileLimiter returns the proxy's Options.FileLimit hook, Redis's
// adjustOpenFilesLimit: it raises the soft RLIMIT_NOFILE toward maxclients +
// reservedFDs, stepping down 16 at a time when the system refuses, and
// returns how many clients the limit it got allows. It never lowers the hard
// limit (Redis sets both to the same value; keeping the hard one lets a later
// CONFIG SET maxclients raise the soft one again), and raises it only where
// the process is allowed to.
func fileLimiter(log hclog.Logger) func(maxclients int) int {
	return func(maxclients int) int {
		want := uint64(maxclients) + reservedFDs
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			log.Warn("cannot read the open file limit; assuming 1024", "error", err)
			return min(maxclients, 1024-reservedFDs)
		}
		old := lim.Cur
		if old >= want {
			return maxclients
		}
		best := want
		var setErr error
		for best > old {
			next := syscall.Rlimit{Cur: best, Max: max(lim.Max, best)}
			if setErr = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); setErr == nil {
				break
			}
			if best < 16 {
				best = old
				break
			}
			best -= 16
		}
		best = max(best, old)
		if best >= want {
			log.Info("open file limit raised", "from", old, "to", best)
			return maxclients
		}
		if best <= reservedFDs {
			log.Error("open file limit too low to start", "limit", best, "needed", want)
			return 0
		}
		// setErr is nil when a smaller step was allowed: the key is left out
		// then, since an "error" is always a string in the logs.
		const msg = "cannot raise the open file limit as far as maxclients needs"
		if setErr != nil {
			log.Warn(msg, "maxclients", maxclients, "needed", want, "limit", best, "error", setErr)
		} else {
			log.Warn(msg, "maxclients", maxclients, "needed", want, "limit", best)
		}
		return int(best - reservedFDs)
	}
}
