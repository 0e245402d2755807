"""kafka-python against a running shardlog broker.

Commands (run by tests/client_kafka_python.rs, which owns the broker):
  create   BOOTSTRAP TOPIC PARTITIONS
  produce  BOOTSTRAP TOPIC ACKS START COUNT MANIFEST   (appends to MANIFEST)
  verify   BOOTSTRAP TOPIC MANIFEST
Exits non-zero, with the reason, when anything differs.
"""
import json
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

BASE_TS = 1_760_000_000_000


def record(i):
    return (f"key-{i}".encode(), f"py-{i}-".encode() + b"y" * (i % 89), BASE_TS + i)


def create(bootstrap, topic, partitions):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=int(partitions), replication_factor=1)])
    assert topic in admin.list_topics(), "created topic is listed"
    admin.close()


def produce(bootstrap, topic, acks, start, count, manifest):
    acks = "all" if acks == "all" else int(acks)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=5,
                             enable_idempotence=False, max_in_flight_requests_per_connection=1)
    futures = []
    for i in range(int(start), int(start) + int(count)):
        key, value, ts = record(i)
        futures.append((i, producer.send(topic, key=key, value=value, timestamp_ms=ts)))
    producer.flush()
    with open(manifest, "a") as out:
        for i, f in futures:
            md = f.get(timeout=30)
            out.write(json.dumps({"i": i, "p": md.partition, "o": md.offset}) + "\n")
    producer.close()


def load(manifest):
    expected = {}
    with open(manifest) as f:
        for line in f:
            e = json.loads(line)
            part = expected.setdefault(e["p"], {})
            assert e["o"] not in part, f"offset {e['o']} of partition {e['p']} acknowledged twice"
            part[e["o"]] = record(e["i"])
    return expected


def verify(bootstrap, topic, manifest):
    expected = load(manifest)
    total = sum(len(p) for p in expected.values())
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_wait_ms=100)
    partitions = sorted(consumer.partitions_for_topic(topic))
    tps = [TopicPartition(topic, p) for p in partitions]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    got = {}
    last = {}
    deadline = time.time() + 180
    seen = 0
    while seen < total and time.time() < deadline:
        for tp, messages in consumer.poll(timeout_ms=500).items():
            part = got.setdefault(tp.partition, {})
            for m in messages:
                previous = last.get(tp.partition, -1)
                assert m.offset > previous, f"partition {tp.partition} went back from {previous} to {m.offset}"
                last[tp.partition] = m.offset
                part[m.offset] = (m.key, m.value, m.timestamp)
                seen += 1
    assert seen == total, f"consumed {seen} of {total}"
    assert got == expected, "consumed records differ from what was acknowledged"
    begin = consumer.beginning_offsets(tps)
    end = consumer.end_offsets(tps)
    for tp in tps:
        assert begin[tp] == 0, f"earliest of {tp}: {begin[tp]}"
        assert end[tp] == max(expected[tp.partition]) + 1, f"latest of {tp}: {end[tp]}"
    for probe in (BASE_TS, BASE_TS + 777, BASE_TS + 60_000, BASE_TS + 10**9):
        answer = consumer.offsets_for_times({tp: probe for tp in tps})
        for tp in tps:
            want = next((o for o, r in sorted(expected[tp.partition].items()) if r[2] >= probe), None)
            have = answer[tp].offset if answer[tp] is not None else None
            assert have == want, f"offset for time {probe} in {tp}: {have} != {want}"
    consumer.close()
    print(f"verified {total} records in {len(tps)} partitions")


if __name__ == "__main__":
    commands = {"create": create, "produce": produce, "verify": verify}
    commands[sys.argv[1]](*sys.argv[2:])
