"""confluent-kafka (librdkafka inside the wheel) for tests/acls.rs: ACL
administration with the AdminClient, and a producer and a consumer to see
what the ACLs allow. Prints one JSON object on stdout.

Every client also takes the JSON object in $SHARDLOG_CLIENT_CONFIG (e.g.
security.protocol and SASL settings), so the same commands can run as an
authenticated user.

usage:
  confluent_acls.py create-acls BOOTSTRAP ACLS_JSON     -> {"results": [null | error name, ...]}
  confluent_acls.py describe-acls BOOTSTRAP FILTER_JSON -> {"acls": [...]} or {"error": name}
  confluent_acls.py delete-acls BOOTSTRAP FILTER_JSON   -> {"deleted": [...]} or {"error": name}
  confluent_acls.py create-topic BOOTSTRAP TOPIC PARTITIONS -> {"error": null | name}
  confluent_acls.py topics BOOTSTRAP                    -> {"topics": {name: error name | null}}
  confluent_acls.py produce BOOTSTRAP TOPIC VALUES_JSON PRODUCERS
        each of PRODUCERS fresh producers (fresh connections) sends every value
        -> {"delivered": n, "errors": [error name, ...]}
  confluent_acls.py consume BOOTSTRAP TOPIC GROUP COUNT -> {"values": [...], "errors": [error name, ...]}

An ACL (or filter) is {"resource_type": "TOPIC", "name": "orders-",
"pattern_type": "PREFIXED", "principal": "User:ANONYMOUS", "host": "*",
"operation": "WRITE", "permission": "ALLOW"}; in a filter, "ANY" and null
match anything.
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

TIMEOUT_S = 20


def config(bootstrap, **more):
    c = {"bootstrap.servers": bootstrap}
    c.update(json.loads(os.environ.get("SHARDLOG_CLIENT_CONFIG", "{}")))
    c.update(more)
    return c


def binding_args(a):
    return (
        ResourceType[a["resource_type"]],
        a.get("name"),
        ResourcePatternType[a["pattern_type"]],
        a.get("principal"),
        a.get("host"),
        AclOperation[a["operation"]],
        AclPermissionType[a["permission"]],
    )


def as_json(b):
    return {
        "resource_type": b.restype.name,
        "name": b.name,
        "pattern_type": b.resource_pattern_type.name,
        "principal": b.principal,
        "host": b.host,
        "operation": b.operation.name,
        "permission": b.permission_type.name,
    }


def error_name(e):
    err = e.args[0] if isinstance(e, KafkaException) and e.args else e
    return err.name() if hasattr(err, "name") else str(err)


def create_acls(admin, acls):
    futures = admin.create_acls([AclBinding(*binding_args(a)) for a in acls], request_timeout=TIMEOUT_S)
    results = []
    for f in futures.values():
        try:
            f.result()
            results.append(None)
        except KafkaException as e:
            results.append(error_name(e))
    return {"results": results}


def describe_acls(admin, f):
    try:
        found = admin.describe_acls(AclBindingFilter(*binding_args(f)), request_timeout=TIMEOUT_S).result()
    except KafkaException as e:
        return {"error": error_name(e)}
    return {"acls": sorted((as_json(b) for b in found), key=json.dumps)}


def delete_acls(admin, f):
    futures = admin.delete_acls([AclBindingFilter(*binding_args(f))], request_timeout=TIMEOUT_S)
    try:
        deleted = [as_json(b) for fut in futures.values() for b in fut.result()]
    except KafkaException as e:
        return {"error": error_name(e)}
    return {"deleted": sorted(deleted, key=json.dumps)}


def create_topic(admin, topic, partitions):
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=TIMEOUT_S)
    try:
        futures[topic].result()
        return {"error": None}
    except KafkaException as e:
        return {"error": error_name(e)}


def topics(admin):
    md = admin.list_topics(timeout=TIMEOUT_S)
    return {"topics": {name: (t.error.name() if t.error else None) for name, t in md.topics.items()}}


def produce(bootstrap, topic, values, producers):
    delivered, errors = 0, []

    def report(err, _msg):
        nonlocal delivered
        if err is None:
            delivered += 1
        else:
            errors.append(err.name())

    for _ in range(producers):
        p = Producer(config(bootstrap, **{"enable.idempotence": False, "message.timeout.ms": 10000, "linger.ms": 0}))
        for v in values:
            try:
                p.produce(topic, v.encode(), on_delivery=report)
            except KafkaException as e:
                # librdkafka refuses at once when the metadata it already
                # holds says the topic is not writable (a race with its
                # first metadata request); the same refusal as a report's.
                errors.append(error_name(e))
        left = p.flush(TIMEOUT_S)
        if left:
            errors.append(f"{left} undelivered")
    return {"delivered": delivered, "errors": errors}


def consume(bootstrap, topic, group, count):
    c = Consumer(config(bootstrap, **{"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    c.subscribe([topic])
    values, errors = [], []
    deadline = time.time() + TIMEOUT_S
    while len(values) < count and time.time() < deadline and not errors:
        msg = c.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            errors.append(msg.error().name())
            continue
        values.append(msg.value().decode())
    if values and not errors:
        c.commit(asynchronous=False)
    c.close()
    return {"values": values, "errors": errors}


def main():
    command, bootstrap, *args = sys.argv[1:]
    admin = AdminClient(config(bootstrap))
    if command == "create-acls":
        out = create_acls(admin, json.loads(args[0]))
    elif command == "describe-acls":
        out = describe_acls(admin, json.loads(args[0]))
    elif command == "delete-acls":
        out = delete_acls(admin, json.loads(args[0]))
    elif command == "create-topic":
        out = create_topic(admin, args[0], int(args[1]))
    elif command == "topics":
        out = topics(admin)
    elif command == "produce":
        out = produce(bootstrap, args[0], json.loads(args[1]), int(args[2]))
    elif command == "consume":
        out = consume(bootstrap, args[0], args[1], int(args[2]))
    else:
        raise SystemExit(f"unknown command {command}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
