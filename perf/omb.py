#!/usr/bin/env python3
"""OpenMessaging-Benchmark-style workloads on Apache Kafka 3.9.1 and kshard
(log.io.mode=buffered), one broker at a time, with the generator in perf/omb/
(Kafka's own Java client, org.apache.kafka:kafka-clients 3.9.1).

Workloads, after OMB's workloads/1-topic-100-partitions-1kb-4p-4c*.yaml with
its driver-kafka/kafka-latency.yaml settings (acks=all, linger.ms=1,
batch.size=131072; consumers: auto.offset.reset=earliest,
enable.auto.commit=false, max.partition.fetch.bytes=10485760), replication
factor 1: 1 topic, 100 partitions, 1 KiB records, one subscription of 4
consumers in one group, and
  4p     4 producers, no keys
  keyed  4 producers, keys from OMB's RANDOM_NANO key distributor
  50p    50 producers, no keys
all at one fixed publish rate (--rate, the same for both brokers), the warm-up
dropped from the figures.

Each fresh broker first gets an unmeasured run (--broker-warmup-s).

Usage: perf/omb.sh [--quick] [--rate MSG_PER_S] [--broker-warmup-s S]
                   [--warmup-s S] [--duration-s S]
                   [--workloads 4p,keyed,50p] [--brokers kafka,kshard]
                   [--out FILE.json] [--no-build] [--keep]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (Broker, BrokerCpu, cpu_s: brokers started and measured as compare.py does)

REPO = compare.REPO
OMB_DIR = REPO / "perf" / "omb"
# 20,000 msg/s of 1 KiB (19.5 MiB/s): what Apache Kafka 3.9.1 holds on this
# shared 2-core machine with the generator beside it; at 30,000 it fell
# behind (keyed: publish delay p99 1.8 s). See tuning.md, issue 16.
DEFAULT_RATE = 20_000
WORKLOADS = {
    "4p": {"name": "1-topic-100-partitions-1kb-4p-4c", "producers": 4, "keys": "NO_KEY"},
    "keyed": {"name": "1-topic-100-partitions-1kb-4p-4c-keyed", "producers": 4, "keys": "RANDOM_NANO"},
    "50p": {"name": "1-topic-100-partitions-1kb-50p-4c", "producers": 50, "keys": "NO_KEY"},
}
PARTITIONS, CONSUMERS, MESSAGE_SIZE_BYTES = 100, 4, 1024


def log(msg):
    print(f"[omb {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def build(args):
    """The generator (offline first: ~/.m2 usually holds everything) and kshard."""
    mvn = ["mvn", "-B", "-q", "-f", str(OMB_DIR / "pom.xml"), "compile", "dependency:copy-dependencies"]
    if subprocess.run(mvn[:1] + ["-o"] + mvn[1:]).returncode != 0:
        subprocess.run(mvn, check=True)
    if not args.no_build:
        subprocess.run(["nice", "cargo", "build", "--release", "--bin", "kshard"], cwd=REPO, check=True)


def omb_command(workload, bootstrap, args, out, warmup_s, duration_s):
    w = WORKLOADS[workload]
    cp = f"{OMB_DIR / 'target' / 'classes'}:{OMB_DIR / 'target' / 'dependency'}/*"
    return ["java", "-Xms1G", "-Xmx2G", "-XX:+UseG1GC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp", cp, "kshard.omb.Omb", "--bootstrap-server", bootstrap, "--name", w["name"],
            "--partitions", str(PARTITIONS), "--producers", str(w["producers"]), "--consumers", str(CONSUMERS),
            "--message-size", str(MESSAGE_SIZE_BYTES), "--key-distributor", w["keys"],
            "--producer-rate", str(args.rate), "--warmup-s", str(warmup_s),
            "--duration-s", str(duration_s), "--out", str(out)]


def run_workload(broker, workload, args, root, warmup_s, duration_s, tag=""):
    """One generator run; the broker's CPU seconds are sampled at the
    generator's OMB-MEASURE-START / -END lines, so only the measured window counts."""
    out = root / f"{broker.kind}-{workload}{tag}.json"
    cmd = omb_command(workload, broker.bootstrap, args, out, warmup_s, duration_s)
    compare.note(cmd[cmd.index("kshard.omb.Omb"):])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    timeout_s = warmup_s + duration_s + 300
    killer = threading.Timer(timeout_s, proc.kill)
    killer.start()
    cpu = {}
    try:
        for line in proc.stdout:
            mark = line.strip()
            if mark in ("OMB-MEASURE-START", "OMB-MEASURE-END"):
                cpu[mark] = compare.cpu_s(broker.proc.pid)
        rc = proc.wait()
    finally:
        killer.cancel()
    if rc != 0 or not out.exists():
        raise RuntimeError(f"generator exited with {rc} (timeout {timeout_s}s)")
    r = json.loads(out.read_text())
    cpu_s = cpu["OMB-MEASURE-END"] - cpu["OMB-MEASURE-START"]
    r["broker_cpu_s"] = cpu_s
    r["broker_cpu_cores"] = cpu_s / r["measured_s"]
    r["broker_cpu_s_per_gib"] = cpu_s / (r["published_bytes"] / 2**30) if r["published_bytes"] else None
    return r


