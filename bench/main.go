// Command bench is replproxy's benchmark harness: the evidence that
// fan-out is cheaper through replproxy, written to bench/RESULTS.md with
// charts next to it. It is a module of its own (bench/go.mod), so that the
// product's go.mod does not carry the plotting library; of replproxy's
// packages it imports only internal/netns and internal/cachedata (through
// a replace of the main module by the parent folder), and it builds
// cmd/replproxy and runs replbuf's benchmarks from the product's root
// (-root, by default the parent folder).
// Run it in bench/:
//
//	make bench           # the full run (go run . in bench/)
//	make bench QUICK=1   # under five minutes on 2 cores (go run . -quick in bench/)
//
// It measures these, each in its own file:
//
//	engine.go     the replbuf fan-out engine vs raw writev (go test -bench)
//	delay.go      how long a write takes to reach a replica: direct,
//	              through a byte forwarder (forward.go, the floor), a
//	              chained redis-server and the proxy, in one run
//	streaming.go  direct, chained and proxied replication of one write load
//	paced.go      chained and proxied at a steady rate from many clients,
//	              and idle
//	floor.go      the send floor and the log's floors measured beside its
//	              rows
//	goals.go      the streaming goals and the stream log's, met or missed
//	              per row
//	fullsync.go   N replicas attaching at once to a primary holding data
//	restart.go    the proxy SIGKILLed under load and started again
//	many.go       a hundred replicas direct and behind one proxy: their
//	              full syncs at once, a paced load's delay to the first
//	              and the last of them, and a SIGKILL of the proxy
//	regions.go    two regions (network namespaces) joined by a rate-limited
//	              link, plain against compressed (needs root, ip and tc)
//
// Every server runs on 127.0.0.1 in a temp dir and is stopped when its run
// ends, on error and on Ctrl-C too (package cluster). The harness lives here,
// beside its results, rather than under cmd/: it is not a program replproxy
// ships, and a reader finds the code that made the figures next to them.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the harness's flags; defaults depend on -quick.
type options struct {
	quick      bool
	out        string // directory of RESULTS.md and the charts
	root       string // the replproxy module's root: where cmd/replproxy is built and replbuf benchmarked
	goCmd      string
	sections   map[string]bool
	reps       int
	replicas   []int
	sizes      []int
	streamMB   int
	syncMB     int
	syncN      []int
	syncReps   int
	syncDelay  int
	restartN   int
	restartRep int
	restartMBs int
	benchCount int
	benchTime  string
	withLogOff bool     // the log-off variant: streaming at logOff, and a restart section
	logOff     []int    // streaming: replica counts measured with the proxy's log off too; nil: not measured
	logFull    []int    // streaming: replica counts measured with a full, recycling log too; nil: not measured
	fullLogMB  int      // streaming: the full-log variant's repl-log-size, MiB
	tlsN       int      // streaming: replicas of the TLS row; 0: no TLS row
	tlsSize    int      // streaming: value size of the TLS row
	proxyArgs  []string // -proxy-args: more replproxy arguments for every proxy a run starts
	profile    bool     // perf-record the proxy at profilePoints
	dryRun     bool     // list the points and exit
	// paced: the rates (SETs/s), value sizes (and cacheSize), replica
	// counts at every rate and at the lowest alone, each run's measured
	// seconds, the load's connections, and the idle row's seconds.
	pacedRates   []int
	pacedSizes   []int
	pacedN       []int
	pacedWideN   []int
	pacedSeconds int
	pacedConns   int
	idleSeconds  int
	// delay: the paced rates (and a burst row), value sizes, replica
	// counts behind each relay, the proxy's repl-read-coalesce-usec
	// settings compared (delayDefault: its default), each run's measured
	// seconds.
	delayRates    []int
	delayBurst    bool
	delayGoFloor  bool // the delay section's floor is the Go forwarder (-floor go), not the C one
	delaySizes    []int
	delayN        []int
	delayWindows  []string
	delayVariants []string // of delayVariantNames, at the smallest N
	delaySeconds  int
	// many: the replicas, the data asked in MiB (manyDataSet: given with
	// -many-data-mb, so refused rather than reduced when it does not fit
	// in memory), the paced load's rate, each run's measured seconds, and
	// the runs per topology.
	manyN       int
	manyDataMB  int
	manyDataSet bool
	manyRate    int
	manySeconds int
	manyReps    int
	// regions: the veth's rate each way in Mbit/s, the dataset in MiB,
	// each steady load's seconds and rates (percent of the link).
	regionsMbit    int
	regionsDataMB  int
	regionsSeconds int
	regionsLoads   []int
	regionsData    []string
	note           string   // free text for RESULTS.md
	args           []string // the flags that shape the figures, for RESULTS.md
}

