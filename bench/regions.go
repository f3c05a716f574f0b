package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/replproxy/replproxy/bench/internal/cluster"
	"github.com/replproxy/replproxy/bench/internal/load"
	"github.com/replproxy/replproxy/bench/internal/sample"
	"github.com/replproxy/replproxy/internal/cachedata"
	"github.com/replproxy/replproxy/internal/netns"
)

// The regions section: two regions as two network namespaces
// joined by a veth pair whose bandwidth tbf limits both ways. Region A holds
// the primary and proxy A, region B proxy B (a replica of proxy A) and
// three redis-server replicas of proxy B, so that only the link A→B
// crosses the veth. Each data kind runs in one pair of namespaces with one
// primary and one proxy A; proxy B and its replicas are started afresh for
// each link mode (plain, then zstd), so that every mode pays its own full
// sync across the link and then the same steady loads.

// regionReplicas is how many redis-servers replicate from proxy B.
const regionReplicas = 3

// lagSampleInterval is how often the replicas' lag is sampled under load.
const lagSampleInterval = 100 * time.Millisecond

// linkModes are proxy B's repl-link-compression values, in the order run.
var linkModes = []string{"no", "zstd"}

// regionData is one kind of data: how the primary is filled, and the
// commands of the steady load.
type regionData struct {
	name  string
	shape string // one line for RESULTS.md
	// fill and stream return a fresh generator; each call starts the same
	// sequence, so that every link mode gets the same bytes.
	fill, stream func() func(dst []byte) []byte
}

var regionDatas = []regionData{
	{
		name: "cache-like",
		shape: "internal/cachedata: ~40% JSON documents (SET user:<id>|product:<id>, 300 B–3 KiB, EX 3600 on half), " +
			"~25% session hashes (HSET session:<32 hex>, 6–12 fields), ~25% short strings (tokens, flags, numbers, statuses), " +
			"~10% INCRBY counters (every fourth followed by EXPIRE); ids 80% from the hottest 2% of 1,000,000",
		fill:   func() func([]byte) []byte { return cachedata.New(1).Next },
		stream: func() func([]byte) []byte { return cachedata.New(2).Next },
	},
	{
		name: "redis-benchmark",
		shape: "redis-benchmark -t set -d 512 -r 1000000's commands, written by the harness so that they can be paced: " +
			"SET key:<12 digits> with the one 512-byte value redis-benchmark 7.0 generates; the fill writes keys 0, 1, 2, …, " +
			"the load uniform random keys below 1,000,000",
		fill:   func() func([]byte) []byte { return benchmarkKeys(false) },
		stream: func() func([]byte) []byte { return benchmarkKeys(true) },
	},
}

// benchmarkValue is the value redis-benchmark 7.0 sets with -d n: its
// genBenchmarkRandomData, one string for every SET of the run.
func benchmarkValue(n int) []byte {
	state := uint32(1234)
	v := make([]byte, n)
	for i := range v {
		state = state*1103515245 + 12345
		v[i] = '0' + byte((state>>16)&63)
	}
	return v
}

// benchmarkKeys returns a generator of redis-benchmark's SETs: keys
// key:<12 digits> counting up from 0, or drawn below 1,000,000 (-r) from
// a fixed seed.
func benchmarkKeys(random bool) func([]byte) []byte {
	value := benchmarkValue(512)
	rng := rand.New(rand.NewPCG(3, 5))
	next := 0
	return func(dst []byte) []byte {
		k := next
		if random {
			k = rng.IntN(1_000_000)
		} else {
			next++
		}
		dst = append(dst, "*3\r\n$3\r\nSET\r\n$16\r\nkey:"...)
		dst = fmt.Appendf(dst, "%012d\r\n$%d\r\n", k, len(value))
		dst = append(dst, value...)
		return append(dst, "\r\n"...)
	}
}

// regionsResult is the whole section.
type regionsResult struct {
	skipped  string // why the section did not run (no namespaces); "" when it ran
	rateBits int64  // the veth's tbf rate, each way
	dataMB   int    // dataset asked for, MiB
	seconds  int    // each steady load's length
	loads    []int  // percent of the link's rate, of stream
	cells    []regionCell
}

// regionCell is one data kind under one link mode.
type regionCell struct {
	data    string
	mode    string // proxy B's repl-link-compression
	failed  string // what stopped this cell short (it keeps what it measured before); "" when nothing
	dataMB  float64
	synced  bool // sync holds proxy B's full sync
	sync    regionSync
	streams []regionStream // one per load measured
	// digestsSame: DEBUG DIGEST of the primary and of every replica agree
	// after the loads; digested says whether they were compared.
	digested, digestsSame bool
}

