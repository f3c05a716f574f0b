#!/usr/bin/env bash
# bench-e2e.sh: end-to-end comparison, on this machine, of
#   direct: primary -> N real replicas
#   proxy:  primary -> replproxy -> N real replicas
# For each run it starts fresh servers, waits until the replicas are in sync, drives a
# fixed write load on the primary with redis-benchmark and measures
#   - time from the start of the load until every replica's master_repl_offset reaches
#     the primary's (after the load), and the replication throughput:
#     offset delta / that time (the bytes of stream every replica received, per second);
#   - the primary's CPU seconds over that time (INFO cpu used_cpu_sys + used_cpu_user);
#   - the proxy's CPU seconds (its INFO cpu) and its CPU seconds per GB relayed:
#     proxy CPU / (offset delta * N / 1e9).
# The two configurations alternate, REPS times each; medians are reported, with the
# ratios proxy/direct, as a table and as one JSON line (starting with {"benchmark").
#
#   make bench-e2e [E2E_REPLICAS=4] [E2E_REPS=3] [E2E_REQUESTS=200000] [E2E_SIZE=1024]
#                  [E2E_PIPELINE=16] [E2E_CLIENTS=50] [E2E_TESTS=set] [E2E_KEYSPACE=]
#                  [E2E_PROXY_ARGS="--repl-log-size 0"]  (extra replproxy arguments)
#                  [E2E_TLS=1]
#
# E2E_TLS=1 runs every server over TLS only (certificates made with openssl): the
# primary, the proxy (tls-replication upstream, tls-port downstream) and the replicas.
#
# All servers listen on 127.0.0.1; every process and the temp dir are removed on exit.
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N=${E2E_REPLICAS:-4}
REPS=${E2E_REPS:-3}
REQUESTS=${E2E_REQUESTS:-200000}
SIZE=${E2E_SIZE:-1024}
PIPELINE=${E2E_PIPELINE:-16}
CLIENTS=${E2E_CLIENTS:-50}
TESTS=${E2E_TESTS:-set}
KEYSPACE=${E2E_KEYSPACE:-} # redis-benchmark -r; empty: one key, so memory stays flat
RP_TIMEOUT=${E2E_TIMEOUT:-120}
TLS=${E2E_TLS:-0}

for v in N REPS REQUESTS SIZE PIPELINE CLIENTS; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || rp_fail "$v must be a positive integer, got '${!v}'"
done
for cmd in redis-server redis-cli redis-benchmark "${GO:-go}"; do
	command -v "$cmd" >/dev/null 2>&1 || rp_fail "$cmd not found (run 'make redis')"
done

BENCH_ARGS=(-t "$TESTS" -n "$REQUESTS" -d "$SIZE" -P "$PIPELINE" -c "$CLIENTS")
[ -z "$KEYSPACE" ] || BENCH_ARGS+=(-r "$KEYSPACE")

rp_init
rp_build
[ "$TLS" = 0 ] || rp_tls_init

# calc EXPR: floating-point arithmetic.
calc() { awk "BEGIN { printf \"%.6f\n\", $1 }"; }

