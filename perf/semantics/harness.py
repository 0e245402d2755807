"""The three delivery semantics of the source notes, demonstrated with
crashes: a consumer processes records into SQLite (a real external store)
while a producer runs, and is SIGKILLed at random points many times. Then
the records it stored are counted per mode: lost (never stored) and
duplicated (stored more than once).

  at-most-once   commit the offsets, then process: a crash between the two
                 loses what was polled; nothing is processed twice.
  at-least-once  process, then commit: a crash between the two processes
                 those records again; nothing is lost.
  exactly-once   the result and the offset go into one SQLite transaction;
                 on start the consumer seeks to the offset stored there:
                 neither loss nor duplicates.
  exactly-once (transactions)
                 the Kafka way (transactions.py): the output records and the
                 consumed offset go into one Kafka transaction; the processor
                 is SIGKILLed and so is the broker, twice: neither loss nor
                 duplicates in the output read read_committed.

Usage:
  harness.py run BOOTSTRAP WORKDIR [RECORDS] [KILLS] [SEED] [SHARDLOG]
      runs the first three modes against a running broker and, given the
      shardlog binary, the fourth against a broker of its own (it kills and
      restarts it); prints the table, and exits non-zero if a mode broke its
      promise;
  harness.py consume BOOTSTRAP TOPIC MODE DB   (started and killed by `run`)
  harness.py process BOOTSTRAP                 (the fourth mode's processor)
"""
import json
import logging
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import transactions
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

MODES = ("at-most-once", "at-least-once", "exactly-once")
# Work per record, so a kill lands inside processing often enough.
PROCESS_SECONDS = 0.002


def open_db(path):
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS processed (id INTEGER NOT NULL)")
    db.execute("CREATE TABLE IF NOT EXISTS position (part INTEGER PRIMARY KEY, next INTEGER NOT NULL)")
    return db


def process(db, record_id):
    time.sleep(PROCESS_SECONDS)
    db.execute("INSERT INTO processed (id) VALUES (?)", (record_id,))


def consume(bootstrap, topic, mode, db_path):
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format=f"%(asctime)s consumer {mode} %(levelname)s %(name)s: %(message)s")
    db = open_db(db_path)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=f"semantics-{mode}",
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             max_poll_records=20, fetch_max_wait_ms=100)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    if mode == "exactly-once":
        row = db.execute("SELECT next FROM position WHERE part = 0").fetchone()
        if row is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, row[0])
    print("READY", flush=True)
    while True:
        batch = consumer.poll(timeout_ms=200).get(tp, [])
        if not batch:
            continue
        next_offset = batch[-1].offset + 1
        if mode == "at-most-once":
            consumer.commit()  # the polled position
            for r in batch:
                db.execute("BEGIN")
                process(db, int(r.value))
                db.execute("COMMIT")
        elif mode == "at-least-once":
            for r in batch:
                db.execute("BEGIN")
                process(db, int(r.value))
                db.execute("COMMIT")
            consumer.commit()
        else:
            db.execute("BEGIN")
            for r in batch:
                process(db, int(r.value))
            db.execute("INSERT OR REPLACE INTO position (part, next) VALUES (0, ?)", (next_offset,))
            db.execute("COMMIT")
        print(f"AT {next_offset}", flush=True)


STARTS_FAILED = []


def start_consumer(bootstrap, topic, mode, db):
    # A consumer that cannot bootstrap (kafka-python gives up after 30 s) is
    # started again, once, and counted: CI saw one such start. Its own log
    # (warnings on stderr) says why.
    for attempt in range(2):
        p = subprocess.Popen([sys.executable, __file__, "consume", bootstrap, topic, mode, db],
                             stdout=subprocess.PIPE, text=True)
        if p.stdout.readline().strip() == "READY":
            return p
        p.wait()
        STARTS_FAILED.append(mode)
        print(f"{mode} consumer did not start (exit {p.returncode}); attempt {attempt + 1}", file=sys.stderr, flush=True)
    raise AssertionError(f"{mode} consumer did not start twice in a row")


def run_mode(bootstrap, workdir, mode, records, kills, rng):
    topic = f"semantics-{mode}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    admin.close()
    db = os.path.join(workdir, f"{mode}.sqlite")
    # The producer runs the whole time, in its own thread, paced so that
    # records keep arriving while consumers are started and killed.
    pace = (kills * 0.6) / records

    def produce():
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        for i in range(records):
            producer.send(topic, value=str(i).encode(), partition=0)
            time.sleep(pace)
        producer.flush()
        producer.close()

    feeder = threading.Thread(target=produce)
    feeder.start()
    for _ in range(kills):
        c = start_consumer(bootstrap, topic, mode, db)
        time.sleep(rng.uniform(0.2, 0.9))
        c.send_signal(signal.SIGKILL)
        c.wait()
    feeder.join()
    # A last consumer runs until everything was consumed, then stops.
    c = start_consumer(bootstrap, topic, mode, db)
    deadline = time.time() + 120
    while time.time() < deadline:
        line = c.stdout.readline()
        if line.startswith("AT ") and int(line.split()[1]) >= records:
            break
    c.send_signal(signal.SIGKILL)
    c.wait()
    conn = sqlite3.connect(db)
    ids = [row[0] for row in conn.execute("SELECT id FROM processed")]
    conn.close()
    distinct = set(ids)
    lost = records - len(distinct & set(range(records)))
    duplicated = len(ids) - len(distinct)
    return {"mode": mode, "records": records, "kills": kills, "lost": lost, "duplicated": duplicated}


def run(bootstrap, workdir, records="3000", kills="12", seed="7", shardlog=None):
    records, kills = int(records), int(kills)
    rng = random.Random(int(seed))
    os.makedirs(workdir, exist_ok=True)
    rows = [run_mode(bootstrap, workdir, m, records, kills, rng) for m in MODES]
    if shardlog is not None:
        rows.append(transactions.run_mode(shardlog, workdir, records, kills, rng))
    print(f"| mode | records | consumer SIGKILLs | lost | duplicated | broker SIGKILLs |")
    print(f"|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['mode']} | {r['records']} | {r['kills']} | {r['lost']} | {r['duplicated']} "
              f"| {r.get('broker_kills', 0)} |")
    print("JSON " + json.dumps(rows))
    if STARTS_FAILED:
        print(f"consumer starts that failed and were retried: {len(STARTS_FAILED)} ({', '.join(STARTS_FAILED)})")
    by = {r["mode"]: r for r in rows}
    broken = []
    if by["at-most-once"]["duplicated"] != 0:
        broken.append("at-most-once duplicated records")
    if by["at-most-once"]["lost"] == 0:
        broken.append("at-most-once lost nothing: the kills never landed between commit and processing")
    if by["at-least-once"]["lost"] != 0:
        broken.append("at-least-once lost records")
    if by["exactly-once"]["lost"] != 0 or by["exactly-once"]["duplicated"] != 0:
        broken.append("exactly-once lost or duplicated records")
    txn = by.get(transactions.MODE)
    if txn is not None and (txn["lost"] != 0 or txn["duplicated"] != 0 or not txn["input_complete"]):
        broken.append(f"{transactions.MODE} lost or duplicated records (or the input is incomplete)")
    if broken:
        sys.exit("; ".join(broken))


if __name__ == "__main__":
    {"run": run, "consume": consume, "process": transactions.process}[sys.argv[1]](*sys.argv[2:])