class Broker(compare.Broker):
    """compare.py's broker, with extra kshard settings (--kshard-override)."""

    def __init__(self, kind, root, bins, cp, kshard_overrides):
        super().__init__(kind, root, bins, cp)
        self.kshard_overrides = kshard_overrides

    def command(self):
        cmd = super().command()
        if self.kind != "kafka":
            cmd += [a for kv in self.kshard_overrides for a in ("--override", kv)]
        return cmd


def run_broker(kind, workloads, args, root, bins, cp):
    b = Broker(kind, root, bins, cp, args.kshard_override)
    res = {}
    log(f"starting {kind} on {b.bootstrap}")
    try:
        b.start()
        # A fresh broker (JIT, 100 new partitions) is slow for its first
        # half minute or so: one unmeasured run of the first workload first.
        runs = [("broker_warmup", workloads[0], args.broker_warmup_s - 5, 5)]
        runs += [(w, w, args.warmup_s, args.duration_s) for w in workloads]
        for key, w, warmup_s, duration_s in runs:
            log(f"{key}: {WORKLOADS[w]['name']} on {kind} at {args.rate} msg/s "
                f"({warmup_s}s warm-up, {duration_s}s measured)")
            try:
                res[key] = run_workload(b, w, args, root, warmup_s, duration_s, "" if key == w else f"-{key}")
            except Exception as e:
                log(f"  {key} on {kind} failed: {e}")
                res[key] = {"error": str(e)[:300]}
    finally:
        b.stop_all()
    return res


# (key path in a workload result, label, higher is better)
ROWS = [("publish_rate_msg_per_s", "publish rate msg/s", True),
        ("consume_rate_msg_per_s", "consume rate msg/s", True)]
