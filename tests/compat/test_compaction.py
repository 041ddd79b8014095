"""Log compaction: 100k updates over 1k keys (one partition uncompressed,
one gzip) in a cleanup.policy=compact topic with small segments; a reader
from the start sees every key's latest value in far fewer records, and
tombstoned keys vanish after delete.retention.ms once more segments roll."""

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

import compat_util as cu

TOPIC = "compacted"
KEYS = 1000
UPDATES = 100_000
PARTITIONS = 2  # key k lives in partition k % 2
TOMBSTONED = range(0, 100)
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "65536",
    "segment.ms": "2000",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
    "min.compaction.lag.ms": "0",
}
# The cleaner settings Kafka needs to clean within seconds.
BROKER = {"log.cleaner.backoff.ms": "500", "log.cleaner.min.compaction.lag.ms": "0"}
DEADLINE_S = 120


def key(k):
    return f"key-{k:04d}".encode()


class Updater:
    """Writes value "v<seq>-<k>" for key k; remembers every key's latest."""

    def __init__(self, bootstrap):
        base = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
        # Partition 0 from an uncompressed producer, partition 1 from gzip:
        # the cleaner must rewrite both kinds of batch.
        self.producers = [Producer(base), Producer({**base, "compression.type": "gzip"})]
        self.latest = {}
        self.seq = 0

    def put(self, k, value):
        self.producers[k % PARTITIONS].produce(TOPIC, key=key(k), value=value, partition=k % PARTITIONS)
        self.latest[k] = value
        if self.seq % 1000 == 0:
            for p in self.producers:
                p.poll(0)

    def update(self, keys):
        for k in keys:
            self.seq += 1
            self.put(k, f"v{self.seq:07d}-{k}".encode() + b"x" * (k % 40))

    def flush(self):
        for p in self.producers:
            assert p.flush(60) == 0


def read_all(bootstrap):
    """A full read from offset 0 of both partitions: (records read, the
    last value seen per key, None for a tombstone)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-reader", "enable.auto.commit": False})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)}
        c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS) if ends[p] > 0])
        last = {p: -1 for p in range(PARTITIONS)}
        latest = {}
        n = 0
        deadline = time.monotonic() + 60
        while any(last[p] < ends[p] - 1 for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, f"read stuck at {last}, ends {ends}"
            for m in c.consume(5000, 0.5):
                assert m.error() is None, m.error()
                assert m.offset() > last[m.partition()], "offsets must increase"
                last[m.partition()] = m.offset()
                k = int(m.key().decode().split("-")[1])
                assert k % PARTITIONS == m.partition()
                latest[k] = m.value()
                n += 1
        return n, latest
    finally:
        c.close()


def test_compaction_keeps_latest_and_drops_tombstones(broker_factory):
    b = broker_factory({**cu.GROUP_BROKER_OVERRIDES, **BROKER})
    cu.create_group_topic(b.bootstrap, TOPIC, PARTITIONS, TOPIC_CONFIG)
    u = Updater(b.bootstrap)
    t0 = time.monotonic()
    for start in range(0, UPDATES, KEYS):
        u.update(range(KEYS))
    u.flush()
    want = dict(u.latest)

    # 1. Compaction: every key's latest value, from far fewer records.
    n = None
    while time.monotonic() - t0 < DEADLINE_S:
        u.update([KEYS - 1])  # an append lets the active segment roll (segment.ms)
        u.flush()
        want = dict(u.latest)
        n, latest = read_all(b.bootstrap)
        assert set(latest) == set(range(KEYS))
        wrong = [k for k in range(KEYS) if latest[k] != want[k]]
        assert not wrong, f"keys without their latest value: {wrong[:10]}"
        if n < 20_000:
            break
        time.sleep(2)
    compacted_s = time.monotonic() - t0
    assert n is not None and n < 20_000, f"still {n} records after {DEADLINE_S}s: no cleaning"

    # 2. Tombstones: gone after delete.retention.ms once their segments are
    # cleaned again (more updates to other keys make those segments dirty).
    for k in TOMBSTONED:
        u.put(k, None)
    u.flush()
    t1 = time.monotonic()
    others = range(len(TOMBSTONED), KEYS)
    while True:
        u.update(others)
        u.flush()
        n, latest = read_all(b.bootstrap)
        for k in others:
            assert latest[k] == u.latest[k], f"key {k} lost its latest value"
        resurrected = [k for k in TOMBSTONED if latest.get(k) is not None]
        assert not resurrected, f"deleted keys came back: {resurrected[:10]}"
        present = [k for k in TOMBSTONED if k in latest]
        if not present:
            break
        assert time.monotonic() - t1 < DEADLINE_S, f"tombstones of {len(present)} keys still there"
        time.sleep(2)
    print(f"compacted to {n} records in {compacted_s:.1f}s; tombstones gone after {time.monotonic() - t1:.1f}s")
