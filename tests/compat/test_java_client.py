"""The Java kafka-clients (3.9 and 4.x) through tests/compat/java: AdminClient
(createTopics, describeTopics, listOffsets by every OffsetSpec, deleteRecords,
describeConfigs, describeCluster), KafkaProducer (default idempotent, each
codec, acks 0/1/all) and KafkaConsumer assign + seekToBeginning."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

import compat_util as cu

JAVA_DIR = Path(__file__).resolve().parent / "java"
VERSIONS = os.environ.get("KSHARD_JAVA_CLIENT_VERSIONS", "3.9.1 4.4.0").split()
PARTITIONS = 3
PER_RUN = 6667  # x 3 runs x 5 codecs = 100k records per client version
# (acks, idempotence): None keeps the client default (idempotent since 3.0).
RUNS = [("all", None), ("1", "false"), ("0", "false")]
TS_BASE = int(time.time() * 1000) - 5_400_000


def classpath(version):
    base = JAVA_DIR / "target" / f"kc-{version}"
    if not (base / "classes" / "kshard" / "compat" / "Client.class").exists():
        pytest.fail(f"Java client for {version} not built: run scripts/setup.sh")
    return f"{base / 'classes'}:{base / 'libs'}/*"


def client(version, *args, timeout_s=180):
    cmd = [
        "java",
        "-Xmx256m",
        "-XX:TieredStopAtLevel=1",
        "-Xshare:auto",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        classpath(version),
        "kshard.compat.Client",
        *args,
    ]
    r = subprocess.run(cmd, capture_output=True, timeout=timeout_s)
    assert r.returncode == 0, f"{args[0]} failed rc={r.returncode}:\n{r.stderr.decode()[-3000:]}"
    return [json.loads(line) for line in r.stdout.decode().splitlines() if line.strip()]


def topic_name(version, codec):
    return f"jv{version.replace('.', '')}-{codec}"


@pytest.fixture(scope="module", params=VERSIONS)
def produced(request, broker):
    version = request.param
    topics = [topic_name(version, c) for c in cu.CODECS]
    [created] = client(version, "create-topics", "--bootstrap", broker.bootstrap, "--partitions", str(PARTITIONS), *topics)
    for t in topics:
        assert created["topics"][t]["partitions"] == PARTITIONS
        assert all(leader >= 0 for leader in created["topics"][t]["leaders"])
    cu.wait_topics_ready(broker.bootstrap, topics, PARTITIONS)
    acked = {}
    for codec in cu.CODECS:
        t = topic_name(version, codec)
        acked[t] = {}
        for n, (acks, idem) in enumerate(RUNS):
            args = ["produce", "--bootstrap", broker.bootstrap, "--topic", t, "--partitions", str(PARTITIONS)]
            args += ["--start", str(n * PER_RUN), "--count", str(PER_RUN), "--codec", codec, "--acks", acks]
            args += ["--ts-base", str(TS_BASE)]
            if idem is not None:
                args += ["--idempotence", idem]
            rows = client(version, *args)
            assert len(rows) == PER_RUN
            for r in rows:
                assert r["p"] == r["i"] % PARTITIONS
                acked[t][r["i"]] = r["o"] if acks != "0" else -1
    return version, acked


def consume(version, broker, topic):
    rows = client(
        version, "consume", "--bootstrap", broker.bootstrap, "--topic", topic, "--partitions", str(PARTITIONS)
    )
    got = {p: [] for p in range(PARTITIONS)}
    for r in rows:
        assert r["tt"] == "CreateTime"
        hdrs = [(k, v.encode()) for k, v in r["h"]]
        got[r["p"]].append((r["o"], r["k"].encode(), r["v"].encode(), hdrs, r["ts"]))
    return got


def verify(version, broker, topic, acked):
    total = PER_RUN * len(RUNS)
    got = consume(version, broker, topic)
    for p in range(PARTITIONS):
        cu.verify_partition_records(got[p], topic, list(range(p, total, PARTITIONS)), ts_base=TS_BASE, acked=acked)


@pytest.mark.parametrize("codec", cu.CODECS)
def test_produce_consume(broker, produced, codec):
    version, acked = produced
    t = topic_name(version, codec)
    verify(version, broker, t, acked[t])


def test_list_offsets_all_specs(broker, produced):
    version, _ = produced
    t = topic_name(version, "lz4")
    total = PER_RUN * len(RUNS)
    idxs = {p: list(range(p, total, PARTITIONS)) for p in range(PARTITIONS)}
    stamps = [0, TS_BASE + 1, TS_BASE + 2500, TS_BASE + total - 1, TS_BASE + 10 * total]
    [res] = client(
        version, "offsets", "--bootstrap", broker.bootstrap, "--topic", t, "--partitions", str(PARTITIONS),
        "--ts", ",".join(map(str, stamps)),
    )
    for p in range(PARTITIONS):
        n = len(idxs[p])
        assert res["earliest"][p][0] == 0
        assert res["latest"][p][0] == n
        assert res["max_timestamp"][p] == [n - 1, TS_BASE + idxs[p][-1]]
        assert res["consumer_beginning"][p] == 0
        assert res["consumer_end"][p] == n
        for ts in stamps:
            want = next((o for o, i in enumerate(idxs[p]) if TS_BASE + i >= ts), None)
            admin = res["for_timestamp"][str(ts)][p]
            cons = res["consumer_offsets_for_times"][str(ts)][p]
            if want is None:
                assert admin == [-1, -1], (ts, p, admin)
                assert cons is None
            else:
                assert admin == [want, TS_BASE + idxs[p][want]], (ts, p)
                assert cons == [want, TS_BASE + idxs[p][want]], (ts, p)


def test_describe_cluster_topics_configs(broker, produced):
    version, _ = produced
    t = topic_name(version, "gzip")
    [d] = client(version, "describe", "--bootstrap", broker.bootstrap, "--topic", t)
    host, port = broker.bootstrap.split(":")
    assert len(d["nodes"]) == 1
    node_id, node_host, node_port = d["nodes"][0]
    assert (node_host, node_port) == (host, int(port))
    assert d["cluster_id"]
    assert d["topic_partitions"] == PARTITIONS
    assert d["topic_id_set"]
    for p, leader, replicas, isr in d["partitions"]:
        assert (leader, replicas, isr) == (node_id, 1, 1)
    cfg = d["topic_config"]
    assert cfg["cleanup.policy"] == "delete"
    assert cfg["retention.ms"] == "604800000"
    assert cfg["compression.type"] == "producer"
    assert cfg["max.message.bytes"] == "1048588"
    assert d["broker_config_count"] > 50
    assert d["broker_log_dirs"] == broker.log_dirs


def test_delete_records(broker, produced):
    version, _ = produced
    t = topic_name(version, "dr")
    client(version, "create-topics", "--bootstrap", broker.bootstrap, "--partitions", "1", t)
    cu.wait_topics_ready(broker.bootstrap, [t], 1)
    client(version, "produce", "--bootstrap", broker.bootstrap, "--topic", t, "--partitions", "1",
           "--count", "50", "--ts-base", str(TS_BASE))
    [r] = client(version, "delete-records", "--bootstrap", broker.bootstrap, "--topic", t,
                 "--partition", "0", "--before", "10")
    assert r == {"low_watermark": 10, "earliest": 10}
    rows = client(version, "consume", "--bootstrap", broker.bootstrap, "--topic", t, "--partitions", "1")
    assert [x["o"] for x in rows] == list(range(10, 50))
    assert rows[0]["k"] == cu.rec_key(t, 10).decode()


def test_restart_then_consume(broker, produced):
    version, acked = produced
    broker.restart()
    for codec in cu.CODECS:
        t = topic_name(version, codec)
        verify(version, broker, t, acked[t])
