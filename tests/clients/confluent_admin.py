"""confluent-kafka's AdminClient (librdkafka inside the wheel) for
tests/confluent_admin.rs. Prints one JSON object on stdout.

usage:
  confluent_admin.py max-timestamp BOOTSTRAP TOPIC PARTITION
      ListOffsets with OffsetSpec.max_timestamp() (timestamp -3, v7+);
      prints the offset and timestamp answered.
"""
import json
import sys

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

TIMEOUT_S = 20


def max_timestamp(admin, topic, partition):
    tp = TopicPartition(topic, partition)
    futures = admin.list_offsets({tp: OffsetSpec.max_timestamp()}, request_timeout=TIMEOUT_S)
    info = futures[tp].result()
    return {"offset": info.offset, "timestamp": info.timestamp}


def main():
    command, bootstrap, topic, n = sys.argv[1:5]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if command == "max-timestamp":
        out = max_timestamp(admin, topic, int(n))
    else:
        raise SystemExit(f"unknown command {command}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
