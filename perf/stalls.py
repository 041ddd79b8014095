"""Stall benchmarks: the worst shard stall of kshard (its stall detector at
shard.stall.threshold.ms=10) in each workload that stalls thread-per-core
brokers:

  partitions   10,000 partitions created and deleted (10 topics of 1,000
               in turn: the open-files limit here is 20,000)
  producers    10,000 idempotent producers on one partition, then a segment
               roll and a shutdown, each writing the producer snapshot
  leader_isr   a 2-broker ZooKeeper cluster, 1,000 partitions led by broker
               2; broker 2 restarts: leadership moves to broker 1 and back
  compaction   a 1 GiB compacted partition (10,000 keys) cleaned
  cold_compaction  the same 1 GiB written to a delete-policy topic, dropped
               from the page cache, then the topic switched to compact: the
               pass reads every segment from the disk
  direct_roll  2 GiB of 1 KiB records into 8 partitions of 16 MiB segments
               with log.io.mode=direct: 128 segment rolls under load
  cold_consume 1 GiB in 8 partitions dropped from the page cache, then
               consumed from the start (a consumer catching up on old data)

A stall is a shard not polling for longer than the threshold, not counting
the time its thread waited for a CPU (task_ms in the log). Reports, per
workload, the worst stall, the count and where the worst one was.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "cluster"))
sys.path.insert(0, str(REPO / "tests" / "compat"))
import compat_util as cu  # noqa: E402
import cluster_util as cl  # noqa: E402

THRESHOLD_MS = 10
STALL_RE = re.compile(r"shard stall: shard=(\d+) stall_ms=([\d.]+) runq_ms=([\d.]+) task_ms=([\d.]+) "
                      r"count=\d+ worst_ms=[\d.]+ at: (.*)")
COMMON = {"shard.stall.threshold.ms": str(THRESHOLD_MS), "num.partitions": "1",
          "auto.create.topics.enable": "true", "group.initial.rebalance.delay.ms": "0"}


def log(msg):
    print(f"[stalls {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Stalls:
    """Stall lines in a set of broker logs from the moment of creation."""

    def __init__(self, paths):
        self.marks = {p: (p.stat().st_size if p.exists() else 0) for p in paths}

    def result(self, where=None):
        """Stalls of the task_ms over the threshold (those whose frames
        contain `where`, if given, or an address the watchdog did not name:
        it parses debug information a few times at once, then once per 5 s,
        so such a stall may be anywhere and is counted)."""
        stalls = []
        for p, mark in self.marks.items():
            with open(p, "rb") as f:
                f.seek(mark)
                for m in STALL_RE.finditer(f.read().decode(errors="replace")):
                    stalls.append({"log": p.name, "shard": int(m.group(1)), "stall_ms": float(m.group(2)),
                                   "runq_ms": float(m.group(3)), "task_ms": float(m.group(4)),
                                   "at": m.group(5)[:400]})
        counted = [s for s in stalls if s["task_ms"] > THRESHOLD_MS
                   and (where is None or where in s["at"] or "0x" in s["at"])]
        worst = max(counted, key=lambda s: s["task_ms"], default=None)
        top = sorted(counted, key=lambda s: -s["task_ms"])[:10]
        return {"worst_ms": worst["task_ms"] if worst else 0.0, "count": len(counted), "worst": worst,
                "top": top, "os_preempted": len(stalls) - len(counted)}


class Single:
    """One kshard on the embedded store."""

    def __init__(self, root, overrides=None):
        self.dir = root / "broker"
        self.dir.mkdir(parents=True)
        self.port = cu.free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_path = self.dir / "kshard.log"
        props = {"listeners": f"PLAINTEXT://{self.bootstrap}", "log.dirs": str(self.dir / "data"),
                 **COMMON, **(overrides or {})}
        cmd = [str(cl.KSHARD_BIN)] + [a for k, v in props.items() for a in ("--override", f"{k}={v}")]
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        cl.wait_for(lambda: cu.probe_ready("127.0.0.1", self.port), 30, "kshard listening")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(300)


def admin(bootstrap):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(a, topic, partitions, config=None, assignment=None):
    from confluent_kafka.admin import NewTopic
    nt = (NewTopic(topic, num_partitions=len(assignment), replication_factor=-1, replica_assignment=assignment,
                   config=config or {}) if assignment else
          NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {}))
    a.create_topics([nt], operation_timeout=120, request_timeout=300)[topic].result(600)


def perf(args, timeout_s=1800):
    cmd = [str(REPO / "target" / "release" / "kshard-perf")] + args + ["--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr[-400:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def w_partitions(root, topics=10, partitions=1000):
    """10 topics of 1,000 partitions, each created then deleted: kshard
    keeps 3 files open per partition and this machine's hard limit on open
    files is 20,000, so 10,000 partitions cannot exist at once."""
    b = Single(root)
    try:
        a = admin(b.bootstrap)
        data = b.dir / "data"
        s = Stalls([b.log_path])
        t0 = time.monotonic()
        for i in range(topics):
            topic = f"p1k-{i}"
            create_topic(a, topic, partitions)
            a.delete_topics([topic], operation_timeout=120, request_timeout=300)[topic].result(600)
            cl.wait_for(lambda: not any(e.startswith(topic + "-") for e in os.listdir(data)), 120,
                        f"{topic} dirs gone")
        time.sleep(2)
        return {**s.result(), "create_delete_s": time.monotonic() - t0}
    finally:
        b.stop()


def pipelined(sock, frames, parse, window=500):
    """Sends request frames with at most `window` in flight; returns the
    parsed responses in order."""
    out, sent = [], 0
    while len(out) < len(frames):
        while sent < len(frames) and sent - len(out) < window:
            sock.sendall(frames[sent])
            sent += 1
        out.append(parse(cu.recv_frame(sock)))
    return out


def init_pid_frame(corr):
    return cu.frame(cu.request_header_v1(22, 0, corr, "stalls") + cu.string(None) + cu.i32(60000))


def parse_init_pid(payload):
    r = cu.Reader(payload)
    r.i32()
    r.i32()
    err, pid, epoch = r.i16(), r.i64(), r.i16()
    assert err == 0, f"InitProducerId error {err}"
    return pid, epoch


def w_producers(root, producers=10_000):
    b = Single(root)
    try:
        create_topic(admin(b.bootstrap), "idem", 1, {"segment.bytes": str(4 << 20)})
        with cu.connect("127.0.0.1", b.port, 120) as sock:
            pids = pipelined(sock, [init_pid_frame(i) for i in range(producers)], parse_init_pid)
            ts = int(time.time() * 1000)
            frames = [cu.produce_v3(i, "idem", 0, cu.record_batch([(b"k%d" % i, b"v" * 64, [])], ts,
                                                                 producer_id=pid, producer_epoch=epoch,
                                                                 base_sequence=0), acks=1)
                      for i, (pid, epoch) in enumerate(pids)]
            resps = pipelined(sock, frames, cu.parse_produce_v3_response)
            errors = sum(1 for _, parts in resps for err, _ in parts.values() if err != 0)
            assert errors == 0, f"{errors} idempotent produce errors"
        snapshots = lambda: sorted(p.name for p in (b.dir / "data" / "idem-0").glob("*.snapshot"))  # noqa: E731
        s = Stalls([b.log_path])
        before = snapshots()
        # 8 MiB more on the 4 MiB segment: rolls, each taking the snapshot.
        perf(["produce", "--bootstrap-server", b.bootstrap, "--topic", "idem", "--partitions", "1",
              "--num-records", "8192", "--record-size", "1024", "--acks", "1"])
        time.sleep(2)
        roll = s.result()
        rolled = [n for n in snapshots() if n not in before]
        assert rolled, "no producer snapshot after the roll"
        size = (b.dir / "data" / "idem-0" / rolled[-1]).stat().st_size
        s = Stalls([b.log_path])
        b.stop()
        return {"roll": roll, "shutdown": s.result(), "snapshot_bytes": size,
                "worst_ms": max(roll["worst_ms"], s.result()["worst_ms"])}
    finally:
        b.stop()


def w_leader_isr(root, partitions=1000):
    """Counts broker 1 (taking leadership of all partitions, then giving it
    back) and broker 2 once restarted (following, then leading again);
    broker 2's own shutdown (closing 1,000 logs) is reported apart."""
    root.mkdir(parents=True, exist_ok=True)
    zk_server = cl.ZooKeeperServer()
    zk_server.start()
    zk = zk_server.client()
    c = cl.Cluster(zk_server, zk)
    try:
        overrides = {**COMMON, "auto.leader.rebalance.enable": "true",
                     "leader.imbalance.check.interval.seconds": "5"}
        b1, b2 = c.start(2, overrides)
        create_topic(c.admin(), "lai", partitions, assignment=[[2, 1]] * partitions)
        led_by = lambda bid: sum(1 for p in range(partitions)  # noqa: E731
                                 if (c.partition_state("lai", p) or {}).get("leader") == bid)
        cl.wait_for(lambda: led_by(2) == partitions, 300, "broker 2 leading all", 1.0)
        s1, s2_stop = Stalls([b1.log_path]), Stalls([b2.log_path])
        t0 = time.monotonic()
        b2.stop()
        stop_s = time.monotonic() - t0
        shutdown = s2_stop.result()
        s2 = Stalls([b2.log_path])
        b2.start()
        cl.wait_for(lambda: led_by(2) == partitions, 600, "leadership back on broker 2", 1.0)
        time.sleep(2)
        r1, r2 = s1.result(), s2.result()
        for b in (b1, b2):
            shutil.copy(b.log_path, root / f"{b.name}.log")
        return {"worst_ms": max(r1["worst_ms"], r2["worst_ms"]), "count": r1["count"] + r2["count"],
                "worst": max((r1["worst"], r2["worst"]), key=lambda w: w["task_ms"] if w else -1),
                "broker1": r1, "broker2_restarted": r2, "broker2_shutdown": shutdown,
                "stop_s": stop_s, "restart_and_back_s": time.monotonic() - t0}
    finally:
        c.cleanup()
        zk.stop()
        zk_server.cleanup()


