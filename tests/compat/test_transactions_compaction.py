"""The cleaner and transactions, as Kafka's: in a compacted topic, aborted
data goes at the first cleaning, a marker goes a pass after the last of its
transaction's data once its delete horizon (delete.retention.ms) has
passed, and the last batch of an active producer stays, emptied, with the
marker that ends it. Checked with a librdkafka transactional producer,
read_committed and read_uncommitted consumers, and Kafka's own
DumpLogSegments reading the segment files; DumpLogSegments also reads the
`.txnindex` of aborted transactions."""

import re
import shutil
import subprocess
import time
import uuid

from confluent_kafka import Producer

import compat_util as cu
from test_transactions import read_all, txn_producer, wait_settled

TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "300",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "0",
    "min.compaction.lag.ms": "0",
}
BROKER = {"log.cleaner.backoff.ms": "200", "log.cleaner.min.compaction.lag.ms": "0"}
BATCH_LINE = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*isControl: (true|false)")


def dump_batches(b, topic, tmp):
    """(base offset, record count, control) of every batch in the
    partition's segment files, as Kafka's DumpLogSegments reads them (from
    copies: the cleaner swaps segments often here); None if a segment went
    away while being copied."""
    from conftest import kafka_classpath

    for old in tmp.glob("*.log"):
        old.unlink()
    try:
        for f in b.partition_dir(topic, 0).glob("*.log"):
            shutil.copy(f, tmp / f.name)
    except FileNotFoundError:
        return None
    files = sorted(str(p) for p in tmp.glob("*.log"))
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", kafka_classpath(),
           "kafka.tools.DumpLogSegments", "--files", ",".join(files)]
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    batches = []
    for line in r.stdout.decode().splitlines():
        m = BATCH_LINE.search(line)
        if m:
            batches.append((int(m[1]), int(m[3]), m[4] == "true"))
    return sorted(batches)


def test_cleaner_removes_aborted_data_and_markers(broker_factory, tmp_path):
    b = broker_factory({**cu.GROUP_BROKER_OVERRIDES, **BROKER})
    bs = b.bootstrap
    topic = "txn-compact-" + uuid.uuid4().hex[:8]
    cu.create_group_topic(bs, topic, 1, TOPIC_CONFIG)
    p = txn_producer(bs, "compact-" + uuid.uuid4().hex[:8])
    for records, commit in [([("k", "a1")], True), ([("k", "a2"), ("j", "x")], False), ([("k", "a3")], True)]:
        p.begin_transaction()
        for k, v in records:
            p.produce(topic, key=k, value=v, partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    wait_settled(bs, topic, partitions=1)
    plain = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    plain.produce(topic, key="k", value="a4", partition=0)
    # Offsets: 0 a1, 1 commit, 2-3 aborted, 4 abort, 5 a3, 6 commit, 7 a4.
    deadline = time.monotonic() + 120
    i = 0
    while True:
        # Appends let segments roll (segment.ms) and keep the log dirty.
        plain.produce(topic, key=f"filler-{i % 3}", value=str(i), partition=0)
        assert plain.flush(30) == 0
        i += 1
        batches = dump_batches(b, topic, tmp_path) or []
        controls = [(o, n) for o, n, control in batches if control]
        txn_data = [(o, n) for o, n, control in batches if not control and o <= 6]
        if controls == [(6, 1)] and txn_data == [(5, 0)]:
            break
        assert time.monotonic() < deadline, batches
        time.sleep(1)
    # Only the last transaction's marker and its producer's last batch, emptied.
    for isolation in ["read_committed", "read_uncommitted"]:
        got, _ = read_all(bs, topic, isolation, partitions=1)
        assert "a1" not in got[0] and "x" not in got[0] and "a2" not in got[0], (isolation, got)
        assert got[0][0] == "a4", (isolation, got)


def test_dump_log_segments_reads_the_transaction_index(broker_factory, tmp_path):
    """Kafka's DumpLogSegments reads a `.txnindex` as Kafka writes it: one
    entry per aborted transaction, with its first offset, marker offset and
    the last stable offset at its end."""
    from conftest import kafka_classpath

    b = broker_factory({})
    bs = b.bootstrap
    topic = "txn-index-" + uuid.uuid4().hex[:8]
    cu.create_group_topic(bs, topic, 1)
    p = txn_producer(bs, "index-" + uuid.uuid4().hex[:8])
    for values, commit in [(["a"], True), (["b", "c"], False), (["d"], True), (["e"], False)]:
        p.begin_transaction()
        for v in values:
            p.produce(topic, value=v, partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    wait_settled(bs, topic, partitions=1)
    # Offsets: 0 a, 1 commit, 2-3 aborted, 4 abort, 5 d, 6 commit, 7 e, 8 abort.
    index = b.partition_dir(topic, 0) / "00000000000000000000.txnindex"
    deadline = time.monotonic() + 30
    while not index.exists() or index.stat().st_size < 2 * 34:
        assert time.monotonic() < deadline, "no transaction index"
        time.sleep(0.2)
    copy = tmp_path / index.name
    shutil.copy(index, copy)
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", kafka_classpath(),
           "kafka.tools.DumpLogSegments", "--files", str(copy)]
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    entries = re.findall(r"version: (\d+) producerId: (\d+) firstOffset: (\d+) lastOffset: (\d+) lastStableOffset: (\d+)",
                         r.stdout.decode())
    assert [tuple(int(x) for x in e[2:]) for e in entries] == [(2, 4, 5), (7, 8, 9)], r.stdout.decode()
    assert all(e[0] == "0" for e in entries)
