package load

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"time"
)

// Commands writes a stream of distinct commands into a primary, paced:
// unlike Writer, which writes one batch again and again (the same bytes,
// which a compressing link would make look free), every command comes
// fresh from Next. One connection, its writes pipelined ahead of the
// replies by at most inFlight batches.
type Commands struct {
	Addr string // host:port of the primary
	// Dial connects to Addr; nil dials from the harness's own namespace.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Rate caps the command bytes written per second; 0 writes as fast as
	// the primary takes them.
	Rate int64
	// Batch is the commands per write; default 64.
	Batch int
	// Next appends one command, as RESP, to dst and returns the extended
	// slice. Its reply must be a one-line reply (+OK, :n); an error reply
	// stops the load. Called from one goroutine.
	Next func(dst []byte) []byte
}

// inFlight bounds the batches written and not yet answered.
const inFlight = 8

// Run writes at least total bytes of commands (whole batches), or until ctx
// is cancelled when total is 0, and returns the command bytes written once
// every one of them has been answered.
func (c Commands) Run(ctx context.Context, total int64) (int64, error) {
	batch := c.Batch
	if batch <= 0 {
		batch = 64
	}
	dial := c.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "tcp", c.Addr)
	if err != nil {
		return 0, fmt.Errorf("load: dial %s: %w", c.Addr, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	sent := make(chan int, inFlight) // commands per batch written, for the reader
	readDone := make(chan struct{})  // closed when the reader has stopped
	var (
		wg      sync.WaitGroup
		readErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(readDone)
		readErr = readReplies(conn, sent)
	}()
	var (
		written int64
		buf     []byte
		start   = time.Now()
		werr    error
	)
write:
	for (total == 0 || written < total) && ctx.Err() == nil {
		if c.Rate > 0 {
			ahead := time.Duration(float64(written)/float64(c.Rate)*float64(time.Second)) - time.Since(start)
			if ahead > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(ahead):
				}
				continue
			}
		}
		buf = buf[:0]
		for range batch {
			buf = c.Next(buf)
		}
		if _, werr = conn.Write(buf); werr != nil {
			break
		}
		written += int64(len(buf))
		select {
		case sent <- batch:
		case <-readDone: // a bad reply: readErr says which
			break write
		}
	}
	close(sent)
	wg.Wait()
	switch {
	case werr != nil && ctx.Err() == nil:
		return written, fmt.Errorf("load: write: %w", werr)
	case readErr != nil && ctx.Err() == nil:
		return written, readErr
	case total > 0 && written < total:
		return written, ctx.Err()
	}
	return written, nil
}

// readReplies reads as many one-line replies as each batch on sent had
// commands, until sent is closed.
func readReplies(conn net.Conn, sent <-chan int) error {
	rd := bufio.NewReaderSize(conn, 64<<10)
	for n := range sent {
		for range n {
			line, err := rd.ReadSlice('\n')
			if err != nil {
				return fmt.Errorf("load: read reply: %w", err)
			}
			if line[0] != '+' && line[0] != ':' {
				return fmt.Errorf("%w: %q", ErrReply, line)
			}
		}
	}
	return nil
}
