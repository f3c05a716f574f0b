// Command replproxy is the replication fan-out proxy for Redis and Valkey.
//
//	replproxy [path/to/replproxy.conf] [--directive value ...] [-]
//	replproxy --help | --version
//
// It reads redis.conf-style configuration exactly as redis-server does ("-"
// reads it from stdin), then
// runs until SIGINT, SIGTERM or SHUTDOWN, which stop it gracefully (the
// replicas get shutdown-timeout to receive the stream); a second signal
// stops it at once.
package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy"
	"github.com/replproxy/replproxy/proxy/clusterset"
	"github.com/replproxy/replproxy/proxy/config"
)

func main() {
	if code, done := usage(os.Args[1:], os.Stdout); done {
		os.Exit(code)
	}
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run is main with its arguments and error output injected, for tests.
func run(args []string, stderr io.Writer) int {
	cfg, err := config.Parse(args)
	if err != nil {
		fatalConfig(stderr, args, err)
		return 1
	}
	log, closeLog, err := newLogger(cfg, stderr)
	if err != nil {
		fatal(stderr, cfg.LogFormat, "cannot open logfile", err)
		return 1
	}
	defer closeLog()
	configFile := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		// Absolute, as redis-server keeps it: INFO shows where it is, and
		// CONFIG REWRITE writes there whatever the working directory.
		configFile = args[0]
		if abs, err := filepath.Abs(configFile); err == nil {
			configFile = abs
		}
	}
	opts := proxy.Options{
		Logger: log, ConfigFile: configFile, OnMaxMemory: memoryLimiter(log), FileLimit: fileLimiter(log),
		Supervisor: supervisor(cfg.Supervised, log),
	}
	var srv server
	if cfg.FollowsAllShards() {
		// Every shard of the cluster, each a server on a port of its own.
		srv, err = clusterset.New(cfg, clusterset.Options{Server: opts})
	} else {
		srv, err = proxy.New(cfg, opts)
	}
	if err != nil {
		log.Error("cannot start", "error", err)
		if cfg.LogFile != "" {
			// The log is a file: standard error says it too, in the same
			// format, for whoever started the process.
			fatal(stderr, cfg.LogFormat, "cannot start", err)
		}
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go stopOnSignals(ctx, sigs, srv, cancel, log)
	if err := srv.Run(ctx); err != nil {
		log.Error("stopped with an error", "error", err)
		return 1
	}
	return 0
}

// server is what the program runs: one proxy.Server, or a clusterset.Set
// of one per shard (cluster-shard all).
type server interface {
	Run(ctx context.Context) error
	Shutdown()
}

// stopOnSignals stops srv gracefully on the first SIGINT or SIGTERM (the
// replicas get shutdown-timeout to receive the stream), and at once on the
// second, by ending Run's context (stop). It returns when ctx ends.
func stopOnSignals(ctx context.Context, sigs <-chan os.Signal, srv server, stop func(), log hclog.Logger) {
	select {
	case <-ctx.Done():
		return
	case sig := <-sigs:
		log.Info("signal received: shutting down; a second signal stops at once", "signal", sig.String())
		srv.Shutdown()
	}
	select {
	case <-ctx.Done():
	case sig := <-sigs:
		log.Warn("second signal received: stopping at once", "signal", sig.String())
		stop()
	}
}

// memoryLimiter returns the hook that derives the Go runtime's soft memory
// limit (GOMEMLIMIT) from maxmemory, unless GOMEMLIMIT is set in the
// environment, which then wins. maxmemory bounds only the memory that
// counts; replica buffers come on top of it, so the limit leaves them room:
// twice maxmemory plus 64 MiB. With maxmemory 0 there is no limit.
func memoryLimiter(log hclog.Logger) func(int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	return func(maxmemory int64) {
		limit := goMemoryLimit(maxmemory)
		debug.SetMemoryLimit(limit)
		if maxmemory > 0 {
			log.Info("go memory limit set from maxmemory", "maxmemory", maxmemory, "gomemlimit", limit)
		}
	}
}

// goMemoryLimit is the Go memory limit for maxmemory: twice maxmemory plus
// 64 MiB, and math.MaxInt64 (no limit) for maxmemory 0. A maxmemory too large
// to double saturates at no limit: the sum would wrap to a negative or tiny
// limit, and the runtime would then collect without pause.
func goMemoryLimit(maxmemory int64) int64 {
	const headroom = 64 << 20
	if maxmemory <= 0 || maxmemory > (math.MaxInt64-headroom)/2 {
		return math.MaxInt64
	}
	return 2*maxmemory + headroom
}

// newLogger builds the root logger from loglevel, logfile and log-format;
// without a logfile it writes to stderr.
func newLogger(cfg *config.Config, stderr io.Writer) (hclog.Logger, func(), error) {
	out := stderr
	closeFn := func() {}
	if cfg.LogFile != "" {
		f, err := os.OpenFile(cfg.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("open logfile: %w", err)
		}
		out, closeFn = f, func() { f.Close() }
	}
	log := hclog.New(&hclog.LoggerOptions{
		Name:            "replproxy",
		Level:           proxy.HCLogLevel(cfg.LogLevel),
		Output:          out,
		JSONFormat:      cfg.LogFormat == config.LogJSON,
		IncludeLocation: false,
	})
	return log, closeFn, nil
}
