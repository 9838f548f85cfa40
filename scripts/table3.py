#!/usr/bin/env python3
"""Pyxis Table III in the simulator: the polarized pair at three mixes and four C:S ratios.

For each cell it measures the turning-point bound (`ferry sim-sweep --turning-point`), the
one-X bound (`ferry sim-sweep`) and a run of each policy (`ferry sim`, judged on its last
quarter), and prints a markdown table with each policy's gap to the turning-point bound.

Usage: scripts/table3.py [--ferry target/release/ferry] [--policies balance,pyxis,kayak]
       [--duration 3s] [--x-step 0.05] [--json out.json]
Deterministic: the same binary gives the same table.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

A = "task:accesses=4,size=49152,compute=50ns"
B = "task:accesses=1,size=64,compute=50us"
MIXES = [(0.2, 0.8), (0.5, 0.5), (0.8, 0.2)]
APP_CORES = [16, 32, 64, 128]  # C:S 4:1 to 32:1 on 4 storage cores
STORAGE_CORES = 4
SLO = "1ms"


def ferry_json(ferry, args):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.json")
        subprocess.run([ferry, *args, "--json", out], check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ferry", default="target/release/ferry")
    p.add_argument("--policies", default="balance,pyxis,kayak")
    p.add_argument("--duration", default="3s")
    p.add_argument("--x-step", default="0.05")
    p.add_argument("--json")
    a = p.parse_args()
    policies = a.policies.split(",")
    cells = []
    for wa, wb in MIXES:
        workload = f"{A}@{wa}+{B}@{wb}"
        for app in APP_CORES:
            base = ["--app-cores", str(app), "--storage-cores", str(STORAGE_CORES), "--slo-p99", SLO,
                    "--workload", workload]
            tp = ferry_json(a.ferry, ["sim-sweep", *base, "--turning-point", "--x-step", a.x_step])
            one = ferry_json(a.ferry, ["sim-sweep", *base, "--x-step", a.x_step])
            cell = {
                "mix": f"{round(wa * 100)}:{round(wb * 100)}",
                "cs": f"{app // STORAGE_CORES}:1",
                "bound_ops": tp["best_throughput_ops"],
                "bound_alpha": tp["best_rpc_fraction"],
                "one_x_ops": one["best_throughput_ops"],
                "one_x": one["best_rpc_fraction"],
                "runs": {},
            }
            for pol in policies:
                r = ferry_json(a.ferry, ["sim", *base, "--policy", pol, "--duration", a.duration])
                cell["runs"][pol] = {
                    "throughput_ops": r["throughput_ops"],
                    "p99_us": r["p99_us"],
                    "converge_ms": r["converge_ms"],
                    "x": r["rpc_fraction_mean"],
                }
            cells.append(cell)
            print(f"{cell['mix']} {cell['cs']} done", file=sys.stderr)
    head = "| A:B | C:S | turning-point bound (α) | one-X bound (X) | " + " | ".join(
        f"`{p}` (gap, p99 µs, conv ms)" for p in policies) + " |"
    print(head)
    print("|" + "---|" * (4 + len(policies)))
    for c in cells:
        row = [c["mix"], c["cs"], f"{c['bound_ops'] / 1e3:.0f}k ({c['bound_alpha']:.2f})",
               f"{c['one_x_ops'] / 1e3:.0f}k ({c['one_x']:.2f})"]
        for pol in policies:
            r = c["runs"][pol]
            gap = (r["throughput_ops"] / c["bound_ops"] - 1) * 100
            p99 = "-" if r["p99_us"] is None else f"{r['p99_us']:.0f}"
            conv = "never" if r["converge_ms"] is None else f"{r['converge_ms']:.0f}"
            row.append(f"{r['throughput_ops'] / 1e3:.0f}k ({gap:+.1f} %, {p99}, {conv})")
        print("| " + " | ".join(row) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(cells, f, indent=1)


if __name__ == "__main__":
    main()
