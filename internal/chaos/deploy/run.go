package deploy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/replproxy/replproxy/internal/chaos"
)

// notBuilt is what the harness does not do that a reader of the report
// might assume it does; the report lists it so that it never claims more
// than it ran.
var notBuilt = []string{
	"two faults at once are nested (the second is healed before the first) and drawn from the kinds whose heal needs nothing but their target; a failover, a wipe or a kill of a proxy is only ever the first, and never three at once",
	"the primary's link is cut alone to proxy A only, not to the standby or to redis-2",
}

// schedule is the run's sequence of faults and of the gaps between them,
// from the seed alone: the same seed and the same replicas give the same
// schedule, whatever the deployment does meanwhile. It belongs to the
// nemesis's goroutine.
type schedule struct {
	nem  *chaos.Nemesis
	gaps *rand.Rand
}

// newSchedule is o's schedule: faults at proxy A and proxy B (and at
// proxy A's disk and link), of o.Kinds when not empty.
func newSchedule(o Options) *schedule {
	nem := chaos.NewNemesis(o.Seed, replTimeout, []string{"proxy-a", "proxy-b"}, nil)
	nem.Only = o.Kinds
	return &schedule{nem: nem, gaps: rand.New(rand.NewPCG(o.Seed, 1))}
}

// next is the next fault, replicas being the redis-servers a replica-kill
// may pick now, and the gap after its convergence: a second or two of
// writes between two faults (load, not a wait for a condition).
func (s *schedule) next(replicas []string) (chaos.Fault, time.Duration) {
	s.nem.Replicas = replicas
	return s.nem.Next(), time.Duration(1+s.gaps.IntN(2)) * time.Second
}

// Run drives the deployment for o.Duration and returns the run for the
// report. The goroutine that calls Run is the nemesis, and must be the
// test's own, since everything that fails the test runs there. Run starts
// two goroutines, the load and the sampler, under a context of its own,
// which it cancels, waiting for both, before it returns (a t.Fatal
// included). Once the deployment has converged it applies a fault, holds
// it, heals it and checks its cost, one after another, with a second or
// two of load between two, until o.Duration has passed or ctx has ended
// (which cuts a fault's hold short, not its convergence); then it scans
// the proxies' logs. Every violation is in the run it returns, as in the
// history.
func (d *Deployment) Run(ctx context.Context, o Options) chaos.Run {
	ctx, cancel := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer func() {
		cancel()
		bg.Wait()
	}()
	load := newLoader(d)
	bg.Go(func() { load.run(ctx) })
	offsets, mem := &chaos.OffsetTracker{}, &chaos.MemoryTracker{}
	bg.Go(func() { d.sample(ctx, offsets, mem) })

	start := time.Now()
	if _, ok := d.converge(load, start); !ok {
		d.t.Fatalf("the deployment did not converge within %v of its start", convergeBound)
	}
	d.captureBaseline()
	d.hist.Record(chaos.Event{Action: chaos.ActNote, Kind: chaos.NoFault, Detail: fmt.Sprintf("deployment up and converged; goroutines/descriptors %v", d.baseline)})

	sched := newSchedule(o)
	var outcomes []chaos.Outcome
	for time.Since(start) < o.Duration && ctx.Err() == nil {
		f, gap := sched.next(d.replicaNames())
		outcomes = append(outcomes, d.apply(ctx, f, load, offsets))
		hold(ctx, gap)
	}
	cancel()
	bg.Wait()
	for _, p := range d.proxies {
		for _, path := range []string{p.logfile, p.stderr} {
			b, err := os.ReadFile(path)
			if err != nil {
				d.t.Errorf("read %s: %v", path, err)
				continue
			}
			d.hist.Violate(chaos.ScanLog(time.Now(), filepath.Base(path), b)...)
		}
	}

	return chaos.Run{
		Seed:       o.Seed,
		Start:      start,
		Duration:   time.Since(start),
		Command:    o.Command(),
		Outcomes:   outcomes,
		Events:     d.hist.Events(),
		Violations: d.hist.Violations(),
		NotBuilt:   notBuilt,
	}
}
