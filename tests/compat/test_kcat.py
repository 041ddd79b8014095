"""kcat (librdkafka CLI from Debian): produce with codec/acks/keys/headers,
consume with a format string, query offsets by timestamp, list metadata."""

import json
import shutil
import subprocess
import time

import pytest

import compat_util as cu

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat not installed (scripts/setup.sh)")
PER_RUN = 6667  # x 3 acks runs x 5 codecs = 100k records
ACKS_RUNS = ["all", "1", "0"]  # acks=0 last: the topic already has a leader by then


def kcat(broker, *args, stdin=None, timeout_s=120):
    r = subprocess.run(
        [KCAT, "-b", broker.bootstrap, *args],
        input=stdin,
        capture_output=True,
        timeout=timeout_s,
    )
    assert r.returncode == 0, f"kcat {args} failed rc={r.returncode}: {r.stderr.decode()[-2000:]}"
    return r.stdout.decode()


def lines_for(tag, run, start):
    return "".join(
        f"{cu.rec_key(tag, i).decode()}:{cu.rec_value(tag, i).decode()}\n" for i in range(start, start + PER_RUN)
    ).encode()


@pytest.fixture(scope="module")
def produced(broker):
    """Per codec one auto-created topic with three runs (acks all, 1, 0);
    returns {topic: [ms timestamp taken between runs]}."""
    marks = {}
    for codec in cu.CODECS:
        topic = f"kc-{codec}"
        marks[topic] = []
        for n, acks in enumerate(ACKS_RUNS):
            if n:
                time.sleep(0.05)
                marks[topic].append(int(time.time() * 1000))
                time.sleep(0.05)
            kcat(
                broker,
                "-P",
                "-t",
                topic,
                "-p",
                "0",
                "-z",
                codec,
                "-X",
                f"acks={acks}",
                "-K",
                ":",
                "-H",
                f"ht={topic}",
                "-H",
                f"run=acks{acks}",
                stdin=lines_for(topic, acks, n * PER_RUN),
            )
    return marks


def consume(broker, topic):
    out = kcat(broker, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o|%T|%k|%s|%h\\n")
    return [line.split("|") for line in out.splitlines()]


@pytest.mark.parametrize("codec", cu.CODECS)
def test_produce_consume(broker, produced, codec):
    topic = f"kc-{codec}"
    rows = consume(broker, topic)
    assert len(rows) == PER_RUN * len(ACKS_RUNS)
    now_ms = int(time.time() * 1000)
    for i, (off, ts, key, value, headers) in enumerate(rows):
        assert int(off) == i
        assert key == cu.rec_key(topic, i).decode()
        assert value == cu.rec_value(topic, i).decode()
        assert headers == f"ht={topic},run=acks{ACKS_RUNS[i // PER_RUN]}"
        assert now_ms - 600_000 < int(ts) <= now_ms


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_query_offsets_by_timestamp(broker, produced, codec):
    topic = f"kc-{codec}"
    for n, mark in enumerate(produced[topic], start=1):
        out = kcat(broker, "-Q", "-t", f"{topic}:0:{mark}")
        # kcat prints: "<topic> [<partition>] offset <offset>"
        assert f"{topic} [0] offset {n * PER_RUN}" in out, out
    out = kcat(broker, "-Q", "-t", f"{topic}:0:{int(time.time() * 1000) + 3_600_000}")
    assert f"{topic} [0] offset -1" in out, out


def test_metadata_listing(broker, produced):
    md = json.loads(kcat(broker, "-L", "-J"))
    assert len(md["brokers"]) == 1
    host, port = broker.bootstrap.split(":")
    assert md["brokers"][0]["name"] == f"{host}:{port}"
    topics = {t["topic"]: t for t in md["topics"]}
    for codec in cu.CODECS:
        t = topics[f"kc-{codec}"]
        assert [p["partition"] for p in t["partitions"]] == [0]
        assert t["partitions"][0]["leader"] == md["brokers"][0]["id"]
    text = kcat(broker, "-L", "-t", "kc-gzip")
    assert "1 partitions" in text or "1 partition" in text, text


def test_restart_then_consume(broker, produced):
    broker.restart()
    for codec in cu.CODECS:
        rows = consume(broker, f"kc-{codec}")
        assert [int(r[0]) for r in rows] == list(range(PER_RUN * len(ACKS_RUNS)))