// regionSync is proxy B's full sync from proxy A across the link.
type regionSync struct {
	elapsed     time.Duration // proxy B started until its offset equals the primary's
	rdbBytes    int64         // upstream_rdb_bytes of proxy B: the payload, uncompressed
	crossedAB   int64         // veth bytes A→B in that window
	crossedBA   int64
	cpuA, cpuB  time.Duration // process CPU of proxy A in the window, of proxy B since its start
	linkA       linkFigures   // proxy A's link line for proxy B after the sync
	linkB       linkFigures   // proxy B's upstream_link after the sync
	compression string        // proxy B's upstream_link compression= ("" when INFO has no Links section)
	syncsA      int64         // full and partial syncs proxy A served in the window (1: proxy B's alone)
	corrupt     int64         // proxy B's link_corrupt_errors after the sync
}

// regionStream is one steady load through the link.
type regionStream struct {
	pct        int           // the load, percent of the link's rate
	rate       float64       // stream bytes per second, measured
	loadTime   time.Duration // the load's own length
	bytes      int64         // stream written: the primary's offset delta
	crossedAB  int64
	crossedBA  int64
	lag        sample.Summary // bytes: primary offset − the furthest-behind replica's, sampled under load
	lagP99     float64
	catchUp    time.Duration // load end until every replica has it all
	cpuA, cpuB time.Duration // process CPU
	linkA      linkFigures   // delta over the load
	linkB      linkFigures
	resyncs    int64 // full and partial syncs served by proxy A and proxy B, full syncs by the primary, during the load
}

// linkFigures are a Links line's counters (INFO `# Links`); ok is false
// when the proxy's INFO has no such line.
type linkFigures struct {
	ok        bool
	raw, wire int64
	cpu       float64 // seconds
}

func (l linkFigures) sub(earlier linkFigures) linkFigures {
	return linkFigures{ok: l.ok && earlier.ok, raw: l.raw - earlier.raw, wire: l.wire - earlier.wire, cpu: l.cpu - earlier.cpu}
}

// readLink reads one line of a proxy's INFO links section (upstream_link,
// or the first linkN whose ip is host), and that line's compression=.
func readLink(ctx context.Context, p *cluster.Process, line, host string) (linkFigures, string, error) {
	f, err := p.Info(ctx, "links")
	if err != nil {
		return linkFigures{}, "", err
	}
	var v string
	if line != "" {
		v = f[line]
	} else {
		for i := 0; ; i++ {
			s, ok := f["link"+strconv.Itoa(i)]
			if !ok {
				break
			}
			if linkField(s, "ip") == host {
				v = s
				break
			}
		}
	}
	if v == "" {
		return linkFigures{}, "", nil
	}
	// An upstream_link's side-link fetches (fetch_*; absent on a linkN
	// line) cross the same link, so they count with its main link.
	l := linkFigures{ok: true}
	for _, prefix := range []string{"", "fetch_"} {
		raw, _ := strconv.ParseInt(linkField(v, prefix+"raw_bytes"), 10, 64)
		wire, _ := strconv.ParseInt(linkField(v, prefix+"wire_bytes"), 10, 64)
		cpu, _ := strconv.ParseFloat(linkField(v, prefix+"cpu_sec"), 64)
		l.raw, l.wire, l.cpu = l.raw+raw, l.wire+wire, l.cpu+cpu
	}
	return l, linkField(v, "compression"), nil
}

// linkField is key's value in an INFO value of the form k=v,k=v.
func linkField(v, key string) string {
	for _, kv := range strings.Split(v, ",") {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			return val
		}
	}
	return ""
}

func runRegions(ctx context.Context, o *options, proxyBin string) (*regionsResult, error) {
	res := &regionsResult{rateBits: int64(o.regionsMbit) * 1e6, dataMB: o.regionsDataMB, seconds: o.regionsSeconds, loads: o.regionsLoads}
	if err := netns.Supported(); err != nil {
		res.skipped = err.Error()
		logf("regions: SKIPPED, cannot build network namespaces: %v", err)
		return res, nil
	}
	for _, d := range regionDatas {
		if !slices.Contains(o.regionsData, d.name) {
			continue
		}
		cells, err := regionsData(ctx, o, proxyBin, res, d)
		if err != nil {
			return nil, fmt.Errorf("regions, %s: %w", d.name, err)
		}
		res.cells = append(res.cells, cells...)
	}
	return res, nil
}

