#!/usr/bin/env bash
# ferry's durability against Redis 7's AOF, on the same load generator and pinning: each
# server on CPU 0, redis-benchmark (50 clients) on CPU 1. Configurations: ferry in memory,
# ferry --fsync no|everysec|always, Redis appendonly no and appendfsync everysec|always.
# Each run starts every server afresh on an empty data dir; medians over the runs.
#   scripts/bench_durable.sh [RUNS]        (default 3)
#   scripts/bench_durable.sh recovery [MB]  MB (default 1024) of 1,000-byte SETs (snapshots
#                                          taken as the log grows), kill -9, restart:
#                                          recovery time and MB/s of snapshot and log read
#   scripts/bench_durable.sh snapshot [MB] [RUNS]  p99 of 1,000-byte SET/GET at 50 clients
#                                          over MB (default 512) of data, without and with
#                                          snapshots taken back to back (SAVE in a loop);
#                                          Redis with BGSAVE in a loop beside it
# The data dirs live under ${TMPDIR:-/tmp}: say which disk that is when quoting numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
port=6393
base="${TMPDIR:-/tmp}/ferry-bench-durable"

if ! command -v redis-server >/dev/null 2>&1; then
  scripts/redis.sh "$port" 0 && scripts/redis.sh stop "$port"
fi
cargo build --release -q -p ferry-cli

configs=("ferry memory" "ferry no" "ferry everysec" "ferry always" "redis memory" "redis everysec" "redis always")
cases=(
  "SET|-t set -n 200000"
  "SET P16|-t set -n 1000000 -P 16"
  "FCALL bump|-n 100000 -r 100000 FCALL bump 1 ctr:__rand_int__"
  "FCALL bump P16|-n 300000 -P 16 -r 100000 FCALL bump 1 ctr:__rand_int__"
)

pid=
stop() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=; true; }
trap 'stop; rm -rf "$base"' EXIT

start() { # SYSTEM MODE [EXTRA FERRY FLAGS...]
  rm -rf "$base" && mkdir -p "$base"
  if [ "$1" = ferry ]; then
    local log=()
    [ "$2" != memory ] && log=(--data-dir "$base" --fsync "$2" "${@:3}")
    taskset -c 0 target/release/ferry server --listen 127.0.0.1:0 --resp 127.0.0.1:$port \
      --tenant 1:ferry "${log[@]}" >"$base.log" 2>&1 &
  else
    local aof=(--appendonly no)
    [ "$2" != memory ] && aof=(--appendonly yes --appendfsync "$2")
    taskset -c 0 redis-server --port $port --bind 127.0.0.1 --requirepass ferry --save '' --dir "$base" "${aof[@]}" \
      >"$base.log" 2>&1 &
  fi
  pid=$!
  for _ in $(seq 100); do
    cli PING >/dev/null 2>&1 && break
    sleep 0.05
  done
  cli FUNCTION LOAD REPLACE "$(cat examples/lua/small.lua)" >/dev/null
}

cli() { redis-cli -p $port -a ferry --no-auth-warning "$@"; }

