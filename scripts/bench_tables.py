#!/usr/bin/env python3
"""Regenerates the placement tables of docs/BENCHMARKS.md on this machine.

    cargo build --release && scripts/bench_tables.py > /tmp/tables.md

Runs `ferry bench` for every (SLO, workload, policy), `ferry sweep` for the upper bound,
the Redis peer when scripts/redis.sh has started one, and `ferry fairness`; prints
Markdown. Everything pins the storage node to CPU 0 and the app side to CPU 1 (fairness:
node on CPUs 0-1). Every bench cell is FERRY_RUNS runs (default 3, seeds 1..N): it shows the
median goodput, the median steady p99 and how many runs met the SLO; ratios are of medians.
Sweeps and fairness are single runs. Takes about 40 minutes with 3 runs.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile

FERRY = os.environ.get("FERRY", "target/release/ferry")
SLOS = ["5ms", "10ms"]
WORKLOADS = ["light", "medium", "heavy", "bimodal:a=medium,b=light,period=4s"]
POLICIES = ["kv", "rpc", "asfp", "balance", "kayak"]
YCSBT = "ycsbt:accounts=100000,transfer=0.5,compute=20us"
DURATION = "8s"
RUNS = int(os.environ.get("FERRY_RUNS", "3"))


def run(args):
    out = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    proc = subprocess.run([FERRY] + args + ["--json", out], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(f"FAILED {' '.join(args)}: {proc.stderr}\n")
        return None
    with open(out) as f:
        data = json.load(f)
    os.unlink(out)
    return data


def slo_us(slo):
    """'5ms' -> 5000.0"""
    for unit, scale in (("ms", 1000.0), ("us", 1.0), ("s", 1e6)):
        if slo.endswith(unit):
            return float(slo[: -len(unit)]) * scale
    raise ValueError(slo)


def median(values):
    v = sorted(values)
    n = len(v)
    return None if n == 0 else (v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2]))


def bench(workload, policy, slo, extra=()):
    """RUNS runs (seeds 1..RUNS) summarised: medians, runs within the SLO, the raw runs."""
    runs = []
    for seed in range(1, RUNS + 1):
        r = run(["bench", "--workload", workload, "--policy", policy, "--slo-p99", slo, "--duration", DURATION,
                 "--seed", str(seed), *extra])
        if r is not None:
            runs.append(r)
    if not runs:
        return None
    p99s = [r.get("p99_us") or float("inf") for r in runs]
    never = float("inf")
    return {
        "throughput_ops": median([r["throughput_ops"] for r in runs]),
        "p99_us": median(p99s),
        "rpc_fraction_mean": median([r["rpc_fraction_mean"] for r in runs]),
        "converge_ms": median([r["converge_ms"] if r.get("converge_ms") is not None else never for r in runs]),
        "within": sum(p <= slo_us(slo) for p in p99s),
        "runs": runs,
    }


def cell(r):
    if r is None:
        return "failed"
    p99 = r["p99_us"]
    p99 = f"{p99 / 1000:.1f}" if p99 != float("inf") else "-"
    return (f"{r['throughput_ops'] / 1000:.1f}k ({p99} ms, X {r['rpc_fraction_mean']:.2f}, "
            f"{r['within']}/{len(r['runs'])})")


def redis_up(port=6379):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def main():
    print("### Goodput at p99 ≤ SLO (node CPU 0, app CPU 1)\n")
    print(f"Each cell: median over {RUNS} runs (seeds 1..{RUNS}) of the steady-state goodput, of the steady p99 "
          "and of the mean X there, and how many runs met the SLO.\n")
    for slo in SLOS:
        print(f"**SLO p99 ≤ {slo}**\n")
        print("| workload | " + " | ".join(POLICIES) + " | sweep best (X) | balance / sweep | balance / max(kv, rpc) | balance converge |")
        print("|---" * (len(POLICIES) + 5) + "|")
        for w in WORKLOADS + [YCSBT]:
            results = {p: bench(w, p, slo) for p in POLICIES}
            sweep = None
            if not w.startswith("bimodal"):
                sweep = run(["sweep", "--workload", w, "--slo-p99", slo, "--step", "0.25", "--probe", "700ms",
                             "--warmup", "200ms", "--bisection-steps", "4", "--start-rate", "20000"])
            k = results.get("balance")
            best_static = max((results[p]["throughput_ops"] for p in ("kv", "rpc") if results.get(p)), default=0)
            sweep_cell = f"{sweep['best_throughput_ops'] / 1000:.1f}k ({sweep['best_rpc_fraction']:.2f})" if sweep else "n/a"
            vs_sweep = f"{k['throughput_ops'] / sweep['best_throughput_ops']:.2f}" if (k and sweep and sweep['best_throughput_ops']) else "-"
            vs_static = f"{k['throughput_ops'] / best_static:.2f}" if (k and best_static) else "-"
            conv = f"{k['converge_ms']:.0f} ms" if (k and k["converge_ms"] != float("inf")) else "never"
            extras = ""
            a = results.get("asfp")
            shares = [x["pushback_share"] for x in (a["runs"] if a else []) if x.get("pushback_share") is not None]
            if shares:
                wasted = median([x.get("pushback_wasted_storage_cpus") or 0 for x in a["runs"]])
                extras = f" pushback {median(shares) * 100:.1f}%, wasted {wasted:.3f} CPU (medians)"
            inv = ""
            if w.startswith("ycsbt"):
                inv = " invariant " + ",".join(
                    "ok" if results[p] and all(x.get("invariant_ok") for x in results[p]["runs"]) else "FAIL"
                    for p in POLICIES)
            label = w if not w.startswith("bimodal") else "bimodal (medium/light, 4 s)"
            print(f"| {label} | " + " | ".join(cell(results[p]) for p in POLICIES)
                  + f" | {sweep_cell} | {vs_sweep} | {vs_static} | {conv} |" + (f" <!--{extras}{inv}-->" if extras or inv else ""))
            for p in POLICIES:
                r = results[p]
                if r and p == "asfp":
                    sys.stderr.write(f"{w} {slo} asfp:{extras}\n")
                if r and w.startswith("ycsbt"):
                    for x in r["runs"]:
                        sys.stderr.write(f"{w} {slo} {p}: invariant_ok={x.get('invariant_ok')} errors={x.get('errors')}\n")
        print()

    if redis_up():
        print("### ferry vs Redis 7 at equal pinning (SLO p99 ≤ 5ms)\n")
        print("| workload | policy | ferry | Redis | ferry / Redis |")
        print("|---|---|---|---|---|")
        for w in ["light", "medium", "heavy"]:
            for p in ["kv", "rpc", "balance"]:
                f = bench(w, p, "5ms")
                r = bench(w, p, "5ms", ["--target", "redis://127.0.0.1:6379"])
                ratio = f"{f['throughput_ops'] / r['throughput_ops']:.2f}" if (f and r and r["throughput_ops"]) else "-"
                print(f"| {w} | {p} | {cell(f)} | {cell(r)} | {ratio} |")
        print()

    print("### Fairness (2-core node on CPUs 0-1, load generator on CPU 1)\n")
    for workloads in ["heavy,heavy", "heavy,medium,light,heavy"]:
        r = run(["fairness", "--workloads", workloads, "--phase", "4s"])
        if r is None:
            continue
        print(f"Tenants {workloads}: Jain's index {r['jain_together']:.3f} with all running, "
              f"{r['jain_after_stop']:.3f} after the last stopped; node CPUs used by tenants {r['node_cpus_together']:.2f}.\n")
        print("| tenant | workload | home core | together ops/s | CPU share | after stop ops/s | CPU share |")
        print("|---|---|---|---|---|---|---|")
        for t in r["tenants"]:
            after = f"{t['after_stop_ops']:.0f}" if t["after_stop_ops"] is not None else "stopped"
            share = f"{t['after_stop_cpu_share']:.3f}" if t["after_stop_cpu_share"] is not None else "-"
            print(f"| {t['tenant']} | {t['workload']} | {t['home_core']} | {t['together_ops']:.0f} | {t['together_cpu_share']:.3f} | {after} | {share} |")
        print()


if __name__ == "__main__":
    main()
