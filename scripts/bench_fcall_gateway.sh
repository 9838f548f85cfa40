#!/usr/bin/env bash
# FCALL traverse through the gateway's RESP port, placed by each policy: `ferry cluster up`
# with one storage node (CPU 0) and one compute node (the gateway, the compute node and
# redis-benchmark share CPU 1: this machine has two). Prints throughput and p99 per run.
#   scripts/bench_fcall_gateway.sh [RUNS] [POLICIES...]   (default 3; rpc kv balance)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"; shift || true
policies=("${@:-rpc kv balance}")
read -r -a policies <<<"${policies[*]}"
nodes=10000
cargo build --release -q -p ferry-cli
command -v redis-benchmark >/dev/null || { echo "redis-benchmark missing: scripts/redis.sh installs it" >&2; exit 1; }

for run in $(seq "$runs"); do
  for policy in "${policies[@]}"; do
    json=$(mktemp)
    target/release/ferry cluster up --storage-nodes 1 --compute-nodes 1 --policy "$policy" \
      --json "$json" >/dev/null 2>&1 &
    cluster=$!
    for _ in $(seq 100); do [ -s "$json" ] && break; sleep 0.1; done
    port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["gateway_resp"].rsplit(":",1)[1])' "$json")
    cli() { redis-cli -p "$port" -a ferry --no-auth-warning "$@"; }
    cli FUNCTION LOAD "$(cat examples/lua/traverse.lua)" >/dev/null
    for first in $(seq 0 1000 $((nodes - 1))); do cli FCALL load_graph 0 "$first" 1000 $nodes >/dev/null; done
    summary=$(taskset -c 1 redis-benchmark -p "$port" -a ferry -n 20000 -c 4 -r $nodes \
      FCALL traverse 1 node:__rand_int__ 10 2>&1 | tr '\r' '\n')
    rps=$(echo "$summary" | sed -n 's/.*throughput summary: \([0-9.]*\).*/\1/p')
    p99=$(echo "$summary" | grep -A2 'latency summary' | tail -1 | awk '{print $5}')
    where=$(cli FUNCTION STATS | tr '\n' ' ' | sed 's/.*traverse \(calls_on_storage_node [0-9]* calls_on_compute [0-9]*\).*/\1/')
    echo "run $run $policy: ${rps:-failed} FCALL/s, p99 ${p99:-?} ms, $where"
    kill -INT $cluster; wait $cluster 2>/dev/null || true
    rm -f "$json"
  done
done
