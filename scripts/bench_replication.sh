#!/usr/bin/env bash
# What a replica costs a primary's writes: `--ack primary` (a replica follows, the reply
# does not wait for it) and `--ack replica` (the reply waits until the replica has logged
# the write) against a node with no replica, all with --data-dir and --fsync everysec.
# The primary runs on CPU 0; the replica and redis-benchmark share CPU 1 (one machine
# stands in for three). SETs of 3-byte values, 1 client (latency) and 50 clients
# (throughput); each run starts every node afresh; medians over the runs.
#   scripts/bench_replication.sh [RUNS]   (default 3; MODES="primary replica" picks modes,
#                                         the first one the ratios are against)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
base="${TMPDIR:-/tmp}/ferry-bench-replication"
command -v redis-benchmark >/dev/null || { echo "redis-benchmark missing: scripts/redis.sh installs it" >&2; exit 1; }
cargo build --release -q -p ferry-cli
bin=target/release/ferry

pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done; pids=(); true; }
trap 'stop; rm -rf "$base"' EXIT

wait_line() { # FILE PREFIX: the rest of the first line of FILE starting with PREFIX
  for _ in $(seq 300); do
    line=$(grep -m1 "^$2" "$1" 2>/dev/null || true)
    [ -n "$line" ] && { echo "${line#"$2"}"; return; }
    sleep 0.1
  done
  echo "no '$2' line in $1" >&2; cat "$1" >&2; exit 1
}

start() { # MODE (none | primary | replica): starts the nodes; sets $port to the primary's RESP port
  stop
  rm -rf "$base" && mkdir -p "$base/primary" "$base/replica"
  local flags=()
  [ "$1" != none ] && flags=(--replication-listen 127.0.0.1:0 --replication-token bench --ack "$1")
  "$bin" server --listen 127.0.0.1:0 --resp 127.0.0.1:0 --tenant 1:ferry --cpu-set 0 \
    --data-dir "$base/primary" "${flags[@]}" >"$base/primary.out" 2>&1 &
  pids+=($!)
  local resp; resp=$(wait_line "$base/primary.out" "resp on ")
  if [ "$1" != none ]; then
    local source; source=$(wait_line "$base/primary.out" "replication on ")
    "$bin" server --listen 127.0.0.1:0 --resp 127.0.0.1:0 --tenant 1:ferry --cpu-set 1 \
      --data-dir "$base/replica" --replica-of "$source" --replication-token bench \
      >"$base/replica.out" 2>&1 &
    pids+=($!)
    wait_line "$base/replica.out" "recovered " >/dev/null
  fi
  port=${resp##*:}
}

bench() { # PORT ARGS...: rps,p50_ms,p99_ms of the SET line
  local port=$1; shift
  taskset -c 1 redis-benchmark -p "$port" -a ferry --csv -t set "$@" 2>/dev/null |
    awk -F'","' '/^"SET"/ {print $2 "," $5 "," $7}'
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

modes=(${MODES:-none primary replica})
cases=("1 client|-n 20000 -c 1" "50 clients|-n 200000 -c 50")
declare -A results
for run in $(seq "$runs"); do
  for mode in "${modes[@]}"; do
    start "$mode"
    for case in "${cases[@]}"; do
      name=${case%%|*}
      read -ra args <<<"${case#*|}"
      results["$mode|$name"]+="$(bench "$port" "${args[@]}") "
    done
  done
  echo "run $run done" >&2
done
stop

printf '| case | ack | SET/s (median) | p50 ms | p99 ms | p50 / first mode |\n|---|---|---|---|---|---|\n'
for case in "${cases[@]}"; do
  name=${case%%|*}
  base_p50=
  for mode in "${modes[@]}"; do
    values=${results["$mode|$name"]}
    rps=$(tr ' ' '\n' <<<"$values" | sed '/^$/d' | cut -d, -f1 | median)
    p50=$(tr ' ' '\n' <<<"$values" | sed '/^$/d' | cut -d, -f2 | median)
    p99=$(tr ' ' '\n' <<<"$values" | sed '/^$/d' | cut -d, -f3 | median)
    [ "$mode" = "${modes[0]}" ] && base_p50=$p50
    label=$([ "$mode" = none ] && echo "no replica" || echo "$mode")
    ratio=$(awk -v a="$p50" -v b="$base_p50" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
    printf '| %s | %s | %s | %s | %s | %s× |\n' "$name" "$label" "$rps" "$p50" "$p99" "$ratio"
  done
done
