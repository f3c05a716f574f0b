package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/wire"
)

// clientLimits bound what an admin client or replica may send: the proxy's
// commands are short, so bulks are capped far below Redis's 512 MiB.
var clientLimits = wire.Limits{MaxInlineLine: wire.RedisInlineMax, MaxArgs: 1024, MaxBulk: 1 << 20}

// flushThreshold is how much reply a pipelined batch may gather before it is
// written even though more commands are buffered.
const flushThreshold = 64 << 10

// A client is one connection to the proxy: an admin client or (later in its
// life) a replica. Its goroutine, serveClient, owns every field not marked
// otherwise.
type client struct {
	srv     *Server
	id      int64
	conn    net.Conn
	addr    string // remote address
	laddr   string // local address
	created time.Time
	log     hclog.Logger

	rd     *wire.CommandReader
	out    []byte
	authed bool

	hs   replicaHandshake // what REPLCONF said
	plan syncPlan         // how the replica is to be served

	asReplica atomic.Pointer[replica] // set by PSYNC/SYNC: the client is a replica from then on; any goroutine may read it
	outCap    atomic.Int64            // cap of out after the last flush, for memory accounting
	name      atomic.Pointer[string]  // CLIENT SETNAME; read by CLIENT LIST
	lastCmd   atomic.Pointer[string]  // for CLIENT LIST
	lastUse   atomic.Int64            // unix nanos of the last command
}

func newClient(s *Server, id int64, conn net.Conn) *client {
	c := &client{
		srv:     s,
		id:      id,
		conn:    conn,
		addr:    conn.RemoteAddr().String(),
		laddr:   conn.LocalAddr().String(),
		created: time.Now(),
	}
	c.log = s.log.Named("downstream").With("client-id", id, "address", c.addr)
	c.rd = wire.NewCommandReader(countingReader{conn, &s.stats.netInputBytes}, clientLimits)
	c.lastUse.Store(c.created.UnixNano())
	return c
}

// replicaSet reports whether the client became a replica. Any goroutine.
func (c *client) replicaSet() bool { return c.asReplica.Load() != nil }

// countingReader adds every byte read to a counter.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// serveClient reads and runs commands until the client leaves, breaks the
// protocol, or the server stops.
func (s *Server) serveClient(ctx context.Context, c *client) {
	defer s.unregister(c)
	defer c.conn.Close()
	s.mu.Lock()
	c.authed = s.mu.cfg.RequirePass == ""
	s.mu.Unlock()
	for ctx.Err() == nil {
		cmd, err := c.rd.ReadCommand()
		if err != nil {
			var pe *wire.ProtocolError
			if errors.As(err, &pe) {
				c.log.Info("protocol error from client", "error", err)
				c.out = wire.AppendError(c.out, "ERR "+pe.Msg)
				c.flush()
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.log.Debug("client read failed", "error", err)
			}
			return
		}
		if len(cmd.Args) == 0 {
			continue
		}
		s.stats.commandsProcessed.Add(1)
		c.lastUse.Store(time.Now().UnixNano())
		quit := s.dispatch(c, cmd.Args)
		if quit || c.replicaSet() || c.rd.Buffered() == 0 || len(c.out) >= flushThreshold {
			if err := c.flush(); err != nil {
				return
			}
		}
		if quit {
			return
		}
		if c.replicaSet() {
			s.runReplica(ctx, c)
			return
		}
	}
}

// flush writes the gathered replies.
func (c *client) flush() error {
	if len(c.out) == 0 {
		return nil
	}
	c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	n, err := c.conn.Write(c.out)
	c.srv.stats.netOutputBytes.Add(int64(n))
	if cap(c.out) > 1<<20 {
		c.out = nil // don't keep a huge reply buffer around
	} else {
		c.out = c.out[:0]
	}
	c.outCap.Store(int64(cap(c.out)))
	return err
}
