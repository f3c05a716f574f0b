package config

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/replproxy/replproxy/proxy/clustertopo"
)

// Validate checks every field and the rules that span fields. It returns the
// first problem as an [*Error] whose Directive names the field's directive,
// and nil when c may be used. It reads nothing but c (no file system).
func (c *Config) Validate() error {
	for _, check := range []struct {
		directive string
		err       error
	}{
		{"port", checkPort(c.Port, 0)},
		{"bind", checkBind(c.Bind)},
		{"replicaof", checkMaster(c.MasterHost, c.MasterPort)},
		{"masteruser", checkMasterUser(c.MasterUser, c.MasterAuth)},
		{"replicaof-cluster", checkClusterSeeds(c.ClusterSeeds, c.ClusterShard)},
		{"cluster-shard", checkClusterShard(c.ClusterShard)},
		{"cluster-port-base", checkPort(c.ClusterPortBase, 0)},
		{"cluster-refresh-interval", checkRange(int64(c.ClusterRefreshInterval), int64(minClusterRefreshMillis*time.Millisecond), int64(maxClusterRefreshMillis*time.Millisecond))},
		{"bind-source-addr", checkBindSourceAddr(c.BindSourceAddr)},
		{"aclfile", checkACLSource(c.ACLFile, c.Users)},
		{"repl-backlog-size", checkBacklog(c.ReplBacklogSize)},
		{"repl-timeout", checkSeconds(c.ReplTimeout, time.Nanosecond)},
		{"shutdown-timeout", checkSeconds(c.ShutdownTimeout, 0)},
		{"repl-log-size", checkNonNegative(c.ReplLogSize)},
		{"repl-log-fsync", checkEnum(c.ReplLogFsync, logFsyncs)},
		{"repl-log-window", checkLogWindow(c.ReplLogWindow)},
		{"repl-link-compression", checkEnum(c.ReplLinkCompression, linkCompressions)},
		{"repl-link-compression-max-links", checkRange(c.ReplLinkCompressionMaxLinks, 0, maxLinkCompressionMaxLinks)},
		{"repl-snapshot-refresh", checkSeconds(c.ReplSnapshotRefresh, 0)},
		{"repl-snapshot-max-stream-since", checkNonNegative(c.ReplSnapshotMaxStreamSince)},
		{"backup-max-stream-since", checkNonNegative(c.BackupMaxStreamSince)},
		{"snapshot-from", checkSnapshotFrom(c.SnapshotFromHost, c.SnapshotFromPort)},
		{"repl-link-sync-rate-limit", checkSyncRate(c.ReplLinkSyncRateLimit, c.ReplTimeout)},
		{"repl-read-coalesce-usec", checkReadCoalesce(c.ReplReadCoalesce)},
		{"repl-link-compression-coalesce-usec", checkLinkCoalesce(c.ReplLinkCompressionCoalesce)},
		{"client-output-buffer-limit", checkOutputLimits(&c.ClientOutputBufferLimit)},
		{"ack-policy", checkAckReplicas(c.AckReplicas)},
		{"maxmemory", checkNonNegative(c.MaxMemory)},
		{"maxmemory-policy", checkEnum(c.MaxMemoryPolicy, evictionPolicies)},
		{"maxclients", checkMaxClients(c.MaxClients)},
		{"client-query-buffer-limit", checkAtLeast(c.ClientQueryBufferLimit, MinQueryLimit)},
		{"proto-max-bulk-len", checkAtLeast(c.ProtoMaxBulkLen, MinQueryLimit)},
		{"master-query-buffer-limit", checkAtLeast(c.MasterQueryBufferLimit, MinQueryLimit)},
		{"dir", checkDir(c.Dir)},
		{"loglevel", checkEnum(c.LogLevel, logLevels)},
		{"log-format", checkEnum(c.LogFormat, logFormats)},
		{"supervised", checkEnum(c.Supervised, supervisedModes)},
		{"metrics-port", checkPort(c.MetricsPort, 0)},
		{"metrics-bind", checkMetricsBind(c.MetricsBind)},
		{"metrics-web-config", checkMetricsWebConfig(c.MetricsWebConfig)},
		{"tls-port", checkPort(c.TLSPort, 0)},
	} {
		if check.err != nil {
			return &Error{Directive: check.directive, Err: check.err}
		}
	}
	if name, err := checkTLS(c); err != nil {
		return &Error{Directive: name, Err: err}
	}
	if name, err := checkAllShards(c); err != nil {
		return &Error{Directive: name, Err: err}
	}
	return nil
}

