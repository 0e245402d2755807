"""Admin APIs through the admin clients tools and UIs use: confluent-kafka's
AdminClient (librdkafka inside) and kafka-python's KafkaAdminClient.

Usage: admin_clients.py BOOTSTRAP TOPIC
Exits non-zero (with the reason) when any answer is not what Kafka gives.
"""

import sys

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from kafka import KafkaAdminClient


def check(cond, what):
    if not cond:
        sys.exit(f"FAILED: {what}")


def main(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1, config={"compression.type": "lz4"})]).values():
        f.result(30)

    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(30):
        p.produce(topic, value=f"record-{i}".encode(), partition=i % 2)
    check(p.flush(30) == 0, "every record delivered")

    cluster = admin.describe_cluster(request_timeout=30).result(30)
    check([n.id for n in cluster.nodes] == [0], f"one broker, node 0: {cluster.nodes}")
    check(cluster.controller is not None and cluster.controller.id == 0, f"controller: {cluster.controller}")
    check(bool(cluster.cluster_id), "a cluster id")

    for f in admin.create_partitions([NewPartitions(topic, 4)]).values():
        f.result(30)
    md = admin.list_topics(topic, timeout=30)
    check(len(md.topics[topic].partitions) == 4, f"4 partitions after growing: {md.topics[topic].partitions}")

    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(30)
    check(configs["compression.type"].value == "lz4", "compression.type as created")
    check(configs["retention.ms"].is_default, "retention.ms at its default")

    change = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("compression.type", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([change])[change].result(30)
    configs = admin.describe_configs([res])[res].result(30)
    check(configs["retention.ms"].value == "86400000", "retention.ms set incrementally")
    check(configs["compression.type"].value == "producer", "compression.type deleted back to its default")

    broker = ConfigResource(ConfigResource.Type.BROKER, "0")
    broker_configs = admin.describe_configs([broker])[broker].result(30)
    check(broker_configs["num.partitions"].is_read_only, "broker configs are read-only")

    ends = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()}).get(TopicPartition(topic, 0))
    check(ends.result(30).offset == 15, "15 records in partition 0")

    # DeleteRecords: the first 5 records of partition 0 go; a consumer from
    # the beginning starts at 5.
    deleted = admin.delete_records([TopicPartition(topic, 0, 5)])[TopicPartition(topic, 0)].result(30)
    check(deleted.low_watermark == 5, f"low watermark after DeleteRecords: {deleted.low_watermark}")
    start = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})[TopicPartition(topic, 0)].result(30)
    check(start.offset == 5, f"earliest offset after DeleteRecords: {start.offset}")
    too_far = admin.delete_records([TopicPartition(topic, 1, 1000)])[TopicPartition(topic, 1)]
    try:
        too_far.result(30)
        check(False, "DeleteRecords past the high watermark is refused")
    except Exception as e:
        check("OFFSET_OUT_OF_RANGE" in str(e), f"past the high watermark: {e}")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "admin-check", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, -2)])
    first = None
    for _ in range(100):
        m = c.poll(0.3)
        if m is not None and not m.error():
            first = m.offset()
            break
    c.close()
    check(first == 5, f"first record consumed from the beginning: {first}")

    # kafka-python: log dirs (partition sizes) and the cluster.
    kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    sizes = {}
    for broker_dirs in kp.describe_log_dirs():
        for log_dir in broker_dirs["log_dirs"]:
            check(log_dir["error_code"] == 0 and log_dir["usable_bytes"] > 0, f"log dir: {log_dir['log_dir']}")
            for t in log_dir["topics"]:
                for part in t["partitions"]:
                    sizes[(t["name"], part["partition_index"])] = part["partition_size"]
    check(sizes.get((topic, 0), 0) > 0 and sizes.get((topic, 1), 0) > 0, f"written partitions have bytes: {sizes}")
    check((topic, 3) in sizes, f"a new empty partition is listed: {sizes}")
    kc = kp.describe_cluster()
    check(kc["controller_id"] == 0 and len(kc["brokers"]) == 1, f"kafka-python describe_cluster: {kc}")
    print("admin clients: ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
