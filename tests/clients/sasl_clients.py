"""confluent-kafka and kafka-python over SASL_PLAINTEXT (run by tests/sasl.rs,
which owns the broker and its users).

Commands, each printing one JSON object:
  roundtrip CLIENT BOOTSTRAP MECHANISM USER PASSWORD TOPIC VALUES_JSON
      produce VALUES (a JSON list of strings) to partition 0 of TOPIC, then
      consume the partition from the start: {"offsets": [...], "consumed": [...]}
  login CLIENT BOOTSTRAP MECHANISM USER PASSWORD
      list topics once: {"ok": true} or {"ok": false, "error": ..., "kind": ...}
  alter BOOTSTRAP MECHANISM USER PASSWORD (upsert|delete) TARGET_USER [TARGET_PASSWORD]
      AlterUserScramCredentials (SCRAM-SHA-512, 8192 iterations) with the
      AdminClient: {"ok": true} or {"ok": false, "error": ...}
  describe BOOTSTRAP MECHANISM USER PASSWORD [TARGET_USER]
      {"users": {name: [[mechanism, iterations], ...]}} or {"error": ...}
CLIENT is confluent or kafka-python. With $SHARDLOG_SASL_SSL_CA set (a CA
file), every client speaks SASL_SSL and trusts that CA instead.
"""
import json
import os
import sys
import time

SSL_CA = os.environ.get("SHARDLOG_SASL_SSL_CA")


def confluent_conf(bootstrap, mechanism, user, password):
    conf = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL" if SSL_CA else "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if SSL_CA:
        conf["ssl.ca.location"] = SSL_CA
    return conf


def kp_conf(bootstrap, mechanism, user, password):
    conf = dict(bootstrap_servers=bootstrap, security_protocol="SASL_SSL" if SSL_CA else "SASL_PLAINTEXT",
                sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    if SSL_CA:
        conf.update(ssl_cafile=SSL_CA, ssl_check_hostname=False)
    return conf


def roundtrip(client, bootstrap, mechanism, user, password, topic, values):
    if client == "confluent":
        from confluent_kafka import Consumer, Producer, TopicPartition
        conf = confluent_conf(bootstrap, mechanism, user, password)
        offsets = []
        p = Producer({**conf, "linger.ms": 0})
        def delivered(err, msg):
            if err is not None:
                raise SystemExit(f"delivery failed: {err}")
            offsets.append(msg.offset())
        for v in values:
            p.produce(topic, v.encode(), partition=0, on_delivery=delivered)
            p.flush(30)
        c = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        c.assign([TopicPartition(topic, 0, 0)])
        consumed, deadline = [], time.time() + 30
        while len(consumed) < len(values) and time.time() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                consumed.append(m.value().decode())
        c.close()
        return {"offsets": offsets, "consumed": consumed}
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    conf = kp_conf(bootstrap, mechanism, user, password)
    p = KafkaProducer(**conf, acks="all")
    offsets = [p.send(topic, v.encode(), partition=0).get(timeout=30).offset for v in values]
    p.close()
    c = KafkaConsumer(**conf, enable_auto_commit=False, auto_offset_reset="earliest")
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    consumed, deadline = [], time.time() + 30
    while len(consumed) < len(values) and time.time() < deadline:
        for recs in c.poll(timeout_ms=1000).values():
            consumed.extend(r.value.decode() for r in recs)
    c.close()
    return {"offsets": offsets, "consumed": consumed}


def login(client, bootstrap, mechanism, user, password):
    if client == "confluent":
        from confluent_kafka import KafkaError
        from confluent_kafka.admin import AdminClient
        errors = []
        a = AdminClient({**confluent_conf(bootstrap, mechanism, user, password), "error_cb": errors.append,
                         "log_level": 0})
        try:
            a.list_topics(timeout=5)
            return {"ok": True}
        except Exception as e:  # noqa: BLE001 - reported to the test
            a.poll(1)  # serves error_cb
            auth = [x for x in errors if x.code() == KafkaError._AUTHENTICATION]
            first = auth[0] if auth else (errors[0] if errors else e)
            kind = "_AUTHENTICATION" if auth else type(e).__name__
            return {"ok": False, "error": str(first), "kind": kind}
    import logging
    from kafka import KafkaAdminClient
    # kafka-python logs the broker's refusal ("Connection failed: <error>")
    # and retries until its bootstrap times out: the logged error is the one.
    failures = []
    class Keep(logging.Handler):
        def emit(self, record):
            failures.extend(a for a in (record.args or ()) if isinstance(a, Exception))
    logging.getLogger("kafka").addHandler(Keep())
    try:
        # The refusal is logged at the first attempt; 5 s of retries is
        # plenty (the default bootstrap timeout is 30 s).
        a = KafkaAdminClient(**kp_conf(bootstrap, mechanism, user, password), request_timeout_ms=5000,
                             bootstrap_timeout_ms=5000)
        a.list_topics()
        a.close()
        return {"ok": True}
    except Exception as e:  # noqa: BLE001 - reported to the test
        sasl = [f for f in failures if type(f).__name__ == "SaslAuthenticationFailedError"]
        e = (sasl or failures or [e])[0]
        return {"ok": False, "error": str(e), "kind": type(e).__name__}


def admin(bootstrap, mechanism, user, password):
    from confluent_kafka.admin import AdminClient
    return AdminClient(confluent_conf(bootstrap, mechanism, user, password))


def alter(bootstrap, mechanism, user, password, op, target, target_password=None):
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    if op == "upsert":
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
        change = UserScramCredentialUpsertion(target, info, target_password.encode())
    else:
        change = UserScramCredentialDeletion(target, ScramMechanism.SCRAM_SHA_512)
    # The client must outlive its futures: a collected one purges them.
    client = admin(bootstrap, mechanism, user, password)
    futures = client.alter_user_scram_credentials([change])
    try:
        futures[target].result(timeout=30)
        return {"ok": True}
    except Exception as e:  # noqa: BLE001 - reported to the test
        return {"ok": False, "error": str(e)}


def describe(bootstrap, mechanism, user, password, target=None):
    a = admin(bootstrap, mechanism, user, password)
    try:
        if target is None:
            described = a.describe_user_scram_credentials().result(timeout=30)
        else:
            described = {target: a.describe_user_scram_credentials([target])[target].result(timeout=30)}
    except Exception as e:  # noqa: BLE001 - reported to the test
        return {"error": str(e)}
    return {"users": {name: [[i.mechanism.name, i.iterations] for i in d.scram_credential_infos]
                      for name, d in described.items()}}


def main(argv):
    cmd = argv[0]
    if cmd == "roundtrip":
        out = roundtrip(*argv[1:7], json.loads(argv[7]))
    elif cmd == "login":
        out = login(*argv[1:6])
    elif cmd == "alter":
        out = alter(*argv[1:])
    elif cmd == "describe":
        out = describe(*argv[1:])
    else:
        raise SystemExit(f"unknown command {cmd}")
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
