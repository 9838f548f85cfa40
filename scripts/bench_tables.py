#!/usr/bin/env python3
"""Regenerates the placement tables of docs/BENCHMARKS.md on this machine.

    cargo build --release && scripts/bench_tables.py > /tmp/tables.md

Runs `ferry bench` for every (SLO, workload, policy), `ferry sweep` for the upper bound,
the Redis peer when scripts/redis.sh has started one, and `ferry fairness`; prints
Markdown. Everything pins the storage node to CPU 0 and the app side to CPU 1 (fairness:
node on CPUs 0-1). Takes about 25 minutes.
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
POLICIES = ["kv", "rpc", "asfp", "kayak"]
YCSBT = "ycsbt:accounts=100000,transfer=0.5,compute=20us"
DURATION = "8s"


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


def bench(workload, policy, slo, extra=()):
    return run(["bench", "--workload", workload, "--policy", policy, "--slo-p99", slo, "--duration", DURATION, *extra])


def cell(r):
    if r is None:
        return "failed"
    p99 = r.get("p99_us")
    p99 = f"{p99 / 1000:.1f}" if p99 else "-"
    return f"{r['throughput_ops'] / 1000:.1f}k ({p99} ms, X {r['rpc_fraction_mean']:.2f})"


def redis_up(port=6379):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def main():
    print("### Goodput at p99 ≤ SLO (node CPU 0, app CPU 1)\n")
    print("Each cell: steady-state goodput (p99 over the steady window, mean X there).\n")
    for slo in SLOS:
        print(f"**SLO p99 ≤ {slo}**\n")
        print("| workload | " + " | ".join(POLICIES) + " | sweep best (X) | kayak / sweep | kayak / max(kv, rpc) | kayak converge |")
        print("|---" * (len(POLICIES) + 5) + "|")
        for w in WORKLOADS + [YCSBT]:
            results = {p: bench(w, p, slo) for p in POLICIES}
            sweep = None
            if not w.startswith("bimodal"):
                sweep = run(["sweep", "--workload", w, "--slo-p99", slo, "--step", "0.25", "--probe", "700ms",
                             "--warmup", "200ms", "--bisection-steps", "4", "--start-rate", "20000"])
            k = results.get("kayak")
            best_static = max((results[p]["throughput_ops"] for p in ("kv", "rpc") if results.get(p)), default=0)
            sweep_cell = f"{sweep['best_throughput_ops'] / 1000:.1f}k ({sweep['best_rpc_fraction']:.2f})" if sweep else "n/a"
            vs_sweep = f"{k['throughput_ops'] / sweep['best_throughput_ops']:.2f}" if (k and sweep and sweep['best_throughput_ops']) else "-"
            vs_static = f"{k['throughput_ops'] / best_static:.2f}" if (k and best_static) else "-"
            conv = f"{k['converge_ms']:.0f} ms" if (k and k.get("converge_ms") is not None) else "never"
            extras = ""
            a = results.get("asfp")
            if a and a.get("pushback_share") is not None:
                extras = f" pushback {a['pushback_share'] * 100:.1f}%, wasted {a['pushback_wasted_storage_cpus'] or 0:.3f} CPU"
            inv = ""
            if w.startswith("ycsbt"):
                inv = " invariant " + ",".join("ok" if (results[p] or {}).get("invariant_ok") else "FAIL" for p in POLICIES)
            label = w if not w.startswith("bimodal") else "bimodal (medium/light, 4 s)"
            print(f"| {label} | " + " | ".join(cell(results[p]) for p in POLICIES)
                  + f" | {sweep_cell} | {vs_sweep} | {vs_static} | {conv} |" + (f" <!--{extras}{inv}-->" if extras or inv else ""))
            for p in POLICIES:
                r = results[p]
                if r and p == "asfp":
                    sys.stderr.write(f"{w} {slo} asfp:{extras}\n")
                if r and w.startswith("ycsbt"):
                    sys.stderr.write(f"{w} {slo} {p}: invariant_ok={r.get('invariant_ok')} errors={r.get('errors')}\n")
        print()

    if redis_up():
        print("### ferry vs Redis 7 at equal pinning (SLO p99 ≤ 5ms)\n")
        print("| workload | policy | ferry | Redis | ferry / Redis |")
        print("|---|---|---|---|---|")
        for w in ["light", "medium", "heavy"]:
            for p in ["kv", "rpc", "kayak"]:
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