// regionsData runs one data kind in one pair of namespaces, under each
// link mode in turn.
func regionsData(ctx context.Context, o *options, proxyBin string, res *regionsResult, d regionData) (cells []regionCell, err error) {
	pair, err := netns.New(netns.Options{RateBitsPerSec: res.rateBits})
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := pair.Close(); err == nil {
			err = cerr
		}
	}()
	c, err := cluster.New(proxyBin, o.proxyArgs...)
	if err != nil {
		return nil, err
	}
	defer closeCluster(c, &err)
	placeA := cluster.Place{Host: pair.AddrA, Command: pair.A.Command, Dial: pair.A.DialContext}
	placeB := cluster.Place{Host: pair.AddrB, Command: pair.B.Command, Dial: pair.B.DialContext}

	for _, mode := range linkModes {
		cell := regionCell{data: d.name, mode: mode}
		if err := regionMode(ctx, o, c, pair, placeA, placeB, d, &cell); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			cell.failed = err.Error()
			logf("regions %s, link %s: stopped short: %v", d.name, mode, err)
		}
		cells = append(cells, cell)
	}
	return cells, nil
}

// fillDataset writes the generator's commands into the primary, unpaced,
// until its used_memory_dataset reaches target, and returns that in MB.
func fillDataset(ctx context.Context, primary *cluster.Process, next func([]byte) []byte, target int64) (float64, error) {
	w := load.Commands{Addr: primary.Addr(), Dial: primary.Place().Dial, Next: next, Batch: 256}
	for {
		used, err := primary.InfoInt(ctx, "memory", "used_memory_dataset")
		if err != nil {
			return 0, err
		}
		if used >= target {
			return float64(used) / 1e6, nil
		}
		// Step by what is missing (at least 4 MiB), so that the fill ends
		// close to the target.
		if _, err := w.Run(ctx, max(4<<20, (target-used)/2)); err != nil {
			return 0, fmt.Errorf("fill: %w", err)
		}
	}
}

