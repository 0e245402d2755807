#!/usr/bin/env python3
"""Summary of perf/capacity-sweeps.sh: per sweep step, the broker's produce
p50/p99/p99.9 beside the null broker's p99 at the same step (the floor of
the generator plus loopback, low sweeps only) and their ratio; then the
full sweep's steps and where it stopped keeping up.

    capacity_sweeps.py RESULTS_DIR
"""
import json
import os
import sys


def load(path):
    return json.load(open(path)) if os.path.exists(path) else None


def main():
    d = sys.argv[1]
    low = {a: load(os.path.join(d, "low", f"sweep-1024B-acks{a}.json")) for a in ("1", "all")}
    floor = {a: load(os.path.join(d, "floor", f"sweep-1024B-acks{a}.json")) for a in ("1", "all")}
    full = load(os.path.join(d, "full", "sweep-1024B-acksall.json"))
    first = next(s for s in list(low.values()) + [full] if s)
    print("# Capacity sweeps\n")
    print(f"commit {first['commit'][:12]}; machine: {first['machine']}; 1 KiB records, 16 partitions, "
          f"{first['parameters']['duration_s']:.0f} s per step after {first['parameters']['warmup_s']:.0f} s\n")
    print("| acks | requested msg/s | achieved msg/s | p50 ms | p99 ms | p99.9 ms | floor p99 ms | p99 ÷ floor |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for acks in ("1", "all"):
        if not low[acks]:
            continue
        floors = {s["requested_msgs_per_s"]: s for s in (floor[acks] or {}).get("steps", [])}
        for s in low[acks]["steps"]:
            print(row(acks, s, floors.get(s["requested_msgs_per_s"])))
    if full:
        print("\nFull sweep (acks=all, no floor):\n")
        print("| acks | requested msg/s | achieved msg/s | p50 ms | p99 ms | p99.9 ms | floor p99 ms | p99 ÷ floor |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for s in full["steps"]:
            print(row("all", s, None))
        print(f"\nMaximum sustained: {full['max_sustained_msgs_per_s']:,.0f} msg/s "
              f"(first saturated step: {full['first_saturated_step']})")


def row(acks, s, fl):
    lat = s.get("latency_ms") or {}
    fl_p99 = (fl or {}).get("latency_ms", {}).get("p99_ms")
    ratio = f"{lat['p99_ms'] / fl_p99:.1f}×" if fl_p99 and lat.get("p99_ms") else ""
    cells = [f"{lat.get(q, float('nan')):.3f}" for q in ("p50_ms", "p99_ms", "p99.9_ms")]
    kept = "" if s.get("kept_up", True) else " (behind)"
    return (f"| {acks} | {s['requested_msgs_per_s']:,.0f} | {s['achieved_msgs_per_s']:,.0f}{kept} | "
            f"{' | '.join(cells)} | {'' if fl_p99 is None else f'{fl_p99:.3f}'} | {ratio} |")


if __name__ == "__main__":
    main()
