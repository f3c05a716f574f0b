package proxy

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/tlsconf"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/proxy/wire"
)

// commandEntries are the commands the proxy answers, each run on s
// (newCommandTable completes them). s may be nil where only the table's
// names and shapes are wanted: nothing runs then.
func commandEntries(s *Server) map[string]command {
	t := map[string]command{
		"ping":      {arity: -1, run: s.cmdPing},
		"echo":      {arity: 2, run: s.cmdEcho},
		"quit":      {arity: -1, noAuth: true, run: s.cmdQuit},
		"auth":      {arity: -2, noAuth: true, run: s.cmdAuth},
		"info":      {arity: -1, run: s.cmdInfo},
		"role":      {arity: 1, run: s.cmdRole},
		"config":    {arity: -2, run: s.cmdConfig},
		"client":    {arity: -2, run: s.cmdClient},
		"cluster":   {arity: -2, run: s.cmdCluster},
		"command":   {arity: -1, run: s.cmdCommand},
		"select":    {arity: 2, run: s.cmdSelect},
		"replicaof": {arity: 3, run: s.cmdReplicaOf},
		"replconf":  {arity: -1, run: s.cmdReplconf},
		"psync":     {arity: -3, run: s.cmdPSync},
		"sync":      {arity: 1, run: s.cmdSync},
		"slaveof":   {arity: 3, run: s.cmdReplicaOf},
		"hello":     {arity: -1, noAuth: true, run: s.cmdHello},
		"reset":     {arity: 1, noAuth: true, run: s.cmdReset},
		"time":      {arity: 1, run: s.cmdTime},
		"slowlog":   {arity: -2, run: s.cmdSlowlog},
		"latency":   {arity: -2, run: s.cmdLatency},
		"shutdown":  {arity: -1, run: s.cmdShutdown},
		"acl":       {arity: -2, run: s.cmdACL},
		// Pub/Sub, as a replica serves it (commands_sentinel.go, package pubsub).
		"subscribe":   {arity: -2, run: s.cmdSubscribe},
		"unsubscribe": {arity: -1, run: s.cmdUnsubscribe},
		"publish":     {arity: 3, run: s.cmdPublish},
	}
	return t
}

func (s *Server) cmdPing(c *client, args [][]byte) bool {
	switch len(args) {
	case 1:
		c.out = wire.AppendSimple(c.out, "PONG")
	case 2:
		c.out = wire.AppendBulk(c.out, args[1])
	default:
		c.out = wire.AppendError(c.out, "ERR wrong number of arguments for 'ping' command")
	}
	return false
}

func (s *Server) cmdEcho(c *client, args [][]byte) bool {
	c.out = wire.AppendBulk(c.out, args[1])
	return false
}

func (s *Server) cmdQuit(c *client, _ [][]byte) bool {
	c.out = wire.AppendSimple(c.out, "OK")
	return true
}

// redisDatabases is redis-server's default count of databases, the range
// SELECT takes.
const redisDatabases = 16

// cmdSelect is SELECT index. The proxy holds no keys, so it only checks
// the index, as Redis's selectCommand does: an int (string2ll's rules, in
// the range of a C int), then one of its 16 databases.
func (s *Server) cmdSelect(c *client, args [][]byte) bool {
	n, ok := wire.ParseInt(args[1])
	switch {
	case !ok || n < math.MinInt32 || n > math.MaxInt32:
		c.out = wire.AppendError(c.out, "ERR value is not an integer or out of range")
	case n < 0 || n >= redisDatabases:
		c.out = wire.AppendError(c.out, "ERR DB index is out of range")
	default:
		c.out = wire.AppendSimple(c.out, "OK")
	}
	return false
}

