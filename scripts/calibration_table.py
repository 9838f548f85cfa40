#!/usr/bin/env python3
"""The simulator calibrated to this machine, against the real 1 + 1 system.

(a) `ferry calibrate` measures this machine's costs and writes a profile (or --profile
reuses one); (b) for each workload and each fixed X, the real upper bound (`ferry sweep
--x X`: the highest rate whose p99 meets the SLO, node on CPU 0, app on CPU 1) and the
simulator's (`ferry sim-sweep --profile P --app-cores 1 --storage-cores 1 --x X`, each
fixed-rate run warmed up and measured as long as a real probe); (c) a Markdown table:
workload, X, real throughput at the SLO, simulated, their ratio, real p99, simulated p99.

Run it on a quiet machine: the defaults take minutes (four on this VM: six workloads, three X, a
bisection of one-second probes each). `--quick` runs one workload at one X with short
probes, to check that everything works (about a minute).

Usage: scripts/calibration_table.py [--ferry target/release/ferry] [--profile P]
       [--workload W]... [--x 0,0.5,1] [--slo-p99 5ms] [--probe 1s] [--warmup 300ms]
       [--calibrate-duration 24s] [--out-dir DIR] [--quick]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

WORKLOADS = [
    "light",
    "medium",
    "heavy",
    "ycsbt:accounts=100000,transfer=0.5,compute=20us",
    "social",
    "traverse:depth=4,compute=5us,size=4096",
]


def run(ferry, args, log):
    """Runs ferry with `args`, its stderr into `log`; exits with its message on failure."""
    print("$ ferry " + " ".join(args), file=sys.stderr, flush=True)
    done = subprocess.run([ferry, *args], stdout=subprocess.PIPE, stderr=log, text=True)
    if done.returncode != 0:
        sys.exit(f"ferry {' '.join(args)} failed (exit {done.returncode}); see {log.name}")
    return done.stdout


def rows_by_x(path):
    with open(path) as f:
        return {round(r["rpc_fraction"], 6): r for r in json.load(f)["rows"]}


def fmt_ops(v):
    return f"{v / 1e3:.1f}k" if v else "0"


def fmt_us(v):
    return "-" if v is None else (f"{v / 1e3:.2f} ms" if v >= 1e3 else f"{v:.0f} µs")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ferry", default="target/release/ferry")
    p.add_argument("--profile", help="use this profile instead of running ferry calibrate")
    p.add_argument("--workload", action="append", help="repeatable; default: the six of the table")
    p.add_argument("--x", default="0,0.5,1", help="comma-separated fixed X values")
    p.add_argument("--slo-p99", default="5ms")
    p.add_argument("--probe", default="1s", help="measured length of each real probe")
    p.add_argument("--warmup", default="300ms", help="unmeasured start of each probe")
    p.add_argument("--bisection-steps", default="5")
    p.add_argument("--calibrate-duration", default="24s")
    p.add_argument("--out-dir", help="keep the profile, JSON reports and logs here")
    p.add_argument("--quick", action="store_true",
                   help="one workload at X = 1, short probes and calibration: a smoke test")
    a = p.parse_args()
    workloads = a.workload or WORKLOADS
    if a.quick:
        workloads = a.workload or ["light"]
        a.x, a.probe, a.warmup, a.bisection_steps = "1", "200ms", "100ms", "2"
        a.calibrate_duration = "2s"
    out = a.out_dir or tempfile.mkdtemp(prefix="ferry-calibration-")
    os.makedirs(out, exist_ok=True)
    log = open(os.path.join(out, "ferry.log"), "w")
    profile = a.profile or os.path.join(out, "profile.json")
    if not a.profile:
        print(run(a.ferry, ["calibrate", "--duration", a.calibrate_duration, "--out", profile], log),
              file=sys.stderr)
    xs = [float(x) for x in a.x.split(",")]
    table = []
    for i, w in enumerate(workloads):
        real, sim = os.path.join(out, f"real-{i}.json"), os.path.join(out, f"sim-{i}.json")
        run(a.ferry, ["sweep", "--workload", w, "--slo-p99", a.slo_p99, "--x", a.x,
                      "--probe", a.probe, "--warmup", a.warmup,
                      "--bisection-steps", a.bisection_steps, "--json", real], log)
        run(a.ferry, ["sim-sweep", "--profile", profile, "--app-cores", "1", "--storage-cores", "1",
                      "--workload", w, "--slo-p99", a.slo_p99, "--x", a.x,
                      "--warmup", a.warmup, "--measure", a.probe, "--json", sim], log)
        real_rows, sim_rows = rows_by_x(real), rows_by_x(sim)
        for x in xs:
            r, s = real_rows.get(round(x, 6)), sim_rows.get(round(x, 6))
            if r is None or s is None:
                sys.exit(f"{w}: no row for X = {x} in {real} or {sim}")
            ratio = f"{s['throughput_ops'] / r['throughput_ops']:.2f}" if r["throughput_ops"] else "-"
            table.append(f"| `{w}` | {x:g} | {fmt_ops(r['throughput_ops'])} | "
                         f"{fmt_ops(s['throughput_ops'])} | {ratio} | {fmt_us(r['p99_us'])} | "
                         f"{fmt_us(s['p99_us'])} |")
    with open(profile) as f:
        machine = json.load(f)["measured_on"]
    print(f"Sim against real, 1 + 1 cores, p99 <= {a.slo_p99}; profile of {machine}")
    print(f"(reports and logs in {out})\n")
    print("| workload | X | real ops/s at SLO | sim ops/s | sim / real | real p99 | sim p99 |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(table))


if __name__ == "__main__":
    main()
