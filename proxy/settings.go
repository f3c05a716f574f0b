package proxy

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/listen"
	"github.com/replproxy/replproxy/proxy/tlsconf"
	"github.com/replproxy/replproxy/streamlog"
)

// The configuration in force is published copy-on-write: readers load one
// pointer and never take a lock; a writer (CONFIG SET, REPLICAOF) clones the
// published value, changes the clone and publishes it. A published value is
// never changed again, so a reader may keep it as long as it likes.
//
// A change runs in three steps (configChanges.change), and only the middle
// one holds a lock:
//
//  1. prepare, with no lock held: edit the clone, validate it, and do every
//     piece of I/O it needs (read the TLS files it names, take a new dir's
//     lock, open the listeners of a new port, tls-port or bind);
//  2. publish, under writeMu, with no I/O: if the configuration in force is
//     still the one the change started from, store the new one and put
//     what was prepared in place (pointer swaps: the listener set, dir's
//     lock); if not, undo the preparation (close what it opened) and start
//     again from the configuration in force, so that no change is lost;
//  3. finish, with no lock held, after the changes published before it
//     have finished (applied, a chain of channels): apply its effects
//     (GOMEMLIMIT, log level, Retarget, backlog size), close what it
//     displaced (old listeners, the old dir's lock), log.
//
// Changes prepare side by side, so two may want the same socket or dir lock
// (or one a socket its predecessor has not closed yet); and a bind that
// overlaps an address we listen on (127.0.0.1, then *) can only be opened
// once our listener there is closed, which changes the listeners in use
// before the configuration. A change whose listen or dir lock fails runs
// again alone: it waits, holding no lock, until every other change has
// finished, and none starts until it has; alone, what it cannot have is
// no sibling's, and it may close the listeners in use (listener_set.go).

// settings is one published configuration, with the part of it every client
// consults on its hot path already derived, so that both come from the same
// change.
type settings struct {
	cfg    *config.Config // read-only once published
	client clientConf
	tls    *tlsconf.Material // the TLS material cfg names (tls_handshake.go); nil without TLS
}

// liveConfig is the configuration in force: the published settings, read
// with one atomic load by any goroutine. Its writers are configChanges'.
// The zero value holds none; New publishes the first.
type liveConfig struct {
	cur atomic.Pointer[settings] // replaced, never changed
}

func newSettings(cfg *config.Config, tls *tlsconf.Material) *settings {
	return &settings{cfg: cfg, client: *newClientConf(cfg), tls: tls}
}

// config returns the configuration in force. It is shared: never change it.
func (c *liveConfig) config() *config.Config { return c.cur.Load().cfg }

// clientConf returns what clients consult of the configuration in force.
func (c *liveConfig) clientConf() *clientConf { return &c.cur.Load().client }

// tls returns the TLS material in force, nil when no TLS is configured.
func (c *liveConfig) tls() *tlsconf.Material { return c.cur.Load().tls }

// tlsLoadError is a failure to build the TLS material at CONFIG SET: Redis
// answers it with "Unable to update TLS configuration" and keeps the old.
type tlsLoadError struct{ err error }

func (e *tlsLoadError) Error() string { return "load TLS material: " + e.err.Error() }
func (e *tlsLoadError) Unwrap() error { return e.err }

// configChanges are the writers of the configuration in force (CONFIG SET,
// REPLICAOF) and of the config file (CONFIG REWRITE): it orders them,
// prepares what a change needs of the listeners and dir's lock, publishes
// it and puts its effects in force. Made by New with what a change
// touches; any client's goroutine calls change and rewrite.
type configChanges struct {
	// What a change reads, prepares and swaps, and apply, which puts each
	// part's effects of a published change in force (Server.applyConfig).
	// Read-only.
	conf      *liveConfig
	listeners *listenerSet
	dir       *dataDir
	log       hclog.Logger
	apply     func(prev, next *config.Config)

	// writeMu guards the publication of conf, the fields below and dir's
	// lock and release (dataDir). It is taken by no reader and held for no
	// I/O, no logging and no wait: under it a change compares and swaps
	// pointers and counts. The listener set's lock (a leaf) is the only
	// lock taken under it.
	writeMu sync.Mutex
	running int  // changes started and not finished
	waiting int  // changes waiting to run alone; none other starts meanwhile
	alone   bool // a change runs alone: none other starts until it finishes
	// ended is closed (and cleared) when a change finishes or gives up, to
	// wake the changes waiting to start; nil while none waits.
	ended chan struct{}
	// applied is closed once the change published last has finished: the
	// next one applies its effects after it. nil before the first change.
	applied chan struct{}

	// rewriteMu makes CONFIG REWRITEs one at a time: it guards the config
	// file, and is held across its I/O (no other lock is taken under it).
	rewriteMu sync.Mutex

	// ioHook, when set (by a test, before the server is shared), is
	// called at each point where a change does I/O, with what it does
	// ("listen", "read tls", ...); nil in production.
	ioHook func(what string)
}

