"""librdkafka through confluent-kafka: every codec x acks mode, 100k records,
manual assignment, ListOffsets by timestamp, restart and read again."""

import time

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

import compat_util as cu

PARTITIONS = 3
TOTAL_RECORDS = 100_000
# acks mode name -> producer settings; idempotence only makes sense with acks=all.
ACKS_MODES = {
    "a0": {"acks": "0", "enable.idempotence": False},
    "a1": {"acks": "1", "enable.idempotence": False},
    "aall": {"acks": "all", "enable.idempotence": False},
    "aidem": {"acks": "all", "enable.idempotence": True},
}
COMBOS = [(c, a) for c in cu.CODECS for a in ACKS_MODES]
PER_COMBO = TOTAL_RECORDS // len(COMBOS)
TS_BASE = int(time.time() * 1000) - 3_600_000


def tag_of(codec, acks):
    return f"ck-{codec}-{acks}"


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topics(bootstrap, names, partitions=PARTITIONS):
    a = admin(bootstrap)  # keep the handle alive until the futures resolve
    futs = a.create_topics(
        [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names],
        operation_timeout=30,
    )
    for name, f in futs.items():
        f.result(60)
    cu.wait_topics_ready(bootstrap, names, partitions)


def produce(bootstrap, tag, count, codec, settings, partitions=PARTITIONS):
    """Produce records 0..count-1 to topic `tag`; returns {i: offset}."""
    acked = {}
    errors = []

    def on_delivery(i):
        def cb(err, msg):
            if err is not None:
                errors.append((i, err))
            else:
                off = msg.offset()  # None for acks=0: no offset is returned
                acked[i] = -1 if off is None or off < 0 else off

        return cb

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "linger.ms": 5,
            "message.timeout.ms": 60000,
            **settings,
        }
    )
    for i in range(count):
        while True:
            try:
                p.produce(
                    tag,
                    key=cu.rec_key(tag, i),
                    value=cu.rec_value(tag, i),
                    headers=cu.rec_headers(tag, i),
                    partition=i % partitions,
                    timestamp=TS_BASE + i,
                    on_delivery=on_delivery(i),
                )
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0, "producer did not drain"
    assert not errors, f"{tag}: delivery errors {errors[:5]}"
    assert len(acked) == count
    return acked


