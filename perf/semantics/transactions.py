"""The fourth mode of harness.py, `exactly-once (transactions)`: the Kafka
way. A processor reads an input topic (read_committed), writes each record's
id to an output topic and commits its consumed offset in the same Kafka
transaction (send_offsets_to_transaction, then commit_transaction), with a
transactional producer (confluent-kafka, i.e. librdkafka: kafka-python has
no transactions).

The processor is SIGKILLed at random `kills` times and the broker twice
(SIGKILL, then restarted on the same data directory and port), so this mode
runs its own broker: the shardlog binary is given to `run`. Afterwards the
output topic is read read_committed and its ids are counted against the
input topic's: lost and duplicated must both be 0.

Any error inside the processor (a broker gone mid-transaction, a fenced
epoch) makes it exit; the harness starts a new one, whose
init_transactions aborts or completes what the old one left open. That is
the recovery Kafka's exactly-once relies on, so it is what is tested.
"""
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

MODE = "exactly-once (transactions)"
INPUT = "semantics-txn-in"
OUTPUT = "semantics-txn-out"
GROUP = "semantics-txn"
TXN_ID = "semantics-txn-processor"
BROKER_KILLS = 2
PROCESS_SECONDS = 0.002
TIMEOUT = 30


def process(bootstrap):
    """The processor (started and killed by `run_mode`)."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID,
                         "transaction.timeout.ms": 10000, "linger.ms": 5})
    try:
        # First: the coordinator aborts (or completes) what a killed
        # predecessor left open, so the offset read next is stable.
        producer.init_transactions(TIMEOUT)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "isolation.level": "read_committed", "fetch.wait.max.ms": 100})
        tp = TopicPartition(INPUT, 0)
        consumer.assign([tp])
        print("READY", flush=True)
        while True:
            batch = [m for m in consumer.consume(num_messages=20, timeout=0.2) if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            for m in batch:
                time.sleep(PROCESS_SECONDS)
                record_id = m.value().decode().removeprefix("in-")
                producer.produce(OUTPUT, value=record_id.encode(), partition=0)
            next_offset = batch[-1].offset() + 1
            producer.send_offsets_to_transaction([TopicPartition(INPUT, 0, next_offset)],
                                                 consumer.consumer_group_metadata(), TIMEOUT)
            producer.commit_transaction(TIMEOUT)
            print(f"AT {next_offset}", flush=True)
    except KafkaException as e:
        print(f"processor exits: {e}", file=sys.stderr, flush=True)
        sys.exit(3)


def free_port():
    """A free port below the ephemeral range, so no client's source port
    can hold it when the broker restarts on it."""
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise AssertionError("no free port")


class Broker:
    """`shardlog serve` on one data directory and port, restartable."""

    def __init__(self, binary, workdir):
        self.binary, self.workdir = binary, workdir
        self.data = os.path.join(workdir, "txn-broker-data")
        self.port = free_port()
        self.starts = 0
        self.proc = None

    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        self.starts += 1
        out = os.path.join(self.workdir, f"txn-broker-{self.starts}.out")
        err = open(os.path.join(self.workdir, f"txn-broker-{self.starts}.log"), "w")
        self.proc = subprocess.Popen([self.binary, "serve", "--listen", self.bootstrap(), "--cores", "2",
                                      "--metrics-listen", "127.0.0.1:0", "--data-dir", self.data],
                                     stdout=open(out, "w"), stderr=err)
        deadline = time.time() + 30
        while time.time() < deadline:
            with open(out) as f:
                if "listening on" in f.read():
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"broker start {self.starts} failed; see {err.name}")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def start_processor(bootstrap, workdir, n):
    err = open(os.path.join(workdir, f"txn-processor-{n}.log"), "w")
    harness = os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness.py")
    p = subprocess.Popen([sys.executable, harness, "process", bootstrap], stdout=subprocess.PIPE,
                         stderr=err, text=True)
    return p


def read_ids(bootstrap, topic, isolation, until_offset):
    """The ids in partition 0 of `topic`, read from the start until the
    position reaches `until_offset` (markers take offsets too)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"semantics-txn-check-{topic}",
                  "enable.auto.commit": False, "isolation.level": isolation})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    ids = []
    deadline = time.time() + 60
    while time.time() < deadline:
        for m in c.consume(num_messages=500, timeout=0.5):
            if m.error() is None:
                ids.append(int(m.value().decode().removeprefix("in-")))
        pos = c.position([TopicPartition(topic, 0)])[0].offset
        if pos >= until_offset:
            break
    c.close()
    return ids