func parseOptions(args []string) (*options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	o := &options{}
	fs.BoolVar(&o.quick, "quick", false, "a short run: fewer points, less data (a few minutes on 2 cores)")
	fs.StringVar(&o.out, "out", ".", "directory for RESULTS.md and the charts")
	fs.StringVar(&o.root, "root", "..", "the replproxy module's root, where the harness builds cmd/replproxy and runs replbuf's benchmarks")
	fs.StringVar(&o.goCmd, "go", cmp.Or(os.Getenv("GO"), "go"), "the go command, to build replproxy and run the engine benchmarks; $GO when set")
	fs.StringVar(&o.note, "note", "", "a note for RESULTS.md, e.g. what else was loading the machine")
	sections := fs.String("sections", "engine,delay,streaming,paced,fullsync,restart,many,regions", "which measurements to run")
	reps := fs.Int("reps", 0, "runs per streaming, delay and paced point (default 3; quick 1)")
	replicas := fs.String("replicas", "", "streaming: replica counts (default 1,4,8; quick 1,4)")
	sizes := fs.String("sizes", "", "streaming: value sizes in bytes, and \"mixed\" for 100 B–64 KiB values of a fixed seeded distribution (default 512,1024,16384,65536,mixed; quick 16384)")
	streamMB := fs.Int("stream-mb", 0, "streaming: MiB of SETs written per run (default 512; quick 64)")
	syncMB := fs.Int("sync-mb", 0, "full sync: MiB of values on the primary (default 1024; quick 64)")
	syncN := fs.String("sync-replicas", "", "full sync: replica counts (default 1,4,8; quick 1,4)")
	syncReps := fs.Int("sync-reps", 0, "full sync: runs per point (default 3; quick 1)")
	fs.IntVar(&o.syncDelay, "sync-delay", 0, "full sync: the primary's repl-diskless-sync-delay in seconds")
	fs.IntVar(&o.restartN, "restart-replicas", 4, "restart: replicas behind the proxy")
	restartRep := fs.Int("restart-reps", 0, "restart: runs (default 5; quick 1)")
	fs.IntVar(&o.restartMBs, "restart-rate", 16, "restart: write load in MB/s during the kill")
	variants := fs.String("variants", "log-off,log-full,tls", "streaming and restart variants beside the proxy's default (stream log on, from an empty log): log-off, log-full (the log already full and recycling; streaming only), tls; \"none\" for none")
	logOff := fs.String("log-off-replicas", "", "streaming: replica counts measured with the stream log off too, at every value size (default 1,4,8; quick 4)")
	logFull := fs.String("log-full-replicas", "", "streaming: replica counts measured with a full, recycling stream log too, at every value size (default 1,4,8; quick 4)")
	fs.IntVar(&o.fullLogMB, "full-log-size", 128, "streaming: the full-log variant's repl-log-size in MiB (its segments are an eighth of it, at most 64 MiB); the log is filled past it before each run")
	fs.IntVar(&o.tlsN, "tls-replicas", 4, "streaming: replicas of the TLS row")
	fs.IntVar(&o.tlsSize, "tls-size", 16384, "streaming: value size of the TLS row")
	proxyArgs := fs.String("proxy-args", "", "more replproxy arguments for every proxy a run starts, before the variant's own (e.g. \"--repl-backlog-size 64mb\")")
	fs.BoolVar(&o.profile, "profile", false, "perf-record the proxy during one more streaming run per point (proxied, log on: 512 B values to 1 replica and 16 KiB to 4; and TLS at the TLS row's N and size, with the TLS row) and quote the top of perf report")
	fs.BoolVar(&o.dryRun, "dry-run", false, "list the points the run would measure, and exit")
	fs.IntVar(&o.regionsMbit, "regions-mbit", 100, "regions: the rate of the link between the two namespaces, Mbit/s each way (tbf)")
	pacedRates := fs.String("paced-rates", "", "paced: total SETs per second (default 1000,5000,20000; quick 20000)")
	pacedSizes := fs.String("paced-sizes", "", "paced: value sizes in bytes, and \"cache\" for internal/cachedata's cache-like mix of commands (default 128,512,4096,cache; quick 512)")
	pacedN := fs.String("paced-replicas", "", "paced: replica counts measured at every rate (default 1,4; quick 1)")
	pacedWideN := fs.String("paced-wide-replicas", "", "paced: replica counts measured at the lowest rate only, \"none\" for none (default 16; quick none)")
	pacedSeconds := fs.Int("paced-seconds", 0, fmt.Sprintf("paced: seconds of each run's measured window, after a warm-up of %.0f s (default 20; quick 5)", pacedWarmup.Seconds()))
	fs.IntVar(&o.pacedConns, "paced-conns", 20, "paced: the load's connections, each writing its share every millisecond")
	delayRates := fs.String("delay-rates", "", "delay: total SETs per second (default 1000,5000,20000,50000; quick 1000,20000)")
	fs.BoolVar(&o.delayBurst, "delay-burst", true, "delay: a row under a saturating burst too")
	floor := fs.String("floor", "c", "delay: the floor relay, c (an event loop of raw system calls) or go (a Go read and write loop through the Go runtime's poller)")
	delaySizes := fs.String("delay-sizes", "", "delay: value sizes in bytes (default 512; quick 512)")
	delayN := fs.String("delay-replicas", "", "delay: replicas behind each relay (default 1,4,16; quick 1)")
	delayWindows := fs.String("delay-windows", "default,1000", "delay: the proxy's repl-read-coalesce-usec settings compared, \"default\" for its default")
	delayVariants := fs.String("delay-variants", "", "delay: variants measured at the smallest N and the default window, of "+strings.Join(delayVariantNames, ",")+", or none (default all; quick none)")
	delaySeconds := fs.Int("delay-seconds", 0, fmt.Sprintf("delay: seconds of each run's measured window, after a warm-up of %.0f s (default 20; quick 5)", pacedWarmup.Seconds()))
	manyN := fs.Int("many-replicas", 0, "many: replicas, direct and behind one proxy (default 100; quick 16)")
	manyDataMB := fs.Int("many-data-mb", 0, fmt.Sprintf("many: MiB of data on the primary, which every replica holds a copy of; the default is halved until the copies fit in %.0f%% of the memory available (default 256; quick 32)", 100*manyMemShare))
	fs.IntVar(&o.manyRate, "many-rate", 1000, fmt.Sprintf("many: the paced load's SETs per second (%s values, -paced-conns connections)", sizeName(manyValueSize)))
	manySeconds := fs.Int("many-seconds", 0, fmt.Sprintf("many: seconds of the paced load's measured window, after a warm-up of %.0f s (default 20; quick 5)", pacedWarmup.Seconds()))
	manyReps := fs.Int("many-reps", 0, "many: runs per topology, direct and proxied alternated (default 1: one run of both takes about 4 minutes on 2 cores, most of it the replicas' syncs and digests; quick 1)")
	idleSeconds := fs.Int("idle-seconds", 0, "paced: seconds of the idle row's window (default 60; quick 5)")
	regionsDataMB := fs.Int("regions-data-mb", 0, "regions: MiB of dataset on the primary that proxy B's full sync carries across the link (default 1024; quick 32)")
	regionsSeconds := fs.Int("regions-seconds", 0, "regions: seconds of each steady load (default 60; quick 5)")
	regionsLoads := fs.String("regions-loads", "", "regions: the steady loads, in percent of the link's rate of stream (default 90,120; quick 90)")
	regionsData := fs.String("regions-data", regionDataNames(), "regions: the data kinds, of "+regionDataNames())
	benchCount := fs.Int("bench-count", 0, "engine: go test -count (default 10; quick 1)")
	benchTime := fs.String("benchtime", "", "engine: go test -benchtime (default 1s; quick 0.1s)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == "note" || f.Name == "go" || f.Name == "out" || f.Name == "root" || f.Name == "dry-run":
		case f.Value.String() == "true":
			o.args = append(o.args, "-"+f.Name)
		case strings.ContainsAny(f.Value.String(), " '\"\\"):
			// Quoted so that the recorded command runs again as it ran
			// (in a shell, and inside make's BENCH_ARGS='...').
			o.args = append(o.args, "-"+f.Name+"="+strconv.Quote(f.Value.String()))
		default:
			o.args = append(o.args, "-"+f.Name+"="+f.Value.String())
		}
	})
	pick := func(v, full, quick int) int {
		switch {
		case v > 0:
			return v
		case o.quick:
			return quick
		}
		return full
	}
	o.reps = pick(*reps, 3, 1)
	o.streamMB = pick(*streamMB, 512, 64)
	o.syncMB = pick(*syncMB, 1024, 64)
	o.syncReps = pick(*syncReps, 3, 1)
	o.restartRep = pick(*restartRep, 5, 1)
	o.benchCount = pick(*benchCount, 10, 1)
	o.regionsDataMB = pick(*regionsDataMB, 1024, 32)
	o.regionsData = strings.Split(*regionsData, ",")
	for _, d := range o.regionsData {
		if !strings.Contains(","+regionDataNames()+",", ","+d+",") {
			return nil, fmt.Errorf("-regions-data: unknown data kind %q (%s)", d, regionDataNames())
		}
	}
	o.regionsSeconds = pick(*regionsSeconds, 60, 5)
	o.pacedSeconds = pick(*pacedSeconds, 20, 5)
	o.idleSeconds = pick(*idleSeconds, 60, 5)
	o.delaySeconds = pick(*delaySeconds, 20, 5)
	switch *floor {
	case "c":
	case "go":
		o.delayGoFloor = true
	default:
		return nil, fmt.Errorf("-floor: %q is neither c nor go", *floor)
	}
	o.manyN = pick(*manyN, 100, 16)
	o.manyDataMB, o.manyDataSet = pick(*manyDataMB, 256, 32), *manyDataMB > 0
	o.manySeconds = pick(*manySeconds, 20, 5)
	o.manyReps = pick(*manyReps, 1, 1)
	if o.manyRate <= 0 {
		return nil, errors.New("-many-rate: want a positive integer")
	}
	for _, w := range strings.Split(*delayWindows, ",") {
		if w = strings.TrimSpace(w); w != delayDefault {
			if n, err := strconv.Atoi(w); err != nil || n < 0 {
				return nil, fmt.Errorf("-delay-windows: %q is neither %q nor a number of microseconds", w, delayDefault)
			}
		}
		o.delayWindows = append(o.delayWindows, w)
	}
	dv := *delayVariants
	if dv == "" {
		dv = map[bool]string{false: strings.Join(delayVariantNames, ","), true: "none"}[o.quick]
	}
	for _, v := range strings.Split(dv, ",") {
		switch {
		case v == "none":
		case slices.Contains(delayVariantNames, v):
			o.delayVariants = append(o.delayVariants, v)
		default:
			return nil, fmt.Errorf("-delay-variants: unknown variant %q (%s, none)", v, strings.Join(delayVariantNames, ","))
		}
	}
	if o.pacedConns <= 0 {
		return nil, errors.New("-paced-conns: want a positive integer")
	}
	if o.regionsMbit <= 0 {
		return nil, errors.New("-regions-mbit: want a positive integer")
	}
	o.benchTime = *benchTime
	o.proxyArgs = strings.Fields(*proxyArgs)
	if o.benchTime == "" {
		o.benchTime = map[bool]string{false: "1s", true: "0.1s"}[o.quick]
	}
	var err error
	lists := []struct {
		dst         *[]int
		flag        string
		full, quick string
	}{
		{&o.replicas, *replicas, "1,4,8", "1,4"},
		{&o.sizes, *sizes, "512,1024,16384,65536,mixed", "16384"},
		{&o.syncN, *syncN, "1,4,8", "1,4"},
		{&o.logOff, *logOff, "1,4,8", "4"},
		{&o.logFull, *logFull, "1,4,8", "4"},
		{&o.regionsLoads, *regionsLoads, "90,120", "90"},
		{&o.pacedRates, *pacedRates, "1000,5000,20000", "20000"},
		{&o.pacedSizes, *pacedSizes, "128,512,4096,cache", "512"},
		{&o.pacedN, *pacedN, "1,4", "1"},
		{&o.pacedWideN, *pacedWideN, "16", "none"},
		{&o.delayRates, *delayRates, "1000,5000,20000,50000", "1000,20000"},
		{&o.delaySizes, *delaySizes, "512", "512"},
		{&o.delayN, *delayN, "1,4,16", "1"},
	}
	for _, l := range lists {
		s := l.flag
		if s == "" {
			s = map[bool]string{false: l.full, true: l.quick}[o.quick]
		}
		if s == "none" && l.dst == &o.pacedWideN {
			continue
		}
		if *l.dst, err = parseInts(s); err != nil {
			return nil, err
		}
		// Each list of sizes takes its own mix; no other list takes one.
		for _, mix := range []struct {
			size       int
			name, flag string
			sizes      *[]int
		}{{mixedSize, "mixed", "-sizes", &o.sizes}, {cacheSize, "cache", "-paced-sizes", &o.pacedSizes}} {
			if l.dst != mix.sizes && slices.Contains(*l.dst, mix.size) {
				return nil, fmt.Errorf("%q: %q is a value of %s only", s, mix.name, mix.flag)
			}
		}
	}
	withLogOff, withLogFull, withTLSRow := false, false, false
	for _, v := range strings.Split(*variants, ",") {
		switch v {
		case "log-off":
			withLogOff = true
		case "log-full":
			withLogFull = true
		case "tls":
			withTLSRow = true
		case "none":
		default:
			return nil, fmt.Errorf("-variants: unknown variant %q (log-off, log-full, tls, none)", v)
		}
	}
	if o.withLogOff = withLogOff; !withLogOff {
		o.logOff = nil
	}
	if !withLogFull {
		o.logFull = nil
	}
	if !withTLSRow {
		o.tlsN = 0
	}
	if o.fullLogMB <= 0 {
		return nil, errors.New("-full-log-size: want a positive integer")
	}
	if o.tlsN < 0 || o.tlsSize <= 0 {
		return nil, errors.New("-tls-replicas and -tls-size: want positive integers")
	}
	o.sections = map[string]bool{}
	for _, s := range strings.Split(*sections, ",") {
		switch s {
		case "engine", "delay", "streaming", "paced", "fullsync", "restart", "many", "regions":
			o.sections[s] = true
		default:
			return nil, fmt.Errorf("-sections: unknown section %q", s)
		}
	}
	return o, nil
}

