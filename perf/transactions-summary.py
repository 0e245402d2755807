"""Medians of perf/transactions-bench.sh's runs, as a markdown table.

usage: transactions-summary.py RESULTS_DIR
"""
import glob
import json
import os
import statistics
import sys


def load(out, kind):
    return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, f"{kind}-*.json")))]


def med(runs, *path):
    values = []
    for r in runs:
        v = r
        for k in path:
            v = v[k]
        values.append(v)
    return statistics.median(values), values


def latency_rows(lat, rate):
    target = lat[0]["comparison"]["target_e2e_p99_ms_at_most"]
    for q in ("p50", "p99", "p99.9"):
        a, _ = med(lat, "without_transactions", "e2e_latency_ms", f"{q}_ms")
        b, bs = med(lat, "transactional", "e2e_latency_ms", f"{q}_ms")
        t = f"≤ {target:g} ms: {'met' if b <= target else 'not met'}" if q == "p99" else ""
        print(f"| {rate:,.0f} msg/s: read_committed e2e {q}, ms | {a:.3f} | {b:.3f} ({', '.join(f'{x:.3f}' for x in bs)}) | | {t} |")
    for q in ("p50", "p99"):
        a, _ = med(lat, "without_transactions", "latency_ms", f"{q}_ms")
        b, _ = med(lat, "transactional", "latency_ms", f"{q}_ms")
        print(f"| {rate:,.0f} msg/s: produce (corrected) {q}, ms | {a:.3f} | {b:.3f} | | |")
    a, _ = med(lat, "without_transactions", "throughput", "msgs_per_s")
    b, _ = med(lat, "transactional", "throughput", "msgs_per_s")
    print(f"| {rate:,.0f} msg/s: achieved msg/s | {a:,.0f} | {b:,.0f} | {b / a:.2f} | |")
    cp99, _ = med(lat, "comparison", "commit_transaction_ms", "p99_ms")
    cp50, _ = med(lat, "comparison", "commit_transaction_ms", "p50_ms")
    print(f"| {rate:,.0f} msg/s: commit_transaction p50 / p99, ms | | {cp50:.3f} / {cp99:.3f} | | |")


def main(out):
    thr, lat = load(out, "throughput"), load(out, "latency")
    first = (thr or lat)[0]
    p = first["parameters"]
    print(f"machine: {first['machine']['cpu']}, {first['machine']['cores']} cores, kernel {first['machine']['kernel']}; commit {first['commit']}")
    print(f"{p['partitions']} partitions, {p['record_size']} B records, acks={p['acks']}, commit every {p['txn_interval_ms']:g} ms, "
          f"{p['duration_s']:g} s measured after {p['warmup_s']:g} s warm-up, generator on core(s) {p['cores']}; medians of {len(thr)} (throughput) and {len(lat) // max(1, len({r['parameters']['rate'] for r in lat}))} per rate (latency)")
    print()
    print("| run | without transactions | with transactions | ratio | target |")
    print("|---|---:|---:|---:|---|")
    if thr:
        plain, _ = med(thr, "without_transactions", "throughput", "msgs_per_s")
        txn, _ = med(thr, "transactional", "throughput", "msgs_per_s")
        ratio, ratios = med(thr, "comparison", "throughput_txn_over_plain")
        print(f"| unthrottled throughput, msg/s | {plain:,.0f} | {txn:,.0f} | {ratio:.2f} ({', '.join(f'{r:.2f}' for r in ratios)}) | ≥ 0.80: {'met' if ratio >= 0.8 else 'not met'} |")
        commits, _ = med(thr, "comparison", "commits")
        cp99, _ = med(thr, "comparison", "commit_transaction_ms", "p99_ms")
        print(f"| unthrottled: commits, commit_transaction p99 ms | | {commits:.0f}, {cp99:.3f} | | |")
    rates = sorted({r["parameters"]["rate"] for r in lat})
    for rate in rates:
        latency_rows([r for r in lat if r["parameters"]["rate"] == rate], rate)
    bad = [r["status"] for r in thr + lat if r["status"] != "ok"]
    print()
    print(f"validation: {len(thr) + len(lat) - len(bad)} of {len(thr) + len(lat)} invocations ok (every record acknowledged"
          f"{' and received read_committed' if lat else ''}, none lost, duplicated or out of order)")


if __name__ == "__main__":
    main(sys.argv[1])
