#!/usr/bin/env python3
"""The real 1 + 1 placement check of docs/BENCHMARKS.md: the default policy against the
static ones and the measured bound, on light, medium, heavy and YCSB-T at a 5 ms p99.

    cargo build --release && scripts/placement_real.py > /tmp/real.md

For each workload, FERRY_RUNS runs (default 5, seeds 1..N) of every policy, interleaved
(seed by seed, policy by policy, so a slow phase of the VM hits all of them), then one
`ferry sweep`. Node on CPU 0, app side on CPU 1. Prints Markdown: per policy, the runs whose
steady p99 met the SLO, the median goodput and p99 and X; per workload, the default's median
against the better static policy's and against the sweep. Takes ~20 minutes with 5 runs.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_tables import median, run, slo_us  # noqa: E402  (the same runner and statistics)

SLO = os.environ.get("FERRY_SLO", "5ms")
SLO_US = slo_us(SLO)
WORKLOADS = ["light", "medium", "heavy", "ycsbt:accounts=100000,transfer=0.5,compute=20us"]
POLICIES = ["balance", "kv", "rpc", "kayak"]
STATIC = ["kv", "rpc"]
DURATION = "6s"
RUNS = int(os.environ.get("FERRY_RUNS", "5"))


def fmt(v, scale=1.0, digits=1, unit=""):
    return "–" if v is None else f"{v / scale:.{digits}f}{unit}"


def main():
    print(f"SLO p99 ≤ {SLO}, {RUNS} runs per cell of {DURATION}, seeds 1..{RUNS}, interleaved.\n")
    print("| workload | policy | within SLO | median goodput | median p99 | median X |")
    print("|---|---|---|---|---|---|")
    summary = []
    for workload in WORKLOADS:
        runs = {p: [] for p in POLICIES}
        for seed in range(1, RUNS + 1):
            for policy in POLICIES:
                r = run(["bench", "--workload", workload, "--policy", policy, "--slo-p99", SLO,
                         "--duration", DURATION, "--seed", str(seed)])
                if r is not None:
                    runs[policy].append(r)
                    sys.stderr.write(f"{workload} {policy} seed {seed}: {r['throughput_ops']:.0f}/s "
                                     f"p99 {r['p99_us']} X {r['rpc_fraction_mean']:.2f}\n")
        medians = {}
        for policy in POLICIES:
            rs = runs[policy]
            within = sum(1 for r in rs if r["p99_us"] is not None and r["p99_us"] <= SLO_US)
            medians[policy] = median([r["throughput_ops"] for r in rs])
            print(f"| {workload} | {policy} | {within}/{len(rs)} | {fmt(medians[policy], 1e3, 1, 'k')} | "
                  f"{fmt(median([r['p99_us'] for r in rs if r['p99_us'] is not None]), 1e3, 2, ' ms')} | "
                  f"{fmt(median([r['rpc_fraction_mean'] for r in rs]), 1, 2)} |")
        sweep = run(["sweep", "--workload", workload, "--slo-p99", SLO])
        best_static = max((medians[p] or 0.0, p) for p in STATIC)
        summary.append((workload, medians["balance"], best_static, sweep))
    print("\n| workload | balance median | better static (median) | balance / static | sweep best (X) | balance / sweep |")
    print("|---|---|---|---|---|---|")
    for workload, bal, (static, name), sweep in summary:
        best = sweep["best_throughput_ops"] if sweep else None
        x = sweep["best_rpc_fraction"] if sweep else None
        print(f"| {workload} | {fmt(bal, 1e3, 1, 'k')} | {name} {fmt(static, 1e3, 1, 'k')} | "
              f"{fmt(bal / static if bal and static else None, 1, 2, '×')} | {fmt(best, 1e3, 1, 'k')} ({fmt(x, 1, 2)}) | "
              f"{fmt(bal / best if bal and best else None, 1, 2)} |")


if __name__ == "__main__":
    main()
