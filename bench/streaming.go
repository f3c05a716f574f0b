package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/replproxy/replproxy/bench/internal/cluster"
	"github.com/replproxy/replproxy/bench/internal/load"
	"github.com/replproxy/replproxy/bench/internal/procstat"
	"github.com/replproxy/replproxy/bench/internal/sample"
)

// streamPoint is one cell of the streaming tables.
type streamPoint struct {
	topology  topology
	variant   string // a variant's name
	replicas  int
	valueSize int
}

// streamPoints are the points a run measures, in order: at every N and
// size direct and chained (plain) and proxied with its log on (from an
// empty log), and with the log off and with a full log where o asks; then
// the TLS row, all three topologies over TLS, and proxied over TLS with
// its log off too when o measures log off.
func streamPoints(o *options) []streamPoint {
	var out []streamPoint
	for _, n := range o.replicas {
		for _, size := range o.sizes {
			out = append(out, streamPoint{direct, plain.name, n, size}, streamPoint{chained, plain.name, n, size},
				streamPoint{proxied, logOn.name, n, size})
			if slices.Contains(o.logOff, n) {
				out = append(out, streamPoint{proxied, logOff.name, n, size})
			}
			if slices.Contains(o.logFull, n) {
				out = append(out, streamPoint{proxied, logFull.name, n, size})
			}
		}
	}
	if o.tlsN > 0 {
		for _, t := range topologies {
			out = append(out, streamPoint{t, withTLS.name, o.tlsN, o.tlsSize})
		}
		if o.withLogOff {
			out = append(out, streamPoint{proxied, tlsLogOff.name, o.tlsN, o.tlsSize})
		}
	}
	return out
}

// streamRun is one measured run: fresh servers, one write load.
type streamRun struct {
	bytes       int64         // stream written: the primary's offset delta
	elapsed     time.Duration // load start until every replica has it all
	lag         time.Duration // load end until every replica has it all
	primaryCPU  time.Duration
	relayCPU    time.Duration
	loadCPU     time.Duration // the harness process, which generates the load
	relayHWM    int64         // peak RSS of the relay, bytes
	extraSyncs  int64         // full syncs on the primary, and resyncs the relay served, during the load
	logRestarts int64         // proxy with its log on: restarts of the log for falling behind, during the load
	digestsSame bool
	logBehind   time.Duration // proxy with its log on: every replica has it all until the log has it too
	logWindow   int64         // proxy with its log on: how far its log's follower may fall behind, bytes
	// logFloor is the log's floor (proxy with its log on, without TLS)
	// for floorBytes: the full log's after a full-log run, the empty
	// log's after the others; zero when not measured.
	logFloor   logFloor
	floorBytes int64
}

const gb = 1e9

func perGB(d time.Duration, bytes int64) float64 { return d.Seconds() / (float64(bytes) / gb) }

// streamSummary is a point's runs summarised.
type streamSummary struct {
	point             streamPoint
	runs              int
	mbps              sample.Summary // stream MB/s per replica
	primaryCPUGB      sample.Summary // primary CPU-s per GB of stream
	relayCPUReplicaGB sample.Summary // relay CPU-s per replica-GB
	loadCPUGB         sample.Summary // load generator CPU-s per GB
	lag               sample.Summary // seconds
	relayHWM          sample.Summary // MB
	extraSyncs        int64          // summed over runs
	logRestarts       int64          // summed over runs
	digestsSame       bool           // in every run
	streamMB          float64        // median stream per run
	sendFloor         sample.Summary // the send floor at this N, CPU-s per replica-GB, measured beside this row
	logBehind         sample.Summary // seconds the log finished after the replicas; log-on variants only
	logWindow         sample.Summary // the follower's window, bytes; log-on variants only
	ddFloor           sample.Summary // the log's floor: dd's CPU-s per GB through the page cache
	crcFloor          sample.Summary // the log's floor: CRC-32C's CPU-s per GB
}

type streamingResult struct {
	loadDesc string
	points   []streamSummary
}

