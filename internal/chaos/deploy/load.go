package deploy

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replproxy/replproxy/internal/cachedata"
)

const (
	// writeRate is the load's bytes of commands per second, in a chunk
	// every writeTick; every waitEvery-th chunk ends with a WAIT.
	writeRate = 128 << 10
	writeTick = 50 * time.Millisecond
	waitEvery = 10
	// flushEvery is how much load passes between two FLUSHALLs, as a cache
	// is flushed now and then: cachedata's session keys never repeat, so
	// without it the dataset grows all run long, and with it each DEBUG
	// DIGEST (seconds at 150k keys, blocking the server) and so each
	// convergence check.
	flushEvery = 5 * time.Minute
	// loadSeed seeds the load's generator: the load is the same every run.
	loadSeed = 36
)

// loader is the steady write load: cachedata's commands to whichever
// server the Sentinels name the primary, a WAIT every waitEvery chunks, a
// FLUSHALL every flushEvery of load. Its run goroutine writes; the nemesis
// pauses and resumes it.
type loader struct {
	d      *Deployment
	paused atomic.Bool // set by the nemesis while it waits for convergence
	chunks int         // chunks written so far; owned by run's goroutine
}

func (l *loader) pause() { l.paused.Store(true) }

func (l *loader) resume() { l.paused.Store(false) }

// run writes until ctx ends, reconnecting to the primary the Sentinels
// name whenever the connection fails or the primary changes.
func (l *loader) run(ctx context.Context) {
	gen := cachedata.New(loadSeed)
	for ctx.Err() == nil {
		n, ok := l.d.lookup(l.d.primary())
		if !ok {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		conn, err := n.ns.DialContext(ctx, "tcp", n.addr)
		if err != nil {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		l.write(ctx, conn, gen, n.name)
		conn.Close()
	}
}

// write writes to conn, the primary name, until a write fails, ctx ends or
// the Sentinels name another primary; a second goroutine drains replies
// until conn is closed, and write waits for it before it returns.
func (l *loader) write(ctx context.Context, conn net.Conn, gen *cachedata.Gen, name string) {
	var drain sync.WaitGroup
	drain.Go(func() { io.Copy(io.Discard, conn) })
	defer drain.Wait()
	defer conn.Close()
	tick := time.NewTicker(writeTick)
	defer tick.Stop()
	wait := []byte("*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$3\r\n100\r\n")
	flushAll := []byte("*1\r\n$8\r\nFLUSHALL\r\n")
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if i%20 == 0 && l.d.primary() != name {
			return
		}
		if l.paused.Load() {
			continue
		}
		chunk := gen.FillRESP(writeRate / int(time.Second/writeTick))
		if i%waitEvery == 0 {
			chunk = append(chunk, wait...)
		}
		l.chunks++
		if l.chunks%int(flushEvery/writeTick) == 0 {
			chunk = append(chunk, flushAll...)
		}
		conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(chunk); err != nil {
			return
		}
	}
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
