"""Summary of perf/shared-flush-ab.sh: medians of 3 per workload, before and
after the shared device flush, each p99 also as a ratio to the null-broker
floor of the same run, and how many syncs the shared flush served."""
import glob
import json
import os
import re
import statistics
import sys


def runs(d, name):
    out = []
    for path in sorted(glob.glob(os.path.join(d, f"{name}-[0-9].json"))):
        r = json.load(open(path))
        if r.get("status") == "ok":
            out.append(r)
    return out


def median(rs, key, pct):
    vals = [r[key][pct] for r in rs]
    return statistics.median(vals) if vals else float("nan")


def counter(path, name):
    total = 0.0
    for line in open(path):
        if line.startswith(name + "_total{") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def main():
    d, commit = sys.argv[1], sys.argv[2]
    io = open(os.path.join(d, "io-properties.toml")).read()
    sync = re.search(r"fdatasync_p99_us\s*=\s*([0-9.]+)", io)
    any_run = (runs(os.path.join(d, "after"), "produce-acks1-50000") or [{}])[0]
    print(f"# Shared device flush A/B, commit {commit}\n")
    print(f"Machine: {json.dumps(any_run.get('machine', {}))}. 1 KiB, 16 partitions, one shard, "
          f"generator on the other core; medians of the runs shown.\n")
    if sync:
        print(f"Disk (iotune, same run): fdatasync p99 {float(sync.group(1)):.0f} µs.\n")
    floor = {r: runs(os.path.join(d, "floor"), f"produce-acks1-{r}") for r in (5000, 50000)}
    print("| workload | build | runs | p50 | p99 | p99.9 | floor p99 | p99 ÷ floor | admission lag p99 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, rate in (("produce-acksall-5000", 5000), ("produce-acksall-50000", 50000),
                       ("produce-acks1-50000", 50000)):
        fl = median(floor[rate], "latency_ms", "p99_ms")
        for which in ("before", "after"):
            rs = runs(os.path.join(d, which), name)
            p99 = median(rs, "latency_ms", "p99_ms")
            print(f"| {name} | {which} | {len(rs)} | {median(rs, 'latency_ms', 'p50_ms'):.3f} | {p99:.3f} | "
                  f"{median(rs, 'latency_ms', 'p99.9_ms'):.3f} | {fl:.3f} | {p99 / fl:.1f}× | "
                  f"{median(rs, 'generator_admission_lag_ms', 'p99_ms'):.3f} |")
    for which in ("before", "after"):
        for path in sorted(glob.glob(os.path.join(d, which, "metrics-*.txt"))):
            syncs = counter(path, "shardlog_partition_fsyncs")
            shared = counter(path, "shardlog_partition_shared_fsyncs")
            print(f"- {which} {os.path.basename(path)}: {syncs:.0f} syncs, {shared:.0f} served by the shared flush")


main()
