#!/usr/bin/env bash
# Installs Redis 7 if missing and starts it for the ferry-vs-Redis benchmark:
# loopback only, no persistence, pinned to the storage node's CPU (default 0).
#   scripts/redis.sh [PORT] [CPU]      start (idempotent)
#   scripts/redis.sh stop [PORT]       stop
set -euo pipefail

if [ "${1:-}" = "stop" ]; then
  port="${2:-6379}"
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  exit 0
fi
port="${1:-6379}"
cpu="${2:-0}"

if ! command -v redis-server >/dev/null 2>&1; then
  echo "installing redis-server..." >&2
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
fi

version="$(redis-server --version | sed -n 's/.*v=\([0-9]*\).*/\1/p')"
if [ "${version:-0}" -lt 7 ]; then
  echo "redis-server $version found; Redis Functions need 7 or newer" >&2
  exit 1
fi

if redis-cli -p "$port" ping >/dev/null 2>&1; then
  echo "redis already running on 127.0.0.1:$port" >&2
else
  taskset -c "$cpu" redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --enable-debug-command local --dir /tmp \
    --daemonize yes --logfile /tmp/ferry-redis-"$port".log
  for _ in $(seq 50); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
fi
pid="$(redis-cli -p "$port" info server | sed -n 's/^process_id:\([0-9]*\).*/\1/p' | tr -d '\r')"
echo "redis on 127.0.0.1:$port, pid $pid, $(taskset -cp "$pid" | sed 's/.*: /CPUs /')" >&2