ROWS += [(f"publish_latency_ms.{q}", f"publish latency {n} ms", False)
         for q, n in (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"), ("p9999", "p99.99"), ("max", "max"))]
ROWS += [(f"e2e_latency_ms.{q}", f"end-to-end latency {n} ms", False)
         for q, n in (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"), ("p9999", "p99.99"), ("max", "max"))]
ROWS += [(f"publish_delay_ms.{q}", f"publish delay {n} ms", False)
         for q, n in (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"), ("max", "max"))]
ROWS += [("broker_cpu_s_per_gib", "broker CPU s/GiB published", False),
         ("broker_cpu_cores", "broker CPU cores (mean)", False),
         ("backlog_at_end_msgs", "backlog at end, records", False)]


def lookup(result, path):
    v = result
    for k in path.split("."):
        if not isinstance(v, dict) or k not in v:
            return None
        v = v[k]
    return v


def table(results, workloads):
    """Rows of {workload, figure, <broker>..., ratio_<broker>_over_kafka}."""
    others = [k for k in results if k != "kafka"]
    rows = []
    for w in workloads:
        for key, label, higher in ROWS:
            kafka = lookup(results.get("kafka", {}).get(w, {}), key)
            row = {"workload": WORKLOADS[w]["name"], "figure": label, "key": key,
                   "higher_is_better": higher, "kafka": kafka}
            for k in others:
                v = lookup(results[k].get(w, {}), key)
                row[k] = v
                row[f"ratio_{k}_over_kafka"] = v / kafka if (v is not None and kafka) else None
            rows.append(row)
    return rows


def fmt(v):
    if v is None:
        return "-"
    return f"{v:,.2f}" if abs(v) < 1000 else f"{v:,.0f}"


def print_table(rows, results):
    others = [k for k in results if k != "kafka"]
    w = max(len(r["figure"]) for r in rows)
    head = f"{'figure':<{w}}  {'Kafka':>10}" + "".join(f"  {k:>10}  {'/Kafka':>7}" for k in others)
    current = None
    for r in rows:
        if r["workload"] != current:
            current = r["workload"]
            print(f"\n{current}\n{head}\n{'-' * len(head)}")
        line = f"{r['figure']:<{w}}  {fmt(r['kafka']):>10}"
        for k in others:
            line += f"  {fmt(r[k]):>10}  {fmt(r[f'ratio_{k}_over_kafka']):>7}"
        print(line + ("  (higher better)" if r["higher_is_better"] else "  (lower better)"))
    for k, per in results.items():
        for w, r in per.items():
            if "error" in r:
                print(f"  {k} {w}: {r['error']}")


def run(args):
    root = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="kshard-omb-"))
    root.mkdir(parents=True, exist_ok=True)
    log(f"work dir {root}")
    subprocess.run([str(REPO / "scripts" / "kafka-jars.sh"), compare.KAFKA_VERSION], check=True)
    build(args)
    (root / "bin").mkdir(exist_ok=True)
    bins = {"kshard": root / "bin" / "kshard"}
    # A private copy: a rebuild during the run must not swap the binary.
    shutil.copy2(REPO / "target" / "release" / "kshard", bins["kshard"])
    log4j = root / "log4j.properties"
    log4j.write_text("log4j.rootLogger=WARN, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
                     "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
                     "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
    workloads = args.workloads.split(",")
    for w in workloads:
        assert w in WORKLOADS, f"unknown workload {w}: one of {', '.join(WORKLOADS)}"
    out = {"machine": {"cpus": os.cpu_count(), "uname": " ".join(os.uname()),
                       "load_avg_at_start": os.getloadavg()},
           "params": {"rate_msg_per_s": args.rate, "warmup_s": args.warmup_s, "duration_s": args.duration_s,
                      "broker_warmup_s": args.broker_warmup_s, "kshard_overrides": args.kshard_override,
                      "partitions": PARTITIONS, "consumers": CONSUMERS,
                      "message_size_bytes": MESSAGE_SIZE_BYTES,
                      "workloads": {w: WORKLOADS[w] for w in workloads}},
           "results": {}}
    for kind in args.brokers.split(","):
        out["results"][kind] = run_broker(kind, workloads, args, root, bins, {"log4j": log4j})
    out["machine"]["load_avg_at_end"] = os.getloadavg()
    out["table"] = table(out["results"], workloads)
    out["commands"] = compare.COMMANDS
    print_table(out["table"], out["results"])
    print(f"\nrate {args.rate:,} msg/s x {MESSAGE_SIZE_BYTES} B, warm-up {args.warmup_s}s, measured {args.duration_s}s;"
          f" load average at start {out['machine']['load_avg_at_start']}, at end {out['machine']['load_avg_at_end']}"
          f" on {out['machine']['cpus']} cpus")
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"JSON written to {args.out}")
    if not args.keep and not args.data_dir:
        shutil.rmtree(root, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="30 s broker warm-up; 30 s warm-up and 30 s measured"
                   " per workload")
    p.add_argument("--rate", type=int, default=DEFAULT_RATE, help=f"publish rate, msg/s (default {DEFAULT_RATE})")
    p.add_argument("--warmup-s", type=int, default=None, help="warm-up seconds, dropped (default 60)")
    p.add_argument("--broker-warmup-s", type=int, default=None,
                   help="unmeasured run on each fresh broker, seconds (default 60)")
    p.add_argument("--duration-s", type=int, default=None, help="measured seconds (default 300, OMB's 5 minutes)")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated: " + ", ".join(WORKLOADS))
    p.add_argument("--brokers", default="kafka,kshard", help="comma-separated, in run order (kafka, kshard,"
                   " kshard-direct)")
    p.add_argument("--kshard-override", action="append", default=[], metavar="KEY=VALUE",
                   help="extra kshard setting, repeatable (e.g. num.shards=1)")
    p.add_argument("--data-dir", default=None, help="where brokers keep data (default: a new temp dir)")
    p.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "kshard-omb-results.json"),
                   help="JSON output file (default: in the temp dir, not the repo)")
    p.add_argument("--no-build", action="store_true", help="use the existing target/release/kshard")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (broker logs, per-run JSON)")
    args = p.parse_args()
    if args.warmup_s is None:
        # A new 100-partition topic keeps Kafka slow for about 20 s.
        args.warmup_s = 30 if args.quick else 60
    if args.broker_warmup_s is None:
        args.broker_warmup_s = 30 if args.quick else 60
    assert args.broker_warmup_s > 5, "--broker-warmup-s must exceed the 5 s it measures"
    if args.duration_s is None:
        args.duration_s = 30 if args.quick else 300
    run(args)


if __name__ == "__main__":
    main()