def end_offset(bootstrap, topic):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "semantics-txn-watermarks"})
    hw = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)[1]
    c.close()
    return hw


def create_topics(bootstrap):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in (INPUT, OUTPUT)]).values():
        f.result(TIMEOUT)


def feed(bootstrap, records, pace):
    """The input: an idempotent producer, so broker restarts neither lose
    nor duplicate input records."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                  "message.timeout.ms": 120000, "log_level": 2})
    for i in range(records):
        p.produce(INPUT, value=f"in-{i}".encode(), partition=0)
        p.poll(0)
        time.sleep(pace)
    left = p.flush(120)
    assert left == 0, f"{left} input records not delivered"


def run_mode(binary, workdir, records, kills, rng):
    broker = Broker(binary, workdir)
    broker.start()
    create_topics(broker.bootstrap())
    feeder = threading.Thread(target=feed, args=(broker.bootstrap(), records, (kills * 0.9) / records))
    feeder.start()
    broker_kill_at = {kills // 3, (2 * kills) // 3}
    exited_early, started = 0, 0
    for k in range(kills):
        p = start_processor(broker.bootstrap(), workdir, started)
        started += 1
        time.sleep(rng.uniform(0.3, 1.0))
        if k in broker_kill_at:
            broker.kill()
            time.sleep(0.3)
            broker.start()
            time.sleep(rng.uniform(0.5, 1.5))
        if p.poll() is not None:
            exited_early += 1
        p.send_signal(signal.SIGKILL)
        p.wait()
    feeder.join()
    end = end_offset(broker.bootstrap(), INPUT)
    # The last processors run until the input is consumed (a new one is
    # started if one exits).
    deadline, done = time.time() + 180, False
    while not done and time.time() < deadline:
        p = start_processor(broker.bootstrap(), workdir, started)
        started += 1
        watchdog = threading.Timer(max(1.0, deadline - time.time()), p.kill)
        watchdog.start()
        for line in p.stdout:
            if line.startswith("AT ") and int(line.split()[1]) >= end:
                done = True
                break
        watchdog.cancel()
        p.send_signal(signal.SIGKILL)
        p.wait()
    inputs = read_ids(broker.bootstrap(), INPUT, "read_committed", end)
    output_end = end_offset(broker.bootstrap(), OUTPUT)
    outputs = read_ids(broker.bootstrap(), OUTPUT, "read_committed", output_end)
    # What the killed processors wrote and never committed (aborted by their
    # successors' init_transactions): proof the kills landed mid-transaction.
    everything = read_ids(broker.bootstrap(), OUTPUT, "read_uncommitted", output_end)
    broker.stop()
    want, got = count(inputs), count(outputs)
    lost = sum(max(0, n - got.get(i, 0)) for i, n in want.items())
    duplicated = sum(max(0, n - want.get(i, 0)) for i, n in got.items())
    print(f"{MODE}: input {len(inputs)} records (ids 0..{records}: {len(set(inputs) & set(range(records)))}), "
          f"output {len(outputs)} read_committed, {len(everything)} read_uncommitted; processors started {started}, exited on their own before the kill "
          f"{exited_early}; caught up: {done}", flush=True)
    return {"mode": MODE, "records": records, "kills": kills, "broker_kills": BROKER_KILLS,
            "lost": lost, "duplicated": duplicated, "input_complete": sorted(set(inputs)) == list(range(records))}


def count(ids):
    out = {}
    for i in ids:
        out[i] = out.get(i, 0) + 1
    return out
