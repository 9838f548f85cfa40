#!/usr/bin/env python3
"""Resharding on loopback processes: `ferry cluster up --storage-nodes 2`, load GB of
1000-byte values into the slots 12288-16383 of s2 (keys obj:N, pipelined SETs), then
`ferry cluster reshard --slots 12288-16383 --to s1` while a writer per node SETs a key of
a range that stays put (one request at a time, 2 ms apart). Prints the bytes moved (keys
and values), the move's time as `cluster reshard` reports it (from its start to the
hand-over's epoch) and the rate, the destination's copy and frozen times from its log, and
each writer's SET p99 before and during the move. Checks a sample of moved keys on s1.

    scripts/bench_reshard.py [GB]   (default 1)
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from bench_failover import command, connect, key_slot, percentile

GB = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
VALUE = b"v" * 1000
FIRST, LAST = 12288, 16383
PIPELINE = 512
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FERRY = os.path.join(ROOT, "target/release/ferry")


def moving_keys(count):
    """`count` keys obj:{TAG}:N spread over every slot of FIRST..=LAST (one tag per slot,
    so only the tags are hashed here)."""
    tags, i = {}, 0
    while len(tags) < LAST - FIRST + 1:
        tag = b"t%d" % i
        i += 1
        if FIRST <= key_slot(tag) <= LAST:
            tags.setdefault(key_slot(tag), tag)
    tags = list(tags.values())
    return [b"obj:{%s}:%d" % (tags[n % len(tags)], n) for n in range(count)]


def key_in(low, high):
    """A key whose slot is in low..=high."""
    i = 0
    while not low <= key_slot(b"stay-%d" % i) <= high:
        i += 1
    return b"stay-%d" % i


def load(addr, keys):
    """Pipelined SETs; fails on any reply but +OK."""
    sock = connect(addr, 30.0)
    batch, replies = [], b""
    def flush():
        nonlocal batch, replies
        sock.sendall(b"".join(batch))
        want = 5 * len(batch)
        while len(replies) < want:
            replies += sock.recv(1 << 20)
        if replies[:want] != b"+OK\r\n" * len(batch):
            sys.exit("load: unexpected reply " + repr(replies[:80]))
        replies = replies[want:]
        batch = []
    for key in keys:
        batch.append(command(b"SET", key, VALUE))
        if len(batch) == PIPELINE:
            flush()
    if batch:
        flush()
    sock.close()


class Writer(threading.Thread):
    """SETs one key in a loop; records (start time, latency) of each success."""

    def __init__(self, addr, key):
        super().__init__(daemon=True)
        self.addr, self.key, self.samples, self.stop = addr, key, [], False

    def run(self):
        sock = connect(self.addr, 5.0)
        while not self.stop:
            started = time.monotonic()
            sock.sendall(command(b"SET", self.key, b"w"))
            if sock.recv(64).startswith(b"+OK"):
                self.samples.append((started, time.monotonic() - started))
            time.sleep(0.002)


def main():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "ferry-cli"], cwd=ROOT, check=True)
    work = tempfile.mkdtemp(prefix="ferry-bench-reshard-")
    path = os.path.join(work, "cluster.json")
    stderr_path = os.path.join(work, "stderr")
    up = subprocess.Popen(
        [FERRY, "cluster", "up", "--storage-nodes", "2", "--compute-nodes", "0",
         "--dir", os.path.join(work, "d"), "--json", path],
        stdout=subprocess.DEVNULL, stderr=open(stderr_path, "w"))
    try:
        while not os.path.exists(path):
            if up.poll() is not None:
                sys.exit("cluster up exited; see " + stderr_path)
            time.sleep(0.1)
        cluster = json.load(open(path))
        s1, s2 = (cluster["storage_nodes"][i]["resp"] for i in (0, 1))
        group = cluster["config_group"]
        count = int(GB * 1e9 / (len(VALUE) + 10))
        keys = moving_keys(count)
        started = time.monotonic()
        load(s2, keys)
        moved_bytes = count * len(VALUE) + sum(len(k) for k in keys)
        print(f"loaded {count} keys, {moved_bytes / 1e9:.2f} GB of keys and values, into s2 in "
              f"{time.monotonic() - started:.1f} s", file=sys.stderr)
        staying = {1: key_in(0, 8191), 2: key_in(8192, FIRST - 1)}
        writers = {1: Writer(s1, staying[1]), 2: Writer(s2, staying[2])}
        for writer in writers.values():
            writer.start()
        time.sleep(3)
        move_start = time.monotonic()
        reshard = subprocess.run(
            [FERRY, "cluster", "reshard", "--config-group", group, "--slots", f"{FIRST}-{LAST}",
             "--to", "s1"], capture_output=True, text=True)
        move_end = time.monotonic()
        if reshard.returncode != 0:
            sys.exit("reshard failed: " + reshard.stderr + reshard.stdout)
        time.sleep(0.5)
        for writer in writers.values():
            writer.stop = True
        reported = float(re.search(r"\(([0-9.]+) s\)", reshard.stdout).group(1))
        copied = re.findall(r"slots copied.*", open(stderr_path).read())
        print(f"moved {moved_bytes / 1e9:.2f} GB in {reported:.2f} s: {moved_bytes / 1e6 / reported:.0f} MB/s")
        if copied:
            print("destination: " + re.sub(r"\x1b\[[0-9;]*m", "", copied[-1]))
        for node, writer in writers.items():
            before = [lat for (t, lat) in writer.samples if t < move_start]
            during = [lat for (t, lat) in writer.samples if move_start <= t <= move_end]
            print(f"s{node} SET p99: {percentile(before, 0.99) * 1000:.2f} ms before ({len(before)}), "
                  f"{percentile(during, 0.99) * 1000:.2f} ms during the move ({len(during)})")
        sock = connect(s1, 5.0)
        for key in keys[:: max(1, count // 1000)]:
            sock.sendall(command(b"GET", key))
            reply = b""
            while not reply.endswith(b"\r\n" + VALUE + b"\r\n"):
                chunk = sock.recv(4096)
                if not chunk or reply.startswith(b"-"):
                    sys.exit(f"{key!r} not on s1 after the move: {reply[:80]!r}")
                reply += chunk
        print("a sample of 1000 moved keys is on s1")
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
