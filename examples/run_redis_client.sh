#!/usr/bin/env bash
# Starts a ferry node with a RESP port and runs examples/redis_client.py against it.
# Installs Python's redis package into a virtual environment (.venv-redis) if the system
# Python lacks it. Needs python3 (with venv) and the ferry binary (built if missing).
#   examples/run_redis_client.sh
set -euo pipefail
cd "$(dirname "$0")/.."

python=python3
if ! "$python" -c 'import redis' 2>/dev/null; then
  if [ ! -x .venv-redis/bin/python ]; then
    echo "installing Python's redis package into .venv-redis..." >&2
    "$python" -m venv .venv-redis
    .venv-redis/bin/pip install --quiet redis
  fi
  python=.venv-redis/bin/python
fi

ferry=target/release/ferry
[ -x "$ferry" ] || cargo build --release -p ferry-cli
out=$(mktemp)
"$ferry" server --listen 127.0.0.1:0 --resp 127.0.0.1:0 --tenant 1:ferry >"$out" &
node=$!
trap 'kill $node 2>/dev/null; rm -f "$out"' EXIT
for _ in $(seq 100); do grep -q '^resp on ' "$out" && break; sleep 0.1; done
port=$(sed -n 's/^resp on .*:\([0-9]*\)$/\1/p' "$out")
"$python" examples/redis_client.py --port "$port"
