#!/usr/bin/env python3
"""Summary of perf/broker-ab.sh: per workload the median over repetitions
of each arm's percentiles (arm A, arm B and the null broker's floor), A ÷ B
and each ÷ the floor, and the device writes each broker arm issued per
second (journal writes plus segment writes, from the broker's /metrics read
after each workload), the rescheduling interrupts its core took per
second of the workload and the broker's CPU time as a share of one core
(both over warm-up, measurement and set-up: rates to compare arms by, not
counts per record).

    broker_ab.py RESULTS_DIR ARM_A ARM_B
"""
import glob
import json
import os
import re
import statistics
import sys

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
    d, a, b = sys.argv[1:4]
    arms_order = (a, b, "floor")
    runs = {}
    for path in sorted(glob.glob(os.path.join(d, "*-r[0-9]*.json"))):
        stem = os.path.basename(path)[:-5]
        m = re.match(r"(\w+?)-(produce|e2e)-acks(\w+)-(\d+)-r(\d+)$", stem)
        if not m or m.group(1) not in arms_order:
            continue
        arm, mode, acks, rate, rep = m.groups()
        r = json.load(open(path))
        if r.get("status") != "ok" or r.get("lost"):
            print(f"- {stem}: {r.get('status')}: {r.get('validation')}")
            continue
        runs.setdefault((mode, acks, int(rate)), {}).setdefault(arm, []).append((int(rep), r, stem))
    first = next(iter(next(iter(runs.values())).values()))[0][1]
    print(f"# {a} against {b}\n")
    print(f"commit {first['commit'][:12]}; machine: {first['machine']}; 1 KiB records, 16 partitions, "
          f"{first['throughput']['elapsed_s']:.0f} s per run; medians of the repetitions (n per cell)\n")
    print(f"| workload | arm | n | p50 ms | p99 ms | p99.9 ms | msg/s | {a} ÷ {b} p99 | ÷ floor p99 | device writes/s | RES IPIs/s | broker CPU |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (mode, acks, rate), arms in sorted(runs.items(), key=lambda kv: (kv[0][2] == 0, kv[0][2], kv[0][0], kv[0][1])):
        key = "e2e_latency_ms" if mode == "e2e" else "latency_ms"
        med = {}
        for arm in arms_order:
            rs = arms.get(arm, [])
            if rs:
                med[arm] = {"p99_ms": statistics.median(r[key]["p99_ms"] for _, r, _ in rs)}
        for arm in arms_order:
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
            if arm == a and b in med:
                ratio = f"{p['p99_ms'] / med[b]['p99_ms']:.2f}"
            vs_floor = ""
            if arm != "floor" and "floor" in arms:
                fl = statistics.median(r[key]["p99_ms"] for _, r, _ in arms["floor"])
                vs_floor = f"{p['p99_ms'] / fl:.1f}×"
            label = f"{mode} acks={acks} {'max' if rate == 0 else f'{rate:,}/s'}"
            print(f"| {label} | {arm} | {len(rs)} | {fmt(p['p50_ms'])} | {fmt(p['p99_ms'])} | {fmt(p['p99.9_ms'])} | "
                  f"{fmt(p['rate'], 0)} | {ratio} | {vs_floor} | {fmt(statistics.median(writes), 0) if writes else ''} | {ipi_rate(d, rs)} | {cpu_share(d, rs)} |")
        if a in med and b in med and rate == 0:
            print(f"\nMaximum: {a} ÷ {b} = {med[a]['rate'] / med[b]['rate']:.2f}\n")


def around(d, rs):
    """Per repetition, what perf/broker-ab.sh read around the workload
    (ipis-NAME.txt): its seconds, the broker core's rescheduling interrupts
    and the broker's CPU seconds (None where not recorded). Older runs
    wrote "seconds count" only."""
    out = []
    for _, _, stem in rs:
        path = os.path.join(d, f"ipis-{stem}.txt")
        if not os.path.exists(path):
            continue
        v = [int(x) for x in open(path).read().split()]
        if len(v) == 2:
            out.append((max(v[0], 1), v[1], None))
        else:
            out.append((max(v[0], 1) / 1000, v[1], v[2] / v[3]))
    return out


def ipi_rate(d, rs):
    """Median over repetitions of the broker core's rescheduling interrupts
    per second."""
    rates = [count / seconds for seconds, count, _ in around(d, rs)]
    return fmt(statistics.median(rates), 0) if rates else ""


def cpu_share(d, rs):
    """Median over repetitions of the broker's CPU time as a share of one
    core, over the workload's whole run (warm-up and set-up included)."""
    shares = [cpu / seconds for seconds, _, cpu in around(d, rs) if cpu is not None]
    return f"{statistics.median(shares):.0%}" if shares else ""


def previous(d, arm, rep, stem):
    """The metrics file read just before `stem`'s workload in the same
    broker run (None for the first workload: counters started at 0), in
    the order the runs started (their JSON's started_unix_s)."""
    started = {}
    for path in glob.glob(os.path.join(d, f"{arm}-*-r{rep}.json")):
        started[os.path.basename(path)[:-5]] = json.load(open(path)).get("started_unix_s", 0)
    names = sorted(started, key=started.get)
    i = names.index(stem) if stem in names else -1
    return names[i - 1] if i > 0 else None


if __name__ == "__main__":
    main()
