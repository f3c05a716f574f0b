package downstream

import (
	"context"
	"net"
	"time"

	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/replbuf"
)

// The write loop's link compression: for a downstream proxy whose handshake
// agreed to zstd (Handshake.Compression), everything after the PSYNC reply
// line goes through a linkzstd.Writer (compress), one chunk per write
// operation (flush); the stream's chunks go once the stream has no more,
// or wait for more as repl-link-compression-coalesce-usec says
// (flushStream), and a caught-up link's small ones are sent by the inline
// fan-out (inlineSender.sendChunk).

// compress makes everything written after the PSYNC reply line, just sent,
// go through a zstd encoder when the replica's handshake agreed to it
// (Handshake.Compression): from here to the connection's end, keepalives,
// the payload header, the payload, the EOF mark and the stream. Not for a
// SYNC replica, which has no reply line (no proxy sends SYNC).
func (w *writer) compress() {
	if w.r.hs.Compression != "zstd" || w.z != nil {
		return
	}
	// A downstream proxy's pacer sits under the encoder, so that a capped
	// payload is counted in bytes on the wire; off, it is the socket.
	var dst net.Conn = w.r.conn
	if w.pace != nil {
		dst = w.pace
	}
	w.z = linkzstd.NewWriter(dst)
	w.conn = &compressedConn{Conn: w.r.conn, z: w.z}
	w.r.zw.Store(w.z)
}

// flush ends the compressed chunk the last write operation filled and
// sends it, under that operation's write deadline; a plain link has
// nothing to flush. One chunk per operation keeps the latency what a
// plain link's is, and the ratio barely suffers: the encoder's window
// spans chunks. The stream loop's chunks are ended by flushStream.
func (w *writer) flush() error {
	if w.z == nil {
		return nil
	}
	return w.z.Flush()
}

// On a compressed link the stream loop ends a chunk when the stream has no
// more for it, as a plain link writes; a chunk is then as large as what
// arrived while the last one was written, up to MaxChunkRaw. An operator
// may let a chunk smaller than linkChunkMin wait for more
// (repl-link-compression-coalesce-usec): a live stream of small commands
// otherwise makes one chunk per publish (a few hundred bytes), and zstd
// then costs about four times its CPU per byte of 16 KiB chunks on both
// ends (the codec benchmark: 22.7 against 5.3 CPU-s per GB compressing
// cache-like data on this project's 2-core machine), and the ratio drops
// (3.2 against 4.5). Every byte of such a chunk then reaches the replicas
// behind the link up to that much later, which is why the default waits
// for nothing: a replica behind two proxies is no staler for the link's
// codec than the link's own round trip makes it.
const linkChunkMin = 16 << 10

// flushStream ends the compressed chunk the stream loop is filling once it
// holds linkChunkMin raw bytes, or the coalescing time (Settings.
// LinkCoalesce, read as the chunk starts) passed since its first byte and
// cur has nothing more; until then it waits for more (returning nil when
// cur has some, for the loop to send into the same chunk). A send of
// nothing (n 0) flushes at once: the loop is about to park. A plain link
// has nothing to flush.
func (w *writer) flushStream(ctx context.Context, cur *replbuf.Cursor, n int64) error {
	if w.z == nil {
		return nil
	}
	if n > 0 && w.z.Buffered() > 0 && w.z.Buffered() < linkChunkMin {
		now := time.Now()
		if w.coalesceUntil.IsZero() {
			w.coalesceUntil = now.Add(w.r.set.Load().LinkCoalesce)
		}
		if d := w.coalesceUntil.Sub(now); d > 0 {
			wctx, cancel := context.WithTimeout(ctx, d)
			err := cur.Wait(wctx)
			cancel()
			if err == nil {
				return nil // more to send into this chunk
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	w.coalesceUntil = time.Time{}
	return w.z.Flush()
}

// endCompression releases the encoder once the write loop is done with
// the connection; its figures stay readable (Replica.Compression).
func (w *writer) endCompression() {
	if w.z != nil {
		w.z.Close()
	}
}

// compressedConn is a replica's connection once its link is compressed:
// Write goes to the encoder, which writes whole chunks to the connection;
// Read, deadlines and Close are the connection's. It is neither a
// *net.TCPConn nor a syscall.Conn, so sendfile does not apply to it; the
// inline Fanout writes the socket below it, through the encoder
// (newCompressedInlineSender).
type compressedConn struct {
	net.Conn
	z *linkzstd.Writer
}

func (c *compressedConn) Write(p []byte) (int, error) { return c.z.Write(p) }

// sendRest sends what the socket did not take of the inline sender's last
// chunk on a compressed link, or of its TLS records, under a write deadline
// of repl-timeout, before the write loop writes anything else: the chunk
// is whole in the encoder's window already, and the records are numbered,
// so the peer must get all of it, in order.
func (w *writer) sendRest(in *inlineSender) error {
	if in.rec != nil && in.rec.Pending() > 0 {
		w.r.conn.SetWriteDeadline(time.Now().Add(w.timeout))
		return in.rec.Flush()
	}
	if len(in.rest) == 0 {
		return nil
	}
	w.r.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	_, err := w.r.conn.Write(in.rest)
	in.rest = in.rest[:0]
	return err
}