def consume_all(bootstrap, topic, partitions=PARTITIONS, timeout_s=60):
    """Read every partition from the beginning to its high watermark by
    manual assignment; returns {partition: [(off, key, value, headers, ts)]}."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "compat-unused",  # never subscribes, never commits
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
        }
    )
    try:
        tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
        highs = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
        c.assign(tps)
        out = {p: [] for p in range(partitions)}
        done = {p for p in range(partitions) if highs[p] == 0}
        deadline = time.monotonic() + timeout_s
        while len(done) < partitions:
            assert time.monotonic() < deadline, f"{topic}: timed out, have { {p: len(v) for p, v in out.items()} }"
            for m in c.consume(1000, timeout=1.0):
                if m.error():
                    if m.error().code() == -191:  # _PARTITION_EOF
                        if m.offset() >= highs[m.partition()]:
                            done.add(m.partition())
                        continue
                    raise KafkaException(m.error())
                ts_type, ts = m.timestamp()
                assert ts_type == 1, f"timestamp type {ts_type}"  # CreateTime
                out[m.partition()].append((m.offset(), m.key(), m.value(), m.headers() or [], ts))
        return out
    finally:
        c.close()


def verify_topic(bootstrap, tag, count, acked=None, partitions=PARTITIONS):
    got = consume_all(bootstrap, tag, partitions)
    for p in range(partitions):
        cu.verify_partition_records(
            got[p], tag, list(range(p, count, partitions)), ts_base=TS_BASE, acked=acked
        )


@pytest.fixture(scope="module")
def produced(broker):
    names = [tag_of(c, a) for c, a in COMBOS]
    create_topics(broker.bootstrap, names)
    acks = {}
    for codec, mode in COMBOS:
        tag = tag_of(codec, mode)
        acks[tag] = produce(broker.bootstrap, tag, PER_COMBO, codec, ACKS_MODES[mode])
    return acks


def test_metadata_lists_created_topics(broker, produced):
    md = admin(broker.bootstrap).list_topics(timeout=30)
    assert len(md.brokers) == 1
    for codec, mode in COMBOS:
        t = md.topics[tag_of(codec, mode)]
        assert t.error is None
        assert sorted(t.partitions) == list(range(PARTITIONS))
        for p in t.partitions.values():
            assert p.leader in md.brokers


@pytest.mark.parametrize("codec,mode", COMBOS)
def test_roundtrip(broker, produced, codec, mode):
    tag = tag_of(codec, mode)
    acked = produced[tag]
    if mode == "a0":
        # acks=0: the broker sends no response, so reported offsets mean nothing.
        acked = None
    else:
        # Each partition's acked offsets are exactly 0..n-1.
        for p in range(PARTITIONS):
            offs = sorted(acked[i] for i in range(p, PER_COMBO, PARTITIONS))
            assert offs == list(range(len(offs)))
    verify_topic(broker.bootstrap, tag, PER_COMBO, acked)


def expected_offset_for_ts(p, ts, count=PER_COMBO):
    """Offset of the first record in partition p with timestamp >= ts."""
    idxs = list(range(p, count, PARTITIONS))
    for off, i in enumerate(idxs):
        if TS_BASE + i >= ts:
            return off
    return -1


def test_offsets_for_times(broker, produced):
    tag = tag_of("zstd", "aall")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "compat-unused", "enable.auto.commit": False})
    try:
        for ts in [0, TS_BASE, TS_BASE + 1, TS_BASE + 1000, TS_BASE + 4321, TS_BASE + PER_COMBO - 1]:
            res = c.offsets_for_times([TopicPartition(tag, p, ts) for p in range(PARTITIONS)], timeout=30)
            for tp in res:
                assert tp.error is None
                assert tp.offset == expected_offset_for_ts(tp.partition, ts), (ts, tp)
        # Past the last timestamp: no such offset, reported as -1 (OFFSET_END).
        res = c.offsets_for_times([TopicPartition(tag, 0, TS_BASE + 10 * PER_COMBO)], timeout=30)
        assert res[0].offset == -1
        lo, hi = c.get_watermark_offsets(TopicPartition(tag, 1), timeout=30)
        assert (lo, hi) == (0, len(range(1, PER_COMBO, PARTITIONS)))
    finally:
        c.close()


def test_admin_list_offsets(broker, produced):
    tag = tag_of("lz4", "aidem")
    a = admin(broker.bootstrap)
    n = {p: len(range(p, PER_COMBO, PARTITIONS)) for p in range(PARTITIONS)}

    def query(spec):
        futs = a.list_offsets({TopicPartition(tag, p): spec for p in range(PARTITIONS)}, request_timeout=30)
        return {tp.partition: f.result(30) for tp, f in futs.items()}

    for p, r in query(OffsetSpec.earliest()).items():
        assert r.offset == 0
    for p, r in query(OffsetSpec.latest()).items():
        assert r.offset == n[p]
    for p, r in query(OffsetSpec.max_timestamp()).items():
        last_i = max(range(p, PER_COMBO, PARTITIONS))
        assert (r.offset, r.timestamp) == (n[p] - 1, TS_BASE + last_i)
    ts = TS_BASE + 3000
    for p, r in query(OffsetSpec.for_timestamp(ts)).items():
        off = expected_offset_for_ts(p, ts)
        assert r.offset == off
        assert r.timestamp == TS_BASE + list(range(p, PER_COMBO, PARTITIONS))[off]


def test_restart_then_read_everything_again(broker, produced):
    broker.restart()
    for codec, mode in COMBOS:
        tag = tag_of(codec, mode)
        verify_topic(broker.bootstrap, tag, PER_COMBO, None if mode == "a0" else produced[tag])
    # And the broker still takes writes after the restart.
    tag = tag_of("gzip", "aidem")
    c = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True})
    got = []
    c.produce(tag, key=b"after-restart", value=b"v", partition=0, on_delivery=lambda e, m: got.append((e, m.offset())))
    assert c.flush(30) == 0
    assert got == [(None, len(range(0, PER_COMBO, PARTITIONS)))]