CLEANED_RE = re.compile(r"cleaned compact-0: offsets -?\d+\.\.(\d+),")


def w_compaction(root, mib=1024):
    """Stalls from the start of the produce to the end of the pass that
    cleans up to the active segment (all a pass can clean once the produce
    is over); `worst_ms` counts the cleaner's (frames in cleaner.rs), `all`
    every stall of the window (appends too)."""
    b = Single(root, {"log.cleaner.backoff.ms": "1000"})
    try:
        create_topic(admin(b.bootstrap), "compact", 1,
                     {"cleanup.policy": "compact", "segment.bytes": str(64 << 20),
                      "min.cleanable.dirty.ratio": "0.01"})
        time.sleep(1)
        s = Stalls([b.log_path])
        t0 = time.monotonic()
        perf(["produce", "--bootstrap-server", b.bootstrap, "--topic", "compact", "--partitions", "1",
              "--num-records", str(mib * 1024), "--record-size", "1024", "--acks", "1",
              "--key-cardinality", "10000"])
        produce_s = time.monotonic() - t0
        # Nothing is appended now: the active segment's base is final, and
        # no pass cleans past it (a later pass would find nothing to do).
        part = b.dir / "data" / "compact-0"
        active_base = max(int(f.stem) for f in part.glob("*.log"))

        def cleaned_to_active():
            ends = CLEANED_RE.findall(b.log_path.read_text(errors="replace"))
            return bool(ends) and int(ends[-1]) >= active_base

        cl.wait_for(cleaned_to_active, 1200, f"a pass cleaning up to offset {active_base}", 1.0)
        return {**s.result("cleaner"), "all": s.result(), "produce_s": produce_s,
                "produce_and_clean_s": time.monotonic() - t0}
    finally:
        b.stop()


