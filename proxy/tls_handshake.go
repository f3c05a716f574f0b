package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/wire"
)

// TLS (tls-port, tls-replication): the material is loaded from the files
// the configuration names into a tlsconf.Material, published with that
// configuration (settings.tls) and never changed after. The listener's
// tls.Config only holds GetConfigForClient, which reads the state in force
// at each handshake, and the upstream link takes the client config in force
// at each dial: a CONFIG SET that reloads the files changes what new
// connections get and leaves the open ones as they are.

// tlsHandshakeTimeout bounds a downstream TLS handshake (repl-timeout when
// shorter), so that a client that connects and says nothing holds its
// goroutine and descriptor for that long at most.
const tlsHandshakeTimeout = 10 * time.Second

// listenerTLS is the tls.Config of tls-port's listener: every handshake
// takes the server config in force then.
func listenerTLS(conf *liveConfig) *tls.Config {
	return &tls.Config{
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			st := conf.tls()
			if st == nil || st.Server == nil {
				return nil, errors.New("no TLS configuration")
			}
			return st.Server, nil
		},
	}
}

// handshakeTLS runs the server side of a TLS handshake on an accepted
// connection (read by raw reads, and on a downstream.RecordConn so that a
// replica's records can be written inline), whose client slot the registry has reserved, within the
// handshake timeout. On failure it closes the connection, gives its slot
// back, and counts and logs (rate-limited) the failure.
func (s *Server) handshakeTLS(ctx context.Context, conn net.Conn) (net.Conn, bool) {
	tc := tls.Server(downstream.NewRecordConn(wire.RawReadConn(conn)), s.listeners.tls)
	timeout := min(tlsHandshakeTimeout, s.config().ReplTimeout)
	tc.SetDeadline(time.Now().Add(timeout))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		tc.Close()
		s.clients.unreserve() // before the count, which a reader may wait on
		s.stats.TLSHandshakeFailures.Add(1)
		if ok, n := s.protect.tlsLog.allow(time.Now(), logEvery); ok {
			s.log.Named("downstream").Warn("TLS handshake failed", "address", conn.RemoteAddr().String(), "error", err, "suppressed", n)
		}
		return nil, false
	}
	tc.SetDeadline(time.Time{})
	return tc, true
}