func newConfigChanges(conf *liveConfig, listeners *listenerSet, dir *dataDir, log hclog.Logger,
	apply func(prev, next *config.Config)) *configChanges {
	return &configChanges{conf: conf, listeners: listeners, dir: dir, log: log, apply: apply}
}

// io tells the test hook, if any, that a change is about to do I/O.
func (c *configChanges) io(what string) {
	if h := c.ioHook; h != nil {
		h(what)
	}
}

// start begins a change and returns the settings it starts from. A change
// that runs alone waits until no other runs, and none other starts until
// it ends; the waits hold no lock.
func (c *configChanges) start(alone bool) *settings {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if alone {
		c.waiting++
	}
	for c.alone || alone && c.running > 0 || !alone && c.waiting > 0 {
		if c.ended == nil {
			c.ended = make(chan struct{})
		}
		ended := c.ended
		c.writeMu.Unlock()
		<-ended
		c.writeMu.Lock()
	}
	if alone {
		c.waiting--
		c.alone = true
	}
	c.running++
	return c.conf.cur.Load()
}

// endLocked ends a change begun by start(alone). REQUIRES: writeMu held.
func (c *configChanges) endLocked(alone bool) {
	c.running--
	if alone {
		c.alone = false
	}
	if c.ended != nil {
		close(c.ended)
		c.ended = nil
	}
}

// end is endLocked for a change that holds no lock.
func (c *configChanges) end(alone bool) {
	c.writeMu.Lock()
	c.endLocked(alone)
	c.writeMu.Unlock()
}

// change lets edit change a copy of the configuration in force (prev is
// the current one, not to be changed); when edit returns nil and the copy
// is valid, what it needs is prepared (listeners, dir's lock, TLS
// material) and it is published and put into effect. The error is edit's,
// the validation's or the preparation's (Redis's reply text,
// or a *tlsLoadError), and then nothing changed. edit runs with no lock
// held, and again from the newer configuration when another change was
// published meanwhile: it must only edit next and check.
func (c *configChanges) change(edit func(prev, next *config.Config) error) error {
	return c.changeTLS(false, edit)
}

// changeTLS is change that also reads the TLS material again
// when reloadTLS is set (CONFIG SET named a tls-* directive) and TLS is in
// use, as it does anyway when a tls-* value changed. A failure to load it
// is a *tlsLoadError, and nothing changes: the material in force stays.
// The material is published with the configuration that named it.
func (c *configChanges) changeTLS(reloadTLS bool, edit func(prev, next *config.Config) error) error {
	alone := false
	for {
		cur := c.start(alone)
		prev := cur.cfg
		next := prev.Clone()
		err := edit(prev, next)
		if err == nil {
			err = next.Validate()
		}
		var p *prepared
		conflict := false
		if err == nil {
			p, conflict, err = c.prepare(cur, next, reloadTLS, alone)
		}

		c.writeMu.Lock()
		if stale := c.conf.cur.Load() != cur; stale || conflict && !alone {
			// Made from an older configuration, or what it could not have
			// may be a sibling's: again, from the configuration in force,
			// alone after a conflict. (Alone, no other change publishes:
			// it is never stale, and never undone.)
			c.endLocked(alone)
			c.writeMu.Unlock()
			c.undo(p)
			alone = alone || conflict
			continue
		}
		if err != nil {
			c.endLocked(alone)
			c.writeMu.Unlock()
			return err
		}
		c.conf.cur.Store(newSettings(next, p.tls))
		fin := c.publishLocked(p)
		after := c.applied
		fin.applied = make(chan struct{})
		c.applied = fin.applied
		c.writeMu.Unlock()

		if after != nil {
			<-after // the changes published before this one have finished
		}
		c.finish(prev, next, fin)
		close(fin.applied)
		c.end(alone)
		return nil
	}
}

// prepared is what a change took for its configuration before publishing
// it: nothing in it is in use until publishLocked puts it in place.
type prepared struct {
	tls *tlsconf.Material // the material next names; nil without TLS
	dir *dirMove          // dir's new lock; nil when dir's lock stays
	lns *listenerChange   // the listeners of a new port, tls-port or bind; nil when they stay
}

