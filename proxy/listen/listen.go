// Package listen opens the TCP listeners a configuration's bind, port and
// tls-port name, as redis-server does: one per bind address and kind, an
// optional address ("-") allowed to fail, port 0 settled on the first, and
// the listeners of a kind and address that stay kept as they are; and what
// an accepted connection is (its descriptor, whether it is local). What is
// listened on when, and replacing the set, is the server's.
package listen

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
)

// A Listener is a listener and the bind address it was opened for
// (without Redis's optional "-").
type Listener struct {
	Addr string
	TLS  bool // on tls-port
	Ln   net.Listener
}

// Open opens the listeners of a configuration: a plain one per bind
// address on port, unless port is 0 with a tls-port (TLS only, as in
// Redis), and a TLS one per bind address on tls-port when it is set. A listener in keep with the
// same address and kind is taken instead of a new one. It returns the
// listeners and the plain port (port 0 without TLS picks a free one; TLS
// only leaves 0). On error nothing it opened stays open.
func Open(bind []string, port, tlsPort int, keep []Listener, log hclog.Logger) ([]Listener, int, error) {
	var lns []Listener
	if port != 0 || tlsPort == 0 {
		var err error
		if lns, port, err = openListeners(bind, port, false, keep, log); err != nil {
			return nil, 0, err
		}
	}
	if tlsPort != 0 {
		tlsLns, _, err := openListeners(bind, tlsPort, true, keep, log)
		if err != nil {
			CloseUnkept(lns, keep)
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
func openListeners(bind []string, port int, isTLS bool, keep []Listener, log hclog.Logger) ([]Listener, int, error) {
	var lns []Listener
	fail := func(err error) ([]Listener, int, error) {
		CloseUnkept(lns, keep)
		return nil, 0, err
	}
	for _, addr := range bind {
		optional := strings.HasPrefix(addr, "-")
		addr = strings.TrimPrefix(addr, "-")
		if i := slices.IndexFunc(keep, func(k Listener) bool { return k.Addr == addr && k.TLS == isTLS }); i >= 0 {
			lns = append(lns, keep[i])
			continue
		}
		ln, err := TCP(addr, port)
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
		lns = append(lns, Listener{addr, isTLS, ln})
	}
	if len(lns) == 0 {
		return fail(errors.New("no bind address could be listened on"))
	}
	return lns, port, nil
}

// CloseUnkept closes the listeners of lns that are not in keep.
func CloseUnkept(lns []Listener, keep []Listener) { CloseAll(Without(lns, keep)) }

// Without returns the listeners of lns that are not in keep.
func Without(lns []Listener, keep []Listener) []Listener {
	var out []Listener
	for _, b := range lns {
		if !slices.ContainsFunc(keep, func(k Listener) bool { return k.Ln == b.Ln }) {
			out = append(out, b)
		}
	}
	return out
}

// CloseAll closes lns.
func CloseAll(lns []Listener) {
	for _, b := range lns {
		b.Ln.Close()
	}
}

// TCP listens on port at addr as redis.conf's bind names it
// (Network). The client listeners and the monitoring one (metrics-bind)
// share the rule. The error is net.Listen's.
func TCP(addr string, port int) (net.Listener, error) {
	network, host := Network(addr)
	return net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
}

// Network maps a bind address to net.Listen's network and host: "*" is
// every IPv4 address, "::*" every IPv6 one, anything else a host.
func Network(addr string) (network, host string) {
	switch addr {
	case "*":
		return "tcp4", ""
	case "::*":
		return "tcp6", "::"
	}
	return "tcp", addr
}

// FD returns the descriptor of conn's socket (under TLS, of the
// connection it runs on), or -1 for a connection without one (a pipe in
// tests). Read once at accept: the number stays the connection's until it
// is closed, and CLIENT LIST then no longer lists it.
func FD(conn net.Conn) int {
	if tc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn = tc.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	if raw.Control(func(f uintptr) { fd = int(f) }) != nil {
		return -1
	}
	return fd
}

// IsLoopback reports whether a peer connects from the loopback interface:
// 127.0.0.0/8, ::1 (also as an IPv4-mapped address), or a unix socket.
func IsLoopback(a net.Addr) bool {
	switch a := a.(type) {
	case *net.UnixAddr:
		return true
	case *net.TCPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ok && ip.Unmap().IsLoopback()
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap().IsLoopback()
	}
	return false
}
