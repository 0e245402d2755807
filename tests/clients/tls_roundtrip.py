"""Produces and consumes over an SSL listener with a real Python client, for
tests/tls.rs.

usage: tls_roundtrip.py confluent|kafka-python BOOTSTRAP TOPIC COUNT CA_FILE [CERT_FILE KEY_FILE]
       tls_roundtrip.py probe BOOTSTRAP CA_FILE   (confluent-kafka: metadata only)

Prints `produced <value>` for each record the broker acknowledged and
`consumed <value>` for each record read back from the beginning; exits 0
once COUNT records were read, 2 after 60 s with fewer. `probe` prints
`ok` or `failed <error>`.
"""
import os
import sys
import time
import uuid

TIMEOUT_S = 60


def confluent(bootstrap, topic, count, ca, cert, key):
    from confluent_kafka import Consumer, Producer

    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": ca}
    if cert:
        conf.update({"ssl.certificate.location": cert, "ssl.key.location": key})
    producer = Producer(conf)

    def delivered(err, msg):
        if err is None:
            print("produced", msg.value().decode(), flush=True)
        else:
            print("delivery failed", err, file=sys.stderr, flush=True)

    run = uuid.uuid4().hex[:8]
    for i in range(count):
        producer.produce(topic, value=f"cf-{run}-{i}".encode(), callback=delivered)
        producer.poll(0)
    if producer.flush(TIMEOUT_S) != 0:
        sys.exit(2)
    consumer = Consumer(dict(conf, **{"group.id": f"tls-{run}", "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    seen, deadline = 0, time.time() + TIMEOUT_S
    while seen < count and time.time() < deadline:
        msg = consumer.poll(1)
        if msg is None:
            continue
        if msg.error():
            print("consume error", msg.error(), file=sys.stderr, flush=True)
            continue
        print("consumed", msg.value().decode(), flush=True)
        seen += 1
    consumer.close()
    sys.exit(0 if seen >= count else 2)


def kafka_python(bootstrap, topic, count, ca, cert, key):
    from kafka import KafkaConsumer, KafkaProducer

    ssl = {"security_protocol": "SSL", "ssl_cafile": ca, "ssl_certfile": cert, "ssl_keyfile": key}
    producer = KafkaProducer(bootstrap_servers=bootstrap, **ssl)
    run = uuid.uuid4().hex[:8]
    futures = [(f"kp-{run}-{i}", producer.send(topic, f"kp-{run}-{i}".encode())) for i in range(count)]
    for value, future in futures:
        future.get(timeout=TIMEOUT_S)
        print("produced", value, flush=True)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"tls-{run}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=TIMEOUT_S * 1000,
        **ssl,
    )
    seen = 0
    for msg in consumer:
        print("consumed", msg.value.decode(), flush=True)
        seen += 1
        if seen >= count:
            break
    consumer.close()
    sys.exit(0 if seen >= count else 2)


def probe(bootstrap, ca):
    from confluent_kafka.admin import AdminClient
    from confluent_kafka import KafkaException

    admin = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": ca,
                         "log_level": 0})
    try:
        admin.list_topics(timeout=8)
        print("ok", flush=True)
    except KafkaException as e:
        print("failed", e, flush=True)


def main():
    if sys.argv[1] == "probe":
        probe(sys.argv[2], sys.argv[3])
        return
    client, bootstrap, topic, count, ca = sys.argv[1:6]
    cert, key = (sys.argv[6], sys.argv[7]) if len(sys.argv) > 7 else (None, None)
    run = confluent if client == "confluent" else kafka_python
    run(bootstrap, topic, int(count), ca, cert, key)


if __name__ == "__main__":
    main()
