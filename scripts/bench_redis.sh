#!/usr/bin/env bash
# ferry's RESP port against Redis 7 with the same load generator (redis-benchmark) and the
# same pinning: each server on CPU 0, the load generator on CPU 1. Interleaved runs, the
# median of each, and ferry / Redis. Installs Redis (and its tools) if missing; runs
# memtier_benchmark too where it is installed (the distribution here does not package it).
#   [FERRY_FLAGS=...] scripts/bench_redis.sh [RUNS] [CASE]
# Default 3 runs of every case; CASE runs only the cases whose name contains it (e.g. FCALL
# or types); FERRY_FLAGS are more flags for the ferry server (an A/B of a setting).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
only="${2:-}"
redis_port=6391
ferry_port=7791
ferry_resp=6392
nodes=100000

scripts/redis.sh "$redis_port" 0
cargo build --release -q -p ferry-cli
target/release/ferry server --listen 127.0.0.1:$ferry_port --resp 127.0.0.1:$ferry_resp \
  --tenant 1:ferry --cpu-set 0 ${FERRY_FLAGS:-} >/tmp/ferry-bench-redis.log 2>&1 &
ferry_pid=$!
trap 'kill $ferry_pid 2>/dev/null || true; scripts/redis.sh stop $redis_port' EXIT
for _ in $(seq 50); do
  redis-cli -p $ferry_resp -a ferry --no-auth-warning ping >/dev/null 2>&1 && break
  sleep 0.1
done

cli() { # PORT ARGS...: redis-cli as each server wants it
  local port=$1; shift
  if [ "$port" = "$ferry_resp" ]; then
    redis-cli -p "$port" -a ferry --no-auth-warning "$@"
  else
    redis-cli -p "$port" "$@"
  fi
}

# The same libraries and graph on both.
for port in $redis_port $ferry_resp; do
  cli $port FUNCTION LOAD REPLACE "$(cat examples/lua/traverse.lua)" >/dev/null
  cli $port FUNCTION LOAD REPLACE "$(cat examples/lua/small.lua)" >/dev/null
  for first in $(seq 0 1000 $((nodes - 1))); do
    cli $port FCALL load_graph 0 $first 1000 $nodes >/dev/null
  done
done

bench() { # PORT NAME ARGS...: prints requests per second
  local port=$1; shift
  local auth=()
  [ "$port" = "$ferry_resp" ] && auth=(-a ferry)
  taskset -c 1 redis-benchmark -p "$port" "${auth[@]}" -q "$@" 2>/dev/null |
    tr '\r' '\n' | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -1
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

cases=(
  "GET, not pipelined|-t get -n 200000 -c 50"
  "SET, not pipelined|-t set -n 200000 -c 50"
  "GET, 16 pipelined|-t get -n 1000000 -c 50 -P 16"
  "SET, 16 pipelined|-t set -n 1000000 -c 50 -P 16"
  "FCALL traverse depth 1|-n 100000 -c 32 -r $nodes FCALL traverse 1 node:__rand_int__ 1"
  "FCALL traverse depth 5|-n 50000 -c 32 -r $nodes FCALL traverse 1 node:__rand_int__ 5"
  "FCALL traverse depth 10|-n 50000 -c 32 -r $nodes FCALL traverse 1 node:__rand_int__ 10"
  "FCALL get3 (read-only), not pipelined|-n 100000 -c 32 -r $nodes FCALL get3 3 node:__rand_int__ node:__rand_int__ node:__rand_int__"
  "FCALL get3 (read-only), 16 pipelined|-n 300000 -c 32 -P 16 -r $nodes FCALL get3 3 node:__rand_int__ node:__rand_int__ node:__rand_int__"
  "FCALL bump (read-modify-write), not pipelined|-n 100000 -c 32 -r $nodes FCALL bump 1 ctr:__rand_int__"
  "FCALL bump (read-modify-write), 16 pipelined|-n 300000 -c 32 -P 16 -r $nodes FCALL bump 1 ctr:__rand_int__"
)
# Redis's other types (redis-benchmark's own tests): `scripts/bench_redis.sh 3 types`.
for t in hset lpush rpop sadd zadd lrange_100; do
  cases+=("types: $t, not pipelined|-t $t -n 200000 -c 50" "types: $t, 16 pipelined|-t $t -n 1000000 -c 50 -P 16")
done
printf '| | Redis 7 (%s runs) | ferry RESP (%s runs) | ferry / Redis, medians |\n|---|---|---|---|\n' "$runs" "$runs"
for case in "${cases[@]}"; do
  name="${case%%|*}"
  [[ "$name" == *"$only"* ]] || continue
  read -r -a args <<<"${case#*|}"
  redis=(); ferry=()
  for _ in $(seq "$runs"); do
    redis+=("$(bench $redis_port "${args[@]}")")
    ferry+=("$(bench $ferry_resp "${args[@]}")")
  done
  r=$(printf '%s\n' "${redis[@]}" | median)
  f=$(printf '%s\n' "${ferry[@]}" | median)
  printf '| %s | %s | %s | %.2f× |\n' "$name" "${redis[*]}" "${ferry[*]}" "$(echo "$f / $r" | bc -l)"
done

# Memory: RSS before and after 1 M SETs of 100-byte values (keys mem:0000000..), per object.
if [[ -z "$only" || "memory" == *"$only"* ]]; then
  objects=1000000
  python3 -c "
import sys
value = 'v' * 100
out = sys.stdout.buffer
for i in range($objects):
    key = 'mem:%07d' % i
    out.write(b'*3\r\n\$3\r\nSET\r\n\$%d\r\n%s\r\n\$100\r\n%s\r\n' % (len(key), key.encode(), value.encode()))
" >/tmp/ferry-bench-redis-mem.resp
  rss() { ps -o rss= -p "$1" | tr -d ' '; }
  redis_pid=$(redis-cli -p $redis_port info server | sed -n 's/^process_id:\([0-9]*\).*/\1/p')
  printf '\n| memory, %s objects of 100 bytes | Redis 7 | ferry |\n|---|---|---|\n' "$objects"
  before_r=$(rss "$redis_pid"); before_f=$(rss "$ferry_pid")
  redis-cli -p $redis_port --pipe </tmp/ferry-bench-redis-mem.resp >/dev/null
  redis-cli -p $ferry_resp -a ferry --no-auth-warning --pipe </tmp/ferry-bench-redis-mem.resp >/dev/null
  after_r=$(rss "$redis_pid"); after_f=$(rss "$ferry_pid")
  printf '| RSS growth, MiB | %s | %s |\n' "$(( (after_r - before_r) / 1024 ))" "$(( (after_f - before_f) / 1024 ))"
  printf '| bytes per object | %s | %s |\n' "$(( (after_r - before_r) * 1024 / objects ))" "$(( (after_f - before_f) * 1024 / objects ))"
  rm -f /tmp/ferry-bench-redis-mem.resp
fi

if command -v memtier_benchmark >/dev/null 2>&1; then
  for port in $redis_port $ferry_resp; do
    auth=(); [ "$port" = "$ferry_resp" ] && auth=(-a ferry)
    echo "memtier_benchmark against port $port:"
    taskset -c 1 memtier_benchmark -s 127.0.0.1 -p "$port" "${auth[@]}" --protocol=redis \
      --ratio=1:10 -t 1 -c 50 -n 20000 --hide-histogram 2>/dev/null | grep -E '^(Sets|Gets|Totals)'
  done
else
  echo "memtier_benchmark not installed (not packaged by this distribution): skipped"
fi