// summariseStream summarises a point's runs; floors are the send floor's
// CPU-s per replica-GB measured beside the point, one per repetition.
func summariseStream(p streamPoint, runs []streamRun, floors []float64) streamSummary {
	s := streamSummary{point: p, runs: len(runs), digestsSame: true, sendFloor: sample.Of(floors)}
	var mbps, pcpu, rcpu, lcpu, lag, hwm, mb, behind, window, dd, crc []float64
	for _, r := range runs {
		if variantNamed(p.variant).log && p.topology == proxied {
			behind = append(behind, r.logBehind.Seconds())
			window = append(window, float64(r.logWindow))
		}
		if r.floorBytes > 0 {
			dd = append(dd, perGB(r.logFloor.dd, r.floorBytes))
			crc = append(crc, perGB(r.logFloor.crc, r.floorBytes))
		}
		mbps = append(mbps, float64(r.bytes)/1e6/r.elapsed.Seconds())
		pcpu = append(pcpu, perGB(r.primaryCPU, r.bytes))
		lcpu = append(lcpu, perGB(r.loadCPU, r.bytes))
		lag = append(lag, r.lag.Seconds())
		mb = append(mb, float64(r.bytes)/1e6)
		if p.topology != direct {
			rcpu = append(rcpu, perGB(r.relayCPU, r.bytes*int64(p.replicas)))
			hwm = append(hwm, float64(r.relayHWM)/1e6)
		}
		s.extraSyncs += r.extraSyncs
		s.logRestarts += r.logRestarts
		s.digestsSame = s.digestsSame && r.digestsSame
	}
	s.mbps, s.primaryCPUGB, s.relayCPUReplicaGB = sample.Of(mbps), sample.Of(pcpu), sample.Of(rcpu)
	s.loadCPUGB, s.lag, s.relayHWM = sample.Of(lcpu), sample.Of(lag), sample.Of(hwm)
	s.streamMB = sample.Of(mb).Median
	s.logBehind, s.logWindow = sample.Of(behind), sample.Of(window)
	s.ddFloor, s.crcFloor = sample.Of(dd), sample.Of(crc)
	return s
}

// streamLoad is the write load of a streaming run: pipelines of about 64 KiB
// (16 to 128 SETs), so that small values do not make the load generator
// pay a system call per few commands. The mixed row's pipelines are 16
// SETs of mixedValueSizes (about 120 KiB).
func streamLoad(addr string, valueSize int) load.Writer {
	if valueSize == mixedSize {
		return load.Writer{Addr: addr, ValueSizes: mixedValueSizes(), Pipeline: 16, Conns: 2, Keys: 16}
	}
	pipeline := min(max((64<<10)/(valueSize+40), 16), 128)
	return load.Writer{Addr: addr, ValueSize: valueSize, Pipeline: pipeline, Conns: 2, Keys: 16}
}

// mixedSize is the value size that names the mixed row in -sizes ("mixed")
// and in the points: values of mixedValueSizes.
const mixedSize = -1

// mixedMin and mixedMax bound the mixed row's value sizes.
const mixedMin, mixedMax = 100, 64 << 10

// mixedValueSizes are the 32 value sizes of the mixed row (16 per load
// connection), drawn log-uniformly from mixedMin to mixedMax with a fixed
// seed, so that every run, and every run of the harness, writes the same
// bytes: as many small values as large ones per factor of size, which
// weighs the bytes towards the large ones (mean 7.3 KiB).
func mixedValueSizes() []int {
	rng := rand.New(rand.NewPCG(20, 1))
	out := make([]int, 32)
	for i := range out {
		out[i] = int(math.Round(mixedMin * math.Pow(float64(mixedMax)/mixedMin, rng.Float64())))
	}
	return out
}

// floorKey is a row group of the streaming tables: its send floor.
type floorKey struct{ replicas, valueSize int }

