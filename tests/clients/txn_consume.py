"""A confluent-kafka (librdkafka) consumer for tests/txn_log.rs: reads the
given partitions of TOPIC from the beginning to their end at the chosen
isolation level and prints one JSON object on stdout:
  {"records": [[partition, offset, value], ...], "positions": {partition: next offset}}
At read_committed librdkafka drops the records of aborted transactions
with the fetch's aborted_transactions list and skips the markers; the end
of a partition is then its last stable offset.

usage: txn_consume.py BOOTSTRAP TOPIC ISOLATION PARTITIONS
  ISOLATION: read_committed | read_uncommitted; PARTITIONS: "0,1"
"""
import json
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

TIMEOUT_S = 30


def main():
    bootstrap, topic, isolation, partitions = sys.argv[1:5]
    parts = [int(p) for p in partitions.split(",")]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txn-log-test",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    records = []
    at_end = set()
    deadline = time.time() + TIMEOUT_S
    while len(at_end) < len(parts):
        if time.time() > deadline:
            raise SystemExit(f"timed out; at end: {sorted(at_end)}; records: {records}")
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
                continue
            raise SystemExit(f"consumer error: {msg.error()}")
        at_end.discard(msg.partition())
        records.append([msg.partition(), msg.offset(), msg.value().decode()])
    positions = consumer.position([TopicPartition(topic, p) for p in parts])
    consumer.close()
    print(json.dumps({"records": records, "positions": {str(tp.partition): tp.offset for tp in positions}}))


if __name__ == "__main__":
    main()