// checkAllShards checks what `cluster-shard all` needs of the other
// directives: a port base, and none of what one process serving several
// shards cannot do yet. port must be 0, so that no listener an operator
// would take for a shard's serves nothing; tls-port, tls-replication and
// supervised are refused rather than half done (docs/cluster.md).
func checkAllShards(c *Config) (directive string, err error) {
	if !c.FollowsAllShards() {
		if c.ClusterPortBase != 0 {
			return "cluster-port-base", fmt.Errorf("%w: cluster-port-base is only for cluster-shard all", ErrInvalidValue)
		}
		return "", nil
	}
	switch {
	case c.ClusterPortBase == 0:
		return "cluster-port-base", fmt.Errorf("%w: cluster-shard all needs cluster-port-base (the first shard's port)", ErrInvalidValue)
	case c.Port != 0:
		return "port", fmt.Errorf("%w %d: with cluster-shard all every shard has a port of its own from cluster-port-base: set port 0", ErrInvalidValue, c.Port)
	case c.TLSPort != 0:
		return "tls-port", fmt.Errorf("%w: tls-port is not supported with cluster-shard all", ErrInvalidValue)
	case c.TLSReplication:
		return "tls-replication", fmt.Errorf("%w: tls-replication is not supported with cluster-shard all", ErrInvalidValue)
	case c.Supervised != SupervisedNo:
		return "supervised", fmt.Errorf("%w: supervised is not supported with cluster-shard all", ErrInvalidValue)
	}
	return "", nil
}

func checkPort(port, lo int) error {
	if port < lo || port > 65535 {
		return fmt.Errorf("%w %d: port must be between %d and 65535 inclusive", ErrInvalidValue, port, lo)
	}
	return nil
}

func checkBind(addrs []string) error {
	if len(addrs) == 0 {
		return fmt.Errorf("%w: at least one bind address is required", ErrArgCount)
	}
	if len(addrs) > MaxBindAddrs {
		return fmt.Errorf("%w: too many bind addresses specified (most %d)", ErrArgCount, MaxBindAddrs)
	}
	for _, a := range addrs {
		if err := checkBindAddr(a); err != nil {
			return err
		}
	}
	return nil
}

// checkBindAddr accepts what redis-server 7 accepts and can bind: an optional
// "-" (optional address), then "*", "::*", an IP address or a host name.
func checkBindAddr(addr string) error {
	a := addr
	if len(a) > 0 && a[0] == '-' {
		a = a[1:]
	}
	if a == "*" || a == "::*" {
		return nil
	}
	if checkHost(a) != nil {
		return badValue(addr, "bind address must be *, ::*, an IP address or a host name, optionally prefixed by -")
	}
	return nil
}

// checkHost accepts an IP address (IPv6 with an optional zone) or a host name
// made of letters, digits, '.', '-' and '_'. The narrow alphabet keeps
// CONFIG GET's space-separated output unambiguous.
func checkHost(h string) error {
	if h == "" || len(h) > 255 {
		return badValue(h, "host must be an IP address or a host name")
	}
	ipOnly := false
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
		case c == ':' || c == '%':
			ipOnly = true
		default:
			return badValue(h, "host must be an IP address or a host name")
		}
	}
	if ipOnly || h[0] == '-' {
		if _, err := netip.ParseAddr(h); err != nil {
			return badValue(h, "host must be an IP address or a host name")
		}
	}
	return nil
}

// checkBindSourceAddr accepts "" (the kernel chooses) or what checkHost
// accepts: an IP address or a host name, with no port. Redis stores any
// string and fails at each connect; refusing here turns a typo into a
// CONFIG SET error instead of a link that never comes up. A "host:port" or
// "[::1]:port" fails checkHost's IP parse, so it is refused too.
func checkBindSourceAddr(addr string) error {
	if addr == "" {
		return nil
	}
	if checkHost(addr) != nil {
		return badValue(addr, "bind-source-addr must be an IP address or a host name, without a port")
	}
	return nil
}

