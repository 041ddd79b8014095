"""kill -9 loop under load: three brokers, an RF=3 topic with
min.insync.replicas=2, two idempotent acks=all producers (kafka-clients
3.9.1 and librdkafka) writing numbered records the whole time while a
random broker (leader, follower or controller) is killed and restarted
KILLS times. Afterwards every partition is read from offset 0: each
acknowledged record must be there exactly once at its acknowledged offset,
per-producer order kept within a partition, no offset gaps below the high
watermark. It runs with kshard's page-cache logs and again with
log.io.mode=direct (asynchronous O_DIRECT appends, acknowledged once
written; LeaderAndIsr waits for staged appends before a role change). The
long version is scripts/soak.sh."""

import json
import os
import re
import shutil
from pathlib import Path

import pytest

import cluster_util as cl
import durability as du

KILLS = int(os.environ.get("KSHARD_KILLS", "20"))
PARTITIONS = 3
RATE = int(os.environ.get("KSHARD_KILL_LOOP_RATE", "200"))  # records/s per producer
SEED = int(os.environ["KSHARD_KILL_SEED"]) if "KSHARD_KILL_SEED" in os.environ else None
TOPIC = "kill-loop"
# A kill costs a session expiry plus a start and an ISR rejoin: about 5-8 s
# for kshard, 30-60 s for a JVM broker on two cores.
PER_KILL_S = 60 if cl.TARGET == "kafka" else 20


def _keep(request, tmp_path, summary=None, check=None):
    """Producer logs and the full problem lists next to the broker logs
    conftest copies to /tmp/kshard-cluster-logs/<test id>/."""
    keep = Path("/tmp/kshard-cluster-logs") / re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.nodeid)
    keep.mkdir(parents=True, exist_ok=True)
    for f in tmp_path.glob("producer-*.log"):
        shutil.copy(f, keep / f.name)
    if summary is not None:
        (keep / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    if check is not None:
        (keep / "problems.txt").write_text("\n".join(check.problems(limit=2000)) + "\n")
    return keep


@pytest.mark.needs_replication
@pytest.mark.timeout(240 + KILLS * PER_KILL_S)
@pytest.mark.parametrize("io_mode", ["buffered", "direct"])
def test_kill_loop(cluster, tmp_path, request, io_mode):
    if io_mode == "direct" and cl.TARGET == "kafka":
        pytest.skip("log.io.mode is kshard's")
    overrides = dict(du.CLUSTER_OVERRIDES)
    if io_mode == "direct":
        overrides["log.io.mode"] = "direct"
    cluster.start(3, overrides)
    try:
        summary, problems, check = du.run_kill_loop(cluster, TOPIC, PARTITIONS, KILLS, rate=RATE, seed=SEED,
                                                    log_dir=tmp_path)
    except BaseException:
        _keep(request, tmp_path)
        raise
    print("kill loop summary: " + json.dumps(summary, sort_keys=True))
    if problems:
        keep = _keep(request, tmp_path, summary, check)
        problems.append(f"details in {keep}")
    assert not problems, "\n".join(problems) + f"\nsummary: {json.dumps(summary, sort_keys=True)}"
    assert summary["kills"] == KILLS
    for tag, p in summary["producers"].items():
        assert p["acked"] > 0, f"{tag} had nothing acknowledged"
    assert summary["records_verified"] == summary["records_acked"]
