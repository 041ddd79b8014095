#!/usr/bin/env python3
"""Transactional produce, Kafka 3.9.1 against kshard on this machine, one
broker at a time: Kafka's ProducerPerformance with --transactional-id and
--transaction-duration-ms (a commit every D ms, markers to every partition),
1 KiB records to an 8-partition topic, and the broker's CPU per GiB moved.

    python3 perf/txn_compare.py [--records N] [--txn-ms D] [--no-build]

With KSHARD_KAFKA_VERSION=4.1.1 both sides run Kafka 4.1.1's
ProducerPerformance, so transaction version 2 (an epoch bump per
transaction, partitions added by their leaders), and Kafka runs as one
KRaft node.

A benchmark, outside CI; uses compare.py's brokers and helpers."""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare as c  # noqa: E402

RECORD_BYTES = 1024
PARTITIONS = 8


def create_topic(b, topic):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)


def txn_producer_performance(b, topic, records, txn_ms):
    cmd = c.java(b.cp, "org.apache.kafka.tools.ProducerPerformance", [
        "--topic", topic, "--num-records", str(records), "--record-size", str(RECORD_BYTES),
        "--throughput", "-1", "--transactional-id", "txn-perf-" + topic,
        "--transaction-duration-ms", str(txn_ms),
        "--producer-props", f"bootstrap.servers={b.bootstrap}", "batch.size=65536", "linger.ms=5"])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    m = None
    for line in out.stdout.splitlines():
        m = c.PP_RE.search(line) or m
    if not m:
        raise RuntimeError(f"ProducerPerformance: {out.stdout[-400:]} {out.stderr[-800:]}")
    return {"records_per_s": float(m.group(2)), "mb_per_s": float(m.group(3)),
            "p50_ms": float(m.group(6)), "p99_ms": float(m.group(8))}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=2_000_000)
    p.add_argument("--txn-ms", type=int, default=100)
    p.add_argument("--no-build", action="store_true")
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kshard-txn-compare-"))
    subprocess.run([str(c.REPO / "scripts" / "kafka-jars.sh"), c.KAFKA_VERSION], check=True)
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "kshard", "-p", "kshard-perf"], cwd=c.REPO, check=True)
    bins = {}
    (root / "bin").mkdir()
    for name in ("kshard", "kshard-perf"):
        shutil.copy2(c.REPO / "target" / "release" / name, root / "bin" / name)
        bins[name] = root / "bin" / name
    log4j = root / "log4j.properties"
    log4j.write_text("log4j.rootLogger=WARN, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
                     "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n")
    cp = {"log4j": log4j}
    results = {}
    try:
        for kind in ("kafka", "kshard"):
            b = c.Broker(kind, root, bins, cp)
            b.start()
            c.wait_ready(bins, b)
            time.sleep(3)
            topic = "txn-perf"
            create_topic(b, topic)
            # A first, short run warms both up (JIT, page cache, coordinator load).
            txn_producer_performance(b, topic, args.records // 10, args.txn_ms)
            with c.BrokerCpu(b) as cpu:
                r = txn_producer_performance(b, topic, args.records, args.txn_ms)
            r["cpu_s_per_gib"] = cpu.per_gib(args.records * RECORD_BYTES)
            results[kind] = r
            b.stop_all()
            print(f"{kind}: {r}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    k, s = results["kafka"], results["kshard"]
    print(f"kshard/kafka: MB/s {s['mb_per_s'] / k['mb_per_s']:.2f}, "
          f"CPU s/GiB {s['cpu_s_per_gib'] / k['cpu_s_per_gib']:.2f}, p99 {s['p99_ms'] / max(k['p99_ms'], 1):.2f}")


if __name__ == "__main__":
    main()