// regionMode measures cell's link mode on servers of its own: the primary
// filled with the data kind's dataset, proxy A's own full sync (in region
// A), proxy B's full sync from proxy A, its replicas, the steady loads.
// Every server is started afresh for each mode, so that both modes sync
// the same dataset from as fresh a snapshot (the loads add keys: one
// mode's full sync after the other's loads would carry more) and the
// memory of one mode is given back before the next. Each is stopped at
// the end.
func regionMode(ctx context.Context, o *options, c *cluster.Cluster, pair *netns.Pair, placeA, placeB cluster.Place,
	d regionData, cell *regionCell) (err error) {
	var started []*cluster.Process
	defer func() {
		// A proxy's dir holds a snapshot and a log of the dataset's size:
		// gone with the mode, so that the run's disk use stays one mode's.
		for _, p := range slices.Backward(started) {
			if serr := p.Stop(); err == nil {
				err = serr
			}
			if rerr := os.RemoveAll(p.Dir()); err == nil {
				err = rerr
			}
		}
	}()
	primary, err := c.StartRedisAt(ctx, placeA, "primary-"+cell.mode, append([]string{"--repl-diskless-sync", "yes",
		"--repl-diskless-sync-delay", "0"}, noReplicaLimit()...)...)
	if err != nil {
		return err
	}
	started = append(started, primary)
	logf("regions %s, link %s: filling the primary with %d MiB of dataset", d.name, cell.mode, o.regionsDataMB)
	if cell.dataMB, err = fillDataset(ctx, primary, d.fill(), int64(o.regionsDataMB)<<20); err != nil {
		return err
	}
	proxyA, err := c.StartProxyAt(ctx, placeA, "proxy-a-"+cell.mode, primary, noReplicaLimit()...)
	if err != nil {
		return err
	}
	started = append(started, proxyA)
	if err := cluster.WaitLinkUp(ctx, linkTimeout, proxyA); err != nil {
		return fmt.Errorf("proxy A: %w", err)
	}
	if _, err := cluster.WaitOffsets(ctx, linkTimeout, primary, proxyA); err != nil {
		return fmt.Errorf("proxy A: %w", err)
	}
	args := noReplicaLimit()
	if cell.mode != "no" {
		args = append(args, "--repl-link-compression", cell.mode)
	}
	ab0, ba0, err := pair.Counters()
	if err != nil {
		return err
	}
	cpuA0, err := proxyA.CPU()
	if err != nil {
		return err
	}
	syncsA0, err := syncCount(ctx, proxyA)
	if err != nil {
		return err
	}
	logf("regions %s, link %s: proxy B's full sync across the link", cell.data, cell.mode)
	start := time.Now()
	proxyB, err := c.StartProxyAt(ctx, placeB, "proxy-b-"+cell.mode, proxyA, args...)
	if err != nil {
		return err
	}
	started = append(started, proxyB)
	var replicas []*cluster.Process
	if err := cluster.WaitLinkUp(ctx, linkTimeout, proxyB); err != nil {
		return fmt.Errorf("proxy B: %w", err)
	}
	if _, err := cluster.WaitOffsets(ctx, linkTimeout, primary, proxyB); err != nil {
		return fmt.Errorf("proxy B: %w", err)
	}
	s := &cell.sync
	s.elapsed = time.Since(start)
	cell.synced = true
	ab1, ba1, err := pair.Counters()
	if err != nil {
		return err
	}
	s.crossedAB, s.crossedBA = ab1-ab0, ba1-ba0
	cpuA1, err := proxyA.CPU()
	if err != nil {
		return err
	}
	cpuB, err := proxyB.CPU()
	if err != nil {
		return err
	}
	s.cpuA, s.cpuB = cpuA1.Sub(cpuA0).Total(), cpuB.Total()
	if s.rdbBytes, err = proxyB.InfoInt(ctx, "all", "upstream_rdb_bytes"); err != nil {
		return err
	}
	syncsA1, err := syncCount(ctx, proxyA)
	if err != nil {
		return err
	}
	s.syncsA = syncsA1 - syncsA0
	if f, err := proxyB.Info(ctx, "proxy"); err != nil {
		return err
	} else {
		s.corrupt, _ = strconv.ParseInt(f["link_corrupt_errors"], 10, 64)
	}
	if s.linkA, _, err = readLink(ctx, proxyA, "", pair.AddrB); err != nil {
		return err
	}
	if s.linkB, s.compression, err = readLink(ctx, proxyB, "upstream_link", ""); err != nil {
		return err
	}
	logf("regions %s, link %s: full sync %.1f s, %.0f MB across for %.0f MB of RDB (link says %q, %d sync(s) served by proxy A, %d corrupt)",
		cell.data, cell.mode, s.elapsed.Seconds(), float64(s.crossedAB)/1e6, float64(s.rdbBytes)/1e6, s.compression, s.syncsA, s.corrupt)

	for i := range regionReplicas {
		r, err := c.StartRedisAt(ctx, placeB, fmt.Sprintf("replica%d-%s", i+1, cell.mode),
			"--replicaof", proxyB.Host(), strconv.Itoa(proxyB.Port))
		if err != nil {
			return err
		}
		replicas = append(replicas, r)
		started = append(started, r)
	}
	if err := cluster.WaitLinkUp(ctx, linkTimeout, replicas...); err != nil {
		return fmt.Errorf("replicas: %w", err)
	}
	if _, err := cluster.WaitOffsets(ctx, linkTimeout, primary, replicas...); err != nil {
		return fmt.Errorf("replicas: %w", err)
	}
	for _, pct := range o.regionsLoads {
		st, err := regionLoad(ctx, o, pair, primary, proxyA, proxyB, replicas, d, pct)
		if err != nil {
			return fmt.Errorf("load %d%%: %w", pct, err)
		}
		logf("regions %s, link %s, load %d%%: %.1f MB/s of stream, %.3f GB across per GB, lag max %.1f MB, catch-up %.2f s",
			cell.data, cell.mode, pct, st.rate/1e6, float64(st.crossedAB)/float64(st.bytes), st.lag.Max/1e6, st.catchUp.Seconds())
		cell.streams = append(cell.streams, st)
	}
	// Once, after the loads: a digest of a GB-sized dataset takes long on
	// a loaded machine.
	if cell.digestsSame, err = digestsEqual(ctx, &servers{primary: primary, replicas: replicas}); err != nil {
		return err
	}
	cell.digested = true
	return nil
}

// syncCount is the full and partial syncs p has served (and, for a
// redis-server primary, the same counters).
func syncCount(ctx context.Context, p *cluster.Process) (int64, error) {
	f, err := p.Info(ctx, "stats")
	if err != nil {
		return 0, err
	}
	var n int64
	for _, k := range []string{"sync_full", "sync_partial_ok"} {
		v, _ := strconv.ParseInt(f[k], 10, 64)
		n += v
	}
	return n, nil
}

