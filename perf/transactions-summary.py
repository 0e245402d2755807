"""Medians of perf/transactions-bench.sh's runs, as a markdown table.

usage: transactions-summary.py RESULTS_DIR
"""
import glob
import json
import os
import re
import statistics
import sys
import tomllib


def load(out, kind):
    runs = []
    for p in sorted(glob.glob(os.path.join(out, f"{kind}-*.json"))):
        r = json.load(open(p))
        r["_path"] = p
        runs.append(r)
    return runs


def med(runs, *path):
    values = []
    for r in runs:
        v = r
        for k in path:
            v = v[k]
        values.append(v)
    return statistics.median(values), values


def latency_rows(lat, rate, floor):
    target = lat[0]["comparison"]["target_e2e_p99_ms_at_most"]
    for q in ("p50", "p99", "p99.9"):
        a, _ = med(lat, "without_transactions", "e2e_latency_ms", f"{q}_ms")
        b, bs = med(lat, "transactional", "e2e_latency_ms", f"{q}_ms")
        t = f"≤ {target:g} ms: {'met' if b <= target else 'not met'}" if q == "p99" else ""
        print(f"| {rate:,.0f} msg/s: read_committed e2e {q}, ms | {a:.3f} | {b:.3f} ({', '.join(f'{x:.3f}' for x in bs)}) | | {t} |")
        if floor:
            fa, _ = med(floor, "without_transactions", "e2e_latency_ms", f"{q}_ms")
            fb, fbs = med(floor, "transactional", "e2e_latency_ms", f"{q}_ms")
            below = f"target {'below' if target < fb else 'above'} the floor" if q == "p99" else ""
            print(f"| {rate:,.0f} msg/s: null broker (floor), read_committed e2e {q}, ms | {fa:.3f} | {fb:.3f} "
                  f"({', '.join(f'{x:.3f}' for x in fbs)}) | shardlog / floor {b / fb:.3f} | {below} |")
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
    if lat[0]["comparison"].get("commit_phases_ms"):
        for phase, what in (("drain", "slot → last record answered"), ("end_txn", "EndTxn round trip"),
                            ("add_partitions", "AddPartitionsToTxn round trip")):
            p50, _ = med(lat, "comparison", "commit_phases_ms", phase, "p50_ms")
            p99, _ = med(lat, "comparison", "commit_phases_ms", phase, "p99_ms")
            print(f"| {rate:,.0f} msg/s: commit phase, {what}, p50 / p99, ms | | {p50:.3f} / {p99:.3f} | | |")


def broker_means(out, name):
    """Mean seconds of each (api, stage) in one invocation's /metrics."""
    sums, counts = {}, {}
    path = os.path.join(out, f"metrics-{name}.txt")
    if not os.path.exists(path):
        return {}
    pat = re.compile(r'shardlog_request_(?:total|stage)_seconds_(sum|count)\{shard="\d+",api="(\w+)"(?:,stage="(\w+)")?\} (\S+)')
    for line in open(path):
        m = pat.match(line)
        if m:
            kind, api, stage, v = m.groups()
            key = (api, stage or "total")
            (sums if kind == "sum" else counts)[key] = (sums if kind == "sum" else counts).get(key, 0) + float(v)
    return {k: sums[k] / counts[k] for k in sums if counts.get(k)}


def floor_rows(out, lat, rate, io):
    """What a commit's durable steps cost on this disk, and the broker's own
    EndTxn and Produce figures from the same invocations."""
    names = [os.path.basename(r["_path"])[:-5] for r in lat]
    means = [broker_means(out, n) for n in names]
    means = [m for m in means if m]
    if not means:
        return
    def mm(api, stage):
        return statistics.median(m.get((api, stage), 0.0) for m in means) * 1000
    print(f"| {rate:,.0f} msg/s: broker EndTxn mean, ms (handle) | | {mm('EndTxn', 'total'):.3f} ({mm('EndTxn', 'handle'):.3f}) | | |")
    print(f"| {rate:,.0f} msg/s: broker Produce mean over both runs, ms (DMA write, fdatasync) | | {mm('Produce', 'total'):.3f} ({mm('Produce', 'dma_write'):.3f}, {mm('Produce', 'fdatasync'):.3f}) | | |")
    if io:
        w, f = io["append_write_p50_us"] / 1000, io["fdatasync_p50_us"] / 1000
        # The last records' append and sync, then the prepare record's; a
        # reader no longer waits for the markers' writes (fa7c53d).
        floor = 2 * (w + f)
        print(f"| {rate:,.0f} msg/s: disk floor of a commit's visibility, ms | | {floor:.3f} | | "
              f"2 × (append {w:.3f} + fdatasync {f:.3f}), iotune p50 |")


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
    io = None
    io_path = os.path.join(out, "io-properties.toml")
    if os.path.exists(io_path):
        with open(io_path, "rb") as f:
            io = tomllib.load(f)
    floors = load(out, "floor-latency")
    rates = sorted({r["parameters"]["rate"] for r in lat})
    for rate in rates:
        at = [r for r in lat if r["parameters"]["rate"] == rate]
        latency_rows(at, rate, [r for r in floors if r["parameters"]["rate"] == rate])
        floor_rows(out, at, rate, io)
    runs = thr + lat + floors
    bad = [r["status"] for r in runs if r["status"] != "ok"]
    print()
    if floors:
        print("floor: the same workload and generator against `shardlog bench null-broker` (transactions in memory, "
              "nothing written), pinned where the broker is, in the same run")
    print(f"validation: {len(runs) - len(bad)} of {len(runs)} invocations ok (every record acknowledged"
          f"{' and received read_committed' if lat else ''}, none lost, duplicated or out of order)")


if __name__ == "__main__":
    main(sys.argv[1])
