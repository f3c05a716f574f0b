package deploy

import (
	"context"
	"fmt"
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

// The commands the load ends some chunks with.
const (
	waitCmd     = "*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$3\r\n100\r\n" // WAIT 1 100
	flushAllCmd = "*1\r\n$8\r\nFLUSHALL\r\n"
)

// loader is the steady write load: cachedata's commands to whichever
// server the Sentinels name the primary, a WAIT every waitEvery chunks, a
// FLUSHALL every flushEvery of load. Its run goroutine writes; the nemesis
// pauses and resumes it.
type loader struct {
	// primary names the primary now, "" when none is known; dial connects
	// to the node of that name. Both are the deployment's, called from
	// run's goroutine.
	primary func() string
	dial    func(ctx context.Context, name string) (net.Conn, error)

	paused atomic.Bool // set by the nemesis while it waits for convergence
	chunks int         // chunks written so far; owned by run's goroutine
}

// newLoader is the load on d's primary.
func newLoader(d *Deployment) *loader {
	return &loader{
		primary: d.primary,
		dial: func(ctx context.Context, name string) (net.Conn, error) {
			n, ok := d.lookup(name)
			if !ok {
				return nil, fmt.Errorf("no node %q", name)
			}
			return n.ns.DialContext(ctx, "tcp", n.addr)
		},
	}
}

func (l *loader) pause() { l.paused.Store(true) }

func (l *loader) resume() { l.paused.Store(false) }

// run writes until ctx ends, reconnecting to the primary the Sentinels
// name whenever the connection fails or the primary changes.
func (l *loader) run(ctx context.Context) {
	gen := cachedata.New(loadSeed)
	for ctx.Err() == nil {
		name := l.primary()
		if name == "" {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		conn, err := l.dial(ctx, name)
		if err != nil {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		l.write(ctx, conn, gen, name)
	}
}

// write writes to conn, the primary name, until a write fails, ctx ends or
// the Sentinels name another primary, and closes conn; a second goroutine
// drains replies until conn is closed, and write waits for it before it
// returns.
func (l *loader) write(ctx context.Context, conn net.Conn, gen *cachedata.Gen, name string) {
	var drain sync.WaitGroup
	drain.Go(func() { io.Copy(io.Discard, conn) })
	defer drain.Wait()
	defer conn.Close()
	tick := time.NewTicker(writeTick)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if i%20 == 0 && l.primary() != name {
			return
		}
		if l.paused.Load() {
			continue
		}
		l.chunks++
		chunk := appendTail(gen.FillRESP(writeRate/int(time.Second/writeTick)), i, l.chunks)
		conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(chunk); err != nil {
			return
		}
	}
}

// appendTail appends to the commands of tick i, the n-th chunk written,
// what that chunk ends with: a WAIT every waitEvery ticks, a FLUSHALL
// every flushEvery of load.
func appendTail(chunk []byte, i, n int) []byte {
	if i%waitEvery == 0 {
		chunk = append(chunk, waitCmd...)
	}
	if n%int(flushEvery/writeTick) == 0 {
		chunk = append(chunk, flushAllCmd...)
	}
	return chunk
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