func checkMaster(host string, port int) error {
	if host == "" {
		if port != 0 {
			return fmt.Errorf("%w %d: master port set without a master host", ErrInvalidValue, port)
		}
		return nil
	}
	if err := checkHost(host); err != nil {
		return err
	}
	return checkPort(port, 1)
}

// The range of cluster-refresh-interval, in milliseconds.
const (
	minClusterRefreshMillis = 100
	maxClusterRefreshMillis = 3600 * 1000
)

// checkClusterSeeds checks replicaof-cluster's nodes, and that it and
// cluster-shard are set together: seeds without a shard name nothing to
// follow, a shard without seeds nowhere to ask.
func checkClusterSeeds(seeds []HostPort, shard string) error {
	if len(seeds) > MaxClusterSeeds {
		return fmt.Errorf("%w: %d nodes, at most %d", ErrInvalidValue, len(seeds), MaxClusterSeeds)
	}
	for _, a := range seeds {
		if err := checkHost(a.Host); err != nil {
			return err
		}
		if err := checkPort(a.Port, 1); err != nil {
			return err
		}
	}
	switch {
	case len(seeds) > 0 && shard == "":
		return fmt.Errorf("%w: replicaof-cluster needs cluster-shard (a node ID or a slot)", ErrInvalidValue)
	case len(seeds) == 0 && shard != "":
		return fmt.Errorf("%w: cluster-shard needs replicaof-cluster (the cluster's seed nodes)", ErrInvalidValue)
	}
	return nil
}

// checkClusterShard checks cluster-shard: "" (not set), all, a node ID or
// a slot, as clustertopo reads a selector.
func checkClusterShard(s string) error {
	if s == "" || s == AllShards {
		return nil
	}
	if _, err := clustertopo.ParseSelector(s); err != nil {
		return badValue(s, err.Error())
	}
	return nil
}

// checkSnapshotFrom is checkMaster for snapshot-from: a host with a port,
// or neither (primary). A port alone would be a source the proxy cannot
// dial, and SnapshotFromAddr would report primary for it.
func checkSnapshotFrom(host string, port int) error {
	if host == "" {
		if port != 0 {
			return fmt.Errorf("%w %d: snapshot-from port set without a host", ErrInvalidValue, port)
		}
		return nil
	}
	if err := checkHost(host); err != nil {
		return err
	}
	return checkPort(port, 1)
}

// checkACLSource refuses user lines together with an aclfile, as Redis
// does: one of the two is where the users live.
func checkACLSource(file string, users [][]string) error {
	if file != "" && len(users) > 0 {
		return fmt.Errorf("%w: users defined by user lines and an aclfile at the same time: define them in one "+
			"place, an ACL file or user lines, not both", ErrInvalidValue)
	}
	return nil
}

func checkMasterUser(user, auth string) error {
	if user != "" && auth == "" {
		return fmt.Errorf("%w: masteruser requires masterauth", ErrInvalidValue)
	}
	return nil
}

func checkBacklog(n int64) error {
	if n < MinReplBacklogSize {
		return fmt.Errorf("%w %d: repl-backlog-size must be at least %d", ErrInvalidValue, n, MinReplBacklogSize)
	}
	return nil
}

// checkSeconds checks a duration against [lo, maxSeconds seconds]. Go
// callers may use sub-second durations; the directives cannot.
func checkSeconds(d, lo time.Duration) error {
	if d < lo || d > maxSeconds*time.Second {
		return fmt.Errorf("%w %v: must be between %v and %ds", ErrInvalidValue, d, lo, maxSeconds)
	}
	return nil
}

// maxAckReplicas bounds `ack-policy replicas <n>`: far above any
// maxclients that can be served, and an int on every platform.
const maxAckReplicas = math.MaxInt32

func checkAckReplicas(n int) error {
	if n < 0 || int64(n) > maxAckReplicas {
		return fmt.Errorf("%w %d: replicas must be between 1 and %d", ErrInvalidValue, n, int64(maxAckReplicas))
	}
	return nil
}

func checkReadCoalesce(d time.Duration) error {
	if d < 0 || d > MaxReadCoalesce || d%time.Microsecond != 0 {
		return fmt.Errorf("%w %v: must be whole microseconds from 0 to %v", ErrInvalidValue, d, MaxReadCoalesce)
	}
	return nil
}