// parseInts parses positive integers separated by commas, "mixed" as
// mixedSize and "cache" as cacheSize (only -sizes lists the one and
// -paced-sizes the other; parseOptions checks).
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		switch strings.TrimSpace(f) {
		case "mixed":
			out = append(out, mixedSize)
			continue
		case "cache":
			out = append(out, cacheSize)
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// command is how RESULTS.md says the run can be repeated.
func (o *options) command() string {
	return strings.Join(append([]string{"go run ."}, o.args...), " ")
}

// makeCommand is the make command line that runs command.
func (o *options) makeCommand() string {
	c := "make bench"
	var rest []string
	for _, a := range o.args {
		if a == "-quick" {
			c += " QUICK=1"
		} else {
			rest = append(rest, a)
		}
	}
	if len(rest) > 0 {
		c += fmt.Sprintf(" BENCH_ARGS='%s'", strings.Join(rest, " "))
	}
	return c
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == forwardFlag {
		if err := forwardMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	o, err := parseOptions(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if o.dryRun {
		fmt.Print(o.plan())
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o *options) error {
	if _, err := os.Stat(filepath.Join(o.root, "cmd", "replproxy")); err != nil {
		return fmt.Errorf("-root %s is not replproxy's module root: run in bench/ (make bench does) or name the root", o.root)
	}
	for _, tool := range []string{"redis-server", o.goCmd} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found (make redis installs Redis)", tool)
		}
	}
	tmp, err := os.MkdirTemp("", "replproxy-bench-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	proxyBin := filepath.Join(tmp, "replproxy")
	logf("building replproxy")
	build := exec.CommandContext(ctx, o.goCmd, "build", "-o", proxyBin, "./cmd/replproxy")
	build.Dir = o.root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/replproxy: %w", err)
	}

	r := &results{opts: o, started: time.Now().UTC()}
	r.machine = readMachine(ctx, o.goCmd, o.root, proxyBin)
	if o.sections["engine"] {
		logf("engine: go test -bench (count %d, benchtime %s)", o.benchCount, o.benchTime)
		if r.engine, err = runEngine(ctx, o); err != nil {
			return err
		}
	}
	if o.sections["delay"] {
		if r.delay, err = runDelay(ctx, o, proxyBin); err != nil {
			return err
		}
	}
	if o.sections["streaming"] {
		if r.streaming, err = runStreaming(ctx, o, proxyBin); err != nil {
			return err
		}
	}
	if o.sections["paced"] {
		if r.paced, err = runPaced(ctx, o, proxyBin); err != nil {
			return err
		}
	}
	if o.sections["fullsync"] {
		if r.fullsync, err = runFullSync(ctx, o, proxyBin); err != nil {
			return err
		}
		logf("fullsync: the RDB check, go test -bench (count %d, benchtime %s)", o.benchCount, o.benchTime)
		if r.walk, err = runWalk(ctx, o); err != nil {
			return err
		}
	}
	if o.profile && o.sections["streaming"] {
		r.profiles = runProfiles(ctx, o, proxyBin, tmp)
	}
	if o.sections["restart"] {
		for _, v := range restartVariants(o) {
			x, err := runRestart(ctx, o, proxyBin, v)
			if err != nil {
				return err
			}
			r.restart = append(r.restart, x)
		}
	}
	if o.sections["many"] {
		if r.many, err = runMany(ctx, o, proxyBin); err != nil {
			return err
		}
	}
	if o.sections["regions"] {
		if r.regions, err = runRegions(ctx, o, proxyBin); err != nil {
			return err
		}
	}
	r.finished = time.Now().UTC()
	r.loadEnd = loadAverage()
	if err := r.write(); err != nil {
		return err
	}
	fmt.Print(r.summary())
	return nil
}

// plan lists what a run with o would measure (-dry-run).
func (o *options) plan() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("command: %s", o.command())
	if len(o.proxyArgs) > 0 {
		p("every proxy also gets: %s", strings.Join(o.proxyArgs, " "))
	}
	if o.sections["engine"] {
		p("engine: replbuf benchmarks, -count %d -benchtime %s", o.benchCount, o.benchTime)
	}
	if o.sections["streaming"] {
		pts := streamPoints(o)
		p("streaming: %d points × %d runs, %d MiB each:", len(pts), o.reps, o.streamMB)
		p("  beside each N and size, every run: the send floor (%d MiB per replica); after each log-on run: the log's floor (%d MiB: dd, twice over a full log's file, and CRC-32C)",
			floorBytes(o)>>20, floorBytes(o)>>20)
		if len(o.logFull) > 0 {
			p("  %s: --repl-log-size %dmb, %d MiB written before each run", logFull.name, o.fullLogMB, fullLogFill(o)>>20)
		}
		for _, pt := range pts {
			p("  %-7s %-12s N=%d %s", pt.topology, pt.variant, pt.replicas, sizeName(pt.valueSize))
		}
		if o.profile {
			for _, pt := range profilePoints(o) {
				p("  profile: one more run, proxied %s N=%d %s, under perf record", pt.variant, pt.replicas, sizeName(pt.valueSize))
			}
		}
	}
	if o.sections["delay"] {
		pts := delayPoints(o)
		p("delay: %d points × %d runs, %d connections, %.0f s of warm-up then %d s measured; each run a direct replica, a chained redis-server and the proxy (log on) of one primary:", len(pts), o.reps, o.pacedConns, pacedWarmup.Seconds(), o.delaySeconds)
		for _, pt := range pts {
			p("  %s", pt)
		}
	}
	if o.sections["paced"] {
		pts := pacedPoints(o)
		p("paced: %d points × %d runs, %d connections, %.0f s of warm-up then %d s measured:", len(pts), o.reps, o.pacedConns, pacedWarmup.Seconds(), o.pacedSeconds)
		for _, pt := range pts {
			p("  %s", pt)
		}
		for _, pt := range idlePoints() {
			p("  %s, %d s measured", pt, o.idleSeconds)
		}
	}
	if o.sections["fullsync"] {
		p("full sync: %d MiB, replicas %v, direct and proxied (log on), %d run(s) each", o.syncMB, o.syncN, o.syncReps)
	}
	if o.sections["restart"] {
		for _, v := range restartVariants(o) {
			p("restart: proxied (%s), %d replicas, %d MB/s, %d runs", v.name, o.restartN, o.restartMBs, o.restartRep)
		}
	}
	if o.sections["many"] {
		p("%s", o.manyPlan(memAvailable))
	}
	if o.sections["regions"] {
		p("regions: %d Mbit/s each way between two namespaces, %d MiB of dataset, data %s × link %s: proxy B's full sync, then loads of %v%% of the link for %d s each",
			o.regionsMbit, o.regionsDataMB, strings.Join(o.regionsData, ","), strings.Join(linkModes, ","), o.regionsLoads, o.regionsSeconds)
	}
	return b.String()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "==> "+format+"\n", args...)
}
