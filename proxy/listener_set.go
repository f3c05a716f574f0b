package proxy

import (
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/listen"
)

// listenerSet is the server's client listeners: port's (plain) and
// tls-port's, one of each kind per bind address. New opens them; CONFIG SET
// port, tls-port or bind replaces them while the server runs, opening the
// new ones before closing the old ones, as redis-server's changeListenPort
// does (a listener whose address and port stay is kept as it is). A change
// of port replaces the plain listeners only, of tls-port the TLS ones only;
// a change of bind replaces both kinds, as redis-server's changeBindAddr
// rebinds port and tls-port. Run's end, a drain or Close closes them for
// good. Connections accepted from a replaced listener stay open.
type listenerSet struct {
	sync.Mutex // a leaf but for serve's accept loops, which take no proxy lock
	list       []listen.Listener
	closed     bool                              // closed for good: nothing is served any more
	addr       net.Addr                          // Addr's; kept while list has no listener for it during a change
	tlsAddr    net.Addr                          // TLSAddr's; nil without tls-port, kept like addr
	serve      func(ln net.Listener, isTLS bool) // Run's: starts an accept loop; nil before Run
}

// setList puts lns in the set and settles the addresses Addr and TLSAddr
// report: the first plain listener's, or the first TLS one's when there is
// no plain one (TLS only); an address with no listener now stays as it
// was. REQUIRES: the set's lock held, or the set not yet shared (New).
func (ls *listenerSet) setList(lns []listen.Listener) {
	ls.list = lns
	var plain, secure net.Addr
	for _, b := range lns {
		switch {
		case !b.TLS && plain == nil:
			plain = b.Ln.Addr()
		case b.TLS && secure == nil:
			secure = b.Ln.Addr()
		}
	}
	if secure != nil {
		ls.tlsAddr = secure
	}
	if plain == nil {
		plain = secure
	}
	if plain != nil {
		ls.addr = plain
	}
}

// serveListeners records Run's serve and calls it for every listener; it
// is called for each listener put in later. Nothing is served once the set
// is closed.
func (s *Server) serveListeners(serve func(ln net.Listener, isTLS bool)) {
	s.ln.Lock()
	defer s.ln.Unlock()
	if s.ln.closed {
		return
	}
	s.ln.serve = serve
	for _, b := range s.ln.list {
		serve(b.Ln, b.TLS)
	}
}

// swapListeners puts lns in place of the listeners in use and serves the
// new ones; it returns the old ones lns does not keep, for the caller to
// close (which ends their accept loops), and true. When the set is closed
// already (the server is stopping) it puts nothing in place and returns
// the new ones of lns, and false. It takes the set's lock alone: a
// change's publication calls it under writeMu.
func (s *Server) swapListeners(lns []listen.Listener) (displaced []listen.Listener, ok bool) {
	s.ln.Lock()
	defer s.ln.Unlock()
	old := s.ln.list
	if s.ln.closed {
		return listen.Without(lns, old), false
	}
	s.ln.setList(lns)
	if s.ln.serve != nil {
		for _, b := range listen.Without(lns, old) {
			s.ln.serve(b.Ln, b.TLS)
		}
	}
	return listen.Without(old, lns), true
}

// replaceListeners is swapListeners that closes what it displaced.
func (s *Server) replaceListeners(lns []listen.Listener) bool {
	displaced, ok := s.swapListeners(lns)
	listen.CloseAll(displaced)
	return ok
}

// closeListeners closes the listeners for good; later calls do nothing.
func (s *Server) closeListeners() {
	s.ln.Lock()
	lns := s.ln.list
	if s.ln.closed {
		lns = nil
	}
	s.ln.closed, s.ln.serve = true, nil
	s.ln.Unlock()
	listen.CloseUnkept(lns, nil)
}

// Addr returns the address of the first plain listener, or of the first
// TLS one when there is no plain listener (port 0 with a tls-port): where
// replicas connect. After CONFIG SET port or bind it is the new one's.
func (s *Server) Addr() net.Addr {
	s.ln.Lock()
	defer s.ln.Unlock()
	return s.ln.addr
}

// Port returns the TCP port of [Server.Addr].
func (s *Server) Port() int { return s.Addr().(*net.TCPAddr).Port }

