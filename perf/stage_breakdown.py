#!/usr/bin/env python3
"""Where the slowest requests' time goes inside the broker, from /metrics.

    stage_breakdown.py URL [API] [QUANTILE]     (defaults: Produce 0.99)

Reads shardlog_request_total_seconds (each request's time from its size
prefix read to its response written) and
shardlog_request_stage_seconds_by_total (per stage, the seconds spent by
the requests whose total fell in each bucket). Prints, per stage, the mean
time of the requests at or above the QUANTILE's bucket (the tail) and of
all requests, in milliseconds, as a Markdown table. Scrape before and after
a run and pass BEFORE=URL-or-file to subtract the first scrape.
"""
import math
import os
import sys
import urllib.request
from collections import defaultdict

from prometheus_client.openmetrics.parser import text_string_to_metric_families


def load(source):
    if source.startswith("http"):
        with urllib.request.urlopen(source, timeout=10) as r:
            return r.read().decode()
    with open(source) as f:
        return f.read()


def parse(text, api):
    totals = {}  # le -> cumulative count
    by_total = defaultdict(lambda: defaultdict(float))  # le -> stage -> seconds
    order = []
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.labels.get("api") != api:
                continue
            if s.name == "shardlog_request_total_seconds_bucket":
                le = float(s.labels["le"])
                totals[le] = totals.get(le, 0) + s.value
            elif s.name == "shardlog_request_stage_seconds_by_total_total":
                le = float(s.labels["total_le"])
                stage = s.labels["stage"]
                if stage not in order:
                    order.append(stage)
                by_total[le][stage] += s.value
    return totals, by_total, order


def main():
    url = sys.argv[1]
    api = sys.argv[2] if len(sys.argv) > 2 else "Produce"
    q = float(sys.argv[3]) if len(sys.argv) > 3 else 0.99
    totals, by_total, order = parse(load(url), api)
    if os.environ.get("BEFORE"):
        t0, b0, _ = parse(load(os.environ["BEFORE"]), api)
        totals = {le: c - t0.get(le, 0) for le, c in totals.items()}
        for le in by_total:
            for st in by_total[le]:
                by_total[le][st] -= b0.get(le, {}).get(st, 0.0)
    les = sorted(totals)
    per_bucket = {}
    prev = 0
    for le in les:
        per_bucket[le] = totals[le] - prev
        prev = totals[le]
    n = prev
    if n == 0:
        sys.exit(f"no {api} requests traced")
    rank = math.ceil(q * n)
    tail_from = next(le for le in les if totals[le] >= rank)
    tail = [le for le in les if le >= tail_from]
    tail_n = sum(per_bucket[le] for le in tail)
    lower = max([le for le in les if le < tail_from], default=0.0)
    print(f"{api}: {int(n)} requests; p{q * 100:g} falls in ({lower * 1e3:g}, {tail_from * 1e3:g}] ms;"
          f" tail = {int(tail_n)} requests at or above that bucket")
    print()
    print(f"| stage | tail mean (ms) | all mean (ms) |")
    print(f"|---|---:|---:|")
    tail_sum = all_sum = 0.0
    for st in order:
        t = sum(by_total[le][st] for le in tail) / tail_n * 1e3
        a = sum(by_total[le][st] for le in les) / n * 1e3
        tail_sum += t
        all_sum += a
        print(f"| {st} | {t:.3f} | {a:.3f} |")
    print(f"| **sum** | **{tail_sum:.3f}** | **{all_sum:.3f}** |")


if __name__ == "__main__":
    main()
