# shellcheck shell=bash
# Helpers of scripts/demo.sh. Source it; do not run it.
#
# Every server is started in the background by rp_start_* and its PID kept in RP_PIDS;
# rp_init installs traps so that, however the script ends (success, failure, Ctrl-C,
# SIGTERM), rp_cleanup stops exactly those processes and removes the temp dir.
# Set RP_KEEP=1 to keep the temp dir (logs, RDB files) for inspection.

export LC_ALL=C # byte-wise tr and sed, whatever the locale

RP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RP_TMP=""
RP_PIDS=()
RP_USED_PORTS=" "
RP_PORT=""
RP_TIMEOUT=${RP_TIMEOUT:-30} # seconds to wait for a link or for offsets to settle

rp_log() { printf '==> %s\n' "$*" >&2; }

# rp_fail prints a message and the tail of every log, then exits non-zero.
rp_fail() {
	printf '\nFAIL: %s\n' "$*" >&2
	local f
	if [ -n "$RP_TMP" ]; then
		for f in "$RP_TMP"/*/*.log; do
			[ -s "$f" ] || continue
			printf -- '--- last lines of %s\n' "${f#"$RP_TMP"/}" >&2
			tail -n 15 "$f" >&2
		done
	fi
	exit 1
}

rp_init() {
	RP_TMP=$(mktemp -d "${TMPDIR:-/tmp}/replproxy-script.XXXXXX")
	trap rp_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
}

# rp_alive PID: the process exists and is not a zombie.
rp_alive() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "${st%% *}" != Z ]
}

# rp_stop_all stops every process this script started: SIGTERM, up to 5 s, then SIGKILL.
rp_stop_all() {
	local pid i alive
	[ "${#RP_PIDS[@]}" -gt 0 ] || return 0
	for pid in "${RP_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for ((i = 0; i < 50; i++)); do
		alive=0
		for pid in "${RP_PIDS[@]}"; do
			if rp_alive "$pid"; then alive=1; fi
		done
		[ "$alive" = 0 ] && break
		sleep 0.1
	done
	for pid in "${RP_PIDS[@]}"; do
		if rp_alive "$pid"; then
			echo "warning: pid $pid did not stop on SIGTERM; killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
	done
	RP_PIDS=()
}

rp_cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	trap '' INT # a second Ctrl-C must not interrupt the cleanup
	rp_stop_all
	if [ -n "$RP_TMP" ] && [ -d "$RP_TMP" ]; then
		if [ "${RP_KEEP:-0}" = 1 ]; then
			echo "kept $RP_TMP" >&2
		else
			rm -rf "$RP_TMP"
		fi
	fi
	exit "$rc"
}

rp_build() {
	rp_log "building replproxy"
	(cd "$RP_ROOT" && "${GO:-go}" build -o "$RP_TMP/replproxy" ./cmd/replproxy) ||
		rp_fail "go build ./cmd/replproxy failed"
}

rp_port_busy() {
	if command -v ss >/dev/null 2>&1; then
		[ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ]
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

# rp_free_port sets RP_PORT to a port nobody listens on, below Linux's ephemeral range
# and not handed out before by this script.
rp_free_port() {
	local p i
	for ((i = 0; i < 200; i++)); do
		p=$((20000 + RANDOM % 12000))
		case "$RP_USED_PORTS" in *" $p "*) continue ;; esac
		if ! rp_port_busy "$p"; then
			RP_USED_PORTS+="$p "
			# shellcheck disable=SC2034 # used by the scripts that source this file
			RP_PORT=$p
			return 0
		fi
	done
	rp_fail "no free TCP port found"
}

rp_cli() {
	local port=$1
	shift
	timeout 10 redis-cli -h 127.0.0.1 -p "$port" "$@"
}

# rp_info PORT SECTION FIELD prints one INFO field (empty when absent).
rp_info() {
	rp_cli "$1" INFO "$2" 2>/dev/null | tr -d '\r' | sed -n "s/^$3://p"
}

# rp_start_redis NAME PORT [redis-server args...]: starts redis-server in the background
# in $RP_TMP/NAME, logging to $RP_TMP/NAME/NAME.log.
rp_start_redis() {
	local name=$1 port=$2
	shift 2
	mkdir -p "$RP_TMP/$name"
	redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
		--enable-debug-command yes --daemonize no \
		--dir "$RP_TMP/$name" --logfile "$RP_TMP/$name/$name.log" "$@" \
		</dev/null >>"$RP_TMP/$name/$name.stdout.log" 2>&1 &
	RP_PIDS+=("$!")
	rp_wait_ping "$name" "$port" "$!"
}

# rp_start_proxy NAME PORT PRIMARYPORT [replproxy args...]
rp_start_proxy() {
	local name=$1 port=$2 up=$3
	shift 3
	mkdir -p "$RP_TMP/$name"
	"$RP_TMP/replproxy" --port "$port" --bind 127.0.0.1 --replicaof 127.0.0.1 "$up" \
		--dir "$RP_TMP/$name" --logfile "$RP_TMP/$name/$name.log" "$@" \
		</dev/null >>"$RP_TMP/$name/$name.stderr.log" 2>&1 &
	RP_PIDS+=("$!")
	rp_wait_ping "$name" "$port" "$!"
}

rp_wait_ping() {
	local name=$1 port=$2 pid=$3 deadline=$((SECONDS + RP_TIMEOUT))
	while [ "$(rp_cli "$port" PING 2>/dev/null)" != PONG ]; do
		rp_alive "$pid" || rp_fail "$name (port $port) exited at startup"
		[ "$SECONDS" -lt "$deadline" ] || rp_fail "$name (port $port) does not answer PING"
		sleep 0.05
	done
}

# rp_wait_link NAME PORT: waits until INFO replication says master_link_status:up.
rp_wait_link() {
	local name=$1 port=$2 deadline=$((SECONDS + RP_TIMEOUT))
	while [ "$(rp_info "$port" replication master_link_status)" != up ]; do
		[ "$SECONDS" -lt "$deadline" ] ||
			rp_fail "$name (port $port): master_link_status is not up after ${RP_TIMEOUT}s"
		sleep 0.05
	done
}

# rp_wait_offsets PRIMARYPORT MINOFFSET REPLICAPORT...: waits until every replica's
# master_repl_offset is at least MINOFFSET (or, when MINOFFSET is empty, equals the
# primary's current master_repl_offset).
rp_wait_offsets() {
	local primary=$1 min=$2 target port off deadline=$((SECONDS + RP_TIMEOUT)) ok
	shift 2
	while :; do
		target=$min
		[ -n "$target" ] || target=$(rp_info "$primary" replication master_repl_offset)
		ok=1
		for port in "$@"; do
			off=$(rp_info "$port" replication master_repl_offset)
			if [ -z "$off" ] || [ -z "$target" ] || [ "$off" -lt "$target" ] ||
				{ [ -z "$min" ] && [ "$off" -ne "$target" ]; }; then
				ok=0
				break
			fi
		done
		[ "$ok" = 1 ] && return 0
		if [ "$SECONDS" -ge "$deadline" ]; then
			for port in "$@"; do
				echo "  port $port: master_repl_offset=$(rp_info "$port" replication master_repl_offset)" \
					"link=$(rp_info "$port" replication master_link_status)" >&2
			done
			rp_fail "replica offsets did not reach the primary's ($target) within ${RP_TIMEOUT}s"
		fi
		sleep 0.01
	done
}
