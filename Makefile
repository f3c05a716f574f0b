# replproxy: the two commands a newcomer runs are `make demo` and `make test`.
#
# Integration tests run real redis-server and redis-cli (Debian's redis-server and
# redis-tools, Redis 7.0). `make redis` installs them when they are missing and stops
# the server the Debian package may have started, so that tests own every server.

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
GO ?= go

.PHONY: test vet unit redis node promtool bench bench-engine fuzz demo chaos

# bench/ is a module of its own (so that the product's go.mod does not carry
# the plotting library), which ./... does not enter: each target names it too.
test: redis node promtool vet
	$(GO) test -race -timeout 12m ./...
	$(GO) -C bench test -race ./...
	@# The monitoring port's flood test holds its probes to 100 ms and 500 ms in a
	@# binary without the race detector, which makes every request several times
	@# dearer (under -race it allows 1 s): run once more as built, on its own.
	$(GO) test -count=1 -run '^TestHealthzUnderWrongPasswordFlood$$' ./proxy/metrics/

vet:
	$(GO) vet ./...
	$(GO) -C bench vet ./...

# unit runs every test that needs no Redis: under -short each test that needs a
# redis-server, redis-cli, node or promtool skips, even under CI=true, and so do
# the few slow ones that need none. (Without -short the integration tests skip
# when Redis is missing, except under CI=true, where they fail: `make test`
# never skips.)
unit: vet
	$(GO) test -short -race ./...
	$(GO) -C bench test -short -race ./...

redis:
	@if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then \
		echo "installing redis-server and redis-tools"; \
		$(SUDO) apt-get update && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y redis-server redis-tools && \
		{ $(SUDO) service redis-server stop >/dev/null 2>&1 || true; }; \
	fi
	@redis-server --version

# node installs Node.js and npm when missing: the RESP3 test reads the proxy with
# node-redis, which it installs from the npm registry into the user's cache.
node:
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
		echo "installing nodejs and npm"; \
		$(SUDO) apt-get update && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y nodejs npm; \
	fi
	@node --version

# promtool checks the alerting rules in deploy/prometheus (promtool check rules,
# promtool test rules), its example web configuration and scrape job (promtool
# check web-config, promtool check config) and a real scrape of a running proxy
# (promtool check metrics): TestPromtool* in proxy/, which fail without it under
# CI=true. Debian's prometheus package provides it; the services it starts
# (prometheus, and the node exporter it recommends) are stopped, as for
# redis-server.
promtool:
	@if ! command -v promtool >/dev/null 2>&1; then \
		echo "installing prometheus (for promtool)"; \
		$(SUDO) apt-get update && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends prometheus && \
		{ $(SUDO) service prometheus stop >/dev/null 2>&1 || true; } && \
		{ $(SUDO) service prometheus-node-exporter stop >/dev/null 2>&1 || true; }; \
	fi
	@promtool --version 2>&1 | head -1

# bench measures the engine, the delay a write takes to reach a replica
# (direct, through a byte forwarder, a chained redis-server and replproxy, in
# one run), streaming (direct, chained through a redis-server, through
# replproxy), the relays at paced rates and idle, full syncs, a proxy
# restart, a hundred replicas direct and behind one proxy, and two regions
# (network namespaces joined by a 100 Mbit/s veth, a plain against a zstd
# link between two proxies) against real Redis, and writes bench/RESULTS.md
# with charts beside it. The regions section needs root, ip and tc: without
# them it is skipped and RESULTS.md and the summary say why. QUICK=1 is a run
# of under five minutes on 2 cores; BENCH_ARGS passes more flags (go run . -h
# in bench/ lists them), e.g.
#   make bench QUICK=1 BENCH_ARGS='-note "another job was using the CPUs"'
#   make bench BENCH_ARGS=-dry-run    # list the points a run measures
#   make bench BENCH_ARGS=-profile    # add perf profiles of the proxy (needs perf)
#   make bench BENCH_ARGS='-sections streaming -proxy-args "--repl-backlog-size 64mb"'
#   sudo make bench QUICK=1 BENCH_ARGS=-sections=regions   # the regions alone
#   make bench BENCH_ARGS='-sections=paced -root /path/to/other/tree'   # that tree's proxy
# It runs in bench/ (its own module); it builds replproxy from this folder, or
# from -root.
bench: redis
	GO=$(GO) $(GO) -C bench run . $(if $(QUICK),-quick) $(BENCH_ARGS)

