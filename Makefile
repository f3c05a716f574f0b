# replproxy: the two commands a newcomer runs are `make demo` and `make test`.
#
# Integration tests run real redis-server and redis-cli (Debian's redis-server and
# redis-tools, Redis 7.0). `make redis` installs them when they are missing and stops
# the server the Debian package may have started, so that tests own every server.

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
GO ?= go

.PHONY: test vet unit redis bench fuzz

test: redis vet
	$(GO) test -race -timeout 12m ./...

vet:
	$(GO) vet ./...

# unit runs the tests that need no Redis (the integration tests skip without it,
# except under CI=true, where they fail).
unit: vet
	$(GO) test -race ./replbuf/ ./eviction/

redis:
	@if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then \
		echo "installing redis-server and redis-tools"; \
		$(SUDO) apt-get update && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y redis-server redis-tools && \
		{ $(SUDO) service redis-server stop >/dev/null 2>&1 || true; }; \
	fi
	@redis-server --version

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./replbuf/

# fuzz runs each fuzz target for a short while; FUZZTIME=5m for longer runs.
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzStream -fuzztime $(FUZZTIME) ./replbuf/
