#!/usr/bin/env python3
"""Summarises a perf/standard-workloads.sh results directory as Markdown:
maximum produce throughput with its ratios to the baselines measured in the
same run, and latency at half of that maximum, each percentile also as a
ratio to its floor (the same run against the null broker, in DIR/floor/).

    summarize.py DIR                       the Markdown summary
    summarize.py --median-rate DIR PREFIX  median msg/s of DIR/PREFIX*.json
"""
import glob
import json
import os
import statistics
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def ok_runs(directory, prefix):
    runs = []
    for path in sorted(glob.glob(os.path.join(directory, prefix + "*.json"))):
        r = load(path)
        if r.get("status") != "ok":
            sys.exit(f"{path}: run failed: {r.get('validation')}")
        runs.append(r)
    if not runs:
        sys.exit(f"no results {prefix}*.json in {directory}")
    return runs


PERCENTILES = ("p50", "p90", "p99", "p99.9", "p99.99")


def floor_of(directory, name):
    """The same run against the null broker, if the script made one."""
    path = os.path.join(directory, "floor", name + ".json")
    if not os.path.exists(path):
        return None
    return load(path)


def ratio(value, floor):
    return f"{value / floor:.2f}" if floor > 0 else "–"


def print_floors(d, rows):
    """Floor percentiles of the half-load runs, then each broker percentile
    divided by its floor."""
    floors = [(w, size, acks, ok_runs(d, f"half-{w}")[0], floor_of(d, f"half-{w}")) for w, size, acks in rows]
    for w, size, acks, _, f in floors:
        if f is not None and f.get("status") != "ok":
            print(f"\nfloor run half-{w} failed: {f.get('validation')}")
    floors = [f for f in floors if f[4] is not None and f[4].get("status") == "ok"]
    if not floors:
        return
    cols = [f"produce {p}" for p in PERCENTILES] + [f"e2e {p}" for p in PERCENTILES]
    head = "| workload | " + " | ".join(cols) + " |\n|---|" + "---:|" * len(cols)
    print("\nFloor: the same runs against the null broker (`shardlog bench null-broker`, pinned to the "
          "broker's core: acks at once, fetches from memory), i.e. the generator plus loopback; ms:\n")
    print(head)
    for w, size, acks, h, f in floors:
        cells = [f"{f[k][p + '_ms']:.3f}" for k in ("latency_ms", "e2e_latency_ms") for p in PERCENTILES]
        print(f"| {size} B, acks={acks} | " + " | ".join(cells) + " |")
    print("\nEach percentile of the broker's run ÷ the same percentile of its floor:\n")
    print(head)
    for w, size, acks, h, f in floors:
        cells = [ratio(h[k][p + "_ms"], f[k][p + "_ms"]) for k in ("latency_ms", "e2e_latency_ms") for p in PERCENTILES]
        print(f"| {size} B, acks={acks} | " + " | ".join(cells) + " |")


def median_rate(directory, prefix):
    return statistics.median(r["throughput"]["msgs_per_s"] for r in ok_runs(directory, prefix))


