// Command replproxy is the replication fan-out proxy for Redis and Valkey.
//
//	replproxy [path/to/replproxy.conf] [--directive value ...]
//
// It reads redis.conf-style configuration exactly as redis-server does, then
// runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy"
	"github.com/replproxy/replproxy/proxy/config"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run is main with its arguments and error output injected, for tests.
func run(args []string, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(stderr, "Usage: replproxy [path/to/replproxy.conf] [--directive value ...]")
		return 0
	}
	if len(args) == 1 && (args[0] == "-v" || args[0] == "--version") {
		fmt.Fprintf(stderr, "replproxy v=%s\n", proxy.Version)
		return 0
	}
	cfg, err := config.Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "\n*** FATAL CONFIG ERROR ***\n%v\n", err)
		return 1
	}
	log, closeLog, err := newLogger(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "replproxy: %v\n", err)
		return 1
	}
	defer closeLog()
	configFile := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		configFile = args[0]
	}
	srv, err := proxy.New(cfg, proxy.Options{Logger: log, ConfigFile: configFile})
	if err != nil {
		log.Error("cannot start", "error", err)
		fmt.Fprintf(stderr, "replproxy: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := srv.Run(ctx); err != nil {
		log.Error("stopped with an error", "error", err)
		return 1
	}
	return 0
}

// newLogger builds the root logger from loglevel, logfile and log-format.
func newLogger(cfg *config.Config) (hclog.Logger, func(), error) {
	out := io.Writer(os.Stderr)
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
