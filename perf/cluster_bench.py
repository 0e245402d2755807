"""Summarises perf/cluster-bench.sh: per arm (one broker, three brokers
with one replica per partition, three brokers with three) and workload, the medians over repetitions of produce latency and
throughput, and the cluster's ratio to the one broker measured in the same
run."""

import json
import pathlib
import re
import statistics
import sys

out = pathlib.Path(sys.argv[1])
runs = {}
for f in sorted(out.glob("*-r*.json")):
    arm, workload, _ = re.match(r"(\w+)-(\w+)-r(\d+)", f.stem).groups()
    runs.setdefault((workload, arm), []).append(json.loads(f.read_text()))

first = next(iter(runs.values()))[0]
p = first["parameters"]
reps = len(next(iter(runs.values())))
print(f"# Three-broker cluster beside one broker ({first['commit'][:12]})\n")
print(f"machine: {first['machine']}; {p['partitions']} partitions, {p['record_size']} B records, "
      f"{p['duration_s']:.0f} s measured after {p['warmup_s']:.0f} s, medians of {reps} runs\n")
for f in sorted(out.glob("placement-cluster-r*.txt")):
    print(f"partitions per broker ({f.stem}): {' '.join(f.read_text().split())}")
print()
print("| workload | arm | msg/s | p50 ms | p99 ms | p99.9 ms | ÷ single (msg/s, p50, p99) |")
print("|---|---|---:|---:|---:|---:|---|")
names = {
    "acks1": "acks=1 at rate",
    "acksall": "acks=all at rate",
    "max": "acks=1, as fast as acknowledged",
    "maxall": "acks=all, as fast as acknowledged",
}
arms = {"single": "one broker", "cluster": "3 brokers, RF 1", "rf3": "3 brokers, RF 3"}
for workload in names:
    med = {}
    for arm in arms:
        rs = runs.get((workload, arm), [])
        if not rs:
            continue
        for r in rs:
            if r["lost"] or r["status"] != "ok":
                print(f"WARNING: {arm} {workload}: status {r['status']}, lost {r['lost']}")
        m = {q: statistics.median(r["latency_ms"][f"{q}_ms"] for r in rs) for q in ("p50", "p99", "p99.9")}
        m["rate"] = statistics.median(r["throughput"]["msgs_per_s"] for r in rs)
        med[arm] = m
        ratio = ""
        if arm != "single" and "single" in med:
            s = med["single"]
            ratio = f"{m['rate'] / s['rate']:.2f}, {m['p50'] / s['p50']:.2f}, {m['p99'] / s['p99']:.2f}"
        print(f"| {names[workload]} | {arms[arm]} | {m['rate']:,.0f} | {m['p50']:.3f} | {m['p99']:.3f} | "
              f"{m['p99.9']:.3f} | {ratio} |")


def work_rate(path):
    """Broker CPU seconds a second spent on the workload: through acks=1 at
    RATE, less the same brokers' idle rate."""
    f = [float(x) for x in path.read_text().split()]
    (i0, t0, i1, t1, b1, tb, tick) = f
    idle = (i1 - i0) / tick / (t1 - t0)
    busy = (b1 - i1) / tick / (tb - t1)
    return busy - idle, idle, busy


# A replica's CPU against a produce's: three replicas cost the work of one
# broker's produce plus two replicas' (the leader's sends and the
# followers' appends), at the same rate and size.
costs = []
for single_file in sorted(out.glob("cpu-single-r*.txt")):
    rf3_file = out / single_file.name.replace("single", "rf3")
    if not rf3_file.exists():
        continue
    lead, lead_idle, _ = work_rate(single_file)
    three, three_idle, _ = work_rate(rf3_file)
    if lead > 0:
        costs.append({"single_cpu_s_per_s": lead, "rf3_cpu_s_per_s": three, "single_idle": lead_idle,
                      "rf3_idle": three_idle, "replica_cost": (three - lead) / (2 * lead)})
if costs:
    cost = statistics.median(c["replica_cost"] for c in costs)
    rate = runs[("acks1", "single")][0]["parameters"].get("rate")
    print()
    print(f"A replica's CPU against a produce's (acks=1 at {rate} msg/s, "
          f"busy less idle): median {cost:.2f} (runs "
          + ", ".join(f"{c['replica_cost']:.2f}" for c in costs)
          + "); one broker "
          + ", ".join(f"{c['single_cpu_s_per_s']:.3f}" for c in costs)
          + " CPU s/s, three replicas "
          + ", ".join(f"{c['rf3_cpu_s_per_s']:.3f}" for c in costs)
          + " CPU s/s")
    (out / "replication-cost.json").write_text(json.dumps({
        "replica_cpu_per_produce_cpu": cost,
        "replication_factor": 3,
        "record_size": p["record_size"],
        "partitions": p["partitions"],
        "rate": rate,
        "commit": first["commit"],
        "machine": first["machine"],
        "runs": costs,
    }, indent=1) + "\n")
