package proxy

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/listen"
	"github.com/replproxy/replproxy/proxy/metrics"
	"github.com/replproxy/replproxy/proxy/wire"
)

// What the proxy does against clients it cannot trust: protected mode, the
// limits on what a client may make it buffer, rate-limited logs of what
// strangers can repeat at will, and the characters allowed in names that
// end up inside INFO and CLIENT LIST lines.

// maxClientArgs bounds the arguments of one command: the proxy's commands
// are short, so it keeps Redis 6.2's bound far below Redis 7's INT_MAX.
const maxClientArgs = 1024

// logEvery is how often a log line that strangers can trigger at will (a
// failed AUTH, an accept error, a client closed by a limit) may be written.
const logEvery = time.Second

// deniedMessage is Redis 7.0's protected-mode reply (clientAcceptHandler),
// naming replproxy where Redis names itself.
const deniedMessage = "-DENIED replproxy is running in protected mode because protected " +
	"mode is enabled and no password is set for the default user. " +
	"In this mode connections are only accepted from the loopback interface. " +
	"If you want to connect from external computers to replproxy you " +
	"may adopt one of the following solutions: " +
	"1) Just disable protected mode sending the command " +
	"'CONFIG SET protected-mode no' from the loopback interface " +
	"by connecting to replproxy from the same host it is " +
	"running on, however MAKE SURE replproxy is not publicly accessible " +
	"from internet if you do so. " +
	"2) Alternatively you can just disable the protected mode by " +
	"editing the replproxy configuration file, and setting the protected " +
	"mode option to 'no', and then restarting the server. " +
	"3) If you started the server manually just for testing, restart " +
	"it with the '--protected-mode no' option. " +
	"4) Set up an authentication password for the default user (requirepass). " +
	"NOTE: You only need to do one of the above things in order for " +
	"the server to start accepting connections from the outside.\r\n"

// clientConf is the part of the configuration every client consults on its
// hot path, derived once per change and published with the configuration
// (settings.go), so that reading it costs no lock and no work.
type clientConf struct {
	limits        wire.Limits              // for a client that may run commands
	protectedMode bool                     // protected-mode yes
	output        config.OutputBufferLimit // client-output-buffer-limit normal
}

func newClientConf(cfg *config.Config) *clientConf {
	return &clientConf{
		limits: wire.Limits{
			MaxInlineLine: wire.RedisInlineMax,
			MaxArgs:       maxClientArgs,
			MaxBulk:       cfg.ProtoMaxBulkLen,
			MaxQuery:      cfg.ClientQueryBufferLimit,
		},
		protectedMode: cfg.ProtectedMode,
		output:        cfg.ClientOutputBufferLimit.Normal,
	}
}

// deniedByProtectedMode applies Redis 7.0's rule: with protected mode on and
// a default user that needs no password (open), only loopback clients are
// served, whatever the bind addresses (Redis 6 also required that no bind
// was configured; 7.0 dropped that, since its default bind listens
// everywhere).
func deniedByProtectedMode(cc *clientConf, open bool, remote net.Addr) bool {
	return cc.protectedMode && open && !listen.IsLoopback(remote)
}

// deny answers a client refused by protected mode and closes it.
func deny(conn net.Conn) {
	conn.SetWriteDeadline(time.Now().Add(time.Second))
	conn.Write([]byte(deniedMessage))
	conn.Close()
}

// validName reports whether a client name (CLIENT SETNAME) has only the
// characters Redis allows: '!' to '~', so no spaces, no newlines, nothing
// that would break a CLIENT LIST line.
func validName(name string) bool {
	for i := 0; i < len(name); i++ {
		if name[i] < '!' || name[i] > '~' {
			return false
		}
	}
	return true
}

// protection is what the server holds against clients beyond the
// configuration: the open file limit's check (Options.FileLimit) and the
// log lines a stranger can repeat at will, each let through at most once
// per logEvery. Made by New; the loggers are written by any goroutine.
type protection struct {
	fileLimit  func(maxclients int) int // Options.FileLimit; nil means no check
	acceptLog  logLimiter               // accept errors
	limitLog   logLimiter               // clients closed by a buffer limit
	tlsLog     logLimiter               // failed TLS handshakes
	httpLog    logLimiter               // the monitoring server's errors (net/http's: failed TLS handshakes, accept errors)
	webAuthLog logLimiter               // monitoring requests refused 401
	webBusyLog logLimiter               // monitoring requests refused 429 (the password checks busy)
	webTLSLog  logLimiter               // metrics-web-config's TLS files not reloaded
	linkLog    logLimiter               // compressed links refused past repl-link-compression-max-links
}

func newProtection(fileLimit func(maxclients int) int) *protection {
	return &protection{fileLimit: fileLimit}
}

// logLimiter lets a repeated log line through at most once per period and
// counts the ones it held back. Any goroutine.
type logLimiter struct {
	last       atomic.Int64 // unix nanos of the last line let through
	suppressed atomic.Int64 // lines held back since
}

// allow reports whether a line may be written now and, if so, how many were
// held back before it.
func (l *logLimiter) allow(now time.Time, every time.Duration) (ok bool, suppressed int64) {
	last := l.last.Load()
	if now.UnixNano()-last < int64(every) || !l.last.CompareAndSwap(last, now.UnixNano()) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}

// nextAcceptDelay is the back-off after a failed accept: 10 ms, doubling up
// to 1 s, as net/http's Server.Serve does.
func nextAcceptDelay(d time.Duration) time.Duration {
	if d == 0 {
		return 10 * time.Millisecond
	}
	return min(2*d, time.Second)
}

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