func runStreaming(ctx context.Context, o *options, proxyBin string) (*streamingResult, error) {
	runs := map[streamPoint][]streamRun{}
	floors := map[floorKey][]float64{}
	order := streamPoints(o)
	total := int64(o.streamMB) << 20
	// Repetitions are the outer loop, so a disturbance of the machine
	// spreads over all points instead of skewing one.
	for rep := 1; rep <= o.reps; rep++ {
		for _, p := range order {
			// The send floor once per N and size and repetition, just
			// before the group's first point, so that it sees the same
			// machine as the rows beside it.
			if k := (floorKey{p.replicas, p.valueSize}); len(floors[k]) < rep {
				per := floorBytes(o)
				cpu, err := sendFloor(ctx, p.replicas, per)
				if err != nil {
					return nil, fmt.Errorf("streaming N=%d %s, run %d: %w", p.replicas, sizeName(p.valueSize), rep, err)
				}
				floors[k] = append(floors[k], perGB(cpu, per*int64(p.replicas)))
				logf("send floor run %d N=%d %s: %.2f s/replica-GB (%d MiB per replica)", rep, p.replicas, sizeName(p.valueSize),
					floors[k][rep-1], per>>20)
			}
			r, err := streamOnce(ctx, o, proxyBin, p, total, nil)
			if err != nil {
				return nil, fmt.Errorf("streaming %s (%s), %d replicas, %d B values, run %d: %w",
					p.topology, p.variant, p.replicas, p.valueSize, rep, err)
			}
			logf("streaming run %d %-7s %-12s N=%d %s: %6.1f MB in %6.2f s, primary %.2f s/GB, relay %.2f s/replica-GB, lag %.3f s",
				rep, p.topology, p.variant, p.replicas, sizeName(p.valueSize), float64(r.bytes)/1e6, r.elapsed.Seconds(),
				perGB(r.primaryCPU, r.bytes), perGB(r.relayCPU, r.bytes*int64(p.replicas)), r.lag.Seconds())
			if r.floorBytes > 0 {
				logf("log floor run %d (%s): dd %.2f s/GB, CRC-32C %.2f s/GB (%d MiB)", rep, floorKind(variantNamed(p.variant).fullLog),
					perGB(r.logFloor.dd, r.floorBytes), perGB(r.logFloor.crc, r.floorBytes), r.floorBytes>>20)
			}
			runs[p] = append(runs[p], r)
		}
	}
	w := streamLoad("", 1<<10)
	res := &streamingResult{
		loadDesc: fmt.Sprintf("%d MiB of SET commands per run over %d connections, each writing a pipeline of about 64 KiB (16 to 128 SETs) and reading its replies before the next, %d keys per connection, as fast as the primary replies",
			o.streamMB, w.Conns, w.Keys),
	}
	for _, p := range order {
		res.points = append(res.points, summariseStream(p, runs[p], floors[floorKey{p.replicas, p.valueSize}]))
	}
	return res, nil
}

