#!/usr/bin/env python3
"""How long a replicated partition takes to take acks=all writes again
after its leader's SIGKILL (issue 18's recovery target: 2 s with default
timeouts).

Starts three `shardlog serve` processes in one quorum with the default
heartbeat (2 s) and session (9 s), creates a topic of PARTITIONS
partitions with three replicas each (min.insync.replicas 2) and, REPS
times, SIGKILLs a broker in turn: one that leads the quorum and
partitions, one that leads partitions only, and one that leads nothing
(a follower, whose death holds acks=all until the in-sync set drops it),
each when one of its kind exists. For each partition the victim led (all
of them for a follower), a probe of its own asks a
survivor's Metadata (v1) for the leader every 5 ms and sends it one record
with acks=all (Produce v3, a fresh connection per try) until one is
acknowledged; the time from the kill to that acknowledgement is the
recovery. The killed broker is restarted and all three replicas must be in
sync again before the next repetition.

The baselines, from the same settings: the session timeout (9 s, how long
a silent broker that still accepts connections stays unfenced) and, for
the quorum leader's loss, the longest wait before a Raft election (1.6 s).

Usage: perf/partition_failover.py BIN OUT [REPS] [PARTITIONS]
"""

import json
import os
import platform
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import controller_failover as cf  # noqa: E402

TOPIC = b"failover"


def crc32c(data):
    table = crc32c.table
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _table():
    out = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        out.append(c)
    return out


crc32c.table = _table()


def varint(n):
    n = (n << 1) ^ (n >> 63)
    out = b""
    while True:
        if n < 0x80:
            return out + bytes([n])
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7


def batch(value):
    """A one-record batch (magic 2), no producer id."""
    body = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(len(value)) + value + varint(0)
    record = varint(len(body)) + body
    now = int(time.time() * 1000)
    after_crc = (struct.pack(">hiqqqhii", 0, 0, now, now, -1, -1, -1, 1) + record)
    crc = crc32c(after_crc)
    rest = struct.pack(">ibI", -1, 2, crc) + after_crc
    return struct.pack(">qi", 0, len(rest)) + rest


def call(port, api_key, version, body, timeout=6):
    client = b"partition-failover"
    head = struct.pack(">hhih", api_key, version, 7, len(client)) + client
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(head) + len(body)) + head + body)
        size = struct.unpack(">i", cf.recv_exact(s, 4))[0]
        return cf.recv_exact(s, size)[4:]


