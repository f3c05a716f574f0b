package proxy

import "github.com/replproxy/replproxy/proxy/metrics"

// ReservedFDs is how many descriptors the process needs beside one per
// client: what it asks of the open file limit (RLIMIT_NOFILE, ulimit -n)
// is maxclients + ReservedFDs, and where the limit cannot be raised that
// far, maxclients is lowered to fit (Options.FileLimit), as Redis does with
// its CONFIG_MIN_RESERVED_FDS of 32.
//
// The budget, planned as a whole:
//
//   - maxclients: every RESP client, replicas included, and every
//     connection on tls-port still in its TLS handshake (registry.reserve:
//     Redis counts a client from accept), one descriptor each. Past the
//     limit a connection is refused at once.
//   - monitoring: metrics.MaxConns connections, each with at most one more
//     file open while a scrape runs (the process collector reads /proc):
//     2 * metrics.MaxConns. Connections past the cap wait in the kernel's
//     accept queue and cost the process nothing.
//   - Redis's 32 for the rest, which a proxy bounds itself: standard
//     input, output and error, the log file; the runtime's poller (2); the
//     listeners (plain and tls-port per bind address, metrics-port); the
//     upstream link and the one snapshot fetch in flight; the stream log
//     (dir, its lock, the segment being written and its CRC file,
//     meta.json's replacement while it is written); the snapshot being
//     written to dir, its meta file, a spill; a CONFIG REWRITE's
//     temporary file. About 22 with one bind address, the rest slack.
//
// Not in the budget: a replica reading from dir (the stream log, or a
// snapshot on disk) holds one file beside its socket, one at a time, as a
// Redis replica fed from the RDB file holds its repldbfd, which Redis's
// reserve does not count either. Bounding them would make a replica wait
// for a file while its lag grows and the log's retention may pass its
// offset, which costs it a full sync: the cost the proxy exists to
// avoid. Should the process still run out, a failed open costs that replica
// its connection (it comes back with PSYNC), and the stream log, whose
// writer keeps its files open, retries after a failure.
const ReservedFDs = redisReservedFDs + 2*metrics.MaxConns

// redisReservedFDs is Redis's CONFIG_MIN_RESERVED_FDS.
const redisReservedFDs = 32