// TLSAddr returns the address of the first TLS listener, nil when tls-port
// is 0. After CONFIG SET bind it is the new one's.
func (s *Server) TLSAddr() net.Addr {
	s.ln.Lock()
	defer s.ln.Unlock()
	return s.ln.tlsAddr
}

// plainPort returns the port of the plain listeners, 0 when TLS only: the
// configuration's, which New and CONFIG SET settle when port 0 picks one,
// as INFO's tcp_port is Redis's server.port.
func (s *Server) plainPort() int { return s.config().Port }

// listenerChange is the listeners a change of port, tls-port or bind
// prepared for its configuration: not in use until published.
type listenerChange struct {
	lns    []listen.Listener // the whole set to put in place
	opened []listen.Listener // those of lns the change opened, closed if it is not published
}

// prepareListeners is a change's part for port, tls-port and bind: when
// next changes any, it opens next's listeners (a new port: the plain ones;
// a new tls-port: the TLS ones; a new bind: both kinds, as redis-server's
// changeBindAddr rebinds port and tls-port), keeping those in use whose
// address, kind and port stay, and settles port 0 in next. The error is
// redis-server's reply text; conflict says the listen may have failed on a
// socket of ours (a sibling change's, one the change before has not closed
// yet, or one in use that the new bind overlaps), and the change is to run
// again alone. Alone, when a new address overlaps one in use on the same
// port (127.0.0.1 then *), it closes the listeners in use first and, if
// the new ones still fail, opens the old ones again, as redis-server's
// changeBindAddr does; the configuration in force is prev's throughout,
// as no other change runs, and the change is then never undone.
// REQUIRES: no lock held; a change started (liveConfig.start), alone when
// alone is set.
func (s *Server) prepareListeners(prev, next *config.Config, alone bool) (lc *listenerChange, conflict bool, err error) {
	bindChanged := !slices.Equal(next.Bind, prev.Bind)
	portChanged, tlsPortChanged := next.Port != prev.Port, next.TLSPort != prev.TLSPort
	if !portChanged && !tlsPortChanged && !bindChanged {
		return nil, false, nil
	}
	keep := s.listenersInUse()
	keep = slices.DeleteFunc(keep, func(b listen.Listener) bool {
		return b.TLS && tlsPortChanged || !b.TLS && portChanged
	})
	s.io("listen")
	lns, port, err := listen.Open(next.Bind, next.Port, next.TLSPort, keep, s.log)
	if err != nil && !alone {
		return nil, true, listenReply(portChanged, tlsPortChanged)
	}
	if err != nil && bindChanged && errors.Is(err, syscall.EADDRINUSE) {
		// Perhaps in use by our own listeners: close them, try again, and
		// put the old ones back if that fails too.
		s.io("close listeners")
		s.replaceListeners(nil)
		keep = nil
		s.io("listen")
		lns, port, err = listen.Open(next.Bind, next.Port, next.TLSPort, nil, s.log)
		if err != nil {
			s.io("listen")
			back, _, rerr := listen.Open(prev.Bind, prev.Port, prev.TLSPort, nil, s.log)
			if rerr != nil {
				s.io("log")
				s.log.Error("cannot listen on the old addresses again: no new client can connect", "error", rerr)
			} else {
				s.replaceListeners(back)
			}
		}
	}
	if err != nil {
		s.io("log")
		s.log.Warn("CONFIG SET: cannot listen on the new addresses", "bind", strings.Join(next.Bind, " "), "port", next.Port, "tls-port", next.TLSPort, "error", err)
		return nil, false, listenReply(portChanged, tlsPortChanged)
	}
	next.Port = port
	return &listenerChange{lns: lns, opened: listen.Without(lns, keep)}, false, nil
}

// listenReply is redis-server's reply to a CONFIG SET whose listeners could
// not be opened.
func listenReply(portChanged, tlsPortChanged bool) error {
	if portChanged {
		return errors.New("ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port")
	}
	if tlsPortChanged {
		return errors.New("ERR CONFIG SET failed (possibly related to argument 'tls-port') - Unable to listen on this port")
	}
	return errors.New("ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.")
}

// listenersInUse returns the listeners in use.
func (s *Server) listenersInUse() []listen.Listener {
	s.ln.Lock()
	defer s.ln.Unlock()
	return slices.Clone(s.ln.list)
}