def leaders(port):
    """{partition: (leader, sorted isr)} of TOPIC, from Metadata v1."""
    data = call(port, 3, 1, struct.pack(">ih", 1, len(TOPIC)) + TOPIC, timeout=1)
    (count,) = struct.unpack_from(">i", data, 0)
    pos = 4
    for _ in range(count):
        pos += 4
        (n,) = struct.unpack_from(">h", data, pos)
        pos += 2 + n + 4
        (n,) = struct.unpack_from(">h", data, pos)
        pos += 2 + max(n, 0)
    pos += 4  # controller
    (topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out = {}
    for _ in range(topics):
        (_err, n) = struct.unpack_from(">hh", data, pos)
        pos += 4 + n + 1
        (parts,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(parts):
            (_perr, index, leader, nrep) = struct.unpack_from(">hiii", data, pos)
            pos += 14 + 4 * nrep
            (nisr,) = struct.unpack_from(">i", data, pos)
            isr = struct.unpack_from(f">{nisr}i", data, pos + 4)
            pos += 4 + 4 * nisr
            out[index] = (leader, sorted(isr))
    return out


def produce_acks_all(port, partition, value):
    """The partition's error code for one record with acks=all."""
    part = struct.pack(">i", partition)
    records = batch(value)
    body = (struct.pack(">hhi", -1, -1, 5000) + struct.pack(">ih", 1, len(TOPIC)) + TOPIC
            + struct.pack(">i", 1) + part + struct.pack(">i", len(records)) + records)
    data = call(port, 0, 3, body)
    (n,) = struct.unpack_from(">h", data, 4)
    pos = 4 + 2 + n + 4 + 4
    (err,) = struct.unpack_from(">h", data, pos)
    return err


def probe(partition, victim, survivors, killed, results):
    tries = 0
    while time.monotonic() - killed < 60:
        tries += 1
        for b in survivors:
            try:
                leader, _ = leaders(b.port)[partition]
            except (OSError, struct.error, KeyError):
                continue
            target = next((s for s in survivors if s.node == leader), None)
            if target is None:
                break
            try:
                if produce_acks_all(target.port, partition, f"probe-{victim}-{tries}".encode()) == 0:
                    results[partition] = time.monotonic() - killed
                    return
            except (OSError, struct.error):
                pass
            break
        time.sleep(0.005)
    results[partition] = None


def controller_of(brokers):
    return cf.agreed(brokers)


def in_sync(brokers, partitions):
    """Every partition's (leader, isr) once all three brokers tell the same,
    with every replica in sync (a broker just restarted may not know yet)."""
    try:
        views = [leaders(b.port) for b in brokers]
    except (OSError, struct.error):
        return None
    seen = views[0]
    ok = len(seen) == partitions and all(isr == [1, 2, 3] and leader > 0 for leader, isr in seen.values())
    return seen if ok and all(v == seen for v in views) else None


def main():
    bin_path, out = sys.argv[1], sys.argv[2]
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 9
    partitions = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    os.makedirs(out, exist_ok=True)
    quorum = ",".join(f"{n}@127.0.0.1:{cf.free_port()}" for n in (1, 2, 3))
    brokers = [cf.Broker(bin_path, out, n, quorum, cf.free_port()) for n in (1, 2, 3)]
    for b in brokers:
        b.start()
    cf.wait_until(lambda: cf.agreed(brokers), 60, "the first agreement")
    subprocess.run([bin_path, "topics", "create", "--bootstrap", f"127.0.0.1:{brokers[0].port}", "-p",
                    str(partitions), "-r", "3", "-c", "min.insync.replicas=2", TOPIC.decode()], check=True)
    rows = []
    for rep in range(1, reps + 1):
        seen = cf.wait_until(lambda: in_sync(brokers, partitions), 120, "three replicas in sync")
        controller = cf.wait_until(lambda: controller_of(brokers), 60, "agreement")
        leading = {}
        for p, (leader, _) in seen.items():
            leading.setdefault(leader, []).append(p)
        followers_only = [n for n in (1, 2, 3) if n not in leading]
        if rep % 3 == 0 and followers_only:
            node, probed = followers_only[0], sorted(seen)
        else:
            want_controller = rep % 3 == 1
            kinds = [n for n in leading if (n == controller) == want_controller] or list(leading)
            node = kinds[0]
            probed = leading[node]
        victim = next(b for b in brokers if b.node == node)
        survivors = [b for b in brokers if b is not victim]
        results = {}
        killed = time.monotonic()
        victim.kill()
        probes = [threading.Thread(target=probe, args=(p, node, survivors, killed, results)) for p in probed]
        for t in probes:
            t.start()
        for t in probes:
            t.join()
        kind = ("follower only" if node not in leading else
                "quorum leader" if node == controller else "other partition leader")
        worst = max((r for r in results.values() if r is not None), default=None)
        rows.append({"rep": rep, "killed": node, "kind": kind, "partitions": probed,
                     "recovered_s": results, "worst_s": worst})
        shown = ", ".join(f"p{p} {s:.3f} s" if s is not None else f"p{p} never" for p, s in sorted(results.items()))
        print(f"rep {rep}: killed broker {node} ({kind}), probed {probed}: {shown}", flush=True)
        victim.start()
    cf.wait_until(lambda: in_sync(brokers, partitions), 120, "three replicas in sync")
    for b in brokers:
        b.stop()
    write_summary(bin_path, out, rows, partitions)


def write_summary(bin_path, out, rows, partitions):
    commit = subprocess.run([bin_path, "--version"], capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    lines = [
        "# Replicated partition failover (`perf/partition-failover.sh`)",
        "",
        f"machine: {cpu}, {os.cpu_count()} cores, kernel {platform.release()}; binary: {commit}",
        f"3 brokers on 127.0.0.1, one shard each on core 0; defaults: heartbeat 2 s, session 9 s; "
        f"{partitions} partitions, 3 replicas, min.insync.replicas 2; a probe per partition the victim led "
        "(Metadata v1 and one acks=all Produce v3 every 5 ms)",
        "",
        "| broker killed | kills | median s (slowest partition of each kill) | runs s | target 2 s | "
        "÷ session (9 s) |",
        "|---|---:|---:|---|---|---:|",
    ]
    for kind in ("other partition leader", "quorum leader", "follower only"):
        worst = [r["worst_s"] for r in rows if r["kind"] == kind]
        if not worst:
            continue
        if any(w is None for w in worst):
            lines.append(f"| {kind} | {len(worst)} | a partition never recovered within 60 s | | not met | |")
            continue
        m = statistics.median(worst)
        lines.append(f"| {kind} | {len(worst)} | {m:.3f} | " + ", ".join(f"{w:.3f}" for w in worst)
                     + f" | {'met' if m <= 2.0 else 'not met'} | {m / 9.0:.2f} |")
    text = "\n".join(lines) + "\n"
    open(os.path.join(out, "summary.md"), "w").write(text)
    json.dump(rows, open(os.path.join(out, "runs.json"), "w"), indent=1, default=str)
    print(text)


if __name__ == "__main__":
    main()
