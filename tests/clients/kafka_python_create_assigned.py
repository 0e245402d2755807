"""kafka-python's admin client for tests/confluent_admin.rs: CreateTopics
with num_partitions=-1 and an explicit replica list per partition (which
librdkafka refuses to send), then the partition count Metadata reports.

usage: kafka_python_create_assigned.py BOOTSTRAP TOPIC PARTITIONS
Prints {"partitions": N}.
"""
import json
import sys

from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic


def main():
    bootstrap, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    assignments = {p: [0] for p in range(partitions)}
    admin.create_topics([NewTopic(topic, num_partitions=-1, replication_factor=-1, replica_assignments=assignments)])
    admin.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    found = consumer.partitions_for_topic(topic)
    consumer.close()
    print(json.dumps({"partitions": len(found or [])}))


if __name__ == "__main__":
    main()