// streamOnce starts fresh servers, writes total bytes of SETs into the
// primary and measures until every replica has the whole stream. When
// watch is not nil it is called with the relay as the load starts, and the
// function it returns once every replica has the stream (the profiler).
func streamOnce(ctx context.Context, o *options, proxyBin string, p streamPoint, total int64, watch func(relay *cluster.Process) func()) (run streamRun, err error) {
	v := variantNamed(p.variant)
	c, err := newCluster(o, proxyBin, v)
	if err != nil {
		return run, err
	}
	defer closeCluster(c, &err)
	var relayArgs []string
	if v.fullLog && p.topology == proxied {
		relayArgs = fullLogArgs(o)
	}
	s, err := startSteady(ctx, c, p.topology, v, p.replicas, relayArgs...)
	if err != nil {
		return run, err
	}
	if v.fullLog && s.relay != nil {
		if err := fillLog(ctx, s, p, fullLogFill(o)); err != nil {
			return run, fmt.Errorf("filling the log: %w", err)
		}
	}
	syncs0, err := resyncs(ctx, s)
	if err != nil {
		return run, err
	}
	restarts0, err := logRestarts(ctx, s, v)
	if err != nil {
		return run, err
	}

	before, err := readCPUs(s)
	if err != nil {
		return run, err
	}
	off0, err := s.primary.Offset(ctx)
	if err != nil {
		return run, err
	}
	self0, err := procstat.ReadCPU(os.Getpid())
	if err != nil {
		return run, err
	}
	stopWatch := func() {}
	if watch != nil && s.relay != nil {
		stopWatch = sync.OnceFunc(watch(s.relay))
		defer stopWatch() // on error
	}
	start := time.Now()
	if _, err := streamLoad(fmt.Sprintf("127.0.0.1:%d", s.primary.Port), p.valueSize).Run(ctx, total); err != nil {
		return run, fmt.Errorf("load: %w", err)
	}
	loadEnd := time.Now()
	self1, err := procstat.ReadCPU(os.Getpid())
	if err != nil {
		return run, err
	}
	off1, err := cluster.WaitOffsets(ctx, linkTimeout, s.primary, s.replicas...)
	if err != nil {
		return run, fmt.Errorf("catching up: %w", err)
	}
	done := time.Now()
	// The proxy's log follower may still be writing: its CPU belongs to the
	// run, so the reading waits for it (and says how long it trailed).
	logged := v.log && s.relay != nil && p.topology == proxied
	if logged {
		if err := waitLogged(ctx, s.relay, off1); err != nil {
			return run, err
		}
	}
	logDone := time.Now()
	stopWatch()
	after, err := readCPUs(s)
	if err != nil {
		return run, err
	}

	run = streamRun{
		bytes:      off1 - off0,
		elapsed:    done.Sub(start),
		lag:        done.Sub(loadEnd),
		primaryCPU: after[0].Sub(before[0]).Total(),
		loadCPU:    self1.Sub(self0).Total(),
	}
	if s.relay != nil {
		run.relayCPU = after[1].Sub(before[1]).Total()
		if run.relayHWM, err = s.relay.HWM(); err != nil {
			return run, err
		}
	}
	if logged {
		run.logBehind = logDone.Sub(done)
		if run.logWindow, err = followerWindow(ctx, s.relay); err != nil {
			return run, err
		}
		if !v.tls {
			// The log's floor on the proxy's own dir, the servers idle:
			// the full log's for a full-log run, else the empty log's. A
			// floor that fails (no dd, a full disk) costs the row its
			// floor, not the run.
			run.floorBytes = floorBytes(o)
			if run.logFloor, err = diskFloor(ctx, s.relay.Dir(), run.floorBytes, v.fullLog); err != nil {
				if ctx.Err() != nil {
					return run, err
				}
				logf("log floor: none for this run: %v", err)
				run.floorBytes, run.logFloor, err = 0, logFloor{}, nil
			}
		}
	}
	syncs1, err := resyncs(ctx, s)
	if err != nil {
		return run, err
	}
	run.extraSyncs = syncs1 - syncs0
	restarts1, err := logRestarts(ctx, s, v)
	if err != nil {
		return run, err
	}
	run.logRestarts = restarts1 - restarts0
	run.digestsSame, err = digestsEqual(ctx, s)
	return run, err
}

// fillLog writes bytes of the point's load before the measured one and
// waits until the replicas and the proxy's log have all of it and the log
// has dropped segments (its first offset moved), so that the run measures
// a full log whose new segments are recycled files.
func fillLog(ctx context.Context, s *servers, p streamPoint, bytes int64) error {
	first0, err := s.relay.InfoInt(ctx, "persistence", "repl_log_first_offset")
	if err != nil {
		return err
	}
	if _, err := streamLoad(fmt.Sprintf("127.0.0.1:%d", s.primary.Port), p.valueSize).Run(ctx, bytes); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	off, err := cluster.WaitOffsets(ctx, linkTimeout, s.primary, s.replicas...)
	if err != nil {
		return err
	}
	if err := waitLogged(ctx, s.relay, off); err != nil {
		return err
	}
	first1, err := s.relay.InfoInt(ctx, "persistence", "repl_log_first_offset")
	if err != nil {
		return err
	}
	if first1 <= first0 {
		return fmt.Errorf("after %d MiB the log still starts at %d: not full", bytes>>20, first1)
	}
	return nil
}

