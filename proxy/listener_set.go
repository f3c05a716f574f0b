package proxy

import (
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/go-hclog"

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
	// tls is the tls.Config of every handshake on tls-port's listeners
	// (tls_handshake.go), which takes the material in force at each one;
	// log is where a change's listen failures go. Set by New, read-only.
	tls *tls.Config
	log hclog.Logger

	mu      sync.Mutex // a leaf but for serve's accept loops, which take no proxy lock
	list    []listen.Listener
	closed  bool                              // closed for good: nothing is served any more
	addr    net.Addr                          // Addr's; kept while list has no listener for it during a change
	tlsAddr net.Addr                          // TLSAddr's; nil without tls-port, kept like addr
	serve   func(ln net.Listener, isTLS bool) // Run's: starts an accept loop; nil before Run
}

// newListenerSet makes the set of the listeners New opened.
func newListenerSet(lns []listen.Listener, tlsConfig *tls.Config, log hclog.Logger) *listenerSet {
	ls := &listenerSet{tls: tlsConfig, log: log}
	ls.setList(lns)
	return ls
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

// serveAll records Run's serve and calls it for every listener; it
// is called for each listener put in later. Nothing is served once the set
// is closed.
func (ls *listenerSet) serveAll(serve func(ln net.Listener, isTLS bool)) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return
	}
	ls.serve = serve
	for _, b := range ls.list {
		serve(b.Ln, b.TLS)
	}
}

// swap puts lns in place of the listeners in use and serves the
// new ones; it returns the old ones lns does not keep, for the caller to
// close (which ends their accept loops), and true. When the set is closed
// already (the server is stopping) it puts nothing in place and returns
// the new ones of lns, and false. It takes the set's lock alone: a
// change's publication calls it under writeMu.
func (ls *listenerSet) swap(lns []listen.Listener) (displaced []listen.Listener, ok bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	old := ls.list
	if ls.closed {
		return listen.Without(lns, old), false
	}
	ls.setList(lns)
	if ls.serve != nil {
		for _, b := range listen.Without(lns, old) {
			ls.serve(b.Ln, b.TLS)
		}
	}
	return listen.Without(old, lns), true
}

// replace is swap that closes what it displaced.
func (ls *listenerSet) replace(lns []listen.Listener) bool {
	displaced, ok := ls.swap(lns)
	listen.CloseAll(displaced)
	return ok
}

// close closes the listeners for good; later calls do nothing.
func (ls *listenerSet) close() {
	ls.mu.Lock()
	lns := ls.list
	if ls.closed {
		lns = nil
	}
	ls.closed, ls.serve = true, nil
	ls.mu.Unlock()
	listen.CloseUnkept(lns, nil)
}

// plainAddr returns the address of the first plain listener, or of the
// first TLS one when there is no plain listener (port 0 with a tls-port):
// where replicas connect. After CONFIG SET port or bind it is the new
// one's.
func (ls *listenerSet) plainAddr() net.Addr {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.addr
}

// secureAddr returns the address of the first TLS listener, nil when
// tls-port is 0. After CONFIG SET bind it is the new one's.
func (ls *listenerSet) secureAddr() net.Addr {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.tlsAddr
}

// listenerChange is the listeners a change of port, tls-port or bind
// prepared for its configuration: not in use until published.
type listenerChange struct {
	lns    []listen.Listener // the whole set to put in place
	opened []listen.Listener // those of lns the change opened, closed if it is not published
}

// prepare is a change's part for port, tls-port and bind: when
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
// io tells the change's test hook of each piece of I/O (configChanges.io).
// REQUIRES: no lock held; a change started (configChanges.start), alone when
// alone is set.
func (ls *listenerSet) prepare(prev, next *config.Config, alone bool, io func(what string)) (lc *listenerChange, conflict bool, err error) {
	bindChanged := !slices.Equal(next.Bind, prev.Bind)
	portChanged, tlsPortChanged := next.Port != prev.Port, next.TLSPort != prev.TLSPort
	if !portChanged && !tlsPortChanged && !bindChanged {
		return nil, false, nil
	}
	keep := ls.inUse()
	keep = slices.DeleteFunc(keep, func(b listen.Listener) bool {
		return b.TLS && tlsPortChanged || !b.TLS && portChanged
	})
	io("listen")
	lns, port, err := listen.Open(next.Bind, next.Port, next.TLSPort, keep, ls.log)
	if err != nil && !alone {
		return nil, true, listenReply(portChanged, tlsPortChanged)
	}
	if err != nil && bindChanged && errors.Is(err, syscall.EADDRINUSE) {
		// Perhaps in use by our own listeners: close them, try again, and
		// put the old ones back if that fails too.
		io("close listeners")
		ls.replace(nil)
		keep = nil
		io("listen")
		lns, port, err = listen.Open(next.Bind, next.Port, next.TLSPort, nil, ls.log)
		if err != nil {
			io("listen")
			back, _, rerr := listen.Open(prev.Bind, prev.Port, prev.TLSPort, nil, ls.log)
			if rerr != nil {
				io("log")
				ls.log.Error("cannot listen on the old addresses again: no new client can connect", "error", rerr)
			} else {
				ls.replace(back)
			}
		}
	}
	if err != nil {
		io("log")
		ls.log.Warn("CONFIG SET: cannot listen on the new addresses", "bind", strings.Join(next.Bind, " "), "port", next.Port, "tls-port", next.TLSPort, "error", err)
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

// inUse returns the listeners in use.
func (ls *listenerSet) inUse() []listen.Listener {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return slices.Clone(ls.list)
}
