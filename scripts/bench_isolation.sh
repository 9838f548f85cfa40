#!/usr/bin/env bash
# Isolation on one core: tenant 1 calls a Lua function of about 6 ms (in Redis) from 4
# clients while tenant 2 sends a GET every millisecond (one at a time, paced: the same demand
# on both servers). Reports tenant 2's GET latency (p50,
# p99, max) and tenant 1's rate for the function, on ferry (one worker core, both tenants)
# and on Redis 7 (no tenants: the same two loads), each server on CPU 0, the loads on
# CPU 1; the median of RUNS runs of each, interleaved. Installs Redis if missing.
#   scripts/bench_isolation.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
redis_port=6393
ferry_port=7793
ferry_resp=6394
calls=600 # tenant 1's calls per run (about 1 s of the function's CPU per 160 calls)

scripts/redis.sh "$redis_port" 0
cargo build --release -q -p ferry-cli
target/release/ferry server --listen 127.0.0.1:$ferry_port --resp 127.0.0.1:$ferry_resp \
  --tenant 1:one --tenant 2:two --cores 1 --cpu-set 0 >/tmp/ferry-bench-isolation.log 2>&1 &
ferry_pid=$!
trap 'kill $ferry_pid 2>/dev/null || true; scripts/redis.sh stop $redis_port' EXIT
for _ in $(seq 50); do
  redis-cli -p $ferry_resp --user 1 -a one --no-auth-warning ping >/dev/null 2>&1 && break
  sleep 0.1
done

library='#!lua name=isolation
redis.register_function("busy", function(keys, args)
  local x = 0
  for i = 1, tonumber(args[1]) do x = x + i % 3 end
  return x
end)'
redis-cli -p $redis_port FUNCTION LOAD REPLACE "$library" >/dev/null
redis-cli -p $ferry_resp --user 1 -a one --no-auth-warning FUNCTION LOAD REPLACE "$library" >/dev/null
redis-cli -p $redis_port SET k v >/dev/null
redis-cli -p $ferry_resp --user 2 -a two --no-auth-warning SET k v >/dev/null

# Iterations for about 6 ms of the function in Redis.
ms_per_call() { # ITERATIONS
  local rps
  rps=$(taskset -c 1 redis-benchmark -p $redis_port -c 1 -n 40 --csv FCALL busy 0 "$1" 2>/dev/null |
    tail -1 | cut -d, -f2 | tr -d '"')
  echo "1000 / $rps" | bc -l
}
iterations=200000
ms=$(ms_per_call $iterations)
iterations=$(echo "$iterations * 6 / $ms" | bc)
echo "function: $iterations iterations, $(printf '%.2f' "$(ms_per_call $iterations)") ms per call in Redis"

probe() { # PORT AUTH... : a GET every ms, one at a time, until /tmp/ferry-isolation-stop exists
  python3 - "$@" <<'PY'
import os, socket, sys, time
port, auth = int(sys.argv[1]), sys.argv[2:]
s = socket.create_connection(("127.0.0.1", port))
def command(*words):
    s.sendall(b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w.encode()) for w in words))
    data = b""
    while not data.endswith(b"\r\n") or (data.startswith(b"$") and data.count(b"\r\n") < 2 and not data.startswith(b"$-1")):
        data += s.recv(65536)
    return data
if auth:
    command("AUTH", *auth)
latencies = []
next_at = time.perf_counter()
while not os.path.exists("/tmp/ferry-isolation-stop"):
    next_at += 0.001
    started = time.perf_counter()
    command("GET", "k")
    done = time.perf_counter()
    latencies.append((done - started) * 1000)
    if next_at > done:
        time.sleep(next_at - done)
    else:
        next_at = done
latencies.sort()
pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
print("%.3f %.3f %.3f %d" % (pick(0.5), pick(0.99), latencies[-1], len(latencies)))
PY
}

run() { # PORT: prints "rate p50 p99 max gets"
  local port=$1 load_auth=() probe_auth=()
  if [ "$port" = "$ferry_resp" ]; then
    load_auth=(--user 1 -a one)
    probe_auth=(2 two)
  fi
  rm -f /tmp/ferry-isolation-stop
  taskset -c 1 bash -c "$(declare -f probe); probe $port ${probe_auth[*]}" >/tmp/ferry-isolation-probe &
  local probe_pid=$! rate
  sleep 0.3
  rate=$(taskset -c 1 redis-benchmark -p "$port" "${load_auth[@]}" -c 4 -n $calls --csv \
    FCALL busy 0 "$iterations" 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"')
  touch /tmp/ferry-isolation-stop
  wait $probe_pid
  echo "$rate $(cat /tmp/ferry-isolation-probe)"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
column() { # N: the Nth field of each line on stdin, median
  awk -v n="$1" '{print $n}' | median
}

redis_runs=(); ferry_runs=()
for _ in $(seq "$runs"); do
  redis_runs+=("$(run $redis_port)")
  ferry_runs+=("$(run $ferry_resp)")
done
printf '| server | tenant 1 calls/s | tenant 2 GET p50 ms | p99 ms | max ms | GETs |\n|---|---|---|---|---|---|\n'
for server in redis ferry; do
  if [ $server = redis ]; then lines=("${redis_runs[@]}"); else lines=("${ferry_runs[@]}"); fi
  printf '| %s | %s | %s | %s | %s | %s |\n' "$server" \
    "$(printf '%s\n' "${lines[@]}" | column 1)" "$(printf '%s\n' "${lines[@]}" | column 2)" \
    "$(printf '%s\n' "${lines[@]}" | column 3)" "$(printf '%s\n' "${lines[@]}" | column 4)" \
    "$(printf '%s\n' "${lines[@]}" | column 5)"
done
echo "runs (rate p50 p99 max gets): redis: ${redis_runs[*]} | ferry: ${ferry_runs[*]}"
rm -f /tmp/ferry-isolation-stop /tmp/ferry-isolation-probe