// logRestarts is the proxy's count of stream-log restarts (the log let go of
// the stream after falling a memory window behind): a run with one measured
// a log that was down for part of it, which the report says. 0 without a
// proxy's log, or from a replproxy that has no such field.
func logRestarts(ctx context.Context, s *servers, v variant) (int64, error) {
	if s.relay == nil || !v.log {
		return 0, nil
	}
	f, err := s.relay.Info(ctx, "persistence")
	if err != nil {
		return 0, err
	}
	n, ok := f["repl_log_restarts"]
	if !ok { // a replproxy from before the log could restart
		return 0, nil
	}
	return strconv.ParseInt(n, 10, 64)
}

// The proxy's own floors of its windows (proxy/durable.go): the memory
// window is repl-backlog-size, at least proxyMemoryWindowMin, and the log's
// follower may fall behind by that, at least proxyLogBehindMin.
const (
	proxyMemoryWindowMin = 16 << 20
	proxyLogBehindMin    = 64 << 20
)

// followerWindow is how far the proxy's log follower may fall behind the
// stream, holding what it has not appended in memory meanwhile (the
// proxy's logBehindLimit).
func followerWindow(ctx context.Context, relay *cluster.Process) (int64, error) {
	f, err := relay.Info(ctx, "persistence")
	if err != nil {
		return 0, err
	}
	return followerWindowOf(f, func() (string, error) {
		m, err := relay.Client().ConfigGet(ctx, "repl-backlog-size").Result()
		if err != nil {
			return "", fmt.Errorf("%s: CONFIG GET repl-backlog-size: %w", relay.Name, err)
		}
		return m["repl-backlog-size"], nil
	})
}

// followerWindowOf is the follower's window from the proxy's INFO
// persistence fields: repl_log_window where the proxy shows it, else
// computed as the proxy computes it from repl-backlog-size, which backlog
// returns as CONFIG GET does (bytes).
func followerWindowOf(persistence map[string]string, backlog func() (string, error)) (int64, error) {
	if v, ok := persistence["repl_log_window"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO persistence repl_log_window = %q", v)
		}
		return n, nil
	}
	v, err := backlog()
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("repl-backlog-size = %q", v)
	}
	return max(n, proxyMemoryWindowMin, proxyLogBehindMin), nil
}

// waitLogged waits until the proxy's stream log holds the stream up to off.
func waitLogged(ctx context.Context, relay *cluster.Process, off int64) error {
	err := cluster.WaitInfo(ctx, linkTimeout, relay, "persistence", func(f map[string]string) bool {
		last, err := strconv.ParseInt(f["repl_log_last_offset"], 10, 64)
		return err == nil && last >= off
	})
	if err != nil {
		return fmt.Errorf("%s: log up to %d: %w", relay.Name, off, err)
	}
	return nil
}

// resyncs counts the full syncs the primary served and the full and
// partial resyncs the relay (when there is one) served: a replica that
// dropped its link during the load shows as one more.
func resyncs(ctx context.Context, s *servers) (int64, error) {
	n, err := s.primary.InfoInt(ctx, "stats", "sync_full")
	if err != nil || s.relay == nil {
		return n, err
	}
	f, err := s.relay.Info(ctx, "stats")
	if err != nil {
		return 0, err
	}
	for _, k := range []string{"sync_full", "sync_partial_ok"} {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: INFO stats %s = %q", s.relay.Name, k, f[k])
		}
		n += v
	}
	return n, nil
}

// readCPUs reads the CPU of the primary and, when there is one, the relay.
func readCPUs(s *servers) ([]procstat.CPU, error) {
	var out []procstat.CPU
	for _, p := range []*cluster.Process{s.primary, s.relay} {
		if p == nil {
			continue
		}
		c, err := p.CPU()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