# median VALUES...
median() {
	printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 }
		END { if (NR == 0) print "nan"; else if (NR % 2) printf "%.6f\n", a[(NR + 1) / 2]; else printf "%.6f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# Per-mode results, one element per run.
declare -A THR SECS PCPU XCPU XCPUGB LAG OPS BYTES

# start_cluster MODE: sets PRIMARY, PROXY (empty for direct) and REPLICAS, and waits
# until every replica's link is up and its offset equals the primary's.
start_cluster() {
	local mode=$1 i up
	rp_free_port
	PRIMARY=$RP_PORT
	PROXY=""
	REPLICAS=()
	rp_start_redis primary "$PRIMARY" --repl-diskless-sync-delay 0
	up=$PRIMARY
	if [ "$mode" = proxy ]; then
		rp_free_port
		PROXY=$RP_PORT
		# shellcheck disable=SC2086 # E2E_PROXY_ARGS is a list of words
		rp_start_proxy proxy "$PROXY" "$PRIMARY" ${E2E_PROXY_ARGS:-}
		rp_wait_link proxy "$PROXY"
		up=$PROXY
	fi
	for ((i = 1; i <= N; i++)); do
		rp_free_port
		REPLICAS+=("$RP_PORT")
		rp_start_redis "replica$i" "$RP_PORT" --replicaof 127.0.0.1 "$up"
	done
	for ((i = 1; i <= N; i++)); do
		rp_wait_link "replica$i" "${REPLICAS[i - 1]}"
	done
	# One write that every replica must apply: proves the stream flows end to end
	# (after a diskless full sync the primary holds the stream back until its
	# replica's first REPLCONF ACK), so the measured run sees a steady state.
	rp_cli "$PRIMARY" SET e2e:warmup 1 >/dev/null
	rp_wait_offsets "$PRIMARY" "" "${REPLICAS[@]}"
}

# run_one MODE REP: one measured run on fresh servers.
run_one() {
	local mode=$1 rep=$2 o0 o1 c0 c1 p0 p1 t0 tl t1 out delta secs thr pcpu xcpu="" xgb="" lag ops
	rm -rf "${RP_TMP:?}"/primary "$RP_TMP"/proxy "$RP_TMP"/replica*
	start_cluster "$mode"

	o0=$(rp_info "$PRIMARY" replication master_repl_offset)
	c0=$(rp_cpu "$PRIMARY")
	[ -z "$PROXY" ] || p0=$(rp_cpu "$PROXY")
	if [ -z "$o0" ] || [ -z "$c0" ]; then rp_fail "cannot read the primary's INFO"; fi
	[ -z "$PROXY" ] || [ -n "$p0" ] || rp_fail "cannot read the proxy's INFO cpu"

	out=$RP_TMP/bench-$mode-$rep.out
	t0=$EPOCHREALTIME
	redis-benchmark "${RP_CLI_TLS[@]}" -h 127.0.0.1 -p "$PRIMARY" -q "${BENCH_ARGS[@]}" </dev/null >"$out" 2>&1 ||
		rp_fail "redis-benchmark failed: $(tail -c 500 "$out")"
	tl=$EPOCHREALTIME
	o1=$(rp_info "$PRIMARY" replication master_repl_offset)
	rp_wait_offsets "$PRIMARY" "$o1" "${REPLICAS[@]}"
	t1=$EPOCHREALTIME
	c1=$(rp_cpu "$PRIMARY")
	[ -z "$PROXY" ] || p1=$(rp_cpu "$PROXY")
	if [ -n "$PROXY" ] && [ "$(rp_info "$PRIMARY" replication connected_slaves)" != 1 ]; then
		rp_fail "the primary does not have exactly one replica (the proxy)"
	fi
	# Behind the proxy, the primary's sync_full also counts the proxy's
	# snapshot fetches (a small stream log refetches as it wraps): what must
	# not happen is a second sync of the proxy's own link, or of a replica.
	if [ -n "$PROXY" ]; then
		[ "$(rp_info "$PROXY" proxy upstream_full_syncs)" -le 1 ] && [ "$(rp_info "$PROXY" stats sync_full)" -le "$N" ] ||
			rp_fail "$mode run $rep: the proxy or a replica resynced during the load (see the proxy's INFO upstream_full_syncs, sync_full)"
	else
		[ "$(rp_info "$PRIMARY" stats sync_full)" -le "$N" ] ||
			rp_fail "$mode run $rep: a replica resynced during the load (see INFO stats sync_full)"
	fi
	rp_stop_all

	delta=$((o1 - o0))
	secs=$(calc "$t1 - $t0")
	thr=$(calc "$delta / $secs / 1e6")
	pcpu=$(calc "$c1 - $c0")
	lag=$(calc "$t1 - $tl")
	# "SET: 123456.79 requests per second, p50=..." (the last test's rate)
	ops=$(tr '\r' '\n' <"$out" | awk '/requests per second/ { for (i = 1; i < NF; i++) if ($(i + 1) == "requests") r = $i } END { print r + 0 }')
	if [ -n "$PROXY" ]; then
		xcpu=$(calc "$p1 - $p0")
		xgb=$(calc "$xcpu / ($delta * $N / 1e9)")
	fi
	THR[$mode]+=" $thr"
	SECS[$mode]+=" $secs"
	PCPU[$mode]+=" $pcpu"
	LAG[$mode]+=" $lag"
	OPS[$mode]+=" $ops"
	BYTES[$mode]+=" $delta"
	XCPU[$mode]+=" $xcpu"
	XCPUGB[$mode]+=" $xgb"
	printf '  run %d %-6s %7.1f MB in %6.3f s = %7.1f MB/s  load %7.0f ops/s  catch-up %5.3f s  primary CPU %6.3f s' \
		"$rep" "$mode" "$(calc "$delta / 1e6")" "$secs" "$thr" "$ops" "$lag" "$pcpu"
	[ -z "$PROXY" ] || printf '  proxy CPU %6.3f s (%.3f s/GB)' "$xcpu" "$xgb"
	printf '\n'
}

echo "bench-e2e: $N replicas, $REPS runs per configuration, load: redis-benchmark ${BENCH_ARGS[*]}$([ "$TLS" = 0 ] || echo ", all over TLS")"
echo "           $(nproc) CPUs, load average $(cut -d" " -f1-3 /proc/loadavg), redis-server $(redis-server --version | awk '{ print $3 }'), fresh servers for every run"
for ((rep = 1; rep <= REPS; rep++)); do
	for mode in direct proxy; do
		run_one "$mode" "$rep"
	done
done

# Medians (word splitting of the space-separated lists is intended).
m() { # ARRAY MODE
	local -n arr=$1
	# shellcheck disable=SC2086
	median ${arr[$2]}
}
d_thr=$(m THR direct) p_thr=$(m THR proxy)
d_secs=$(m SECS direct) p_secs=$(m SECS proxy)
d_pcpu=$(m PCPU direct) p_pcpu=$(m PCPU proxy)
d_lag=$(m LAG direct) p_lag=$(m LAG proxy)
d_ops=$(m OPS direct) p_ops=$(m OPS proxy)
d_bytes=$(m BYTES direct) p_bytes=$(m BYTES proxy)
x_cpu=$(m XCPU proxy) x_gb=$(m XCPUGB proxy)
r_thr=$(calc "$p_thr / $d_thr")
r_pcpu=$(calc "$p_pcpu / $d_pcpu")
r_secs=$(calc "$p_secs / $d_secs")

echo
printf 'medians of %d runs            %12s %12s %13s\n' "$REPS" direct proxy proxy/direct
printf '%-30s %12.1f %12.1f %13.3f\n' "replication throughput MB/s" "$d_thr" "$p_thr" "$r_thr"
printf '%-30s %12.3f %12.3f %13.3f\n' "time to replicate the load, s" "$d_secs" "$p_secs" "$r_secs"
printf '%-30s %12.3f %12.3f %13.3f\n' "primary CPU, s" "$d_pcpu" "$p_pcpu" "$r_pcpu"
printf '%-30s %12s %12.3f\n' "proxy CPU, s" - "$x_cpu"
printf '%-30s %12s %12.3f\n' "proxy CPU s per GB relayed" - "$x_gb"
printf '%-30s %12.3f %12.3f\n' "catch-up after the load, s" "$d_lag" "$p_lag"
printf '%-30s %12.0f %12.0f\n' "load ops/s (redis-benchmark)" "$d_ops" "$p_ops"
printf '%-30s %12.1f %12.1f\n' "stream per replica, MB" "$(calc "$d_bytes / 1e6")" "$(calc "$p_bytes / 1e6")"
echo
printf '{"benchmark":"replproxy-e2e","replicas":%d,"reps":%d,"tests":"%s","requests":%d,"size":%d,"pipeline":%d,"clients":%d,"tls":%d,' \
	"$N" "$REPS" "$TESTS" "$REQUESTS" "$SIZE" "$PIPELINE" "$CLIENTS" "$([ "$TLS" = 0 ] && echo 0 || echo 1)"
printf '"direct_mbps":%.3f,"proxy_mbps":%.3f,"throughput_ratio":%.4f,' "$d_thr" "$p_thr" "$r_thr"
printf '"direct_secs":%.4f,"proxy_secs":%.4f,' "$d_secs" "$p_secs"
printf '"direct_primary_cpu_s":%.4f,"proxy_primary_cpu_s":%.4f,"primary_cpu_ratio":%.4f,' "$d_pcpu" "$p_pcpu" "$r_pcpu"
printf '"proxy_cpu_s":%.4f,"proxy_cpu_s_per_gb":%.4f,"direct_ops":%.0f,"proxy_ops":%.0f,"stream_bytes":%.0f}\n' \
	"$x_cpu" "$x_gb" "$d_ops" "$p_ops" "$p_bytes"
