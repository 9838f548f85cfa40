#!/usr/bin/env python3
"""Offline checks of the cluster map (deploy/kubernetes/cluster.toml) by the rules ferry
applies when it loads one, and against the rendered manifests.

- TOML of [[node]] tables with only id, addr, slots, resp, replication;
- ids 1 to 64 bytes without whitespace, each once; addr, resp and replication HOST:PORT
  with a port above 0; slot ranges N or N-M with N <= M < 16384;
- every one of the 16,384 slots served by exactly one node;
- with --manifests FILE (the `kubectl kustomize` output): node i is storage-i at
  ferry-storage-i.ferry-storage (ports 7000, 6379, 7100), and the StatefulSets
  ferry-storage and ferry-storage-replica both have as many replicas as the map has nodes.

Standard library only (Python 3.11+ for tomllib). Exits 1 on any failure.
"""

import argparse
import os
import re
import sys
import tomllib

SLOTS = 16384
FIELDS = {"id", "addr", "slots", "resp", "replication"}


def host_port(text):
    if not isinstance(text, str) or ":" not in text:
        return False
    host, port = text.rsplit(":", 1)
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


def slot_range(text):
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not m:
        return None
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) is not None else lo
    return (lo, hi) if lo <= hi < SLOTS else None


def statefulset_replicas(manifests, name):
    for doc in re.split(r"(?m)^---\s*$", manifests):
        if re.search(r"(?m)^kind: StatefulSet$", doc) and re.search(
                rf"(?m)^  name: {re.escape(name)}$", doc):
            m = re.search(r"(?m)^  replicas: (\d+)$", doc)
            return int(m.group(1)) if m else None
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cluster_map")
    parser.add_argument("--manifests", help="the rendered manifests (kubectl kustomize)")
    args = parser.parse_args()
    failures = []
    try:
        with open(args.cluster_map, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as err:
        print(f"FAIL {args.cluster_map}: {err}")
        return 1
    if set(doc) - {"node"}:
        failures.append(f"unknown top-level keys {sorted(set(doc) - {'node'})}")
    nodes = doc.get("node", [])
    if not 1 <= len(nodes) <= 1000:
        failures.append(f"a map has 1 to 1000 nodes, not {len(nodes)}")
    owner = [None] * SLOTS
    seen = set()
    for index, node in enumerate(nodes):
        nid = node.get("id", f"#{index}")
        if set(node) - FIELDS:
            failures.append(f"node {nid}: unknown keys {sorted(set(node) - FIELDS)}")
        for key in ("id", "addr", "slots"):
            if key not in node:
                failures.append(f"node {nid}: no {key}")
        if not isinstance(nid, str) or not 1 <= len(nid.encode()) <= 64 or re.search(r"\s", nid):
            failures.append(f"node {nid!r}: the id must be 1 to 64 bytes without spaces")
        if nid in seen:
            failures.append(f"node {nid}: the id is used twice")
        seen.add(nid)
        for key in ("addr", "resp", "replication"):
            if key in node and not host_port(node[key]):
                failures.append(f"node {nid}: {key} {node[key]!r} must be HOST:PORT")
        for text in node.get("slots", []):
            r = slot_range(text) if isinstance(text, str) else None
            if r is None:
                failures.append(f"node {nid}: slot range {text!r} is not N or N-M with N <= M < {SLOTS}")
                continue
            for slot in range(r[0], r[1] + 1):
                if owner[slot] is not None:
                    failures.append(f"slot {slot} is served by both {owner[slot]} and {nid}")
                    break
                owner[slot] = nid
    gaps = [s for s in range(SLOTS) if owner[s] is None]
    if gaps:
        failures.append(f"{len(gaps)} slots are served by no node (first: {gaps[0]})")

    if args.manifests:
        with open(args.manifests, encoding="utf-8") as f:
            manifests = f.read()
        for i, node in enumerate(nodes):
            host = f"ferry-storage-{i}.ferry-storage"
            want = {"id": f"storage-{i}", "addr": f"{host}:7000", "resp": f"{host}:6379",
                    "replication": f"{host}:7100"}
            for key, value in want.items():
                if node.get(key) != value:
                    failures.append(f"node #{i}: {key} is {node.get(key)!r}, the pod "
                                    f"ferry-storage-{i} runs as {value!r}")
        for name in ("ferry-storage", "ferry-storage-replica"):
            replicas = statefulset_replicas(manifests, name)
            if replicas != len(nodes):
                failures.append(f"StatefulSet {name} has {replicas} replicas, the map "
                                f"{len(nodes)} nodes")

    print(f"cluster map {os.path.basename(args.cluster_map)}: {len(nodes)} nodes "
          f"({', '.join(str(n.get('id')) for n in nodes)}), {SLOTS - len(gaps)} of {SLOTS} slots"
          + (", matches the StatefulSets" if args.manifests and not failures else ""))
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