// prepare does the I/O of a change from cur to next, with no lock held:
// reads the TLS files (when needed), takes a new dir's lock, opens new
// listeners (settling port 0 in next), in that order, so that nothing
// after a socket can fail and leave it open. On error nothing it took is
// kept, and conflict says the failure may be a sibling change's doing (a
// socket or dir lock it holds).
func (c *configChanges) prepare(cur *settings, next *config.Config, reloadTLS, alone bool) (p *prepared, conflict bool, err error) {
	prev := cur.cfg
	p = &prepared{tls: cur.tls}
	if !next.UsesTLS() {
		p.tls = nil
	} else if tlsconf.ReloadNeeded(prev, next, reloadTLS) {
		c.io("read tls")
		st, err := tlsconf.Load(next)
		if err != nil {
			return nil, false, &tlsLoadError{err}
		}
		p.tls = st
	}
	if p.dir, conflict, err = c.dir.prepare(prev, next, c.io); err != nil {
		return nil, conflict, err
	}
	if p.lns, conflict, err = c.listeners.prepare(prev, next, alone, c.io); err != nil {
		c.undo(&prepared{dir: p.dir})
		return nil, conflict, err
	}
	return p, false, nil
}

// undo closes what p took; p was never published. nil does nothing.
func (c *configChanges) undo(p *prepared) {
	if p == nil {
		return
	}
	if p.lns != nil && len(p.lns.opened) > 0 {
		c.io("close listeners")
		listen.CloseAll(p.lns.opened)
	}
	if p.dir != nil && p.dir.lock != nil {
		c.io("unlock dir")
		p.dir.lock.Close()
	}
}

// finishing is what a published change leaves to its finish.
type finishing struct {
	replaced  bool               // the new listeners were put in place (the set was not closed)
	displaced []listen.Listener  // the listeners they replaced, or their own when not put in place
	dir       *dirMove           // dir's new lock, when dir moved
	oldLock   *streamlog.DirLock // the lock dir's move displaced, or dir's new one after releaseDir
	applied   chan struct{}      // closed once the finish is done
}

// publishLocked puts p's listeners and dir lock in place of those in use,
// by pointer swaps, and returns what they displaced. REQUIRES: writeMu
// held, the configuration naming them just published.
func (c *configChanges) publishLocked(p *prepared) *finishing {
	fin := &finishing{dir: p.dir}
	if p.lns != nil {
		fin.displaced, fin.replaced = c.listeners.swap(p.lns.lns)
	}
	if p.dir != nil {
		fin.oldLock = c.dir.swapLocked(p.dir.lock)
	}
	return fin
}

// finish puts a published change's effects into force and closes what it
// displaced, with no lock held, after the changes published before it have
// finished.
func (c *configChanges) finish(prev, next *config.Config, fin *finishing) {
	c.apply(prev, next)
	if len(fin.displaced) > 0 {
		c.io("close listeners")
		listen.CloseAll(fin.displaced) // ends their accept loops
	}
	if fin.oldLock != nil {
		c.io("unlock dir")
		fin.oldLock.Close()
	}
	if fin.dir != nil && fin.dir.err != nil {
		c.io("log")
		c.log.Warn("dir not locked", "dir", next.Dir, "error", fin.dir.err)
	}
	if fin.replaced {
		c.io("log")
		c.log.Info("listeners replaced", "bind", strings.Join(next.Bind, " "), "port", next.Port, "tls-port", next.TLSPort)
	}
}

// releaseDir releases dir's lock, once everything that writes in dir has
// stopped (Run's end, or Close on a server that never ran); no change puts
// one in place after it. The flock is released with no lock held.
func (c *configChanges) releaseDir() {
	c.writeMu.Lock()
	l := c.dir.releaseLocked()
	c.writeMu.Unlock()
	if l != nil {
		c.io("unlock dir")
		l.Close()
	}
}

// rewrite writes cfg over the config file at path (config.Config's
// RewriteFile), one rewrite at a time.
func (c *configChanges) rewrite(path string, cfg *config.Config) error {
	c.rewriteMu.Lock()
	defer c.rewriteMu.Unlock()
	return cfg.RewriteFile(path)
}

// HCLogLevel maps a Redis log level to hclog's.
func HCLogLevel(l config.LogLevel) hclog.Level {
	switch l {
	case config.LogDebug:
		return hclog.Trace
	case config.LogVerbose:
		return hclog.Debug
	case config.LogWarning:
		return hclog.Warn
	case config.LogNothing:
		return hclog.Off
	}
	return hclog.Info
}
