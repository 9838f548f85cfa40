#!/usr/bin/env bash
# Redis's own test suite, in its external-server mode, against ferry's RESP port and
# against Redis 7 in the same sitting: per unit, the tests each passes, and which tests
# Redis passes that ferry does not.
#
#   scripts/redis_suite.sh SUITE_PATH [UNIT ...]
#
# SUITE_PATH is a checkout of redis/redis (or valkey-io/valkey) at the tag of the Redis 7
# installed here, holding `runtest` and `tests/`: the suite is never copied into this
# project. For example:
#   git clone --depth 1 --branch "$(redis-server --version | sed 's/.*v=\([0-9.]*\).*/\1/')" \
#     https://github.com/redis/redis /tmp/redis
#   scripts/redis_suite.sh /tmp/redis
# The default units are the data-model issue's. Each run uses `--durable`, so a test that
# raises an error (a command ferry lacks) counts as failed and the file goes on; tests
# tagged `external:skip` are the suite's own skips in this mode. Skipped on both servers,
# with the suite's own tags (docs/BENCHMARKS.md gives the same list):
#   needs:debug             DEBUG (ferry has no DEBUG command)
#   needs:repl              Redis's replication stream (ferry replicates its own log)
# ferry runs with a default tenant (connections need no AUTH), as Redis's `default` user.
# Needs tclsh (installed with apt if missing) and Redis 7 (scripts/redis.sh installs it).
# FERRY_SKIPFILE=FILE (the suite's --skipfile, for ferry's runs only) names tests that
# would hang ferry's run of a file (a test that waits forever for what ferry does not do,
# so the rest of the file never runs); they count as not passed.
# docs/BENCHMARKS.md names the two that do today (blocked clients served in the order
# they blocked): `BLMPOP with multiple blocked clients` and `Unblock fairness is kept
# while pipelining`.
# REDIS_SERVER=PATH runs that redis-server instead of the installed one: one built from
# the suite's own checkout (`make -C SUITE_PATH`), so the server and the suite are the
# same version (ferry answers as Redis 7.2; Debian's Redis is 7.0).
set -euo pipefail
cd "$(dirname "$0")/.."
suite="${1:?usage: scripts/redis_suite.sh SUITE_PATH [UNIT ...]}"
suite="$(cd "$suite" && pwd)"
shift
units=("$@")
if [ ${#units[@]} -eq 0 ]; then
  units=(type/incr type/string type/hash type/list type/set type/zset expire keyspace scan multi functions scripting)
fi
[ -x "$suite/runtest" ] || { echo "no runtest in $suite" >&2; exit 1; }
if ! command -v tclsh >/dev/null 2>&1; then
  echo "installing tcl..." >&2
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq tcl >/dev/null
fi

redis_port=6395
ferry_port=7795
ferry_resp=6396
out="${REDIS_SUITE_OUT:-target/redis-suite}"
mkdir -p "$out"

cargo build --release -q -p ferry-cli
redis_pid=
ferry_pid=
# Both servers start afresh for every unit: a unit's failures (a CONFIG SET a failed test
# never undid) then cost that unit alone, on either side.
start_servers() {
  if [ -n "${REDIS_SERVER:-}" ]; then
    taskset -c 0 "$REDIS_SERVER" --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
      >>"$out/redis.log" 2>&1 &
    redis_pid=$!
  else
    scripts/redis.sh "$redis_port" 0
  fi
  target/release/ferry server --listen 127.0.0.1:$ferry_port --resp 127.0.0.1:$ferry_resp \
    --tenant 1:ferry --default-tenant 1 --cpu-set 0 >>"$out/ferry.log" 2>&1 &
  ferry_pid=$!
  for port in $ferry_resp $redis_port; do
    for _ in $(seq 50); do
      redis-cli -p "$port" ping >/dev/null 2>&1 && break
      sleep 0.1
    done
  done
}
stop_servers() {
  [ -n "$ferry_pid" ] && { kill "$ferry_pid" 2>/dev/null || true; wait "$ferry_pid" 2>/dev/null || true; }
  if [ -n "$redis_pid" ]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  else
    scripts/redis.sh stop $redis_port
  fi
  ferry_pid=
  redis_pid=
}
trap stop_servers EXIT

# PORT UNIT LOG [ARGS...]: runs one unit; the log keeps the suite's own lines.
run_unit() {
  local port="$1" unit="$2" log="$3"
  shift 3
  (cd "$suite" && timeout 900 ./runtest --host 127.0.0.1 --port "$port" --durable --single "unit/$unit" --clients 1 \
    --tags "-needs:debug -needs:repl" "$@") 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' >"$log" || true
}
passed() { grep -a -c '^\[ok\]: ' "$1" || true; }

start_servers
version=$(redis-cli -p $redis_port info server | sed -n 's/^redis_version:\([0-9.]*\).*/\1/p')
stop_servers
printf '| unit | Redis %s passes | ferry passes | ferry / Redis |\n|---|---|---|---|\n' "$version"
for unit in "${units[@]}"; do
  name="${unit//\//_}"
  start_servers
  run_unit $redis_port "$unit" "$out/redis-$name.log"
  run_unit $ferry_resp "$unit" "$out/ferry-$name.log" ${FERRY_SKIPFILE:+--skipfile "$(realpath "$FERRY_SKIPFILE")"}
  stop_servers
  r=$(passed "$out/redis-$name.log")
  f=$(passed "$out/ferry-$name.log")
  ratio=$(awk -v f="$f" -v r="$r" 'BEGIN { if (r > 0) printf "%.0f %%", 100 * f / r; else print "-" }')
  printf '| %s | %s | %s | %s |\n' "$unit" "$r" "$f" "$ratio"
  # The tests Redis passes and ferry does not, for the reader.
  comm -23 <(grep -a '^\[ok\]: ' "$out/redis-$name.log" | sed -E 's/^\[ok\]: //; s/ \([0-9]+ ms\)$//' | sort -u) \
    <(grep -a '^\[ok\]: ' "$out/ferry-$name.log" | sed -E 's/^\[ok\]: //; s/ \([0-9]+ ms\)$//' | sort -u) \
    >"$out/missing-$name.txt"
done
echo "logs and each unit's tests ferry misses: $out/" >&2
