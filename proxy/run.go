package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/oklog/run"
)

// Run's run group: the server's long-lived goroutines as its actors, each
// returning its error, stopped in one order (actors); Close stops them.

// ErrServerClosed is returned by Run on a server that was closed or has run
// already.
var ErrServerClosed = errors.New("proxy: server closed")

// Run serves until ctx is done, Close is called, a graceful stop (Shutdown)
// has drained or one of its actors fails, then stops every actor in order
// (see actors) and returns once all have stopped. It returns nil after a
// clean stop, else the error of each actor that failed. A server runs once.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !s.life.begin(cancel) {
		return ErrServerClosed
	}
	defer s.life.ended()
	s.log.Info("replproxy started", "version", Version, "address", s.Addr().String(), "pid", s.process.PID)
	// New opened the listeners: a connection waits in their queue for the
	// accept loops, which start with the actors.
	s.supervision.notifyReady()
	err := s.actors(ctx, cancel).run()
	s.hist.Close()
	// Parked replicas see the stream's end, as a cursor's Wait would.
	s.replicas.fanout.Wake()
	s.changes.releaseDir() // last: nothing writes in dir any more
	s.log.Info("replproxy stopped")
	return err
}

// actors is Run's run group: every goroutine of the server that lives as
// long as Run is one of these actors, or started and waited for by one.
// They are stopped in the order they are added here, which is the order
// the server stops in:
//
//  1. stop: waits for ctx's end (Close) or Shutdown, which drains first
//     (drain.go): listeners closed, the link ended, the replicas given up
//     to shutdown-timeout to catch up. Its stop tells the supervisor and
//     cancels ctx, which every actor but the stream log's follower and
//     the monitoring server runs under: a stop at once.
//  2. upstream link: ended first (by the drain already, on a graceful
//     stop), so that the stream's end stays put.
//  3. cluster follower, under replicaof-cluster (cluster_follow.go): under
//     the link's context, so that a drain ends it with the link and no
//     decision re-points a link that has stopped.
//  4. clients: one accept loop per listener (a replaced listener's ends
//     when it is closed) and each client's goroutine, replicas' included;
//     its stop closes the listeners and every client and waits for them.
//  5. monitor and 6. memory return (which the monitor asks for): stopped
//     before the snapshot keeper, whose work the monitor asks for too.
//  7. snapshot keeper: closed, it waits for its fetches, spills and
//     persists.
//  8. stream log, when configured: the follower, the last of the
//     stream's readers, appends what was published; the log is closed
//     once it has stopped.
//  9. monitoring server, when metrics-port is set: it answers /metrics and
//     /readyz until here, through a graceful stop.
//
// Run then closes the history, wakes the replicas parked on the fan-out
// and releases dir's lock.
func (s *Server) actors(ctx context.Context, cancel context.CancelFunc) *actorGroup {
	g := &actorGroup{log: s.log}
	// The link has a context of its own, so that a graceful stop can end
	// it first and fix the stream's end while the replicas catch up.
	linkCtx, stopLink := context.WithCancel(ctx)
	linkDone := make(chan struct{})

	g.add("stop", func() error {
		select {
		case <-ctx.Done():
		case <-s.life.drainRequested():
			s.life.drain(ctx, stopLink, linkDone)
		}
		return nil
	}, func() {
		s.supervision.notifyStopping() // the drain told it already on a graceful stop
		cancel()
	})

	g.add("upstream link", func() error {
		err := s.up.Run(linkCtx)
		close(linkDone)
		if err == nil {
			<-ctx.Done() // ended by a drain: the others stop with the stop actor
		}
		return err
	}, stopLink)

	if cfg := s.config(); len(cfg.ClusterSeeds) > 0 {
		f, err := newClusterFollower(cfg, &s.conf, s.changes, s.up.Lost(), clusterCounts{checks: &s.stats.ClusterChecks,
			failures: &s.stats.ClusterCheckFailures, changes: &s.stats.ClusterPrimaryChanges, slots: &s.stats.ClusterSlots},
			s.log.Named("cluster"))
		g.add("cluster follower", func() error {
			if err != nil {
				return err // only a configuration Validate let through
			}
			if err := f.run(linkCtx); err != nil {
				return err
			}
			<-ctx.Done() // ended by a drain: the others stop with the stop actor
			return nil
		}, nil)
	}

	var conns sync.WaitGroup // the accept loops and the clients' goroutines
	acceptErr := make(chan error, 1)
	g.add("clients", func() error {
		s.listeners.serveAll(func(ln net.Listener, isTLS bool) {
			conns.Go(func() {
				if err := s.acceptLoop(ctx, ln, &conns, isTLS); err != nil {
					select {
					case acceptErr <- err:
					default: // the actor is failing on the first one already
					}
				}
			})
		})
		select {
		case <-ctx.Done():
			return nil
		case err := <-acceptErr:
			return err
		}
	}, func() {
		s.listeners.close()
		s.closeClients()
		conns.Wait()
	})

	g.add("monitor", func() error { return s.cron.run(ctx) }, nil)
	g.add("memory return", func() error { return s.mem.returnMemory(ctx) }, nil)
	// Not stopped by Keeper.Close, which, were it to come before Run (a
	// stop right after the start), would have Run refuse with ErrClosed:
	// Run closes the Keeper itself when ctx ends.
	g.add("snapshot keeper", func() error { return s.snaps.Run(ctx) }, nil)

	if d := s.durable; d != nil {
		// Not under ctx: the follower stops only at its turn, after the
		// link and every other reader of the stream.
		logCtx, stopLog := context.WithCancel(context.Background())
		g.add("stream log", func() error {
			defer d.close()
			return d.follow.Run(logCtx)
		}, stopLog)
	}

	if m := s.monitoring; m != nil {
		s.log.Info("metrics server listening", "address", m.Addr().String())
		g.add("monitoring server", m.Serve, m.Shutdown)
	}
	return g
}