// regionLoad runs one steady load of pct percent of the link's rate for
// o.regionsSeconds, sampling the replicas' lag, and waits for them to
// catch up.
func regionLoad(ctx context.Context, o *options, pair *netns.Pair, primary, proxyA, proxyB *cluster.Process,
	replicas []*cluster.Process, d regionData, pct int) (st regionStream, err error) {
	st.pct = pct
	rate := float64(o.regionsMbit) * 1e6 / 8 * float64(pct) / 100
	total := int64(rate * float64(o.regionsSeconds))
	counted := []*cluster.Process{primary, proxyA, proxyB}
	syncs0 := make([]int64, len(counted))
	for i, p := range counted {
		if syncs0[i], err = syncCount(ctx, p); err != nil {
			return st, err
		}
	}
	linkA0, _, err := readLink(ctx, proxyA, "", pair.AddrB)
	if err != nil {
		return st, err
	}
	linkB0, _, err := readLink(ctx, proxyB, "upstream_link", "")
	if err != nil {
		return st, err
	}
	cpuA0, err := proxyA.CPU()
	if err != nil {
		return st, err
	}
	cpuB0, err := proxyB.CPU()
	if err != nil {
		return st, err
	}
	off0, err := primary.Offset(ctx)
	if err != nil {
		return st, err
	}
	ab0, ba0, err := pair.Counters()
	if err != nil {
		return st, err
	}

	w := load.Commands{Addr: primary.Addr(), Dial: primary.Place().Dial, Rate: int64(rate), Next: pregenerate(d.stream(), total)}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := w.Run(ctx, total)
		done <- err
	}()
	var lags []float64
	tick := time.NewTicker(lagSampleInterval)
	defer tick.Stop()
sampling:
	for {
		select {
		case err := <-done:
			if err != nil {
				return st, err
			}
			break sampling
		case <-tick.C:
			lag, err := sampleLag(ctx, primary, replicas)
			if err != nil {
				<-done
				return st, err
			}
			lags = append(lags, float64(lag))
		}
	}
	st.loadTime = time.Since(start)
	end := time.Now()
	off1, err := cluster.WaitOffsets(ctx, linkTimeout, primary, replicas...)
	if err != nil {
		return st, err
	}
	st.catchUp = time.Since(end)
	ab1, ba1, err := pair.Counters()
	if err != nil {
		return st, err
	}
	cpuA1, err := proxyA.CPU()
	if err != nil {
		return st, err
	}
	cpuB1, err := proxyB.CPU()
	if err != nil {
		return st, err
	}
	linkA1, _, err := readLink(ctx, proxyA, "", pair.AddrB)
	if err != nil {
		return st, err
	}
	linkB1, _, err := readLink(ctx, proxyB, "upstream_link", "")
	if err != nil {
		return st, err
	}
	for i, p := range counted {
		n, err := syncCount(ctx, p)
		if err != nil {
			return st, err
		}
		st.resyncs += n - syncs0[i]
	}
	st.bytes = off1 - off0
	st.rate = float64(st.bytes) / st.loadTime.Seconds()
	st.crossedAB, st.crossedBA = ab1-ab0, ba1-ba0
	st.cpuA, st.cpuB = cpuA1.Sub(cpuA0).Total(), cpuB1.Sub(cpuB0).Total()
	st.linkA, st.linkB = linkA1.sub(linkA0), linkB1.sub(linkB0)
	st.lag = sample.Of(lags)
	if len(lags) > 0 {
		slices.Sort(lags)
		st.lagP99 = lags[min(len(lags)-1, len(lags)*99/100)]
	}
	return st, nil
}

// pregenerate runs next for total bytes of commands before the load starts
// and returns a generator that hands them out one by one (then next's
// further commands): on a machine this loaded, generating JSON documents
// while pacing them fell behind the rate asked; copying them out does not.
func pregenerate(next func([]byte) []byte, total int64) func([]byte) []byte {
	buf := make([]byte, 0, total+64<<10)
	var ends []int
	for int64(len(buf)) < total {
		buf = next(buf)
		ends = append(ends, len(buf))
	}
	i, start := 0, 0
	return func(dst []byte) []byte {
		if i == len(ends) {
			return next(dst)
		}
		dst = append(dst, buf[start:ends[i]]...)
		start = ends[i]
		i++
		return dst
	}
}

// sampleLag is the primary's offset minus the furthest-behind replica's.
// The replicas are read first, so that the lag is never understated by
// the time the reads take.
func sampleLag(ctx context.Context, primary *cluster.Process, replicas []*cluster.Process) (int64, error) {
	low := int64(-1)
	for _, r := range replicas {
		off, err := r.Offset(ctx)
		if err != nil {
			return 0, err
		}
		if low < 0 || off < low {
			low = off
		}
	}
	p, err := primary.Offset(ctx)
	if err != nil {
		return 0, err
	}
	return max(0, p-low), nil
}
