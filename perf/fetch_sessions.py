"""Fetch request bytes with and without incremental fetch sessions
(KIP-227), measured by kafka-python's own client metrics.

    python3 perf/fetch_sessions.py HOST:PORT TOPICS PARTITIONS on|off

Assigns every partition of the topics many-0000.. (one record each, from
perf/many_partitions.py), reads every record, then keeps polling an idle
consumer for IDLE seconds and prints one JSON line: the request rate, the
average request size and the bytes sent per second in that idle window.
"""

import json
import sys
import time

from kafka import KafkaConsumer, TopicPartition

from many_partitions import names

IDLE = 15


def main():
    bootstrap, topics, partitions, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=500,
                      enable_incremental_fetch_sessions=(mode == "on"), metrics_sample_window_ms=5000,
                      metrics_num_samples=2)
    tps = [TopicPartition(n, p) for n in names(topics) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning()
    got = set()
    started = time.monotonic()
    while len(got) < len(tps) and time.monotonic() - started < 300:
        for tp, msgs in c.poll(timeout_ms=500, max_records=100_000).items():
            if msgs:
                got.add(tp)
    read_s = time.monotonic() - started
    end = time.monotonic() + IDLE
    while time.monotonic() < end:
        c.poll(timeout_ms=500)
    m = c.metrics()["consumer-metrics"]
    c.close()
    print(json.dumps({
        "sessions": mode, "partitions": len(tps), "partitions_read": len(got), "read_seconds": round(read_s, 2),
        "idle_request_rate": m.get("request-rate"), "idle_request_size_avg": m.get("request-size-avg"),
        "idle_outgoing_bytes_per_s": m.get("outgoing-byte-rate"),
    }))


if __name__ == "__main__":
    main()