# bench-engine is the replbuf benchmarks alone (the engine vs. raw writev).
bench-engine:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./replbuf/

# fuzz runs each fuzz target for a short while; FUZZTIME=5m for longer runs.
# FuzzDifferential compares the proxy with a real redis-server (make redis).
# A run of linkzstd's targets costs a decoder's history (about 1 MiB), so the
# default minute spent minimizing each new input would be most of a run.
FUZZTIME ?= 30s
fuzz: redis
	$(GO) test -run '^$$' -fuzz '^FuzzStream$$' -fuzztime $(FUZZTIME) ./replbuf/
	$(GO) test -run '^$$' -fuzz FuzzStreamScanner -fuzztime $(FUZZTIME) ./proxy/wire/
	$(GO) test -run '^$$' -fuzz FuzzCommandReader -fuzztime $(FUZZTIME) ./proxy/wire/
	$(GO) test -run '^$$' -fuzz FuzzParseConfig -fuzztime $(FUZZTIME) ./proxy/config/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./proxy/webconfig/
	$(GO) test -run '^$$' -fuzz FuzzMemToLL -fuzztime $(FUZZTIME) ./proxy/config/
	$(GO) test -run '^$$' -fuzz FuzzDispatch -fuzztime $(FUZZTIME) ./proxy/
	$(GO) test -run '^$$' -fuzz '^FuzzDifferential$$' -fuzztime $(FUZZTIME) ./proxy/
	$(GO) test -run '^$$' -fuzz '^FuzzHandshakeReplies$$' -fuzztime $(FUZZTIME) ./proxy/upstream/
	$(GO) test -run '^$$' -fuzz '^FuzzParsePrimaryHistory$$' -fuzztime $(FUZZTIME) ./proxy/upstream/
	$(GO) test -run '^$$' -fuzz '^FuzzSetUser$$' -fuzztime $(FUZZTIME) ./proxy/acl/
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./proxy/acl/
	$(GO) test -run '^$$' -fuzz '^FuzzRecover$$' -fuzztime $(FUZZTIME) ./streamlog/
	$(GO) test -run '^$$' -fuzz '^FuzzRecoverMeta$$' -fuzztime $(FUZZTIME) ./streamlog/
	$(GO) test -run '^$$' -fuzz '^FuzzMeta$$' -fuzztime $(FUZZTIME) ./proxy/snapfile/
	$(GO) test -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./proxy/linkzstd/
	$(GO) test -run '^$$' -fuzz '^FuzzCorruptChunk$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./proxy/linkzstd/
	$(GO) test -run '^$$' -fuzz '^FuzzWalker$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./rdbcheck/
	$(GO) test -run '^$$' -fuzz '^FuzzParseReply$$' -fuzztime $(FUZZTIME) ./proxy/clustertopo/

# chaos runs the chaos harness (internal/chaos/deploy, TestChaos): a two-region
# deployment (netns, so root), a primary, three Sentinels, race-built proxies
# and their replicas under a steady write load, and a nemesis that picks a
# fault from SEED every few seconds for DURATION, heals it and checks what it
# cost; the report goes to bench/CHAOS.md. SEED is random unless given, and
# printed, so that a run is reproduced with `make chaos SEED=<seed>`. `make
# test` runs the same test for 90 s with a fixed seed.
DURATION ?= 10m
ifndef SEED
SEED := $(shell od -An -N4 -tu4 /dev/urandom | tr -d ' ')
endif
chaos: redis
	@echo "chaos: SEED=$(SEED) DURATION=$(DURATION)"
	$(GO) test ./internal/chaos/deploy -run '^TestChaos$$' -count 1 -timeout 0 -v \
		-args -chaos.duration=$(DURATION) -chaos.seed=$(SEED) -chaos.report=$(CURDIR)/bench/CHAOS.md

# demo starts a real primary, replproxy and three real replicas of the proxy on
# 127.0.0.1, writes data to the primary and checks that every replica matches it.
demo: redis
	GO=$(GO) bash scripts/demo.sh
