"""Kafka's own kafka-dump-log (kafka.tools.DumpLogSegments) reads the
segments, offset indexes and time indexes the broker wrote, after a clean
SIGTERM shutdown, and finds them consistent."""

import re
import subprocess

import pytest
from confluent_kafka import Producer

import compat_util as cu
from conftest import kafka_classpath
from test_confluent import create_topics

PER_CODEC = 3000
CODEC_NAMES = {"none": "none", "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}


def dump(*args):
    r = subprocess.run(
        ["java", "-Xmx512m", "-cp", kafka_classpath(), "kafka.tools.DumpLogSegments", *args],
        capture_output=True,
        timeout=180,
    )
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def assert_clean(rc, out, err):
    assert rc == 0, f"DumpLogSegments rc={rc}\n{err[-3000:]}"
    for bad in ("Exception", "corrupt", "Corrupt", "mismatch", "Mismatch", "not match"):
        assert bad not in out and bad not in err, f"{bad!r} in output:\n{(out + err)[-3000:]}"


@pytest.fixture(scope="module")
def stopped_broker(broker_module_factory):
    b = broker_module_factory({"log.segment.bytes": str(256 * 1024), "log.index.interval.bytes": "1024"})
    topics = [f"dl-{c}" for c in cu.CODECS]
    create_topics(b.bootstrap, topics, partitions=1)
    for codec in cu.CODECS:
        t = f"dl-{codec}"
        if codec == "lz4":
            # librdkafka turns lz4 on only when the broker offers
            # FindCoordinator (its marker for Kafka >= 0.9), which kshard does
            # not until consumer groups exist, so lz4 segments come from
            # kafka-python here, against either broker.
            produce_with_kafka_python(b.bootstrap, t)
            continue
        p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": codec, "acks": "all", "linger.ms": 5,
                      "batch.size": 16384})
        for i in range(PER_CODEC):
            p.produce(t, key=cu.rec_key(t, i), value=cu.rec_value(t, i), headers=cu.rec_headers(t, i), partition=0)
            if i % 500 == 0:
                p.poll(0)
        assert p.flush(60) == 0
    b.stop()
    return b


def produce_with_kafka_python(bootstrap, topic):
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type="lz4", acks="all", linger_ms=5,
                      batch_size=16384)
    futures = [
        p.send(topic, key=cu.rec_key(topic, i), value=cu.rec_value(topic, i),
               headers=[(k, v) for k, v in cu.rec_headers(topic, i)], partition=0)
        for i in range(PER_CODEC)
    ]
    p.flush(60)
    for f in futures:
        f.get(timeout=60)
    p.close()


def segments(b, topic):
    d = b.partition_dir(topic, 0)
    logs = sorted(d.glob("*.log"))
    assert logs, f"no segments in {d}"
    for seg in logs:
        assert re.fullmatch(r"\d{20}\.log", seg.name), seg.name
        assert seg.with_suffix(".index").exists(), f"{seg} has no .index"
        assert seg.with_suffix(".timeindex").exists(), f"{seg} has no .timeindex"
    return logs


@pytest.mark.parametrize("codec", cu.CODECS)
def test_deep_iteration_reads_every_record(stopped_broker, codec):
    t = f"dl-{codec}"
    logs = segments(stopped_broker, t)
    if codec == "none":
        sizes = [s.stat().st_size for s in logs]
        assert len(logs) > 1, f"256 KiB segments should have rolled: {sizes}"
    files = ",".join(str(x) for seg in logs for x in (seg, seg.with_suffix(".index"), seg.with_suffix(".timeindex")))
    rc, out, err = dump("--files", files, "--deep-iteration", "--print-data-log")
    assert_clean(rc, out, err)
    offsets = [int(m) for m in re.findall(r"^\| offset: (\d+)", out, re.M)]
    assert offsets == list(range(PER_CODEC)), f"{codec}: {len(offsets)} records dumped:\n{out[:3000]}"
    counts = [int(m) for m in re.findall(r"^baseOffset: \d+ lastOffset: \d+ count: (\d+)", out, re.M)]
    assert sum(counts) == PER_CODEC and len(counts) > 1, counts
    assert out.count("isvalid: true") == len(counts) and "isvalid: false" not in out
    codecs = set(re.findall(r"compresscodec: (\w+)", out))
    assert codecs == {CODEC_NAMES[codec]}, codecs
    keys = re.findall(r" key: (\S+)", out)
    assert keys[:3] == [cu.rec_key(t, i).decode() for i in range(3)]
    assert keys[-1] == cu.rec_key(t, PER_CODEC - 1).decode()
    assert "headerKeys: [hi,ht]" in out


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_index_checks(stopped_broker, codec):
    logs = segments(stopped_broker, f"dl-{codec}")
    idx = ",".join(str(x) for seg in logs for x in (seg.with_suffix(".index"), seg.with_suffix(".timeindex")))
    rc, out, err = dump("--files", idx, "--index-sanity-check")
    assert_clean(rc, out, err)
    # An empty offset index is reported as "is empty" instead of "passed".
    assert out.count("passed sanity check") + out.count("is empty.") == 2 * len(logs), out[-2000:]
    assert "passed sanity check" in out
    rc, out, err = dump("--files", idx, "--verify-index-only")
    assert_clean(rc, out, err)


def test_active_index_is_current_while_running(broker_factory):
    """The active segment's .index is written through a mapping, as Kafka's
    is: kafka-dump-log reads its entries while the broker runs, before any
    roll, flush or shutdown."""
    b = broker_factory({"log.index.interval.bytes": "1024"})
    t = "dl-active"
    create_topics(b.bootstrap, [t], partitions=1)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0, "batch.size": 2048})
    for i in range(400):
        p.produce(t, key=cu.rec_key(t, i), value=cu.rec_value(t, i), partition=0)
        p.flush(30)
    logs = segments(b, t)
    assert len(logs) == 1, logs
    rc, out, err = dump("--files", str(logs[0].with_suffix(".index")))
    assert rc == 0, err[-3000:]
    entries = re.findall(r"^offset: (\d+) position: (\d+)", out, re.M)
    assert len(entries) >= 20, out[-2000:]
    offsets = [int(o) for o, _ in entries]
    assert offsets == sorted(offsets) and offsets[0] > 0, offsets[:10]
    rc, out, err = dump("--files", str(logs[0].with_suffix(".index")), "--verify-index-only")
    assert_clean(rc, out, err)
