package clusterset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy"
	"github.com/replproxy/replproxy/proxy/clustertopo"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/upstream"
)

// DefaultGrace is how long a shard must be missing from every topology
// read before its server is stopped: long enough that a node's view
// missing a shard for a moment (a node that has just joined, a reading
// during a failover) stops nothing, short enough that a removed shard's
// port is released within a minute.
const DefaultGrace = 30 * time.Second

// logEvery is how often failed readings of the topology are logged at
// warning level while they last; in between, at debug level.
const logEvery = time.Minute

// maxLearnt bounds the addresses the set asks besides its seeds, as
// clusterwatch bounds them.
const maxLearnt = 64

// Options configure a Set besides the process's configuration.
type Options struct {
	// Server are the options every shard's server is made with. Its
	// Logger is each shard's, with the field shard-index; OnMaxMemory and
	// FileLimit are the process's hooks, called with the shards' sum
	// (each shard's maxmemory counts, and so do its clients' files);
	// ConfigFile, Supervisor and ClusterMap are the set's own (none,
	// none, its map).
	Server proxy.Options
	// Grace is DefaultGrace when zero.
	Grace time.Duration

	// query replaces clustertopo.Query (tests).
	query func(ctx context.Context, seeds []string, opts clustertopo.Options) (clustertopo.Result, error)
}

// Set is the set of one server per shard. Make it with New, run it with
// Run, once.
type Set struct {
	base  *config.Config // the process's configuration; read-only
	opts  Options
	log   hclog.Logger
	grace time.Duration
	query func(ctx context.Context, seeds []string, opts clustertopo.Options) (clustertopo.Result, error)

	// Owned by Run's goroutine.
	index    *indexMap
	running  map[int]*shard
	learnt   []string  // addresses the last topology named, not seeds
	warnedAt time.Time // the last failed reading logged at warning level; zero after a success
	readOnce bool      // a reading has succeeded
	// startLogged is when each shard that could not start was last logged
	// at error level: once per logEvery, at debug level in between, as a
	// port taken for minutes would otherwise cost a line per reading.
	startLogged map[int]time.Time

	// view is what CLUSTER SHARDS answers: stored by Run, read by every
	// shard's clients (clusterMap).
	view atomic.Pointer[[]viewShard]

	// mem holds each running shard's maxmemory, for the process's
	// memory hook; guarded by its mutex, nothing taken under it
	// but the hooks themselves.
	mem struct {
		sync.Mutex
		maxmemory map[int]int64
	}

	shutdownOnce sync.Once
	shutdownCh   chan struct{} // closed by Shutdown
	ran          atomic.Bool
}

// shard is one running shard's server.
type shard struct {
	index int
	port  int
	srv   *proxy.Server
	err   error // Run's error, set before the shard is sent on exited

	// Owned by Set.Run's goroutine.
	stopping     bool      // Shutdown asked of it: its end is not a failure
	gone         bool      // stopped for leaving the topology: no longer in the view
	missingSince time.Time // zero while the topology lists it
}

// viewShard is one shard of the map CLUSTER SHARDS answers.
type viewShard struct {
	slots []clustertopo.SlotRange
	port  int
	srv   *proxy.Server
}

// New returns the set that serves every shard of the cluster cfg's
// replicaof-cluster names (cfg's cluster-shard must be all); it reads the
// shard map from cfg's dir, creating dir if it is missing. No server is
// made before Run reads the topology.
func New(cfg *config.Config, opts Options) (*Set, error) {
	if cfg == nil || !cfg.FollowsAllShards() {
		return nil, errors.New("clusterset: the configuration does not say cluster-shard all")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.Clone()
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("clusterset: dir %s: %w", cfg.Dir, err)
	}
	m, err := loadMap(cfg.Dir)
	if err != nil {
		return nil, err
	}
	log := opts.Server.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &Set{base: cfg, opts: opts, log: log, grace: opts.Grace, query: opts.query, index: m,
		running: map[int]*shard{}, startLogged: map[int]time.Time{}, shutdownCh: make(chan struct{})}
	if s.grace <= 0 {
		s.grace = DefaultGrace
	}
	if s.query == nil {
		s.query = clustertopo.Query
	}
	s.mem.maxmemory = map[int]int64{}
	return s, nil
}