func checkLinkCoalesce(d time.Duration) error {
	if d < 0 || d > MaxLinkCoalesce || d%time.Microsecond != 0 {
		return fmt.Errorf("%w %v: must be whole microseconds from 0 to %v", ErrInvalidValue, d, MaxLinkCoalesce)
	}
	return nil
}

func checkLogWindow(n int64) error {
	if n < MinReplLogWindow {
		return fmt.Errorf("%w %d: repl-log-window must be at least %d", ErrInvalidValue, n, MinReplLogWindow)
	}
	return nil
}

func checkNonNegative(n int64) error {
	if n < 0 {
		return fmt.Errorf("%w %d: must not be negative", ErrInvalidValue, n)
	}
	return nil
}

// checkSyncRate accepts 0 (unlimited) or a repl-link-sync-rate-limit that
// sends SyncRatePiece bytes within repl-timeout: below that a downstream
// proxy waits longer than its repl-timeout for the rest of a chunk it reads
// whole, drops the link and starts its full sync again, forever.
// repl-timeout is checked before it.
func checkSyncRate(rate int64, timeout time.Duration) error {
	if rate <= 0 || timeout <= 0 {
		return checkNonNegative(rate)
	}
	least := int64(math.Ceil(SyncRatePiece / timeout.Seconds()))
	if rate < least {
		return fmt.Errorf("%w %d: at least %d bytes a second, to send a downstream proxy the largest piece it reads whole "+
			"(a compressed chunk, %d bytes) within repl-timeout (%ss); 0 for unlimited", ErrInvalidValue, rate, least, SyncRatePiece,
			formatSeconds(timeout))
	}
	return nil
}

func checkOutputLimits(l *OutputBufferLimits) error {
	for _, class := range []struct {
		name  string
		limit *OutputBufferLimit
	}{{"normal", &l.Normal}, {"replica", &l.Replica}, {"pubsub", &l.PubSub}} {
		for _, err := range []error{
			checkNonNegative(class.limit.Hard),
			checkNonNegative(class.limit.Soft),
			checkSeconds(class.limit.SoftPeriod, 0),
		} {
			if err != nil {
				return fmt.Errorf("class %s: %w", class.name, err)
			}
		}
	}
	return nil
}

func checkAtLeast(n, lo int64) error {
	if n < lo {
		return fmt.Errorf("%w %d: must be at least %d", ErrInvalidValue, n, lo)
	}
	return nil
}

func checkRange(n, lo, hi int64) error {
	if n < lo || n > hi {
		return fmt.Errorf("%w %d: must be between %d and %d inclusive", ErrInvalidValue, n, lo, hi)
	}
	return nil
}

func checkMaxClients(n int) error {
	if n < 1 || int64(n) > maxClientsLimit {
		return fmt.Errorf("%w %d: maxclients must be between 1 and %d inclusive", ErrInvalidValue, n, maxClientsLimit)
	}
	return nil
}

func checkDir(dir string) error {
	if dir == "" {
		return fmt.Errorf("%w: dir must not be empty", ErrInvalidValue)
	}
	return nil
}

func checkEnum[T ~string](v T, accepted []T) error {
	if slices.Contains(accepted, v) {
		return nil
	}
	return badValue(string(v), enumReason(accepted))
}

// enumReason is redis-server's wording for a bad enum value.
func enumReason[T ~string](accepted []T) string {
	s := "argument(s) must be one of the following: "
	for i, a := range accepted {
		if i > 0 {
			s += ", "
		}
		s += string(a)
	}
	return s
}

// checkMetricsWebConfig accepts a path or "" (none). The file itself is
// read and checked by the server at start (Validate reads no file); a path
// holding a NUL byte names no file, and is refused here, before the open
// would fail with a vaguer error.
func checkMetricsWebConfig(path string) error {
	if strings.IndexByte(path, 0) >= 0 {
		return badValue(path, "a file name cannot hold a NUL byte")
	}
	return nil
}

// checkMetricsBind accepts one bind address without the optional "-": the
// metrics server has one address, and failing to bind it fails the start.
func checkMetricsBind(addr string) error {
	if strings.HasPrefix(addr, "-") {
		return badValue(addr, "metrics-bind takes one address, without -")
	}
	return checkBindAddr(addr)
}
