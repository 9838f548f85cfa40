#!/usr/bin/env bash
# Bytes per element of one large collection in ferry and in Redis 7: a hash, a set, a
# sorted set and a list of N elements (default 1,000,000) with 10-byte members (and a
# 10-byte value per hash field, an integer score per sorted-set member), written over RESP
# with redis-cli --pipe. Each server starts empty for each type, and the process's resident
# memory (RSS) is read before and after, so allocator overhead and fragmentation count on
# both sides alike. Prints a Markdown table. Installs Redis if missing (scripts/redis.sh).
#   scripts/bench_memory.sh [N]
# REDIS_SERVER=PATH runs that redis-server instead of the installed one.
set -euo pipefail
cd "$(dirname "$0")/.."
elements="${1:-1000000}"
redis_port=6393
ferry_port=7793
ferry_resp=6394
batch=100

if ! command -v redis-server >/dev/null 2>&1; then # scripts/redis.sh installs it
  scripts/redis.sh $redis_port 0
  scripts/redis.sh stop $redis_port
fi
cargo build --release -q -p ferry-cli
work="$(mktemp -d)"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

start() { # SERVER: starts it empty on its port, sets $pid and $port
  case "$1" in
    redis)
      port=$redis_port
      "${REDIS_SERVER:-redis-server}" --port $port --bind 127.0.0.1 --save "" --appendonly no \
        >"$work/redis.log" 2>&1 &
      ;;
    ferry)
      port=$ferry_resp
      # The default quota (4 GiB) is far above what one collection takes.
      target/release/ferry server --listen 127.0.0.1:$ferry_port --resp 127.0.0.1:$port \
        --tenant 1:ferry --default-tenant 1 >"$work/ferry.log" 2>&1 &
      ;;
  esac
  pid=$!
  for _ in $(seq 100); do
    redis-cli -p $port ping >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "$1 did not start" >&2
  exit 1
}

stop() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
}

# The commands that build one collection, in RESP (for redis-cli --pipe).
commands() { # TYPE
  python3 - "$1" "$elements" "$batch" <<'EOF'
import sys
kind, n, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = sys.stdout.buffer
def send(words):
    out.write(b"*%d\r\n" % len(words))
    for w in words:
        out.write(b"$%d\r\n%s\r\n" % (len(w), w))
for first in range(0, n, batch):
    words = {"hash": [b"HSET", b"big"], "set": [b"SADD", b"big"],
             "zset": [b"ZADD", b"big"], "list": [b"RPUSH", b"big"]}[kind]
    for i in range(first, min(first + batch, n)):
        member = b"m%09d" % i
        if kind == "hash":
            words += [member, b"v%09d" % i]
        elif kind == "zset":
            words += [b"%d" % i, member]
        else:
            words.append(member)
    send(words)
EOF
}

echo "| type | Redis bytes/element | ferry bytes/element | ferry / Redis |"
echo "|---|---|---|---|"
for kind in hash set zset list; do
  commands "$kind" >"$work/$kind.resp"
  declare -A per=()
  for server in redis ferry; do
    start "$server"
    before=$(rss_kib "$pid")
    redis-cli -p $port --pipe <"$work/$kind.resp" >"$work/pipe.log"
    grep -q "errors: 0" "$work/pipe.log" || { echo "$server: $(cat "$work/pipe.log")" >&2; exit 1; }
    sleep 1
    after=$(rss_kib "$pid")
    per[$server]=$(awk -v a="$after" -v b="$before" -v n="$elements" 'BEGIN {printf "%.1f", (a - b) * 1024 / n}')
    stop
  done
  ratio=$(awk -v f="${per[ferry]}" -v r="${per[redis]}" 'BEGIN {printf "%.2f", f / r}')
  echo "| $kind | ${per[redis]} | ${per[ferry]} | ${ratio}× |"
  unset per
done