// Shutdown asks Run to stop every shard gracefully (each server's
// Shutdown: its replicas get shutdown-timeout) and returns at once. Any
// goroutine, any number of times.
func (s *Set) Shutdown() { s.shutdownOnce.Do(func() { close(s.shutdownCh) }) }

// Run reads the topology at once and then every cluster-refresh-interval,
// starts a server for each shard and stops those gone for the grace
// period, until ctx ends (every shard stopped at once), Shutdown is called
// (gracefully), or a shard's server fails or stops of itself. It returns
// once every shard's server has returned: nil, or the error that ended the
// set. A set runs once.
func (s *Set) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return errors.New("clusterset: the set has run already")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	exited := make(chan *shard)
	err := s.loop(ctx, exited)
	if err != nil {
		cancel() // a failure stops the other shards at once
	}
	for len(s.running) > 0 {
		sh := <-exited
		delete(s.running, sh.index)
		if sh.err != nil && err == nil {
			err = fmt.Errorf("shard %d (port %d): %w", sh.index, sh.port, sh.err)
		}
	}
	s.log.Info("every shard stopped")
	return err
}

// loop is Run until the set must stop: nil when ctx ended or a graceful
// stop was asked (every shard told to stop), else the error that stops
// it.
func (s *Set) loop(ctx context.Context, exited chan *shard) error {
	timer := time.NewTimer(0) // the first reading at once
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.shutdownCh:
			s.stopAll()
			return nil
		case sh := <-exited:
			delete(s.running, sh.index)
			s.publishView(nil)
			switch {
			case sh.err != nil:
				return fmt.Errorf("shard %d (port %d): %w", sh.index, sh.port, sh.err)
			case !sh.stopping:
				// SHUTDOWN on its port: the process stops, as a
				// redis-server does.
				s.log.Info("a shard's server stopped: stopping every shard", "shard-index", sh.index, "port", sh.port)
				s.stopAll()
				return nil
			}
			s.log.Info("shard stopped", "shard-index", sh.index, "port", sh.port)
		case <-timer.C:
			if err := s.refresh(ctx, exited); err != nil {
				return err
			}
			timer.Reset(s.base.ClusterRefreshInterval)
		}
	}
}

// stopAll asks every running shard's server to stop gracefully.
func (s *Set) stopAll() {
	for _, sh := range s.running {
		sh.stopping = true
		sh.srv.Shutdown()
	}
}

// refresh reads the topology once and acts on it: shards started, shards
// missing for the grace period stopped, the map saved and published. A
// reading that fails changes nothing. It returns an error only for a
// shard that cannot start at the first reading that succeeds.
func (s *Set) refresh(ctx context.Context, exited chan *shard) error {
	res, err := s.query(ctx, s.targets(), s.queryOptions())
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		now := time.Now()
		if s.warnedAt.IsZero() || now.Sub(s.warnedAt) >= logEvery {
			s.warnedAt = now
			s.log.Warn("cluster topology not read, shards kept as they are", "error", err.Error())
		} else {
			s.log.Debug("cluster topology not read, shards kept as they are", "error", err.Error())
		}
		return nil
	}
	s.warnedAt = time.Time{}
	first := !s.readOnce
	s.readOnce = true
	s.learn(res.Topology)
	byIndex, changed := s.index.assign(res.Topology)
	saved := true
	if changed {
		if err := s.index.save(s.base.Dir, s.base.ClusterPortBase); err != nil {
			// A shard started on an index not saved could come back on
			// another port after a restart: no new shard starts until the
			// map is saved.
			saved = false
			s.log.Error("shard map not saved: new shards wait", "path", filepath.Join(s.base.Dir, MapFile), "error", err.Error())
		}
	}
	now := time.Now()
	var gone []*shard
	for idx, sh := range s.running {
		if _, ok := byIndex[idx]; ok {
			sh.missingSince = time.Time{}
			continue
		}
		if sh.stopping {
			continue
		}
		if sh.missingSince.IsZero() {
			sh.missingSince = now
			s.log.Info("shard missing from the topology: stopped if still missing after the grace period",
				"shard-index", idx, "port", sh.port, "grace-ms", s.grace.Milliseconds())
			continue
		}
		if now.Sub(sh.missingSince) >= s.grace {
			s.log.Info("shard gone from the cluster: stopping its server", "shard-index", idx, "port", sh.port)
			sh.stopping, sh.gone = true, true
			gone = append(gone, sh)
		}
	}
	indexes := make([]int, 0, len(byIndex))
	for idx := range byIndex {
		indexes = append(indexes, idx)
	}
	slices.Sort(indexes)
	for _, idx := range indexes {
		if _, ok := s.running[idx]; ok || !saved {
			continue
		}
		if err := s.start(ctx, idx, byIndex[idx], exited); err != nil {
			if first {
				return err
			}
			if at, ok := s.startLogged[idx]; !ok || now.Sub(at) >= logEvery {
				s.startLogged[idx] = now
				s.log.Error("shard not started: tried again at the next reading", "shard-index", idx, "error", err.Error())
			} else {
				s.log.Debug("shard not started: tried again at the next reading", "shard-index", idx, "error", err.Error())
			}
			continue
		}
		delete(s.startLogged, idx)
	}
	// The view without the gone shards first, their ports closed after
	// it: no CLUSTER SHARDS sends a client to a port that is closing.
	s.publishView(byIndex)
	for _, sh := range gone {
		sh.srv.Shutdown()
	}
	return nil
}

