"""Summarises perf/journal-ab.sh: medians over repetitions of each arm's
acks=all produce percentiles, the journal's ratio to per-partition segment
syncs, and the syncs each arm issued (from the broker's /metrics)."""

import json
import pathlib
import re
import statistics
import sys

out = pathlib.Path(sys.argv[1])
runs = {}
for f in sorted(out.glob("*-p*-r*.json")):
    arm, parts, _ = re.match(r"(\w+)-p(\d+)-r(\d+)", f.stem).groups()
    runs.setdefault((int(parts), arm), []).append(json.loads(f.read_text()))


def metric(name, stem):
    text = (out / f"metrics-{stem}.txt").read_text() if (out / f"metrics-{stem}.txt").exists() else ""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


first = next(iter(runs.values()))[0]
p = first["parameters"]
print(f"# Shard journal A/B ({first['commit'][:12]})\n")
print(f"machine: {first['machine']}; {p['record_size']} B records, acks={p['acks']}, {p['rate']:.0f} msg/s, "
      f"{p['duration_s']:.0f} s measured after {p['warmup_s']:.0f} s, medians of {len(next(iter(runs.values())))} runs\n")
print("| partitions | arm | p50 ms | p90 ms | p99 ms | p99.9 ms | journal ÷ segment (p50, p99) | fdatasyncs/s (journal + segments) |")
print("|---:|---|---:|---:|---:|---:|---|---:|")
for parts in sorted({k[0] for k in runs}):
    med = {}
    for arm in ("segment", "journal"):
        rs = runs.get((parts, arm), [])
        if not rs:
            continue
        m = {q: statistics.median(r["latency_ms"][f"{q}_ms"] for r in rs) for q in ("p50", "p90", "p99", "p99.9")}
        for r in rs:
            if r["lost"] or r["status"] != "ok":
                print(f"WARNING: {arm} p{parts}: status {r['status']}, lost {r['lost']}")
        stems = [f"{arm}-p{parts}-r{i + 1}" for i in range(len(rs))]
        both = ("shardlog_journal_syncs", "shardlog_partition_fsyncs")
        syncs = statistics.median(sum(metric(f, s) for f in both) for s in stems) / (p["duration_s"] + p["warmup_s"])
        med[arm] = m
        ratio = ""
        if arm == "journal" and "segment" in med:
            ratio = f"{m['p50'] / med['segment']['p50']:.2f}, {m['p99'] / med['segment']['p99']:.2f}"
        print(f"| {parts} | {arm} | {m['p50']:.3f} | {m['p90']:.3f} | {m['p99']:.3f} | {m['p99.9']:.3f} | {ratio} | {syncs:,.0f} |")