// An actorGroup is a run.Group whose actors stop in order: each runs on a
// goroutine of its own and, when the first one returns, every actor is
// stopped, one at a time in the order they were added, each waited for
// before the next is stopped. A failed actor's error is logged and kept.
type actorGroup struct {
	g   run.Group
	log hclog.Logger
	// errs are the failed actors' errors, in the order they failed;
	// appended by the actors' goroutines, read by run once all returned.
	errs struct {
		sync.Mutex
		list []error
	}
}

// add adds the actor name: execute runs it until it is stopped, and
// returns nil then, or its error when it fails; stop, when not nil, tells
// it to return (an actor under Run's context needs no telling: the stop
// actor has cancelled it by its turn). It is stopped once execute has
// returned.
func (g *actorGroup) add(name string, execute func() error, stop func()) {
	done := make(chan struct{})
	g.g.Add(func() error {
		defer close(done)
		err := execute()
		if err != nil {
			g.log.Error("stopping: a part of the server failed", "part", name, "error", err)
			err = fmt.Errorf("%s: %w", name, err)
			g.errs.Lock()
			g.errs.list = append(g.errs.list, err)
			g.errs.Unlock()
		}
		return err
	}, func(error) {
		if stop != nil {
			stop()
		}
		<-done
	})
}

// run runs the actors and returns once every one has stopped: nil, or the
// errors of those that failed.
func (g *actorGroup) run() error {
	g.g.Run() // returns the first actor's error alone: g.errs has them all
	g.errs.Lock()
	defer g.errs.Unlock()
	return errors.Join(g.errs.list...)
}

// Close stops the server: when Run is running, it ends it and waits until it
// has returned; on a server that never ran it closes what New opened. It may
// be called any number of times, from any goroutine; every call returns once
// the server is stopped. It returns nil.
func (s *Server) Close() error {
	s.life.close()
	return nil
}