// start makes shard idx's server and runs it on a goroutine of its own,
// which sends the shard on exited when the server's Run has returned.
func (s *Set) start(ctx context.Context, idx int, topo clustertopo.Shard, exited chan<- *shard) error {
	cfg, err := s.shardConfig(idx, topo)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return fmt.Errorf("shard %d: dir %s: %w", idx, cfg.Dir, err)
	}
	opts := s.opts.Server
	log := s.log.With("shard-index", idx)
	opts.Logger = log
	opts.ConfigFile = ""
	opts.Supervisor = nil
	opts.ClusterMap = s.clusterMap
	opts.MetricsLabels = map[string]string{"shard": strconv.Itoa(idx)}
	opts.OnMaxMemory = s.onMaxMemory(idx)
	opts.FileLimit = s.fileLimit()
	srv, err := proxy.New(cfg, opts)
	if err != nil {
		s.forgetMemory(idx)
		return fmt.Errorf("shard %d (port %d): %w", idx, cfg.Port, err)
	}
	sh := &shard{index: idx, port: cfg.Port, srv: srv}
	s.running[idx] = sh
	s.log.Info("shard started", "shard-index", idx, "port", cfg.Port, "cluster-shard", cfg.ClusterShard, "dir", cfg.Dir)
	go func() {
		sh.err = srv.Run(ctx)
		s.forgetMemory(idx)
		exited <- sh // Run receives every shard's exit before it returns
	}()
	return nil
}

// shardConfig derives shard idx's configuration from the process's: its
// port, dir and metrics port by its index, cluster-shard the ID of the
// shard's primary (of its first node when it has none).
func (s *Set) shardConfig(idx int, topo clustertopo.Shard) (*config.Config, error) {
	b := s.base
	cfg := b.Clone()
	cfg.Port = b.ClusterPortBase + idx
	if cfg.Port > 65535 {
		return nil, fmt.Errorf("shard %d: cluster-port-base %d + %d is past 65535", idx, b.ClusterPortBase, idx)
	}
	if b.MetricsPort != 0 {
		cfg.MetricsPort = b.MetricsPort + idx
		if cfg.MetricsPort > 65535 {
			return nil, fmt.Errorf("shard %d: metrics-port %d + %d is past 65535", idx, b.MetricsPort, idx)
		}
	}
	cfg.ClusterPortBase = 0
	cfg.Dir = filepath.Join(b.Dir, "shard-"+strconv.Itoa(idx))
	cfg.MasterHost, cfg.MasterPort = "", 0
	id := topo.ID
	if p, err := topo.Primary(); err == nil {
		id = p.ID
	} else if len(topo.Nodes) > 0 {
		id = topo.Nodes[0].ID
	}
	cfg.ClusterShard = id
	return cfg, nil
}

// targets are the nodes a reading asks, in order: the seeds, then the
// nodes the last topology named.
func (s *Set) targets() []string {
	return append(s.base.ClusterSeedAddrs(), s.learnt...)
}

