#!/usr/bin/env python3
"""Failover on loopback processes: `ferry cluster up --storage-nodes 2 --replicas 1`, then
KILLS times: SIGSTOP the primary of a shard (shards taken in turn; a stopped process is
silent as a partitioned one is), time until a write to that shard's key through the
gateway's RESP port succeeds again (each attempt on a new connection, given up after
300 ms), SIGCONT the old primary and wait until it is back as a replica. A writer per
shard runs throughout; the other shard's write latencies while a failover is under way
are compared with its latencies before the first one.

    scripts/bench_failover.py [KILLS] [--ack primary|replica] [--lose-disk] [--preload-mb MB]
                              (default 20 kills, --ack primary, no preload)

--lose-disk kills the primary with SIGKILL after deleting its data dir (a lost disk)
instead of stopping it: `cluster up` starts it on an empty dir, the config group promotes
its replica, and it comes back as a replica that copies the new primary. Besides the
resume times it prints how long until the node is a caught-up replica again (its
/readyz answers 200). --preload-mb writes that many MB (1 KB values, pipelined straight
to the shards' primaries) before the first kill, so the copy has something to copy.

With --ack replica, a promoted primary acknowledges writes only once a replica has them:
with one replica per shard, once the old primary has restarted and copied it. So the old
primary is continued as soon as the promotion shows in cluster.json, and "resume" then
includes its restart and copy. Prints the resume times' median, p99 and max, and the p99s.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

KILLS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 20
ACK = sys.argv[sys.argv.index("--ack") + 1] if "--ack" in sys.argv else "primary"
LOSE_DISK = "--lose-disk" in sys.argv
PRELOAD_MB = int(sys.argv[sys.argv.index("--preload-mb") + 1]) if "--preload-mb" in sys.argv else 0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def key_slot(key: bytes) -> int:
    """Redis Cluster's slot: CRC16 (XMODEM) of the key (or its {tag}) mod 16384."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    crc = 0
    for byte in key:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc % 16384


def key_of_shard(shard: int) -> bytes:
    low, high = (0, 8191) if shard == 1 else (8192, 16383)
    i = 0
    while not low <= key_slot(b"k%d" % i) <= high:
        i += 1
    return b"k%d" % i


def command(*words: bytes) -> bytes:
    return b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)


def connect(addr: str, timeout: float) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.sendall(command(b"AUTH", b"ferry"))
    if not sock.recv(64).startswith(b"+OK"):
        raise OSError("AUTH refused")
    return sock


def set_once(addr: str, key: bytes, timeout: float) -> bool:
    try:
        with connect(addr, timeout) as sock:
            sock.sendall(command(b"SET", key, b"v"))
            return sock.recv(64).startswith(b"+OK")
    except OSError:
        return False


PRELOAD_CONNECTIONS_PER_SHARD = 8
PRELOAD_BUSY_RETRIES = 100
PRELOAD_SETTLE_S = 90


def preload(cluster: dict, megabytes: int):
    """Writes MEGABYTES of 1 KB values, half to each shard, 100 commands per pipeline,
    straight to each shard's primary (RESP port) on PRELOAD_CONNECTIONS_PER_SHARD
    connections at once. Not through the gateway: its admission holds a bulk load to a
    few hundred requests a second, which would make a 1 GB preload take most of an hour;
    the load is set-up, not what is measured. Each shard's keys share a hash tag, so every
    one of them belongs to that primary."""
    value = b"x" * 1000
    failures = []
    batches_per_shard = megabytes * 5

    def load(addr: str, tag: bytes, first_batch: int):
        try:
            with connect(addr, 60) as sock:
                for batch in range(first_batch, batches_per_shard, PRELOAD_CONNECTIONS_PER_SHARD):
                    pipeline = b"".join(
                        command(b"SET", b"{%s}pre%d" % (tag, batch * 100 + i), value) for i in range(100))
                    for attempt in range(PRELOAD_BUSY_RETRIES + 1):
                        sock.sendall(pipeline)
                        replies = b""
                        while replies.count(b"\r\n") < 100:
                            chunk = sock.recv(65536)
                            if not chunk:
                                raise OSError("the node closed the connection")
                            replies += chunk
                        refused = [line for line in replies.split(b"\r\n")[:100] if line != b"+OK"]
                        if not refused:
                            break
                        # Load shed with BUSY: back off and send the batch again (SET is
                        # idempotent); anything else is a failure.
                        if not refused[0].startswith(b"-BUSY") or attempt == PRELOAD_BUSY_RETRIES:
                            raise OSError(f"a preload write was refused: {refused[0][:200]!r}")
                        time.sleep(0.05)
        except OSError as error:
            failures.append(error)

    loaders = []
    for shard in (1, 2):
        addr = primary_of(cluster, shard)["resp"]
        tag = key_of_shard(shard)
        loaders += [threading.Thread(target=load, args=(addr, tag, first))
                    for first in range(PRELOAD_CONNECTIONS_PER_SHARD)]
    for loader in loaders:
        loader.start()
    for loader in loaders:
        loader.join()
    if failures:
        raise failures[0]


def ready(metrics: str) -> bool:
    try:
        host, port = metrics.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=1) as sock:
            sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
            return b" 200 " in sock.recv(256)
    except OSError:
        return False


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


