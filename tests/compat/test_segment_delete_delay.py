"""`file.delete.delay.ms`: a segment that retention deletes leaves the log at
once (the log start offset moves past it), its files are renamed
`<name>.deleted` in the partition directory and unlinked only after the
delay, as Kafka's asynchronous segment delete does. Readers holding the old
files keep working meanwhile, and the page cache is freed later. The
segments the log cleaner replaces go the same way.
"""

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

import compat_util as cu

TOPIC = "delayed-delete"
DELAY_S = 4.0
TOPIC_CONFIG = {
    "segment.bytes": "2048",
    "retention.bytes": "2048",
    "file.delete.delay.ms": str(int(DELAY_S * 1000)),
}
BROKER = {"log.retention.check.interval.ms": "500"}


def deleted_names(d):
    return {p.name for p in d.iterdir() if p.name.endswith(".deleted")}


def test_retention_renames_segments_and_unlinks_them_after_the_delay(broker_factory):
    b = broker_factory(BROKER)
    cu.create_group_topic(b.bootstrap, TOPIC, 1, TOPIC_CONFIG)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(60):
        # One batch each: several segments of about seven batches.
        p.produce(TOPIC, value=f"{i:04d}".encode() + b"x" * 200, partition=0)
        assert p.flush(30) == 0
    d = b.partition_dir(TOPIC, 0)

    doomed = cu.wait_for(lambda: deleted_names(d), ".deleted segment files", 60)
    seen_at = time.monotonic()
    assert any(n.endswith(".log.deleted") for n in doomed), doomed
    assert any(n.endswith(".index.deleted") for n in doomed), doomed
    for name in doomed:
        assert not (d / name[: -len(".deleted")]).exists(), f"{name} kept its own name too"

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "delete-delay"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
    finally:
        c.close()
    assert high == 60 and low > 0, (low, high)

    # Still there for most of the delay (first seen at most one poll late).
    time.sleep(DELAY_S / 2)
    assert doomed <= deleted_names(d), f"unlinked early: {doomed - deleted_names(d)}"
    cu.wait_for(lambda: not (doomed & deleted_names(d)), "the delayed unlink", DELAY_S + 30)
    assert time.monotonic() - seen_at >= DELAY_S - 1.0


COMPACTED = "delayed-delete-compacted"
COMPACTED_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "2048",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "file.delete.delay.ms": str(int(DELAY_S * 1000)),
}
# The cleaner settings Kafka needs to clean within seconds.
CLEANER_BROKER = {"log.cleaner.backoff.ms": "500", "log.cleaner.min.compaction.lag.ms": "0"}
KEYS = 4


def read_latest(bootstrap, topic):
    """Every key's last value from offset 0, and the records read."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "delete-delay-reader", "enable.auto.commit": False})
    try:
        tp = TopicPartition(topic, 0)
        _, high = c.get_watermark_offsets(tp, timeout=30)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        latest, read, last = {}, 0, -1
        deadline = time.monotonic() + 60
        while last < high - 1:
            assert time.monotonic() < deadline, f"read stuck at {last}, end {high}"
            for m in c.consume(500, 0.5):
                assert m.error() is None, m.error()
                last = m.offset()
                latest[m.key()] = m.value()
                read += 1
        return latest, read
    finally:
        c.close()


def test_cleaned_segments_are_renamed_and_unlinked_after_the_delay(broker_factory):
    b = broker_factory({**BROKER, **CLEANER_BROKER})
    cu.create_group_topic(b.bootstrap, COMPACTED, 1, COMPACTED_CONFIG)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0})
    want = {}
    for i in range(60):
        # One batch each, the same few keys: several segments to clean.
        k = f"key-{i % KEYS}".encode()
        want[k] = f"{i:04d}".encode() + b"x" * 200
        p.produce(COMPACTED, key=k, value=want[k], partition=0)
        assert p.flush(30) == 0
    d = b.partition_dir(COMPACTED, 0)

    # No retention here (compact only): every .deleted file is the cleaner's.
    doomed = cu.wait_for(lambda: deleted_names(d), ".deleted segment files", 60)
    seen_at = time.monotonic()
    assert any(n.endswith(".log.deleted") for n in doomed), doomed

    latest, read = read_latest(b.bootstrap, COMPACTED)
    assert latest == want
    assert read < 60, f"{read} records read: nothing cleaned"

    time.sleep(DELAY_S / 2)
    assert doomed <= deleted_names(d), f"unlinked early: {doomed - deleted_names(d)}"
    cu.wait_for(lambda: not (doomed & deleted_names(d)), "the delayed unlink", DELAY_S + 30)
    assert time.monotonic() - seen_at >= DELAY_S - 1.0
    assert read_latest(b.bootstrap, COMPACTED)[0] == want