def w_cold_compaction(root, mib=1024):
    """A compaction whose input is no longer in the page cache (a topic
    switched to compact long after it was written): the cleaner's reads
    would wait for the disk on the shard."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    b = Single(root, {"log.cleaner.backoff.ms": "1000"})
    try:
        a = admin(b.bootstrap)
        create_topic(a, "compact", 1, {"cleanup.policy": "delete", "segment.bytes": str(64 << 20)})
        time.sleep(1)
        perf(["produce", "--bootstrap-server", b.bootstrap, "--topic", "compact", "--partitions", "1",
              "--num-records", str(mib * 1024), "--record-size", "1024", "--acks", "1",
              "--key-cardinality", "10000"])
        part = b.dir / "data" / "compact-0"
        active_base = max(int(f.stem) for f in part.glob("*.log"))
        cu.drop_from_page_cache([part])
        # The write-back just forced holds the whole machine up for a while.
        time.sleep(3)
        s = Stalls([b.log_path])
        t0 = time.monotonic()
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in (("cleanup.policy", "compact"), ("min.cleanable.dirty.ratio", "0.01"))]
        for f in a.incremental_alter_configs(
                [ConfigResource(ResourceType.TOPIC, "compact", incremental_configs=entries)]).values():
            f.result(30)

        def cleaned_to_active():
            ends = CLEANED_RE.findall(b.log_path.read_text(errors="replace"))
            return bool(ends) and int(ends[-1]) >= active_base

        cl.wait_for(cleaned_to_active, 1200, f"a pass cleaning up to offset {active_base}", 1.0)
        return {**s.result("cleaner"), "all": s.result(), "clean_s": time.monotonic() - t0}
    finally:
        b.stop()


def w_direct_roll(root, mib=2048):
    """Direct mode's rolls: each makes a new segment (three files created
    and sized, the indexes preallocated and mapped) while produce goes on."""
    b = Single(root, {"log.io.mode": "direct"})
    try:
        create_topic(admin(b.bootstrap), "rolls", 8, {"segment.bytes": str(16 << 20)})
        time.sleep(1)
        s = Stalls([b.log_path])
        perf(["produce", "--bootstrap-server", b.bootstrap, "--topic", "rolls", "--partitions", "8",
              "--num-records", str(mib * 1024), "--record-size", "1024", "--acks", "1"])
        rolls = sum(len(list((b.dir / "data" / f"rolls-{p}").glob("*.log"))) - 1 for p in range(8))
        return {**s.result(), "rolls": rolls}
    finally:
        b.stop()


def w_cold_consume(root, mib=1024):
    """A consumer catching up on segments no longer in the page cache:
    sendfile would read them from the disk on the shard."""
    b = Single(root, {"log.segment.bytes": str(64 << 20)})
    try:
        create_topic(admin(b.bootstrap), "cold", 8)
        perf(["produce", "--bootstrap-server", b.bootstrap, "--topic", "cold", "--partitions", "8",
              "--num-records", str(mib * 1024), "--record-size", "1024", "--acks", "1"])
        cu.drop_from_page_cache(b.dir / "data" / f"cold-{p}" for p in range(8))
        # The write-back just forced holds the whole machine up for a while.
        time.sleep(3)
        s = Stalls([b.log_path])
        r = perf(["consume", "--bootstrap-server", b.bootstrap, "--topic", "cold", "--from-start"])
        return {**s.result(), "consume_mb_per_s": r["mb_per_s"]}
    finally:
        b.stop()


WORKLOADS = {"partitions": w_partitions, "producers": w_producers, "leader_isr": w_leader_isr,
             "compaction": w_compaction, "cold_compaction": w_cold_compaction, "direct_roll": w_direct_roll,
             "cold_consume": w_cold_consume}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", choices=list(WORKLOADS), help="run only these (repeatable)")
    p.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "kshard-stalls.json"))
    p.add_argument("--keep", action="store_true", help="keep the work dir (broker logs)")
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kshard-stalls-"))
    log(f"work dir {root}, kshard {cl.KSHARD_BIN}")
    results = {"load_avg_at_start": os.getloadavg()}
    for name in args.only or WORKLOADS:
        log(name)
        try:
            results[name] = WORKLOADS[name](root / name)
        except Exception as e:  # one failed workload does not hide the others
            log(f"  {name} failed: {e}")
            results[name] = {"error": str(e)[:500]}
        r = results[name]
        if "worst_ms" in r:
            where = (r.get("worst") or {}).get("at", "")
            log(f"  {name}: worst stall {r['worst_ms']:.1f} ms, {r.get('count', '-')} stalls  {where[:200]}")
    results["load_avg_at_end"] = os.getloadavg()
    print(f"\n{'workload':<12} {'worst stall ms':>15} {'stalls':>7}")
    for name in args.only or WORKLOADS:
        r = results[name]
        count = r.get("count", (r.get("roll", {}).get("count", 0) + r.get("shutdown", {}).get("count", 0)))
        print(f"{name:<12} {r.get('worst_ms', float('nan')):>15.1f} {count:>7}")
    print(f"load average at start {results['load_avg_at_start']}, at end {results['load_avg_at_end']}")
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"JSON written to {args.out}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
