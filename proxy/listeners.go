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

// listenerSet is the server's client listeners. New opens them; CONFIG SET
// port or bind replaces them while the server runs, opening the new ones
// before closing the old ones, as redis-server's changeListenPort does (a
// listener whose address and port stay is kept as it is); Run's end, a
// drain or Close closes them for good. Connections accepted from a replaced
// listener stay open.
type listenerSet struct {
	sync.Mutex // a leaf but for serve's accept loops, which take no proxy lock
	list       []boundListener
	closed     bool               // closed for good: nothing is served any more
	addr       net.Addr           // the first listener's; kept while list is empty during a change
	serve      func(net.Listener) // Run's: starts an accept loop; nil before Run
}

// boundListener is a listener and the bind address it was opened for
// (without Redis's optional "-").
type boundListener struct {
	addr string
	ln   net.Listener
}

// openListeners opens a listener per bind address on port, but takes the
// one in keep for an address found there. An address with a leading "-"
// may fail to bind without failing the whole, as in Redis. Port 0 picks a
// free port, which every further address then uses; the port listened on
// is returned. On error nothing it opened stays open.
func openListeners(bind []string, port int, keep map[string]net.Listener, log hclog.Logger) ([]boundListener, int, error) {
	var lns []boundListener
	fail := func(err error) ([]boundListener, int, error) {
		for _, b := range lns {
			if keep[b.addr] != b.ln {
				b.ln.Close()
			}
		}
		return nil, 0, err
	}
	for _, addr := range bind {
		optional := strings.HasPrefix(addr, "-")
		addr = strings.TrimPrefix(addr, "-")
		if ln := keep[addr]; ln != nil {
			lns = append(lns, boundListener{addr, ln})
			continue
		}
		network, host := "tcp", addr
		switch addr {
		case "*":
			network, host = "tcp4", ""
		case "::*":
			network, host = "tcp6", "::"
		}
		ln, err := net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			if optional {
				log.Warn("optional bind address failed", "address", addr, "error", err)
				continue
			}
			return fail(fmt.Errorf("listen on %s port %d: %w", addr, port, err))
		}
		if port == 0 {
			port = ln.Addr().(*net.TCPAddr).Port
		}
		lns = append(lns, boundListener{addr, ln})
	}
	if len(lns) == 0 {
		return fail(errors.New("no bind address could be listened on"))
	}
	return lns, port, nil
}

// closeUnkept closes the listeners of lns that are not in keep.
func closeUnkept(lns []boundListener, keep []boundListener) {
	for _, b := range lns {
		if !slices.ContainsFunc(keep, func(k boundListener) bool { return k.ln == b.ln }) {
			b.ln.Close()
		}
	}
}

// serveListeners records Run's serve and calls it for every listener; it
// is called for each listener put in later. Nothing is served once the set
// is closed.
func (s *Server) serveListeners(serve func(net.Listener)) {
	s.ln.Lock()
	defer s.ln.Unlock()
	if s.ln.closed {
		return
	}
	s.ln.serve = serve
	for _, b := range s.ln.list {
		serve(b.ln)
	}
}

// current returns the listeners in use by address.
func (s *Server) currentListeners() map[string]net.Listener {
	s.ln.Lock()
	defer s.ln.Unlock()
	m := make(map[string]net.Listener, len(s.ln.list))
	for _, b := range s.ln.list {
		m[b.addr] = b.ln
	}
	return m
}

// replaceListeners puts lns in place of the listeners in use, serves the
// new ones, and closes the old ones lns does not keep. It reports false,
// closing the new ones, when the set is closed already (the server is
// stopping).
func (s *Server) replaceListeners(lns []boundListener) bool {
	s.ln.Lock()
	old := s.ln.list
	if s.ln.closed {
		s.ln.Unlock()
		closeUnkept(lns, old)
		return false
	}
	s.ln.list = lns
	if len(lns) > 0 {
		s.ln.addr = lns[0].ln.Addr()
	}
	if s.ln.serve != nil {
		for _, b := range lns {
			if !slices.ContainsFunc(old, func(o boundListener) bool { return o.ln == b.ln }) {
				s.ln.serve(b.ln)
			}
		}
	}
	s.ln.Unlock()
	closeUnkept(old, lns) // ends their accept loops
	return true
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

// Addr returns the address of the first listener: where replicas connect.
// After CONFIG SET port or bind it is the new one's.
func (s *Server) Addr() net.Addr {
	s.ln.Lock()
	defer s.ln.Unlock()
	return s.ln.addr
}

// Port returns the TCP port the server listens on.
func (s *Server) Port() int { return s.Addr().(*net.TCPAddr).Port }

// changeListeners is CONFIG SET's part for port and bind: when next
// changes either, it opens next's listeners, keeping those whose address
// and port stay, and settles port 0 in next; it returns what puts them in
// place once next is published, or closes them when it is not. When a new
// address overlaps one in use on the same port (127.0.0.1 then *), it
// first closes the old listeners and, if the new ones still fail, opens
// the old ones again, as redis-server's changeBindAddr does. The error is
// redis-server's reply text. REQUIRES: s.conf.writeMu held (changeConfig's
// change), so that no other change of the listeners runs meanwhile.
func (s *Server) changeListeners(prev, next *config.Config) (func(published bool), error) {
	if next.Port == prev.Port && slices.Equal(next.Bind, prev.Bind) {
		return nil, nil
	}
	var keep map[string]net.Listener
	if next.Port == prev.Port {
		keep = s.currentListeners()
	}
	lns, port, err := openListeners(next.Bind, next.Port, keep, s.log)
	if err != nil && next.Port == prev.Port && errors.Is(err, syscall.EADDRINUSE) {
		// Perhaps in use by our own listeners: close them, try again, and
		// put the old ones back if that fails too.
		s.replaceListeners(nil)
		lns, port, err = openListeners(next.Bind, next.Port, nil, s.log)
		if err != nil {
			back, _, rerr := openListeners(prev.Bind, prev.Port, nil, s.log)
			if rerr != nil {
				s.log.Error("cannot listen on the old addresses again: no new client can connect", "error", rerr)
			} else {
				s.replaceListeners(back)
			}
		}
	}
	if err != nil {
		s.log.Warn("CONFIG SET: cannot listen on the new addresses", "bind", strings.Join(next.Bind, " "), "port", next.Port, "error", err)
		if next.Port != prev.Port {
			return nil, errors.New("ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port")
		}
		return nil, errors.New("ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.")
	}
	next.Port = port
	return func(published bool) {
		if !published {
			closeUnkept(lns, s.listenersInUse())
			return
		}
		if s.replaceListeners(lns) {
			s.log.Info("listeners replaced", "bind", strings.Join(next.Bind, " "), "port", port)
		}
	}, nil
}

// listenersInUse returns the listeners in use.
func (s *Server) listenersInUse() []boundListener {
	s.ln.Lock()
	defer s.ln.Unlock()
	return slices.Clone(s.ln.list)
}
