#!/usr/bin/env python3
"""A rolling restart under a steady write load, on loopback processes: `ferry cluster up
--storage-nodes 3 --replicas 1 --ack replica`, one writer per shard setting a new key of
its shard through the gateway's RESP port in a loop, then RUNS times `ferry cluster
restart` (every replica, then every primary after a hand-over). Prints for each run how
long it took and each shard's longest time without an acknowledged write (the writes
refused around its hand-over, or stalled while its only replica restarts), and at the end
how many acknowledged keys read back (every one should).

    scripts/bench_rolling_restart.py [RUNS] [--preload-mb MB]   (default 3 runs, no preload)

--preload-mb writes that many MB (1 KB values) before the first run, so restarts recover
and copies copy something.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_failover import command, connect, key_slot, percentile, preload  # noqa: E402

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 3
PRELOAD_MB = int(sys.argv[sys.argv.index("--preload-mb") + 1]) if "--preload-mb" in sys.argv else 0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FERRY = os.path.join(ROOT, "target/release/ferry")


class Writer(threading.Thread):
    """Sets new keys of slots `low..=high` in a loop; records (time, key) of each ack."""

    def __init__(self, addr, prefix, low, high):
        super().__init__(daemon=True)
        self.addr, self.prefix, self.low, self.high = addr, prefix, low, high
        self.acked, self.stop = [], False

    def run(self):
        sock, i = None, 0
        while not self.stop:
            i += 1
            key = b"%s-%d" % (self.prefix, i)
            if not self.low <= key_slot(key) <= self.high:
                continue
            try:
                sock = sock or connect(self.addr, 2.0)
                sock.sendall(command(b"SET", key, b"v"))
                if sock.recv(64).startswith(b"+OK"):
                    self.acked.append((time.monotonic(), key))
                else:
                    time.sleep(0.005)
            except OSError:
                sock = None
                time.sleep(0.01)

    def longest_gap(self, start, end):
        times = [start] + [t for (t, _) in self.acked if start <= t <= end] + [end]
        return max(b - a for a, b in zip(times, times[1:]))


def read_back(addr, keys):
    """How many of `keys` read back through the gateway (pipelined, 100 at a time)."""
    found = 0
    with connect(addr, 30) as sock:
        reader = sock.makefile("rb")
        for at in range(0, len(keys), 100):
            batch = keys[at:at + 100]
            sock.sendall(b"".join(command(b"GET", key) for key in batch))
            for _ in batch:
                head = reader.readline()
                if head.startswith(b"$") and head.strip() != b"$-1":
                    reader.readline()
                    found += 1
    return found


def main():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "ferry-cli"], cwd=ROOT, check=True)
    work = tempfile.mkdtemp(prefix="ferry-bench-rolling-")
    path = os.path.join(work, "cluster.json")
    up = subprocess.Popen(
        [FERRY, "cluster", "up", "--storage-nodes", "3", "--replicas", "1", "--ack", "replica",
         "--compute-nodes", "0", "--dir", os.path.join(work, "d"), "--json", path],
        stdout=open(os.path.join(work, "stdout"), "w"), stderr=open(os.path.join(work, "stderr"), "w"))
    try:
        while not os.path.exists(path):
            if up.poll() is not None:
                sys.exit("cluster up exited; see " + os.path.join(work, "stderr"))
            time.sleep(0.1)
        cluster = json.load(open(path))
        gateway, group = cluster["gateway_resp"], cluster["config_group"]
        time.sleep(3)
        if PRELOAD_MB:
            started = time.monotonic()
            preload(gateway, PRELOAD_MB)
            print(f"preloaded {PRELOAD_MB} MB in {time.monotonic() - started:.1f} s", file=sys.stderr)
        ranges = sorted(tuple(map(int, n["slots"][0].split("-")))
                        for n in cluster["storage_nodes"] if n["role"] == "primary")
        writers = [Writer(gateway, b"s%d" % i, low, high) for i, (low, high) in enumerate(ranges)]
        for writer in writers:
            writer.start()
        time.sleep(2)
        totals, gaps = [], []
        for run in range(RUNS):
            started = time.monotonic()
            restart = subprocess.run([FERRY, "cluster", "restart", "--config-group", group],
                                     capture_output=True, text=True)
            ended = time.monotonic()
            if restart.returncode != 0:
                sys.exit(f"run {run + 1}: cluster restart failed:\n{restart.stdout}{restart.stderr}")
            totals.append(ended - started)
            run_gaps = [w.longest_gap(started, ended) for w in writers]
            gaps.extend(run_gaps)
            print(f"run {run + 1}: {ended - started:.1f} s; longest time without an ack per shard: "
                  + ", ".join(f"{g:.3f} s" for g in run_gaps), file=sys.stderr)
            time.sleep(2)
        for writer in writers:
            writer.stop = True
        for writer in writers:
            writer.join()
        keys = [key for w in writers for (_, key) in w.acked]
        found = read_back(gateway, keys)
        print(f"rolling restarts: {RUNS} of 3 primaries + 3 replicas (--ack replica"
              f"{f', {PRELOAD_MB} MB preloaded' if PRELOAD_MB else ''}): each took median "
              f"{percentile(totals, 0.5):.1f} s, max {max(totals):.1f} s; longest time without an "
              f"acknowledged write to a shard: median {percentile(gaps, 0.5):.3f} s, max {max(gaps):.3f} s")
        print(f"acknowledged writes: {len(keys)}, read back: {found}, lost: {len(keys) - found}")
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
