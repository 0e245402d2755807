"""kafka-python consumer groups against a running shardlog broker.

Commands (run by tests/groups_kafka_python.rs, which owns the broker):
  setup      BOOTSTRAP TOPIC PARTITIONS PER_PARTITION   create and fill a topic
  member     BOOTSTRAP TOPIC GROUP          consume; print "ASSIGNED p,q" on change
  commit     BOOTSTRAP TOPIC GROUP P:OFFSET:META ...
  committed  BOOTSTRAP TOPIC GROUP PARTITIONS   print {partition: [offset, metadata]}
  resume     BOOTSTRAP TOPIC GROUP PARTITIONS   print {partition: first offset consumed}
  offsets-topic BOOTSTRAP PARTITION         print [[key hex, value hex or null], ...]
  groups     BOOTSTRAP                      print the group ids the broker lists
Exits non-zero, with the reason, when anything fails.
"""
import json
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata


def setup(bootstrap, topic, partitions, per_partition):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=int(partitions), replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False)
    for p in range(int(partitions)):
        for i in range(int(per_partition)):
            producer.send(topic, key=f"p{p}-{i}".encode(), value=b"v", partition=p)
    producer.flush()
    producer.close()


def consumer(bootstrap, group, **extra):
    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                         auto_offset_reset="earliest", session_timeout_ms=6000,
                         heartbeat_interval_ms=500, fetch_max_wait_ms=100, **extra)


def member(bootstrap, topic, group):
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    last = None
    while True:
        c.poll(timeout_ms=50)
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            print("ASSIGNED " + ",".join(str(p) for p in now), flush=True)
            last = now


def commit(bootstrap, topic, group, *specs):
    c = consumer(bootstrap, group)
    offsets = {}
    for spec in specs:
        p, offset, meta = spec.split(":", 2)
        offsets[TopicPartition(topic, int(p))] = OffsetAndMetadata(int(offset), meta, -1)
    c.commit(offsets)
    c.close()


def committed(bootstrap, topic, group, partitions):
    c = consumer(bootstrap, group)
    out = {}
    for p in range(int(partitions)):
        tp = TopicPartition(topic, p)
        meta = c.committed(tp, metadata=True)
        if meta is not None:
            out[p] = [meta.offset, meta.metadata]
    c.close()
    print(json.dumps(out))


def resume(bootstrap, topic, group, partitions):
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    first = {}
    deadline = time.time() + 60
    while len(first) < int(partitions) and time.time() < deadline:
        for tp, records in c.poll(timeout_ms=100).items():
            first.setdefault(tp.partition, records[0].offset)
    c.close()
    print(json.dumps(first))


def offsets_topic(bootstrap, partition):
    c = KafkaConsumer(bootstrap_servers=bootstrap, exclude_internal_topics=False,
                      enable_auto_commit=False, fetch_max_wait_ms=100)
    tp = TopicPartition("__consumer_offsets", int(partition))
    c.assign([tp])
    c.seek_to_beginning(tp)
    end = c.end_offsets([tp])[tp]
    out, position = [], 0
    deadline = time.time() + 30
    while position < end:
        if time.time() > deadline:
            sys.exit(f"reading __consumer_offsets-{partition}: at {position} of {end}")
        for _, records in c.poll(timeout_ms=100).items():
            for r in records:
                out.append([r.key.hex(), None if r.value is None else r.value.hex()])
                position = r.offset + 1
    c.close()
    print(json.dumps(out))


def groups(bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    print(json.dumps(sorted(g["group_id"] for g in admin.list_groups())))
    admin.close()


COMMANDS = {"setup": setup, "member": member, "commit": commit, "committed": committed,
            "resume": resume, "offsets-topic": offsets_topic, "groups": groups}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
