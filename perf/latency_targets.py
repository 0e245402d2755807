#!/usr/bin/env python3
"""Summary of perf/latency-targets.sh: per workload the median of its runs'
percentiles against shardlog and against the null broker (the floor), the
ratio of each to the floor, and each tail-latency target met or not.

    latency_targets.py RESULTS_DIR
"""
import glob
import json
import os
import statistics
import sys
import tomllib

PERCENTILES = ("p50_ms", "p99_ms", "p99.9_ms", "p99.99_ms")


def runs(directory, name):
    out = []
    for path in sorted(glob.glob(os.path.join(directory, f"{name}-[0-9]*.json"))):
        with open(path) as f:
            r = json.load(f)
        if r.get("status") == "ok":
            out.append(r)
        else:
            # Named with its directory (broker/ or floor/): the floor's runs
            # are read for the shardlog table's floor column too.
            where = os.path.join(os.path.basename(directory), os.path.basename(path))
            print(f"- {where} failed: {r.get('validation')}")
    return out


def median(rs, key, q):
    vals = [r[key][q] for r in rs if key in r]
    return statistics.median(vals) if vals else None


def fmt(v):
    return "–" if v is None else f"{v:.3f}"


def ratio(v, f):
    return "–" if v is None or not f else f"{v / f:.1f}×"


def below_floor(p99_max, floor_p99, append_p99):
    """Whether a p99 target lies below what the same run measured without
    shardlog: the null broker (generator and loopback) or the disk."""
    why = []
    if floor_p99 is not None and floor_p99 > p99_max:
        why.append("null broker")
    if append_p99 is not None and append_p99 > p99_max:
        why.append("disk")
    return "yes: " + ", ".join(why) if why else "no"