// learn remembers the addresses t names that are not seeds, up to
// maxLearnt.
func (s *Set) learn(t clustertopo.Topology) {
	seeds := s.base.ClusterSeedAddrs()
	var learnt []string
	for _, sh := range t.Shards {
		for _, n := range sh.Nodes {
			if n.Addr == "" || slices.Contains(seeds, n.Addr) || slices.Contains(learnt, n.Addr) || len(learnt) == maxLearnt {
				continue
			}
			learnt = append(learnt, n.Addr)
		}
	}
	s.learnt = learnt
}

// queryOptions are the topology queries' settings: masteruser and
// masterauth, bind-source-addr, each node within repl-timeout, at most
// clustertopo.DefaultTimeout. (tls-replication is refused with
// cluster-shard all.)
func (s *Set) queryOptions() clustertopo.Options {
	b := s.base
	timeout := min(b.ReplTimeout, clustertopo.DefaultTimeout)
	t := upstream.Target{Timeout: timeout, BindSource: b.BindSourceAddr}
	return clustertopo.Options{Username: b.MasterUser, Password: b.MasterAuth, Timeout: timeout, Dial: t.DialTCP}
}

// publishView stores the map CLUSTER SHARDS answers: each running shard
// but those gone from the topology, with its slots as byIndex gives them
// (nil: as last published).
func (s *Set) publishView(byIndex map[int]clustertopo.Shard) {
	old := map[int][]clustertopo.SlotRange{}
	if v := s.view.Load(); v != nil {
		for _, vs := range *v {
			old[vs.port] = vs.slots
		}
	}
	view := make([]viewShard, 0, len(s.running))
	for idx, sh := range s.running {
		if sh.gone {
			continue
		}
		vs := viewShard{port: sh.port, srv: sh.srv, slots: old[sh.port]}
		if topo, ok := byIndex[idx]; ok {
			vs.slots = topo.Slots
		}
		view = append(view, vs)
	}
	slices.SortFunc(view, func(a, b viewShard) int { return a.port - b.port })
	s.view.Store(&view)
}

// clusterMap is every shard server's Options.ClusterMap: the shards
// served, each with its slots, port, and its server's run ID and offset.
func (s *Set) clusterMap() []proxy.ClusterShard {
	v := s.view.Load()
	if v == nil {
		return nil
	}
	out := make([]proxy.ClusterShard, len(*v))
	for i, vs := range *v {
		out[i] = proxy.ClusterShard{Slots: vs.slots, NodeID: vs.srv.RunID(), Port: vs.port, Offset: vs.srv.ReplOffset()}
	}
	return out
}

// onMaxMemory returns shard idx's OnMaxMemory: it records the shard's
// maxmemory and calls the process's hook with the sum over the shards,
// each shard's memory counting towards the process's.
func (s *Set) onMaxMemory(idx int) func(int64) {
	hook := s.opts.Server.OnMaxMemory
	return func(maxmemory int64) {
		s.mem.Lock()
		defer s.mem.Unlock()
		s.mem.maxmemory[idx] = maxmemory
		if hook != nil {
			hook(s.memorySumLocked())
		}
	}
}

// forgetMemory drops a stopped shard's maxmemory from the sum.
func (s *Set) forgetMemory(idx int) {
	s.mem.Lock()
	defer s.mem.Unlock()
	if _, ok := s.mem.maxmemory[idx]; !ok {
		return
	}
	delete(s.mem.maxmemory, idx)
	if hook := s.opts.Server.OnMaxMemory; hook != nil {
		hook(s.memorySumLocked())
	}
}

// memorySumLocked is the shards' maxmemory summed; 0 (no limit) when any
// shard has none.
func (s *Set) memorySumLocked() int64 {
	var sum int64
	for _, m := range s.mem.maxmemory {
		if m == 0 {
			return 0
		}
		sum += m
	}
	return sum
}

// fileLimit returns a shard's FileLimit: the process's hook asked for
// maxclients times the shards (the running ones and this one), each
// shard's clients needing files of the one process, and its answer shared
// out again.
func (s *Set) fileLimit() func(int) int {
	hook := s.opts.Server.FileLimit
	if hook == nil {
		return nil
	}
	n := len(s.running) + 1
	return func(maxclients int) int {
		return hook(maxclients*n) / n
	}
}