// cmdAuth is AUTH <password> (the default user's) or AUTH <user>
// <password>, as redis-server 7.0 answers it.
func (s *Server) cmdAuth(c *client, args [][]byte) bool {
	if len(args) > 3 {
		c.out = wire.AppendError(c.out, "ERR syntax error")
		return false
	}
	if len(args) == 2 && s.access.users.Default().Profile().NoPass() {
		c.out = wire.AppendError(c.out, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		return false
	}
	user := "default"
	if len(args) == 3 {
		user = string(args[1])
	}
	if !s.access.authenticate(c, args[0], user, args[len(args)-1]) {
		return false
	}
	c.out = wire.AppendSimple(c.out, "OK")
	return false
}

// cmdRole answers as a chained replica does: slave, the primary's host and
// port, the link state and the offset applied.
func (s *Server) cmdRole(c *client, _ [][]byte) bool {
	cfg := s.config()
	if cfg.MasterHost == "" {
		c.out = wire.AppendArrayHeader(c.out, 3)
		c.out = wire.AppendBulkString(c.out, "master")
		c.out = wire.AppendInt(c.out, s.hist.Stream().Offset())
		c.out = s.appendRoleReplicas(c.out)
		return false
	}
	st := s.up.State()
	off := int64(-1)
	if st == upstream.StateConnected {
		off = s.up.Applied()
	}
	// Redis's five elements of a replica's ROLE, then replproxy's own
	// replicas in the form a primary's ROLE lists them.
	c.out = wire.AppendArrayHeader(c.out, 6)
	c.out = wire.AppendBulkString(c.out, "slave")
	c.out = wire.AppendBulkString(c.out, cfg.MasterHost)
	c.out = wire.AppendInt(c.out, int64(cfg.MasterPort))
	c.out = wire.AppendBulkString(c.out, st.String())
	c.out = wire.AppendInt(c.out, off)
	c.out = s.appendRoleReplicas(c.out)
	return false
}

// appendRoleReplicas appends the online replicas as a primary's ROLE lists
// them: [ip, port, ack offset], all bulk strings.
func (s *Server) appendRoleReplicas(b []byte) []byte {
	var online []*downstream.Replica
	for _, r := range s.clients.replicaList() {
		if r.State() == downstream.Online {
			online = append(online, r)
		}
	}
	b = wire.AppendArrayHeader(b, len(online))
	for _, r := range online {
		b = wire.AppendArrayHeader(b, 3)
		b = wire.AppendBulkString(b, r.IP())
		b = wire.AppendBulkString(b, strconv.Itoa(r.Port()))
		b = wire.AppendBulkString(b, strconv.FormatInt(r.AckOffset(), 10))
	}
	return b
}

// cmdConfig is CONFIG GET, SET, RESETSTAT, REWRITE and HELP; dispatch has
// checked the subcommand and its arity.
func (s *Server) cmdConfig(c *client, args [][]byte) bool {
	switch wire.Lower(string(args[1])) {
	case "get":
		s.configGet(c, args[2:])
	case "set":
		s.configSet(c, args[2:])
	case "resetstat":
		s.stats.Reset()
		c.out = wire.AppendSimple(c.out, "OK")
	case "rewrite":
		s.configRewrite(c)
	case "help":
		c.out = appendHelp(c.out, "config")
	default:
		unknownSub(c, args)
	}
	return false
}

// configGet returns name/value pairs for every directive one of the
// arguments names, as redis-server 7.0's configGetCommand does (a map in
// RESP3): an argument without a glob character ([, * or ?) is looked up
// (any case, alias or not) and answered under the name as given; a
// pattern is matched against every directive's name, ignoring the case of
// ASCII letters; a directive answers once.
func (s *Server) configGet(c *client, patterns [][]byte) {
	cfg := s.config()
	var pairs []string
	seen := map[string]bool{}
	for _, p := range patterns {
		arg := string(p)
		// Redis looks for a glob character, and matches a pattern, in the
		// argument as a C string: up to a NUL byte.
		if !strings.ContainsAny(wire.CString(arg), "[*?") {
			name, ok := config.Canonical(arg)
			if !ok || seen[arg] || hiddenFromConfigGet(name) {
				continue
			}
			if v, ok := cfg.Get(name); ok {
				seen[arg] = true
				pairs = append(pairs, arg, v)
			}
			continue
		}
		pat := wire.Lower(wire.CString(arg))
		for _, name := range config.Names() {
			if ok, _ := path.Match(pat, name); !ok || seen[name] || hiddenFromConfigGet(name) {
				continue
			}
			if v, ok := cfg.Get(name); ok {
				seen[name] = true
				pairs = append(pairs, name, v)
			}
		}
	}
	c.out = c.proto().AppendMapHeader(c.out, len(pairs)/2)
	for _, p := range pairs {
		c.out = wire.AppendBulkString(c.out, p)
	}
}

// hiddenFromConfigGet reports the directives CONFIG GET never returns: the
// passwords. Redis returns them; replproxy leaves them out, neither name nor
// value, because an empty value would read as "no password" to a tool that
// copies a configuration, and any client that can send CONFIG GET (every
// client, when requirepass is empty) must not learn the primary's password.
// CONFIG SET still sets them.
func hiddenFromConfigGet(name string) bool {
	return name == "masterauth" || name == "requirepass"
}

// configSet applies name/value pairs all or nothing, then puts them into
// effect, in the order of redis-server 7.0's configSetCommand: an odd
// count is a syntax error; every name is checked first, and the first one
// that is unknown, immutable or named twice (an alias is the same
// directive) is the reply, quoted as given; then each value is set in
// turn, and the first refused is the reply, with the directive's name and
// Redis's reason.
func (s *Server) configSet(c *client, args [][]byte) {
	if len(args)%2 != 0 {
		c.out = wire.AppendError(c.out, "ERR syntax error")
		return
	}
	names := make([]string, 0, len(args)/2)
	for i := 0; i < len(args); i += 2 {
		given := wire.CString(string(args[i]))
		name, known := config.Canonical(given)
		var reply string
		switch {
		case !known:
			reply = fmt.Sprintf("ERR Unknown option or number of arguments for CONFIG SET - '%s'", given)
		case !config.Mutable(name):
			reply = fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - can't set immutable config", given)
		case slices.Contains(names, name):
			reply = fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - duplicate parameter", given)
		case name == "replicaof" && len(s.config().ClusterSeeds) > 0:
			reply = fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - %s", given,
				strings.TrimPrefix(errReplicaOfCluster, "ERR "))
		}
		if reply != "" {
			c.out = wire.AppendError(c.out, reply)
			return
		}
		names = append(names, name)
	}
	// Naming a tls-* directive reads the TLS files again, even with the
	// same value: certificates are rotated by replacing the files.
	firstTLS := ""
	for _, name := range names {
		if tlsconf.Names(name) && firstTLS == "" {
			firstTLS = name
		}
	}
	// The change only edits and checks: the sockets of a new port or bind,
	// a new dir's lock and the TLS files are taken by configChanges.changeTLS
	// (prepare), after it.
	err := s.changes.changeTLS(firstTLS != "", func(prev, next *config.Config) error {
		for i, name := range names {
			// The value goes as one argument, spaces and all ("" clears a
			// password); directives that take several words (bind, replicaof,
			// client-output-buffer-limit) split it themselves, quotes included.
			if err := next.Set(name, string(args[2*i+1])); err != nil {
				reason := err.Error()
				var ve *config.ValueError
				if errors.As(err, &ve) {
					reason = ve.Reason
				}
				return fmt.Errorf("ERR CONFIG SET failed (possibly related to argument '%s') - %s", name, reason)
			}
		}
		if err := next.Validate(); err != nil {
			return fmt.Errorf("ERR CONFIG SET failed - %w", err)
		}
		if next.MaxClients != prev.MaxClients && s.protect.fileLimit != nil {
			if n := s.protect.fileLimit(next.MaxClients); n < next.MaxClients {
				return fmt.Errorf("ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with %d", n)
			}
		}
		if next.Dir != prev.Dir {
			// Redis chdirs and replies with strerror; replproxy keeps no
			// working directory, but a dir that is not one would fail
			// every later spill.
			s.changes.io("stat dir")
			if err := checkDirUsable(next.Dir); err != nil {
				return fmt.Errorf("ERR CONFIG SET failed (possibly related to argument 'dir') - %s", err)
			}
			if s.durable != nil {
				// The stream log and dir's lock stay where they were opened:
				// a new dir would hold none of the history a restart needs.
				return errors.New("ERR CONFIG SET failed (possibly related to argument 'dir') - dir cannot change while the stream log is on (repl-log-size)")
			}
			// dir's lock moves with it (dirlock.go, dataDir.prepare).
		}
		return nil
	})
	var tlsErr *tlsLoadError
	if errors.As(err, &tlsErr) {
		// Redis's reply; the cause goes to the log, as Redis's does. The
		// TLS material in force is unchanged.
		s.log.Warn("TLS configuration not updated", "error", tlsErr.err)
		name := firstTLS
		if name == "" {
			name = names[0]
		}
		c.out = wire.AppendError(c.out, fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - Unable to update TLS configuration. Check server logs.", name))
		return
	}
	if err != nil {
		// Every error of the change is a whole reply; Validate passed in it.
		c.out = wire.AppendError(c.out, err.Error())
		return
	}
	c.out = wire.AppendSimple(c.out, "OK")
}

// configRewrite is CONFIG REWRITE: the configuration in force written over
// the file the server started from (config.Config.RewriteFile), with
// redis-server's replies and log lines. Rewrites run one at a time
// (configChanges.rewrite), so the file ends with the configuration of the last one to run.
func (s *Server) configRewrite(c *client) {
	if s.process.ConfigFile == "" {
		c.out = wire.AppendError(c.out, "ERR The server is running without a config file")
		return
	}
	cfg := s.config()
	if cfg.ACLFile == "" {
		// The users in force, as Redis writes them when it has no aclfile.
		cfg = cfg.Clone()
		cfg.Users = nil
		for _, line := range s.access.users.List() {
			cfg.Users = append(cfg.Users, strings.Fields(line)[1:])
		}
	}
	err := s.changes.rewrite(s.process.ConfigFile, cfg)
	if err != nil {
		s.log.Warn("CONFIG REWRITE failed", "path", s.process.ConfigFile, "error", err)
		c.out = wire.AppendError(c.out, "ERR Rewriting config file: "+strerror(err))
		return
	}
	s.log.Info("CONFIG REWRITE executed with success", "path", s.process.ConfigFile)
	c.out = wire.AppendSimple(c.out, "OK")
}

// checkDirUsable reports, in strerror's words, why dir cannot be the
// directory for spilled snapshots.
func checkDirUsable(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return errors.New(strerror(err))
	}
	if !fi.IsDir() {
		return errors.New(strerror(syscall.ENOTDIR))
	}
	return nil
}