def main():
    d = sys.argv[1]
    half = open(os.path.join(d, "half-rate")).read().strip()
    with open(os.path.join(d, "io-properties.toml"), "rb") as f:
        io = tomllib.load(f)
    sync_p99_ms = io["fdatasync_p99_us"] / 1000
    maxes = runs(os.path.join(d, "broker"), "max")
    first = (maxes or runs(os.path.join(d, "broker"), "produce-acks1-5000"))[0]
    m = first["machine"]
    print(f"# Tail-latency targets — commit {first['commit']}\n")
    print(f"Machine: {m.get('cpu')}, {m.get('cores')} cores, kernel {m.get('kernel')}. "
          f"Parameters: 1 KiB records, 16 partitions, one shard, generator on its own core, "
          f"{first['parameters']['duration_s']} s measured after {first['parameters']['warmup_s']} s warm-up; "
          f"medians of the runs shown per row.\n")
    if maxes:
        rates = [r["throughput"]["msgs_per_s"] for r in maxes]
        print(f"Maximum produce throughput (acks=1, unthrottled): median {statistics.median(rates):,.0f} msg/s "
              f"of {len(rates)} runs ({', '.join(f'{x:,.0f}' for x in rates)}); half = {int(half):,} msg/s.\n")
    # The disk's own floor: iotune's paced 1 KiB appends (one direct write
    # in flight, as a partition writes), absent from older profiles.
    append_p99_ms = io["append_write_p99_us"] / 1000 if "append_write_p99_us" in io else None
    print(f"Disk: fdatasync p50/p99 {io['fdatasync_p50_us']}/{io['fdatasync_p99_us']} µs (shardlog iotune, same run).")
    if append_p99_ms is not None:
        print(f"Disk: paced 1 KiB direct appends, one in flight, {io.get('append_write_rate', '?')}/s: "
              f"p50/p99 {io['append_write_p50_us']}/{io['append_write_p99_us']} µs (same run). "
              f"A broker that answers after the device completed the write cannot have a lower p99.")
    print()
    print("| workload | runs | p50 | p99 | p99.9 | p99.99 | floor p99 | p99 ÷ floor | disk append p99 "
          "| admission lag p99 | target | target below a floor? | met |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
    verdicts = []
    for rate in ("5000", "50000", half):
        for name, key, floor_name, floor_key, target in (
            (f"produce-acks1-{rate}", "latency_ms", f"produce-acks1-{rate}", "latency_ms", ("p99 ≤ 1 ms, p99.9 ≤ 2 ms", 1.0, 2.0)),
            (f"produce-acksall-{rate}", "latency_ms", f"produce-acks1-{rate}", "latency_ms",
             (f"p99 ≤ 1 ms + fdatasync p99 = {1 + sync_p99_ms:.2f} ms", 1 + sync_p99_ms, None)),
            (f"e2e-acks1-{rate}", "e2e_latency_ms", f"e2e-acks1-{rate}", "e2e_latency_ms", ("e2e p99 ≤ 1.5 ms", 1.5, None)),
        ):
            rs = runs(os.path.join(d, "broker"), name)
            fl = runs(os.path.join(d, "floor"), floor_name)
            p = {q: median(rs, key, q) for q in PERCENTILES}
            floor_p99 = median(fl, floor_key, "p99_ms")
            lag = median(rs, "generator_admission_lag_ms", "p99_ms")
            label, p99_max, p999_max = target
            met = p["p99_ms"] is not None and p["p99_ms"] <= p99_max and (p999_max is None or p["p99.9_ms"] <= p999_max)
            verdicts.append((name, met))
            print(f"| {name} | {len(rs)} | {fmt(p['p50_ms'])} | {fmt(p['p99_ms'])} | {fmt(p['p99.9_ms'])} | "
                  f"{fmt(p['p99.99_ms'])} | {fmt(floor_p99)} | {ratio(p['p99_ms'], floor_p99)} | {fmt(append_p99_ms)} | "
                  f"{fmt(lag)} | {label} | {below_floor(p99_max, floor_p99, append_p99_ms)} | {'yes' if met else 'no'} |")
    print("\nFloor (null broker, same generator, same run):\n")
    print("| workload | runs | p50 | p99 | p99.9 | p99.99 | admission lag p99 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for rate in ("5000", "50000", half):
        for name, key in ((f"produce-acks1-{rate}", "latency_ms"), (f"e2e-acks1-{rate}", "e2e_latency_ms")):
            fl = runs(os.path.join(d, "floor"), name)
            print(f"| {name} | {len(fl)} | " + " | ".join(fmt(median(fl, key, q)) for q in PERCENTILES)
                  + f" | {fmt(median(fl, 'generator_admission_lag_ms', 'p99_ms'))} |")
    off = os.path.join(d, "broker-zero-ahead-off")
    if os.path.isdir(off):
        print("\nZero-ahead on (the default) against off (`--zero-ahead-bytes 0`), same run:\n")
        print("| workload | p99 on | p99 off | p99 on ÷ off | p99.9 on | p99.9 off |")
        print("|---|---:|---:|---:|---:|---:|")
        for rate in ("5000", "50000"):
            for name, key in ((f"produce-acks1-{rate}", "latency_ms"), (f"produce-acksall-{rate}", "latency_ms"),
                              (f"e2e-acks1-{rate}", "e2e_latency_ms")):
                on, of = runs(os.path.join(d, "broker"), name), runs(off, name)
                p_on, p_off = median(on, key, "p99_ms"), median(of, key, "p99_ms")
                print(f"| {name} | {fmt(p_on)} | {fmt(p_off)} | {ratio(p_on, p_off)} | "
                      f"{fmt(median(on, key, 'p99.9_ms'))} | {fmt(median(of, key, 'p99.9_ms'))} |")
    stages = os.path.join(d, "stages-50k.md")
    if os.path.exists(stages):
        print("\nWhere the slowest Produce requests' time went inside the broker (acks=1, 50k msg/s):\n")
        print(open(stages).read())
    print(f"\nTargets met: {sum(1 for _, m in verdicts if m)} of {len(verdicts)}.")


if __name__ == "__main__":
    main()