bench() { # ARGS...: requests per second
  taskset -c 1 redis-benchmark -p $port -a ferry -c 50 -q "$@" 2>/dev/null |
    tr '\r' '\n' | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -1
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

if [ "$runs" = recovery ]; then
  mb="${2:-1024}"
  start ferry everysec
  taskset -c 1 redis-benchmark -p $port -a ferry -c 50 -P 16 -q -t set -d 1000 -r 100000000 \
    -n $((mb * 1024 * 1024 / 1070)) >/dev/null 2>&1
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=
  echo "log: $(du -sm "$base" | cut -f1) MB in $(ls "$base" | grep -c '\.log$') segments"
  taskset -c 0 target/release/ferry server --listen 127.0.0.1:0 --tenant 1:ferry --data-dir "$base" \
    >"$base.out" 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q '^recovered' "$base.out" 2>/dev/null && break; sleep 0.1; done
  line="$(grep '^recovered' "$base.out")"
  echo "$line"
  # "recovered N objects from S snapshots (B bytes) and C commits (L bytes of log) in T ms"
  bytes="$(echo "$line" | grep -o '([0-9]* bytes' | tr -dc '0-9\n' | paste -sd+ | bc)"
  ms="$(echo "$line" | sed -n 's/.* in \([0-9]*\) ms.*/\1/p')"
  echo "recovery: $(echo "$bytes / 1048576 / ($ms / 1000)" | bc -l | xargs printf '%.0f') MB/s"
  exit 0
fi

p99() { # ARGS...: p99 latency in ms of the last test redis-benchmark --csv reports
  taskset -c 1 redis-benchmark -p $port -a ferry -c 50 --csv "$@" 2>/dev/null | tail -1 | cut -d, -f7 | tr -d '"'
}

if [ "$runs" = snapshot ]; then
  mb="${2:-512}"; rounds="${3:-3}"; keys=$((mb * 1024 * 1024 / 1070))
  load=(-t set -d 1000 -r "$keys" -n $((keys * 2)) -P 16 -q)
  measure=(-d 1000 -r "$keys" -n 200000)
  for system in ferry redis; do
    # No snapshot but the ones asked for: the log may grow past the load.
    start "$system" everysec --snapshot-log-bytes 1099511627776
    taskset -c 1 redis-benchmark -p $port -a ferry -c 50 "${load[@]}" >/dev/null 2>&1
    echo "$system: data dir $(du -sm "$base" | cut -f1) MB after the load"
    for _ in $(seq "$rounds"); do
      for t in set get; do
        quiet="$(p99 -t $t "${measure[@]}")"
        ( while :; do
            if [ "$system" = ferry ]; then taskset -c 1 redis-cli -p $port -a ferry --no-auth-warning SAVE >/dev/null 2>&1
            else cli BGSAVE >/dev/null 2>&1; sleep 0.2; fi
          done ) &
        saver=$!
        busy="$(p99 -t $t "${measure[@]}")"
        kill $saver; wait $saver 2>/dev/null || true
        # One more, waited for: none is running when the next quiet measure starts.
        if [ "$system" = ferry ]; then cli SAVE >/dev/null; else while cli INFO persistence | grep -q 'rdb_bgsave_in_progress:1'; do sleep 0.1; done; fi
        echo "$system $t p99 ms: without $quiet, during snapshots $busy"
      done
    done
    if [ "$system" = ferry ]; then
      echo "ferry snapshots: $(grep -c 'snapshot taken' "$base.log"), took_ms: $(grep -o 'took_ms=[0-9]*' "$base.log" | cut -d= -f2 | sort -n | tr '\n' ' ')"
    fi
    stop
  done
  exit 0
fi

declare -A results
for _ in $(seq "$runs"); do
  for config in "${configs[@]}"; do
    read -r system mode <<<"$config"
    start "$system" "$mode"
    for case in "${cases[@]}"; do
      read -r -a args <<<"${case#*|}"
      results["$config|${case%%|*}"]+="$(bench "${args[@]}") "
    done
    stop
  done
done

printf '| requests/s, medians of %s | %s |\n|---|%s\n' "$runs" "$(printf '%s | ' "${configs[@]}" | sed 's/ | $//')" \
  "$(printf -- '---|%.0s' "${configs[@]}")"
for case in "${cases[@]}"; do
  name="${case%%|*}"
  row="| $name |"
  for config in "${configs[@]}"; do
    row+=" $(echo "${results["$config|$name"]}" | tr ' ' '\n' | grep . | median) |"
  done
  echo "$row"
done
echo
echo "ferry always / ferry memory, ferry always / Redis always, ferry everysec / ferry memory:"
for case in "${cases[@]}"; do
  name="${case%%|*}"
  m() { echo "${results["$1|$name"]}" | tr ' ' '\n' | grep . | median; }
  printf '  %-16s %.2f×  %.2f×  %.2f×\n' "$name" \
    "$(echo "$(m 'ferry always') / $(m 'ferry memory')" | bc -l)" \
    "$(echo "$(m 'ferry always') / $(m 'redis always')" | bc -l)" \
    "$(echo "$(m 'ferry everysec') / $(m 'ferry memory')" | bc -l)"
done
