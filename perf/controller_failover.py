#!/usr/bin/env python3
"""How long the metadata quorum takes to recover from its leader's SIGKILL.

Starts three `shardlog serve` processes forming one quorum
(`--controller-quorum`) with the default heartbeat (2 s) and session
(9 s) settings, then, REPS times: SIGKILLs the broker that leads, and polls
the two survivors' Metadata (v1, every 5 ms) until
  - elected: both name the same new controller, one of them;
  - fenced:  both list only themselves (the dead broker left Metadata);
then restarts the killed broker and waits until all three agree again.
The baselines are the quorum's own settings: the longest a follower waits
before standing (the leader's lease and the longest election timeout, 0.8 s
each, `controller/mod.rs`) and the broker session (9 s).

Usage: perf/controller_failover.py BIN OUT [REPS]
"""

import json
import os
import platform
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time

# Leader lease (election_timeout_max) plus the longest random election timeout.
ELECTION_WORST_S = 1.6
SESSION_TIMEOUT_S = 9.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metadata_v1(port):
    """(controller id, sorted broker ids) that the broker on `port` reports."""
    client = b"failover"
    body = struct.pack(">hhih", 3, 1, 1, len(client)) + client + struct.pack(">i", 0)
    with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        data = recv_exact(s, size)
    pos = 4  # correlation id
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    ids = []
    for _ in range(count):
        (node,) = struct.unpack_from(">i", data, pos)
        pos += 4
        (host_len,) = struct.unpack_from(">h", data, pos)
        pos += 2 + host_len + 4
        (rack_len,) = struct.unpack_from(">h", data, pos)
        pos += 2 + max(rack_len, 0)
        ids.append(node)
    (controller,) = struct.unpack_from(">i", data, pos)
    return controller, sorted(ids)


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def view(port):
    try:
        return metadata_v1(port)
    except (OSError, struct.error):
        return None


class Broker:
    def __init__(self, bin_path, out, node, quorum, kafka_port):
        self.args = [
            bin_path, "serve", "--node-id", str(node), "--controller-quorum", quorum,
            "--listen", f"127.0.0.1:{kafka_port}", "--cores", "1", "--cpuset", "0",
            "--metrics-listen", "", "--data-dir", os.path.join(out, f"data-{node}"),
        ]
        self.node, self.port, self.out, self.proc, self.starts = node, kafka_port, out, None, 0

    def start(self):
        self.starts += 1
        log = open(os.path.join(self.out, f"broker-{self.node}-{self.starts}.log"), "w")
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


def wait_until(check, limit_s, what):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        got = check()
        if got is not None:
            return got
        time.sleep(0.005)
    sys.exit(f"controller_failover: {what} did not happen within {limit_s} s")


def agreed(brokers):
    """The controller all of `brokers` name, if they agree and list exactly themselves."""
    ids = sorted(b.node for b in brokers)
    views = [view(b.port) for b in brokers]
    if any(v is None for v in views):
        return None
    controllers = {v[0] for v in views}
    if len(controllers) == 1 and all(v[1] == ids for v in views) and views[0][0] in ids:
        return views[0][0]
    return None


def main():
    bin_path, out = sys.argv[1], sys.argv[2]
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    os.makedirs(out, exist_ok=True)
    quorum = ",".join(f"{n}@127.0.0.1:{free_port()}" for n in (1, 2, 3))
    brokers = [Broker(bin_path, out, n, quorum, free_port()) for n in (1, 2, 3)]
    for b in brokers:
        b.start()
    wait_until(lambda: agreed(brokers), 60, "the first agreement")
    rows = []
    for rep in range(1, reps + 1):
        leader = agreed(brokers) or wait_until(lambda: agreed(brokers), 60, "agreement")
        victim = next(b for b in brokers if b.node == leader)
        survivors = [b for b in brokers if b is not victim]
        killed = time.monotonic()
        victim.kill()

        def elected():
            views = [view(b.port) for b in survivors]
            if any(v is None for v in views):
                return None
            names = {v[0] for v in views}
            if len(names) == 1 and leader not in names and names <= {b.node for b in survivors}:
                return time.monotonic() - killed
            return None

        elect_s = wait_until(elected, 60, "a new election")
        fence_s = wait_until(lambda: agreed(survivors) and time.monotonic() - killed, 60, "the fence")
        rows.append({"rep": rep, "killed": leader, "elected_s": elect_s, "fenced_s": fence_s})
        print(f"rep {rep}: killed leader {leader}; new controller after {elect_s:.3f} s, "
              f"dead broker fenced after {fence_s:.3f} s", flush=True)
        victim.start()
        wait_until(lambda: agreed(brokers), 60, "the rejoin")
    for b in brokers:
        b.stop()
    elect = statistics.median(r["elected_s"] for r in rows)
    fence = statistics.median(r["fenced_s"] for r in rows)
    commit = subprocess.run([bin_path, "--version"], capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    summary = [
        "# Metadata quorum failover (`perf/controller-failover.sh`)",
        "",
        f"machine: {cpu}, {os.cpu_count()} cores, kernel {platform.release()}; binary: {commit}",
        f"3 brokers on 127.0.0.1, one shard each on core 0; defaults: heartbeat 2 s, session "
        f"{SESSION_TIMEOUT_S:.0f} s, Raft election timeout 0.4-0.8 s after a 0.8 s leader lease; "
        f"Metadata v1 polled every 5 ms; medians of {reps}",
        "",
        "| from the leader's SIGKILL until | median s | runs s | ÷ baseline |",
        "|---|---:|---|---|",
        f"| survivors name a new controller | {elect:.3f} | "
        + ", ".join(f"{r['elected_s']:.3f}" for r in rows)
        + f" | {elect / ELECTION_WORST_S:.2f} of lease + longest election timeout ({ELECTION_WORST_S:.1f} s) |",
        f"| the dead broker leaves their Metadata | {fence:.3f} | "
        + ", ".join(f"{r['fenced_s']:.3f}" for r in rows)
        + f" | {fence / SESSION_TIMEOUT_S:.2f} of the session timeout (9 s) |",
    ]
    text = "\n".join(summary) + "\n"
    open(os.path.join(out, "summary.md"), "w").write(text)
    json.dump(rows, open(os.path.join(out, "runs.json"), "w"), indent=1)
    print(text)


if __name__ == "__main__":
    main()
