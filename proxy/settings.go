package proxy

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/config"
)

// The configuration in force is published copy-on-write: readers load one
// pointer and never take a lock; a writer (CONFIG SET, REPLICAOF) clones the
// published value, changes the clone and publishes it. A published value is
// never changed again, so a reader may keep it as long as it likes.

// settings is one published configuration, with the part of it every client
// consults on its hot path already derived, so that both come from the same
// change.
type settings struct {
	cfg    *config.Config // read-only once published
	client clientConf
	tls    *tlsState // the TLS material cfg names (tls.go); nil without TLS
}

// liveConfig holds the published settings.
type liveConfig struct {
	cur atomic.Pointer[settings] // replaced, never changed

	// writeMu serialises writers from the clone to the end of the change's
	// effects, so two writers never lose each other's change and the
	// effects (backlog size, GOMEMLIMIT, log level) are applied in the
	// order the values were published. It is taken by no reader, and no
	// other proxy lock is taken under it: the backlog size, which lives in
	// the stream, is applied after it is released (changeConfig).
	writeMu sync.Mutex

	// ioHook, when set (by a test, before the server is shared), is
	// called at each point where a change does I/O, with what it does
	// ("listen", "read tls", ...); nil in production.
	ioHook func(what string)
}

// io tells the test hook, if any, that a change is about to do I/O.
func (s *Server) io(what string) {
	if h := s.conf.ioHook; h != nil {
		h(what)
	}
}

func newSettings(cfg *config.Config, tls *tlsState) *settings {
	return &settings{cfg: cfg, client: *newClientConf(cfg), tls: tls}
}

// config returns the configuration in force. It is shared: never change it.
func (s *Server) config() *config.Config { return s.conf.cur.Load().cfg }

// clientConf returns what clients consult of the configuration in force.
func (s *Server) clientConf() *clientConf { return &s.conf.cur.Load().client }

// changeConfig lets change edit a copy of the configuration in force (prev
// is the current one, not to be changed); when change returns nil and the
// copy is valid, it is published and put into effect. The error is change's,
// or the validation's. change may return a done func, for what it prepared
// and must now put in place or undo (the listeners of a new port or bind):
// done(true) runs after the publication, done(false) when the copy was
// not valid or its TLS material could not be loaded, both under writeMu,
// so that they come in publication order.
func (s *Server) changeConfig(change func(prev, next *config.Config) (done func(published bool), err error)) error {
	return s.changeConfigTLS(false, change)
}

// changeConfigTLS is changeConfig that also reads the TLS material again
// when reloadTLS is set (CONFIG SET named a tls-* directive) and TLS is in
// use, as it does anyway when a tls-* value changed. A failure to load it
// is a *tlsLoadError, and nothing changes: the material in force stays.
// The files are read under writeMu, so that the material is published with
// the configuration that named it; only writers wait for it.
func (s *Server) changeConfigTLS(reloadTLS bool, change func(prev, next *config.Config) (done func(published bool), err error)) error {
	s.conf.writeMu.Lock()
	cur := s.conf.cur.Load()
	prev := cur.cfg
	next := prev.Clone()
	done, err := change(prev, next)
	if err != nil {
		s.conf.writeMu.Unlock()
		return err
	}
	if err := next.Validate(); err != nil {
		if done != nil {
			done(false)
		}
		s.conf.writeMu.Unlock()
		return err
	}
	tlsst := cur.tls
	if !next.UsesTLS() {
		tlsst = nil
	} else if tlsReloadNeeded(prev, next, reloadTLS) {
		s.io("read tls")
		st, err := loadTLS(next)
		if err != nil {
			if done != nil {
				done(false)
			}
			s.conf.writeMu.Unlock()
			return &tlsLoadError{err}
		}
		tlsst = st
	}
	s.conf.cur.Store(newSettings(next, tlsst))
	s.applyConfig(prev, next)
	if done != nil {
		done(true)
	}
	s.conf.writeMu.Unlock()
	if next.ReplBacklogSize != prev.ReplBacklogSize {
		// Under the history's lock, the only proxy lock held while calling
		// into replbuf. It applies the size published last, not next's: of
		// two writers racing here, the later one then sets the newer value.
		s.hist.SetBacklogSize(func() int64 { return s.config().ReplBacklogSize })
	}
	return nil
}

// applyConfig puts the effects of a newly published configuration into
// force, but for the backlog size (changeConfig). REQUIRES: s.conf.writeMu
// held.
func (s *Server) applyConfig(prev, next *config.Config) {
	if next.MaxMemory != prev.MaxMemory && s.onMaxMemory != nil {
		s.io("memory limit") // cmd/replproxy's logs
		s.onMaxMemory(next.MaxMemory)
	}
	if next.LogLevel != prev.LogLevel {
		s.log.SetLevel(HCLogLevel(next.LogLevel))
	}
	if next.MasterHost != prev.MasterHost || next.MasterPort != prev.MasterPort ||
		next.MasterAuth != prev.MasterAuth || next.MasterUser != prev.MasterUser ||
		next.TLSReplication != prev.TLSReplication {
		s.up.Retarget()
	}
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