def main():
    if sys.argv[1] == "--median-rate":
        print(int(median_rate(sys.argv[2], sys.argv[3])))
        return
    d = sys.argv[1]
    base = load(os.path.join(d, "baseline.json"))
    tcp, dma = base["raw_loopback_tcp_mb_per_s"], base["raw_dma_write_mb_per_s"]
    m = base["machine"]
    first = ok_runs(d, "max-")[0]
    p = first["parameters"]
    print(f"machine: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}; commit {first['commit']}")
    print(f"broker: one shard pinned to core {base['parameters']['server_core']}; "
          f"generator pinned to core {base['parameters']['client_core']}; "
          f"{p['partitions']} partitions, {p['duration_s']:.0f} s measured after {p['warmup_s']:.0f} s warm-up")
    print(f"baselines (median of {base['parameters']['repetitions']}): raw loopback TCP {tcp:.0f} MB/s, "
          f"raw DMA write {dma:.0f} MB/s\n")
    print("| workload | max msg/s | max MB/s | ÷ raw TCP | ÷ raw DMA | ÷ min(TCP, DMA) |")
    print("|---|---:|---:|---:|---:|---:|")
    rows = []
    for size in (1024, 100):
        for acks in ("1", "all"):
            w = f"{size}B-acks{acks}"
            runs = ok_runs(d, f"max-{w}-")
            rate = statistics.median(r["throughput"]["msgs_per_s"] for r in runs)
            mbps = statistics.median(r["throughput"]["mb_per_s"] for r in runs)
            print(f"| {size} B, acks={acks} | {rate:,.0f} | {mbps:.1f} | {mbps / tcp:.2f} | "
                  f"{mbps / dma:.2f} | {mbps / min(tcp, dma):.2f} |")
            rows.append((w, size, acks))
    print("\nLatency at half of the maximum (open loop, from intended send time; ms):\n")
    print("| workload | rate msg/s | produce p50 | p99 | p99.9 | e2e p50 | p99 | p99.9 | validation |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for w, size, acks in rows:
        h = ok_runs(d, f"half-{w}")[0]
        lat, e2e = h["latency_ms"], h["e2e_latency_ms"]
        print(f"| {size} B, acks={acks} | {h['parameters']['rate']:,.0f} | {lat['p50_ms']:.3f} | "
              f"{lat['p99_ms']:.3f} | {lat['p99.9_ms']:.3f} | {e2e['p50_ms']:.3f} | {e2e['p99_ms']:.3f} | "
              f"{e2e['p99.9_ms']:.3f} | {h['validation']} |")
    print_floors(d, rows)
    for path in sorted(glob.glob(os.path.join(d, "sweep-*.json"))):
        r = load(path)
        p = r["parameters"]
        sat = r.get("max_sustained_msgs_per_s")
        rows = [s for s in r["steps"] if s.get("status") == "ok"]
        floor = floor_of(d, os.path.basename(path)[:-len(".json")])
        floor_steps = {s["step"]: s for s in (floor or {}).get("steps", []) if s.get("status") == "ok"}
        print(f"\nSweep, {p['record_size']} B, acks={p['acks']} ({os.path.basename(path)}): "
              + (f"saturation at about {sat:,.0f} msg/s ({r['max_sustained_mb_per_s']:.1f} MB/s)"
                 if sat and r.get("first_saturated_step") else "did not saturate"))
        print("\n| requested msg/s | achieved msg/s | p50 ms | p99 ms | p99.9 ms | kept up "
              "| floor p50 | p99 | p99.9 | p50 ÷ floor | p99 ÷ floor | p99.9 ÷ floor |")
        print("|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
        for s in rows:
            lat = s["latency_ms"]
            f = floor_steps.get(s["step"], {}).get("latency_ms")
            qs = ("p50_ms", "p99_ms", "p99.9_ms")
            vs = " | ".join([f"{f[q]:.3f}" for q in qs] + [ratio(lat[q], f[q]) for q in qs]) if f else " | ".join(["–"] * 6)
            print(f"| {s['requested_msgs_per_s']:,.0f} | {s['achieved_msgs_per_s']:,.0f} | {lat['p50_ms']:.3f} | "
                  f"{lat['p99_ms']:.3f} | {lat['p99.9_ms']:.3f} | {'yes' if s['kept_up'] else 'no'} | {vs} |")
    io = os.path.join(d, "io-properties.toml")
    if os.path.exists(io):
        import tomllib
        with open(io, "rb") as f:
            t = tomllib.load(f)
        print(f"\nDisk (shardlog iotune): sequential write {t['write_bandwidth_mb_per_s']:.0f} MB/s, read "
              f"{t['read_bandwidth_mb_per_s']:.0f} MB/s, fdatasync p50/p99 {t['fdatasync_p50_us']}/{t['fdatasync_p99_us']} µs, "
              f"random 4 KiB reads {t['random_read_iops_qd1']:,.0f} IOPS (qd 1), {t['random_read_iops_qd32']:,.0f} (qd 32)")
    vs = glob.glob(os.path.join(d, "rdkafka-*.json"))
    if vs:
        r = load(vs[0])
        if r.get("status") == "ok" and r.get("rdkafka", {}).get("status") == "ok":
            print(f"\nGenerator check, 1 KiB acks=1 unthrottled: native {r['throughput']['msgs_per_s']:,.0f} msg/s, "
                  f"librdkafka {r['rdkafka']['throughput']['msgs_per_s']:,.0f} msg/s "
                  f"(native ÷ librdkafka = {r['ratio']['throughput_native_over_rdkafka']:.2f})")


if __name__ == "__main__":
    main()
