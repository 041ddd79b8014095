#!/usr/bin/env python3
"""kshard with 1 and with 2 shards (`num.shards`) under the same loads:
kshard-perf produce (1 KiB, acks=1, 8 partitions, one connection, and two
connections) and consume from the start, with throughput, the broker's CPU
seconds per GiB (utime + stime of the process, as compare.py) and that CPU
split by thread (shard-0, shard-1, the rest), requests per GiB (the client's
sendto calls) and wake-ups of a parked shard per GiB (the broker's write
calls: glommio writes a sleeping executor's eventfd when another thread
wakes one of its tasks, as the mailbox does; both counted with `perf stat`
when perf is installed), and, from the
placement rule, the share of each topic's partitions that a connection on
each shard reaches through the mailbox.

Usage: perf/shards.py [--duration-s S] [--consume-size-mib M] [--shards 1,2]
                      [--java [--java-records N]] [--out FILE.json]
Uses the existing target/release binaries (build them first). On a 2-core
machine the client shares the cores with the broker: compare CPU per GiB,
not throughput, across shard counts.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import compare
from compare import REPO, Broker, BrokerCpu, log, perf, wait_ready

PARTITIONS = 8


def fnv1a(data):
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def shard_for(topic, partition, nr_shards):
    """shards/src/placement.rs, for partitions >= 0 of ordinary topics."""
    return (fnv1a(topic.encode()) + partition) % nr_shards


def remote_share(topic, partitions, nr_shards):
    """Per shard a connection may land on: the share of the topic's
    partitions owned by another shard (reached through the mailbox)."""
    owners = [shard_for(topic, p, nr_shards) for p in range(partitions)]
    return {s: sum(o != s for o in owners) / partitions for s in range(nr_shards)}


SENDTO = "syscalls:sys_enter_sendto"
WRITE = "syscalls:sys_enter_write"


class SyscallCount:
    """Calls of one syscall (a tracepoint) by a process over a `with` block,
    by `perf stat`. In the broker, write(2) is an eventfd write waking a
    parked shard (network I/O goes through io_uring and sendfile, segment
    writes are pwrite; a log line is also a write). None when perf cannot
    count."""

    def __init__(self, pid, out, event=WRITE):
        self.pid, self.out, self.event, self.calls, self.proc = pid, out, event, None, None

    def __enter__(self):
        if shutil.which("perf"):
            self.proc = subprocess.Popen(["perf", "stat", "-x,", "-e", self.event, "-p", str(self.pid),
                                          "-o", str(self.out)], stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # attached before the step starts
        return self

    def __exit__(self, *exc):
        if self.proc:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(30)
            self.calls = perf_stat_count(self.out, self.event)
        return False


def perf_stat_count(path, event=SENDTO):
    for line in Path(path).read_text().splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2] == event and fields[0].isdigit():
            return int(fields[0])
    return None


def client(bins, args, timeout_s, out):
    """kshard-perf with --json (as compare.perf), under `perf stat` counting
    its sendto calls: one per request, the client writing each whole."""
    cmd = [str(bins["kshard-perf"])] + args + ["--json"]
    compare.note(cmd)
    if shutil.which("perf"):
        cmd = ["perf", "stat", "-x,", "-e", SENDTO, "-o", str(out)] + cmd
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    r = json.loads(done.stdout.strip().splitlines()[-1])
    r["sendto_calls"] = perf_stat_count(out) if out.exists() else None
    return r


def thread_cpu_s(pid):
    """CPU seconds per thread name (shard-0, shard-1, ...) of a process."""
    out = defaultdict(float)
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        key = name if name.startswith("shard-") else "other"
        out[key] += (int(fields[11]) + int(fields[12])) / tick
    return out


class ShardedBroker(Broker):
    def __init__(self, root, bins, nr_shards):
        super().__init__("kshard", root / f"shards-{nr_shards}", bins, cp=None)
        self.nr_shards = nr_shards

    def command(self):
        return super().command() + ["--override", f"num.shards={self.nr_shards}"]


def measured(b, payload_of, run):
    """Runs `run()`, returning its summary with CPU per GiB, per thread, and
    requests and shard wake-ups per GiB."""
    before = thread_cpu_s(b.proc.pid)
    with BrokerCpu(b) as cpu, SyscallCount(b.proc.pid, b.root / "perf-broker.txt") as wakes:
        r = run()
    after = thread_cpu_s(b.proc.pid)
    gib = payload_of(r) / 2**30
    per_gib = (lambda n: n / gib if n is not None else None)
    r.setdefault("sendto_calls", None)
    return {
        "mb_per_s": r["mb_per_s"],
        "records_per_s": r["records_per_s"],
        "payload_gib": gib,
        "broker_cpu_s": cpu.seconds,
        "broker_cpu_s_per_gib": cpu.per_gib(payload_of(r)),
        "thread_cpu_s_per_gib": {k: (after[k] - before.get(k, 0.0)) / gib for k in sorted(after)},
        "client_requests_per_gib": per_gib(r["sendto_calls"]),
        "shard_wakes_per_gib": per_gib(wakes.calls),
    }


def workloads(bins, b, args):
    D = args.duration_s
    bs = ["--bootstrap-server", b.bootstrap]
    produce = ["produce", *bs, "--partitions", str(PARTITIONS), "--record-size", "1024", "--acks", "1",
               "--duration-s", str(D)]
    out = {}
    for producers in (1, 2):
        topic = f"p{producers}"
        out[f"produce_1k_acks1_{producers}conn"] = measured(
            b, lambda r: r["payload_bytes"],
            lambda: client(bins, produce + ["--topic", topic, "--producers", str(producers)], D * 4 + 120,
                           b.root / "perf-client.txt"))
        out[f"produce_1k_acks1_{producers}conn"]["remote_partition_share_by_conn_shard"] = remote_share(
            topic, PARTITIONS, b.nr_shards)
    if args.java:
        out["producer_performance_1k_acks1"] = producer_performance_step(bins, b, args)
    topic = "c"
    perf(bins, ["produce", *bs, "--topic", topic, "--partitions", str(PARTITIONS), "--record-size", "1024",
                "--acks", "1", "--num-records", str(args.consume_size_mib * 1024)], 1800)
    consume = ["consume", *bs, "--topic", topic, "--from-start"]
    perf(bins, consume, 1800)  # warms the page cache
    out["consume_from_start"] = measured(b, lambda r: r["payload_bytes"],
                                         lambda: client(bins, consume, 1800, b.root / "perf-client.txt"))
    out["consume_from_start"]["remote_partition_share_by_conn_shard"] = remote_share(
        topic, PARTITIONS, b.nr_shards)
    return out


def producer_performance_step(bins, b, args):
    """Kafka's ProducerPerformance (compare.py's settings: batch 64 KiB,
    linger 5 ms), 1 KiB acks=1, into an 8-partition topic kshard-perf
    creates first (auto-creation would make one partition)."""
    topic = "j"
    perf(bins, ["produce", "--bootstrap-server", b.bootstrap, "--topic", topic, "--partitions",
                str(PARTITIONS), "--record-size", "1024", "--num-records", "1"], 120)
    log4j = b.root / "log4j.properties"
    log4j.write_text("log4j.rootLogger=WARN, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
                     "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n")
    records = args.java_records
    r = measured(b, lambda r: r["records"] * 1024,
                 lambda: compare.producer_performance({"log4j": log4j}, b, topic, records, 1024, "1", 900))
    r["remote_partition_share_by_conn_shard"] = remote_share(topic, PARTITIONS, b.nr_shards)
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration-s", type=int, default=20)
    p.add_argument("--consume-size-mib", type=int, default=1024)
    p.add_argument("--shards", default="1,2")
    p.add_argument("--java", action="store_true", help="also Kafka's ProducerPerformance (needs the Kafka jars)")
    p.add_argument("--java-records", type=int, default=2_000_000)
    p.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "kshard-shards-results.json"))
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kshard-shards-"))
    bins = {}
    (root / "bin").mkdir()
    for name in ("kshard", "kshard-perf"):
        bins[name] = root / "bin" / name
        shutil.copy2(REPO / "target" / "release" / name, bins[name])
    results = {"cpus": os.cpu_count(), "load_avg_at_start": os.getloadavg(),
               "params": vars(args), "runs": {}}
    try:
        for n in [int(s) for s in args.shards.split(",")]:
            b = ShardedBroker(root, bins, n)
            log(f"kshard with {n} shard(s) on {b.bootstrap}")
            b.start()
            try:
                wait_ready(bins, b)
                time.sleep(2)
                results["runs"][f"shards_{n}"] = workloads(bins, b, args)
            finally:
                b.stop_all()
    finally:
        results["load_avg_at_end"] = os.getloadavg()
        results["commands"] = compare.COMMANDS
        Path(args.out).write_text(json.dumps(results, indent=2))
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
