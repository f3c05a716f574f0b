#!/usr/bin/env bash
# demo.sh: a real Redis primary, replproxy as its only replica, and three real
# redis-server replicas of the proxy. Writes mixed data to the primary, waits until
# the replicas' offsets equal the primary's, and compares DEBUG DIGEST everywhere.
#
#   make demo            (or: bash scripts/demo.sh)
#
# Needs go, redis-server, redis-cli and redis-benchmark. Everything listens on
# 127.0.0.1 only; every process and the temp dir are removed on exit (RP_KEEP=1 keeps
# the temp dir and its logs).
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NREPLICAS=3

for cmd in redis-server redis-cli redis-benchmark "${GO:-go}"; do
	command -v "$cmd" >/dev/null 2>&1 || rp_fail "$cmd not found (run 'make redis')"
done

rp_init
rp_build

rp_free_port
PRIMARY=$RP_PORT
rp_free_port
PROXY=$RP_PORT
REPLICAS=()
for ((i = 1; i <= NREPLICAS; i++)); do
	rp_free_port
	REPLICAS+=("$RP_PORT")
done

rp_log "starting primary on 127.0.0.1:$PRIMARY"
rp_start_redis primary "$PRIMARY" --repl-diskless-sync-delay 0

rp_log "starting replproxy on 127.0.0.1:$PROXY (replica of $PRIMARY)"
rp_start_proxy proxy "$PROXY" "$PRIMARY" --loglevel verbose
rp_wait_link proxy "$PROXY"

for ((i = 1; i <= NREPLICAS; i++)); do
	port=${REPLICAS[i - 1]}
	rp_log "starting replica$i on 127.0.0.1:$port (replica of the proxy)"
	rp_start_redis "replica$i" "$port" --replicaof 127.0.0.1 "$PROXY"
done
for ((i = 1; i <= NREPLICAS; i++)); do
	rp_wait_link "replica$i" "${REPLICAS[i - 1]}"
done
rp_log "all replicas report master_link_status:up"

rp_log "writing mixed data to the primary with redis-benchmark"
bench() {
	local out=$RP_TMP/bench.out
	timeout 60 redis-benchmark -h 127.0.0.1 -p "$PRIMARY" -q "$@" </dev/null >"$out" 2>&1 ||
		rp_fail "redis-benchmark $* failed: $(tail -c 500 "$out")"
	tr '\r' '\n' <"$out" | awk 'NF && !/rps=/ { print "    " $0 }'
}
# Small values, many key types, pipelined.
bench -t set,incr,lpush,rpush,sadd,hset,zadd,mset,lpop,spop -n 20000 -r 5000 -d 64 -P 16
# Medium and large values (the large ones span several 16 KiB stream blocks).
bench -t set,lpush -n 4000 -r 2000 -d 4096 -P 8
bench -t set -n 300 -r 100 -d 100000 -c 4
# Explicit writes: plain SETs, another database, an expiry, and a script whose
# several writes travel as one MULTI/EXEC block.
rp_cli "$PRIMARY" SET demo:greeting "hello from the primary" >/dev/null
rp_cli "$PRIMARY" SET demo:counter 41 >/dev/null
rp_cli "$PRIMARY" INCR demo:counter >/dev/null
rp_cli "$PRIMARY" SET demo:ttl x EX 3600 >/dev/null
rp_cli "$PRIMARY" -n 3 SET demo:otherdb "in db 3" >/dev/null
rp_cli "$PRIMARY" EVAL "for i = 1, 200 do redis.call('SET', KEYS[1] .. i, i) end; redis.call('HSET', KEYS[1] .. 'hash', 'a', 1, 'b', 2); redis.call('DEL', KEYS[1] .. '1'); return 202" 1 demo:eval: >/dev/null
rp_cli "$PRIMARY" EVAL "redis.call('RPUSH', KEYS[1], unpack(ARGV)); return redis.call('LLEN', KEYS[1])" 1 demo:list a b c d e >/dev/null

rp_log "waiting for every replica's offset to equal the primary's"
rp_wait_offsets "$PRIMARY" "" "${REPLICAS[@]}"

# check fills errors[] with every way the replicas differ from the primary.
check() {
	local i port d off id
	errors=()
	PRIMARY_DIGEST=$(rp_cli "$PRIMARY" DEBUG DIGEST)
	primary_off=$(rp_info "$PRIMARY" replication master_repl_offset)
	primary_id=$(rp_info "$PRIMARY" replication master_replid)
	case "$PRIMARY_DIGEST" in
	'' | *ERR* | 0000000000000000000000000000000000000000)
		errors+=("the primary's digest is empty or missing: '$PRIMARY_DIGEST'") ;;
	esac
	[ "$(rp_info "$PRIMARY" replication connected_slaves)" = 1 ] ||
		errors+=("the primary has $(rp_info "$PRIMARY" replication connected_slaves) connected_slaves, want 1 (the proxy)")
	[ "$(rp_info "$PROXY" replication connected_slaves)" = "$NREPLICAS" ] ||
		errors+=("the proxy has $(rp_info "$PROXY" replication connected_slaves) connected_slaves, want $NREPLICAS")
	for ((i = 1; i <= NREPLICAS; i++)); do
		port=${REPLICAS[i - 1]}
		d=$(rp_cli "$port" DEBUG DIGEST)
		off=$(rp_info "$port" replication master_repl_offset)
		id=$(rp_info "$port" replication master_replid)
		[ "$d" = "$PRIMARY_DIGEST" ] || errors+=("replica$i digest $d differs from the primary's $PRIMARY_DIGEST")
		[ "$off" = "$primary_off" ] || errors+=("replica$i master_repl_offset $off differs from the primary's $primary_off")
		[ "$id" = "$primary_id" ] || errors+=("replica$i master_replid $id differs from the primary's $primary_id")
		[ "$(rp_info "$port" replication master_link_status)" = up ] || errors+=("replica$i master_link_status is not up")
	done
}

# The primary sends a PING into the stream every 10 s, so a check can race with one:
# on a mismatch, wait for the offsets again and check once more.
for attempt in 1 2 3; do
	check
	if [ "${#errors[@]}" -eq 0 ]; then break; fi
	if [ "$attempt" -lt 3 ]; then
		sleep 0.5
		rp_wait_offsets "$PRIMARY" "" "${REPLICAS[@]}"
	fi
done

# The table. The proxy holds no dataset, so it has no digest.
row() { # name port digest
	printf '%-9s %-6s %-7s %18s %16s  %s\n' "$1" "$2" \
		"$(rp_info "$2" replication role)" \
		"$(rp_info "$2" replication master_repl_offset)" \
		"$(rp_info "$2" replication connected_slaves)" "$3"
}
printf '\n%-9s %-6s %-7s %18s %16s  %s\n' SERVER PORT ROLE MASTER_REPL_OFFSET CONNECTED_SLAVES DEBUG_DIGEST
row primary "$PRIMARY" "$PRIMARY_DIGEST"
row proxy "$PROXY" "(no dataset)"
for ((i = 1; i <= NREPLICAS; i++)); do
	row "replica$i" "${REPLICAS[i - 1]}" "$(rp_cli "${REPLICAS[i - 1]}" DEBUG DIGEST)"
done
echo

if [ "${#errors[@]}" -gt 0 ]; then
	printf '  - %s\n' "${errors[@]}" >&2
	rp_fail "the replicas do not match the primary"
fi
echo "primary: $(rp_cli "$PRIMARY" DBSIZE) keys in db0; replication ID $primary_id, shared by every replica"
echo "OK: all replicas match the primary"
