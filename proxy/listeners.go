package proxy

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/config"
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
	list       []boundListener
	closed     bool                              // closed for good: nothing is served any more
	addr       net.Addr                          // Addr's; kept while list has no listener for it during a change
	tlsAddr    net.Addr                          // TLSAddr's; nil without tls-port, kept like addr
	serve      func(ln net.Listener, isTLS bool) // Run's: starts an accept loop; nil before Run
}

// boundListener is a listener and the bind address it was opened for
// (without Redis's optional "-").
type boundListener struct {
	addr string
	tls  bool // on tls-port
	ln   net.Listener
}

// setList puts lns in the set and settles the addresses Addr and TLSAddr
// report: the first plain listener's, or the first TLS one's when there is
// no plain one (TLS only); an address with no listener now stays as it
// was. REQUIRES: the set's lock held, or the set not yet shared (New).
func (ls *listenerSet) setList(lns []boundListener) {
	ls.list = lns
	var plain, secure net.Addr
	for _, b := range lns {
		switch {
		case !b.tls && plain == nil:
			plain = b.ln.Addr()
		case b.tls && secure == nil:
			secure = b.ln.Addr()
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

// openAll opens cfg's listeners: a plain one per bind address on port,
// unless port is 0 with a tls-port (TLS only, as in Redis), and a TLS one
// per bind address on tls-port when it is set. A listener in keep with the
// same address and kind is taken instead of a new one. It returns the
// listeners and the plain port (port 0 without TLS picks a free one; TLS
// only leaves 0). On error nothing it opened stays open.
func openAll(cfg *config.Config, keep []boundListener, log hclog.Logger) ([]boundListener, int, error) {
	var lns []boundListener
	port := cfg.Port
	if cfg.Port != 0 || cfg.TLSPort == 0 {
		var err error
		if lns, port, err = openListeners(cfg.Bind, cfg.Port, false, keep, log); err != nil {
			return nil, 0, err
		}
	}
	if cfg.TLSPort != 0 {
		tlsLns, _, err := openListeners(cfg.Bind, cfg.TLSPort, true, keep, log)
		if err != nil {
			closeUnkept(lns, keep)
			return nil, 0, err
		}
		lns = append(lns, tlsLns...)
	}
	return lns, port, nil
}

// openListeners opens a listener per bind address on port, of the kind
// isTLS says, but takes the one of that kind in keep for an address found
// there. An address with a leading "-" may fail to bind without failing
// the whole, as in Redis. Port 0 picks a free port, which every further
// address then uses; the port listened on is returned. On error nothing it
// opened stays open.
func openListeners(bind []string, port int, isTLS bool, keep []boundListener, log hclog.Logger) ([]boundListener, int, error) {
	var lns []boundListener
	fail := func(err error) ([]boundListener, int, error) {
		closeUnkept(lns, keep)
		return nil, 0, err
	}
	for _, addr := range bind {
		optional := strings.HasPrefix(addr, "-")
		addr = strings.TrimPrefix(addr, "-")
		if i := slices.IndexFunc(keep, func(k boundListener) bool { return k.addr == addr && k.tls == isTLS }); i >= 0 {
			lns = append(lns, keep[i])
			continue
		}
		ln, err := listenTCP(addr, port)
		if err != nil {
			if optional {
				log.Warn("optional bind address failed", "address", addr, "port", port, "error", err)
				continue
			}
			return fail(fmt.Errorf("listen on %s port %d: %w", addr, port, err))
		}
		if port == 0 {
			port = ln.Addr().(*net.TCPAddr).Port
		}
		lns = append(lns, boundListener{addr, isTLS, ln})
	}
	if len(lns) == 0 {
		return fail(errors.New("no bind address could be listened on"))
	}
	return lns, port, nil
}

// closeUnkept closes the listeners of lns that are not in keep.
func closeUnkept(lns []boundListener, keep []boundListener) { closeAll(without(lns, keep)) }

// without returns the listeners of lns that are not in keep.
func without(lns []boundListener, keep []boundListener) []boundListener {
	var out []boundListener
	for _, b := range lns {
		if !slices.ContainsFunc(keep, func(k boundListener) bool { return k.ln == b.ln }) {
			out = append(out, b)
		}
	}
	return out
}

// closeAll closes lns.
func closeAll(lns []boundListener) {
	for _, b := range lns {
		b.ln.Close()
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
		serve(b.ln, b.tls)
	}
}

// swapListeners puts lns in place of the listeners in use and serves the
// new ones; it returns the old ones lns does not keep, for the caller to
// close (which ends their accept loops), and true. When the set is closed
// already (the server is stopping) it puts nothing in place and returns
// the new ones of lns, and false. It takes the set's lock alone: a
// change's publication calls it under writeMu.
func (s *Server) swapListeners(lns []boundListener) (displaced []boundListener, ok bool) {
	s.ln.Lock()
	defer s.ln.Unlock()
	old := s.ln.list
	if s.ln.closed {
		return without(lns, old), false
	}
	s.ln.setList(lns)
	if s.ln.serve != nil {
		for _, b := range without(lns, old) {
			s.ln.serve(b.ln, b.tls)
		}
	}
	return without(old, lns), true
}

// replaceListeners is swapListeners that closes what it displaced.
func (s *Server) replaceListeners(lns []boundListener) bool {
	displaced, ok := s.swapListeners(lns)
	closeAll(displaced)
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
	closeUnkept(lns, nil)
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
	lns    []boundListener // the whole set to put in place
	opened []boundListener // those of lns the change opened, closed if it is not published
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
	keep = slices.DeleteFunc(keep, func(b boundListener) bool {
		return b.tls && tlsPortChanged || !b.tls && portChanged
	})
	s.io("listen")
	lns, port, err := openAll(next, keep, s.log)
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
		lns, port, err = openAll(next, nil, s.log)
		if err != nil {
			s.io("listen")
			back, _, rerr := openAll(prev, nil, s.log)
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
	return &listenerChange{lns: lns, opened: without(lns, keep)}, false, nil
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
func (s *Server) listenersInUse() []boundListener {
	s.ln.Lock()
	defer s.ln.Unlock()
	return slices.Clone(s.ln.list)
}

// listenTCP listens on port at addr as redis.conf's bind names it
// (bindNetwork). The client listeners and the monitoring one (metrics-bind)
// share the rule. The error is net.Listen's.
func listenTCP(addr string, port int) (net.Listener, error) {
	network, host := bindNetwork(addr)
	return net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
}

// bindNetwork maps a bind address to net.Listen's network and host: "*" is
// every IPv4 address, "::*" every IPv6 one, anything else a host.
func bindNetwork(addr string) (network, host string) {
	switch addr {
	case "*":
		return "tcp4", ""
	case "::*":
		return "tcp6", "::"
	}
	return "tcp", addr
}
