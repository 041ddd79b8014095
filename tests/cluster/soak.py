"""Kill -9 soak: the long version of test_kill_loop.py, run by
scripts/soak.sh (not in CI).

Starts a ZooKeeper and three brokers of KSHARD_TEST_TARGET (kshard by
default, kafka for Apache Kafka 3.9.1), an RF=3 topic with
min.insync.replicas=2, two idempotent acks=all producers (kafka-clients and
librdkafka), then kills a random broker with SIGKILL --kills times,
restarting it each time. Ctrl-C ends the kill loop early; the log is
checked either way. Prints one progress line per kill and, last, one JSON
summary line; exits 1 when an acknowledged record was lost, duplicated,
moved or reordered (logs then kept in /tmp/kshard-cluster-logs/soak-<time>/).
"""

import argparse
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cluster_util as cl  # noqa: E402
import durability as du  # noqa: E402

LOG_KEEP_DIR = Path("/tmp/kshard-cluster-logs")


def _keep_logs(cluster, zk_server, producer_log_dir, summary, check):
    keep = LOG_KEEP_DIR / time.strftime("soak-%Y%m%d-%H%M%S")
    keep.mkdir(parents=True, exist_ok=True)
    for i, b in enumerate(cluster.all_brokers if cluster else []):
        if b.log_path.exists():
            shutil.copy(b.log_path, keep / f"{i}-{b.name}.log")
    if zk_server is not None and zk_server.log_path.exists():
        shutil.copy(zk_server.log_path, keep / "zookeeper.log")
    for f in Path(producer_log_dir).glob("producer-*.log"):
        shutil.copy(f, keep / f.name)
    if summary is not None:
        (keep / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    if check is not None:
        (keep / "problems.txt").write_text("\n".join(check.problems(limit=5000)) + "\n")
    return keep


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=int(os.environ.get("KSHARD_KILLS", "1000")))
    ap.add_argument("--rate", type=int, default=int(os.environ.get("KSHARD_SOAK_RATE", "200")),
                    help="records per second per producer")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--summary", type=Path, default=None, help="also write the JSON summary here")
    args = ap.parse_args()

    stop = threading.Event()

    def on_signal(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        print(f"signal {signum}: finishing the current kill, then checking the log (again to abort)", flush=True)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    producer_log_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"kshard-soak-{os.getpid()}"
    producer_log_dir.mkdir(parents=True, exist_ok=True)
    zk_server = cluster = zk = None
    summary = check = None
    rc = 1
    t0 = time.monotonic()
    try:
        print(f"soak: target {cl.TARGET}, {args.kills} kills, {args.rate} records/s per producer", flush=True)
        zk_server = cl.ZooKeeperServer()
        zk_server.start()
        zk = zk_server.client()
        cluster = cl.Cluster(zk_server, zk)
        cluster.start(3, du.CLUSTER_OVERRIDES)
        summary, problems, check = du.run_kill_loop(
            cluster, "soak", args.partitions, args.kills, rate=args.rate, seed=args.seed,
            progress=lambda line: print(line, flush=True), log_dir=producer_log_dir, stop_event=stop)
        summary["requested_kills"] = args.kills
        if problems:
            keep = _keep_logs(cluster, zk_server, producer_log_dir, summary, check)
            print("FAILED:\n" + "\n".join(problems) + f"\nlogs in {keep}", flush=True)
        else:
            rc = 0
    except BaseException as e:
        keep = _keep_logs(cluster, zk_server, producer_log_dir, summary, check)
        print(f"soak aborted: {type(e).__name__}: {e}\nlogs in {keep}", flush=True)
        summary = summary or {"target": cl.TARGET, "aborted": f"{type(e).__name__}: {e}"}
        summary["elapsed_s"] = round(time.monotonic() - t0, 1)
    finally:
        if cluster is not None:
            cluster.cleanup()
        if zk is not None:
            zk.stop()
            zk.close()
        if zk_server is not None:
            zk_server.cleanup()
        shutil.rmtree(producer_log_dir, ignore_errors=True)
    line = json.dumps(summary, sort_keys=True)
    print(line, flush=True)
    if args.summary:
        args.summary.write_text(line + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
