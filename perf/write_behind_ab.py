#!/usr/bin/env python3
"""Summary of perf/write-behind-ab.sh: per workload the median over
repetitions of each arm's percentiles (write-behind, each append writing its
segment, and the null broker's floor), the ratios, and the device writes
each arm issued per second (journal writes plus segment writes, from the
broker's /metrics read after each workload).

    write_behind_ab.py RESULTS_DIR
"""
import glob
import json
import os
import re
import statistics
import sys

ARMS = ("behind", "direct", "floor")


def metric_total(path, names):
    total = 0.0
    if not os.path.exists(path):
        return None
    for line in open(path):
        if line.startswith(names):
            total += float(line.rsplit(" ", 1)[1])
    return total


def fmt(v, digits=3):
    return "–" if v is None else f"{v:,.{digits}f}"


def main():
    d = sys.argv[1]
    runs = {}
    for path in sorted(glob.glob(os.path.join(d, "*-r[0-9]*.json"))):
        stem = os.path.basename(path)[:-5]
        m = re.match(r"(behind|direct|floor)-(\w+)-acks(\w+)-(\d+)-r(\d+)$", stem)
        if not m:
            continue
        arm, mode, acks, rate, rep = m.groups()
        r = json.load(open(path))
        if r.get("status") != "ok" or r.get("lost"):
            print(f"- {stem}: {r.get('status')}: {r.get('validation')}")
            continue
        runs.setdefault((mode, acks, int(rate)), {}).setdefault(arm, []).append((int(rep), r, stem))
    first = next(iter(next(iter(runs.values())).values()))[0][1]
    print("# Write-behind A/B\n")
    print(f"commit {first['commit'][:12]}; machine: {first['machine']}; 1 KiB records, 16 partitions, "
          f"{first['throughput']['elapsed_s']:.0f} s per run; medians of the repetitions (n per cell)\n")
    print("| workload | arm | n | p50 ms | p99 ms | p99.9 ms | msg/s | behind ÷ direct p99 | ÷ floor p99 | device writes/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (mode, acks, rate), arms in sorted(runs.items(), key=lambda kv: (kv[0][2] == 0, kv[0][2], kv[0][0], kv[0][1])):
        key = "e2e_latency_ms" if mode == "e2e" else "latency_ms"
        med = {}
        for arm in ARMS:
            rs = arms.get(arm, [])
            if rs:
                med[arm] = {"p99_ms": statistics.median(r[key]["p99_ms"] for _, r, _ in rs)}
        for arm in ARMS:
            rs = arms.get(arm, [])
            if not rs:
                continue
            p = {q: statistics.median(r[key][q] for _, r, _ in rs) for q in ("p50_ms", "p99_ms", "p99.9_ms")}
            p["rate"] = statistics.median(r["throughput"]["msgs_per_s"] for _, r, _ in rs)
            med[arm] = p
            writes = []
            for rep, r, stem in rs:
                if arm == "floor":
                    continue
                names = ("shardlog_journal_writes_total", "shardlog_partition_segment_writes_total")
                after = metric_total(os.path.join(d, f"metrics-{stem}.txt"), names)
                prev = previous(d, arm, rep, stem)
                before = metric_total(os.path.join(d, f"metrics-{prev}.txt"), names) if prev else 0.0
                if after is not None and before is not None:
                    writes.append((after - before) / r["throughput"]["elapsed_s"])
            ratio = ""
            if arm == "behind" and "direct" in med:
                ratio = f"{p['p99_ms'] / med['direct']['p99_ms']:.2f}"
            vs_floor = ""
            if arm != "floor" and "floor" in arms:
                fl = statistics.median(r[key]["p99_ms"] for _, r, _ in arms["floor"])
                vs_floor = f"{p['p99_ms'] / fl:.1f}×"
            label = f"{mode} acks={acks} {'max' if rate == 0 else f'{rate:,}/s'}"
            print(f"| {label} | {arm} | {len(rs)} | {fmt(p['p50_ms'])} | {fmt(p['p99_ms'])} | {fmt(p['p99.9_ms'])} | "
                  f"{fmt(p['rate'], 0)} | {ratio} | {vs_floor} | {fmt(statistics.median(writes), 0) if writes else ''} |")
        if "behind" in med and "direct" in med and rate == 0:
            print(f"\nMaximum: behind ÷ direct = {med['behind']['rate'] / med['direct']['rate']:.2f}\n")


def previous(d, arm, rep, stem):
    """The metrics file read just before `stem`'s workload in the same
    broker run (None for the first workload: counters started at 0)."""
    files = sorted(glob.glob(os.path.join(d, f"metrics-{arm}-*-r{rep}.txt")), key=os.path.getmtime)
    names = [os.path.basename(f)[len("metrics-"):-4] for f in files]
    i = names.index(stem) if stem in names else -1
    return names[i - 1] if i > 0 else None


if __name__ == "__main__":
    main()