class Writer(threading.Thread):
    """Writes one shard's key in a loop; records (start time, latency) of each success."""

    def __init__(self, addr, key):
        super().__init__(daemon=True)
        self.addr, self.key, self.samples, self.stop = addr, key, [], False

    def run(self):
        sock = None
        while not self.stop:
            started = time.monotonic()
            try:
                sock = sock or connect(self.addr, 1.0)
                sock.sendall(command(b"SET", self.key, b"w"))
                if sock.recv(64).startswith(b"+OK"):
                    self.samples.append((started, time.monotonic() - started))
            except OSError:
                sock = None
            time.sleep(0.002)


def cluster_json(path):
    with open(path) as f:
        return json.load(f)


def primary_of(cluster, shard):
    slots = "0-8191" if shard == 1 else "8192-16383"
    return next(n for n in cluster["storage_nodes"] if n["role"] == "primary" and n["slots"] == [slots])


def main():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "ferry-cli"], cwd=ROOT, check=True)
    work = tempfile.mkdtemp(prefix="ferry-bench-failover-")
    path = os.path.join(work, "cluster.json")
    up = subprocess.Popen(
        [os.path.join(ROOT, "target/release/ferry"), "cluster", "up", "--storage-nodes", "2",
         "--replicas", "1", "--ack", ACK, "--compute-nodes", "0", "--dir", os.path.join(work, "d"),
         "--json", path],
        stdout=open(os.path.join(work, "stdout"), "w"), stderr=open(os.path.join(work, "stderr"), "w"))
    try:
        while not os.path.exists(path):
            if up.poll() is not None:
                sys.exit("cluster up exited; see " + os.path.join(work, "stderr"))
            time.sleep(0.1)
        cluster = cluster_json(path)
        gateway = cluster["gateway_resp"]
        if PRELOAD_MB:
            started = time.monotonic()
            preload(cluster, PRELOAD_MB)
            print(f"preloaded {PRELOAD_MB} MB in {time.monotonic() - started:.1f} s", file=sys.stderr)
            # The replicas' copy and the snapshots the load started finish before the
            # "before" latencies are taken.
            time.sleep(PRELOAD_SETTLE_S)
        keys = {1: key_of_shard(1), 2: key_of_shard(2)}
        writers = {shard: Writer(gateway, keys[shard]) for shard in (1, 2)}
        for writer in writers.values():
            writer.start()
        time.sleep(3)
        baseline_end = time.monotonic()
        resumes, windows, caught_up = [], [], []
        for kill in range(KILLS):
            shard = 1 + kill % 2
            old = primary_of(cluster_json(path), shard)
            if LOSE_DISK:
                shutil.rmtree(old["data_dir"])
                os.kill(old["pid"], signal.SIGKILL)
            else:
                os.kill(old["pid"], signal.SIGSTOP)
            stopped = time.monotonic()
            continued = False
            while not set_once(gateway, keys[shard], 0.3):
                if time.monotonic() - stopped > 60:
                    sys.exit(f"kill {kill + 1}: writes to shard {shard} never resumed")
                # Under --ack replica the new primary needs a replica: the old one, back.
                if (ACK == "replica" and not LOSE_DISK and not continued
                        and primary_of(cluster_json(path), shard)["id"] != old["id"]):
                    os.kill(old["pid"], signal.SIGCONT)
                    continued = True
            resumed = time.monotonic()
            resumes.append(resumed - stopped)
            windows.append((3 - shard, stopped, resumed))
            if not continued and not LOSE_DISK:
                os.kill(old["pid"], signal.SIGCONT)
            deadline = time.monotonic() + 60
            while True:
                node = next(n for n in cluster_json(path)["storage_nodes"] if n["id"] == old["id"])
                if node["role"] == "replica" and node["pid"] != old["pid"] and ready(node["metrics"]):
                    caught_up.append(time.monotonic() - stopped)
                    break
                if node.get("down") or time.monotonic() > deadline or up.poll() is not None:
                    with open(os.path.join(work, "stderr")) as err:
                        tail = "".join(err.readlines()[-15:])
                    sys.exit(f"kill {kill + 1}: {old['id']} did not come back as a replica: {node}\n{tail}")
                time.sleep(0.1)
            print(f"kill {kill + 1}: shard {shard} ({old['id']}) resumed after {resumes[-1]:.3f} s",
                  file=sys.stderr)
            time.sleep(2)
        for writer in writers.values():
            writer.stop = True
        baseline = [lat for w in writers.values() for (t, lat) in w.samples if t < baseline_end]
        during = [lat for (shard, start, end) in windows
                  for (t, lat) in writers[shard].samples if start <= t <= end]
        print(f"failovers: {KILLS} (--ack {ACK}{', disk lost' if LOSE_DISK else ''}"
              f"{f', {PRELOAD_MB} MB preloaded' if PRELOAD_MB else ''}); writes resumed after: median "
              f"{percentile(resumes, 0.5):.3f} s, p99 {percentile(resumes, 0.99):.3f} s, "
              f"max {max(resumes):.3f} s")
        print(f"back as a caught-up replica (/readyz 200) after: median {percentile(caught_up, 0.5):.3f} s, "
              f"max {max(caught_up):.3f} s" + (" (disk lost: copied whole)" if LOSE_DISK else ""))
        print(f"the other shard's SET latency: p99 {percentile(baseline, 0.99) * 1000:.2f} ms before "
              f"({len(baseline)} writes), p99 {percentile(during, 0.99) * 1000:.2f} ms during failovers "
              f"({len(during)} writes)")
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
