"""Produce one record to every partition of many topics, or read them all
back and check them, with confluent-kafka (librdkafka).

    python3 perf/many_partitions.py create  HOST:PORT TOPICS PARTITIONS
    python3 perf/many_partitions.py produce HOST:PORT TOPICS PARTITIONS ROUND
    python3 perf/many_partitions.py verify  HOST:PORT TOPICS PARTITIONS ROUNDS

Topics are named many-0000.. . `produce` writes the value
"<topic>/<partition>/<round>" with acks=all and fails unless every record
is acknowledged; `verify` assigns every partition from offset 0 and fails
unless each holds exactly the acknowledged values of rounds 0..ROUNDS-1, in
order. Each prints one JSON line with its timings.
"""

import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def names(topics):
    return [f"many-{t:04d}" for t in range(topics)]


def create(bootstrap, topics, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    started = time.monotonic()
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names(topics)], operation_timeout=600)
    for name, f in futures.items():
        f.result()
    return {"created_topics": topics, "partitions": topics * partitions, "seconds": time.monotonic() - started}


def produce(bootstrap, topics, partitions, rnd):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                  "queue.buffering.max.messages": 1_000_000, "message.timeout.ms": 300_000})
    failed = []
    acked = [0]

    def done(err, msg):
        if err is not None:
            failed.append(f"{msg.topic()}/{msg.partition()}: {err}")
        else:
            acked[0] += 1

    started = time.monotonic()
    for name in names(topics):
        for part in range(partitions):
            p.produce(name, value=f"{name}/{part}/{rnd}".encode(), partition=part, on_delivery=done)
            p.poll(0)
    left = p.flush(600)
    elapsed = time.monotonic() - started
    if failed or left or acked[0] != topics * partitions:
        sys.exit(f"produce: {acked[0]} acknowledged of {topics * partitions}, {left} left; {failed[:5]}")
    return {"acked": acked[0], "seconds": elapsed}


def verify(bootstrap, topics, partitions, rounds):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "many-verify", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(n, p, 0) for n in names(topics) for p in range(partitions)])
    want = topics * partitions * rounds
    seen = {}
    started = time.monotonic()
    deadline = started + 900
    while sum(len(v) for v in seen.values()) < want and time.monotonic() < deadline:
        for msg in c.consume(10_000, timeout=1.0):
            if msg.error():
                continue
            seen.setdefault((msg.topic(), msg.partition()), []).append(msg.value().decode())
    c.close()
    elapsed = time.monotonic() - started
    bad = []
    for name in names(topics):
        for part in range(partitions):
            expect = [f"{name}/{part}/{r}" for r in range(rounds)]
            got = seen.get((name, part), [])
            if got != expect:
                bad.append(f"{name}/{part}: {got} != {expect}")
    if bad:
        sys.exit(f"verify: {len(bad)} partitions differ, e.g. {bad[:3]}")
    return {"verified_records": want, "seconds": elapsed}


def main():
    cmd, bootstrap, topics, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if cmd == "create":
        out = create(bootstrap, topics, partitions)
    elif cmd == "produce":
        out = produce(bootstrap, topics, partitions, int(sys.argv[5]))
    elif cmd == "verify":
        out = verify(bootstrap, topics, partitions, int(sys.argv[5]))
    else:
        sys.exit(__doc__)
    print(json.dumps({"step": cmd, **out}))


if __name__ == "__main__":
    main()
