"""kafka-python (pure Python client): every codec x acks mode, 100k records,
assign + seek_to_beginning, offsets_for_times, restart and read again."""

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

import compat_util as cu

PARTITIONS = 3
TOTAL_RECORDS = 100_000
ACKS_MODES = {
    "a0": {"acks": 0},
    "a1": {"acks": 1},
    "aall": {"acks": "all"},
    "aidem": {"acks": "all", "enable_idempotence": True},
}
CODECS = {"none": None, "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}
COMBOS = [(c, a) for c in CODECS for a in ACKS_MODES]
PER_COMBO = TOTAL_RECORDS // len(COMBOS)
TS_BASE = int(time.time() * 1000) - 7_200_000


def tag_of(codec, mode):
    return f"kp-{codec}-{mode}"


def produce(bootstrap, tag, count, codec, settings):
    kwargs = dict(settings)
    kwargs.setdefault("enable_idempotence", False)
    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=CODECS[codec],
        linger_ms=5,
        batch_size=64 * 1024,
        request_timeout_ms=30000,
        **kwargs,
    )
    futs = []
    for i in range(count):
        futs.append(
            p.send(
                tag,
                key=cu.rec_key(tag, i),
                value=cu.rec_value(tag, i),
                headers=cu.rec_headers(tag, i),
                partition=i % PARTITIONS,
                timestamp_ms=TS_BASE + i,
            )
        )
    p.flush(60)
    acked = {i: f.get(60).offset for i, f in enumerate(futs)}
    p.close(10)
    return acked


def new_consumer(bootstrap):
    # No group_id: no coordinator, no commits, partitions assigned by hand.
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        max_poll_records=5000,
        request_timeout_ms=30000,
    )


def consume_all(bootstrap, topic, timeout_s=90):
    c = new_consumer(bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        ends = c.end_offsets(tps)
        out = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + timeout_s
        while any(c.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"{topic}: timed out"
            for tp, msgs in c.poll(timeout_ms=1000).items():
                for m in msgs:
                    assert m.timestamp_type == 0, "CreateTime expected"
                    out[tp.partition].append((m.offset, m.key, m.value, list(m.headers), m.timestamp))
        return out
    finally:
        c.close()


def verify_topic(bootstrap, tag, acked):
    got = consume_all(bootstrap, tag)
    for p in range(PARTITIONS):
        cu.verify_partition_records(
            got[p], tag, list(range(p, PER_COMBO, PARTITIONS)), ts_base=TS_BASE, acked=acked
        )


@pytest.fixture(scope="module")
def produced(broker):
    names = [tag_of(c, a) for c, a in COMBOS]
    adm = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    adm.create_topics([NewTopic(n, PARTITIONS, 1) for n in names], timeout_ms=30000)
    adm.close()
    cu.wait_topics_ready(broker.bootstrap, names, PARTITIONS)
    out = {}
    for codec, mode in COMBOS:
        tag = tag_of(codec, mode)
        acked = produce(broker.bootstrap, tag, PER_COMBO, codec, ACKS_MODES[mode])
        out[tag] = None if mode == "a0" else acked
    return out


@pytest.mark.parametrize("codec,mode", COMBOS)
def test_roundtrip(broker, produced, codec, mode):
    tag = tag_of(codec, mode)
    acked = produced[tag]
    if acked is not None:
        for p in range(PARTITIONS):
            offs = sorted(acked[i] for i in range(p, PER_COMBO, PARTITIONS))
            assert offs == list(range(len(offs)))
    verify_topic(broker.bootstrap, tag, acked)


def test_offsets_for_times_and_bounds(broker, produced):
    tag = tag_of("snappy", "aall")
    c = new_consumer(broker.bootstrap)
    try:
        tps = [TopicPartition(tag, p) for p in range(PARTITIONS)]
        counts = {tp: len(range(tp.partition, PER_COMBO, PARTITIONS)) for tp in tps}
        assert c.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert c.end_offsets(tps) == counts
        for ts in [0, TS_BASE, TS_BASE + 2, TS_BASE + 777, TS_BASE + PER_COMBO - 1]:
            res = c.offsets_for_times({tp: ts for tp in tps})
            for tp in tps:
                idxs = list(range(tp.partition, PER_COMBO, PARTITIONS))
                want = next((o for o, i in enumerate(idxs) if TS_BASE + i >= ts), None)
                if want is None:
                    assert res[tp] is None
                else:
                    assert (res[tp].offset, res[tp].timestamp) == (want, TS_BASE + idxs[want]), (ts, tp)
        res = c.offsets_for_times({tps[0]: TS_BASE + 10 * PER_COMBO})
        assert res[tps[0]] is None, "no record at or after a future timestamp"
    finally:
        c.close()


def test_restart_then_read_everything_again(broker, produced):
    broker.restart()
    for codec, mode in COMBOS:
        tag = tag_of(codec, mode)
        verify_topic(broker.bootstrap, tag, produced[tag])
