// Package load writes a fixed amount of replication stream into a primary:
// pipelined SETs of one value size over a few connections, with a raw RESP
// writer so that generating the load costs little CPU next to what it
// measures (each batch is built once and written again and again).
// Commands is a second load: every command fresh from a generator (the
// cache-like data, redis-benchmark's keys), paced, for a link whose cost
// depends on the bytes themselves (a compressed one). Paced is the third: a
// fixed rate of commands from many connections, each writing its share
// every millisecond, as a primary's clients do when it is not saturated.
package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ErrReply is returned when the primary answers a SET with anything but +OK.
var ErrReply = errors.New("load: unexpected reply")

// Writer describes the load. The zero values of Pipeline, Conns and Keys take
// the defaults below.
type Writer struct {
	Addr      string // host:port of the primary
	ValueSize int    // bytes per value; ignored when ValueSizes is set
	Pipeline  int    // SETs per write; default 16
	Conns     int    // connections writing at once; default 2
	Keys      int    // distinct keys per connection, so memory stays flat; default 16
	// Rate caps the command bytes written per second over all connections;
	// 0 writes as fast as the primary takes them.
	Rate int64
	// ValueSizes, when set, are the values' sizes instead: the i-th SET of
	// connection c's batch has ValueSizes[(c*Pipeline+i) mod len], so a
	// mixed load is the same bytes on every run.
	ValueSizes []int
}

// Batch returns the bytes of one pipeline of SETs for connection conn: keys
// bench:<conn>:<i mod Keys>, values of ValueSize 'x' bytes (or of the sizes
// ValueSizes gives).
func (w Writer) Batch(conn int) []byte {
	w = w.withDefaults()
	var b []byte
	for i := range w.Pipeline {
		size := w.ValueSize
		if n := len(w.ValueSizes); n > 0 {
			size = w.ValueSizes[(conn*w.Pipeline+i)%n]
		}
		key := fmt.Sprintf("bench:%d:%d", conn, i%w.Keys)
		b = append(b, "*3\r\n$3\r\nSET\r\n"...)
		b = appendBulk(b, []byte(key))
		b = appendBulk(b, bytes.Repeat([]byte{'x'}, size))
	}
	return b
}

func appendBulk(b, s []byte) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, "\r\n"...)
	b = append(b, s...)
	return append(b, "\r\n"...)
}

func (w Writer) withDefaults() Writer {
	if w.Pipeline <= 0 {
		w.Pipeline = 16
	}
	if w.Conns <= 0 {
		w.Conns = 2
	}
	if w.Keys <= 0 {
		w.Keys = 16
	}
	if w.Keys > w.Pipeline {
		w.Keys = w.Pipeline
	}
	return w
}

// Run writes at least total bytes of commands (whole batches), or until ctx
// is cancelled when total is 0, and returns the command bytes written. Each
// connection writes one batch and reads its replies before the next.
func (w Writer) Run(ctx context.Context, total int64) (int64, error) {
	w = w.withDefaults()
	var (
		written atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for i := range w.Conns {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", w.Addr)
		if err != nil {
			cancel()
			wg.Wait()
			return 0, err
		}
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		defer stop()
		defer conn.Close()
		batch := w.Batch(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := w.conn(conn, batch, &written, total, start)
			if err != nil && ctx.Err() == nil {
				errOnce.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return written.Load(), first
	}
	if total > 0 && written.Load() < total {
		return written.Load(), ctx.Err()
	}
	return written.Load(), nil
}

func (w Writer) conn(conn net.Conn, batch []byte, written *atomic.Int64, total int64, start time.Time) error {
	want := bytes.Repeat([]byte("+OK\r\n"), w.Pipeline)
	replies := make([]byte, len(want))
	for total == 0 || written.Load() < total {
		if w.Rate > 0 {
			ahead := time.Duration(float64(written.Load())/float64(w.Rate)*float64(time.Second)) - time.Since(start)
			if ahead > 0 {
				time.Sleep(ahead)
			}
		}
		if _, err := conn.Write(batch); err != nil {
			return err
		}
		if _, err := io.ReadFull(conn, replies); err != nil {
			return err
		}
		if !bytes.Equal(replies, want) {
			return fmt.Errorf("%w: %q", ErrReply, replies)
		}
		written.Add(int64(len(batch)))
	}
	return nil
}