// errReplicaOfCluster refuses REPLICAOF and CONFIG SET replicaof while the
// proxy follows a cluster's shard (cluster_follow.go), which sets replicaof
// itself, as a cluster node refuses REPLICAOF ("not allowed in cluster
// mode").
const errReplicaOfCluster = "ERR REPLICAOF not allowed while replicaof-cluster is set"

// cmdReplicaOf is REPLICAOF <host> <port> or REPLICAOF NO ONE, checked as
// Redis's replicaofCommand checks it: the port is 0 to 65535 ("Invalid
// master port"), and the primary already in force is left as it is.
func (s *Server) cmdReplicaOf(c *client, args [][]byte) bool {
	if len(s.config().ClusterSeeds) > 0 {
		c.out = wire.AppendError(c.out, errReplicaOfCluster)
		return false
	}
	host, port := string(args[1]), string(args[2])
	noOne := wire.EqualFold(host, "no") && wire.EqualFold(port, "one")
	if !noOne {
		n, ok := wire.ParseInt(args[2])
		if !ok || n < 0 || n > 65535 {
			c.out = wire.AppendError(c.out, "ERR Invalid master port")
			return false
		}
		if cfg := s.config(); cfg.MasterHost != "" && wire.EqualFold(cfg.MasterHost, host) && int64(cfg.MasterPort) == n {
			c.out = wire.AppendSimple(c.out, "OK Already connected to specified master")
			return false
		}
	}
	var now *config.Config
	err := s.changes.change(func(_, next *config.Config) error {
		now = next // the last try's is the one published
		if noOne {
			return next.Set("replicaof", "no", "one")
		}
		return next.Set("replicaof", host, port)
	})
	if err != nil {
		c.out = wire.AppendError(c.out, fmt.Sprintf("ERR %v", err))
		return false
	}
	s.log.Info("replicaof changed by a client", "host", now.MasterHost, "port", now.MasterPort,
		"client-id", c.id, "address", c.addr, "client-name", c.clientName())
	c.out = wire.AppendSimple(c.out, "OK")
	return false
}
