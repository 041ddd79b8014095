"""Transactions with real clients: librdkafka (confluent-kafka) and Kafka's
Java client 3.9 and 4.x. Commit and abort visibility under read_committed
and read_uncommitted, the last stable offset holding read_committed
consumers (Fetch and ListOffsets) while a transaction is open, fencing by a
second producer with the same transactional id, the coordinator's abort of
a transaction past its timeout, consume-transform-produce with the group's
offsets sent to the transaction (TxnOffsetCommit), and all of it after a
kill -9 and restart. franz-go's TestTxnEtl (test_franz_go.py) adds an
exactly-once ETL through group rebalances."""

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

import compat_util as cu
from test_java_client import VERSIONS, client

# The coordinator looks for timed-out transactions this often (Kafka's
# default is 10 s); the timeout test sets transaction.timeout.ms 1500.
OVERRIDES = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}


@pytest.fixture(scope="module")
def tbroker(broker_module_factory):
    return broker_module_factory(OVERRIDES)


def create_topic(bs, partitions=3):
    from confluent_kafka.admin import AdminClient, NewTopic

    name = "txn-" + uuid.uuid4().hex[:10]
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    cu.wait_topics_ready(bs, [name], partitions, 30)
    return name


def txn_producer(bs, txn_id, **extra):
    conf = {"bootstrap.servers": bs, "transactional.id": txn_id, "linger.ms": 5}
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(60)
    return p


def read_all(bs, topic, isolation, partitions=3, timeout_s=30):
    """Every record below the end (the LSO for read_committed), by partition."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "r-" + uuid.uuid4().hex, "isolation.level": isolation,
                  "enable.auto.commit": False})
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in range(partitions)}
        c.assign(tps)
        got = {p: [] for p in range(partitions)}
        pos = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + timeout_s
        while any(pos[p] < ends[p] for p in pos) and time.monotonic() < deadline:
            for p in range(partitions):
                pos[p] = c.position([TopicPartition(topic, p)])[0].offset
                if pos[p] < 0:
                    pos[p] = 0
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            got[m.partition()].append(m.value().decode())
        return got, ends
    finally:
        c.close()


def wait_settled(bs, topic, partitions=3, timeout_s=30):
    """Until no transaction is open on `topic` (the LSO is the high
    watermark): a commit is answered before its markers are written."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "w-" + uuid.uuid4().hex,
                  "isolation.level": "read_committed"})
    u = Consumer({"bootstrap.servers": bs, "group.id": "w-" + uuid.uuid4().hex})
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            lso = [c.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in tps]
            hw = [u.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in tps]
            if lso == hw:
                return
            assert time.monotonic() < deadline, (lso, hw)
            time.sleep(0.2)
    finally:
        c.close()
        u.close()


def values(got):
    return sorted(v for vs in got.values() for v in vs)


def test_commit_and_abort_visibility(tbroker):
    bs = tbroker.bootstrap
    topic = create_topic(bs)
    p = txn_producer(bs, "vis-" + topic)
    for tag, n, commit in (("c", 10, True), ("a", 5, False), ("d", 3, True)):
        p.begin_transaction()
        for i in range(n):
            p.produce(topic, key=str(i), value=f"{tag}{i}", partition=i % 3)
        p.flush()
        if commit:
            p.commit_transaction(60)
        else:
            p.abort_transaction(60)
    wait_settled(bs, topic)
    committed, ends_rc = read_all(bs, topic, "read_committed")
    everything, ends_ru = read_all(bs, topic, "read_uncommitted")
    assert values(committed) == sorted([f"c{i}" for i in range(10)] + [f"d{i}" for i in range(3)])
    assert values(everything) == sorted([f"c{i}" for i in range(10)] + [f"a{i}" for i in range(5)]
                                        + [f"d{i}" for i in range(3)])
    # 18 records and a marker per partition per transaction; nothing is
    # open, so the LSO is the high watermark.
    assert sum(ends_ru.values()) == 18 + 3 * 3
    assert ends_rc == ends_ru
    # Within a partition, committed records keep their order.
    assert committed[0] == ["c0", "c3", "c6", "c9", "d0"]


def test_open_transaction_holds_the_last_stable_offset(tbroker):
    bs = tbroker.bootstrap
    topic = create_topic(bs, partitions=1)
    plain = Producer({"bootstrap.servers": bs})
    plain.produce(topic, value="before", partition=0)
    plain.flush(30)
    p = txn_producer(bs, "lso-" + topic)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=f"t{i}", partition=0)
    p.flush()
    # Records after the open transaction do not pass the LSO either.
    plain.produce(topic, value="after", partition=0)
    plain.flush(30)
    got_rc, end_rc = read_all(bs, topic, "read_committed", partitions=1, timeout_s=5)
    got_ru, end_ru = read_all(bs, topic, "read_uncommitted", partitions=1)
    assert end_rc[0] == 1 and got_rc[0] == ["before"]
    assert end_ru[0] == 6 and got_ru[0] == ["before", "t0", "t1", "t2", "t3", "after"]
    p.commit_transaction(60)
    deadline = time.monotonic() + 30
    while True:
        got_rc, end_rc = read_all(bs, topic, "read_committed", partitions=1)
        if end_rc[0] == 7 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert end_rc[0] == 7
    assert got_rc[0] == ["before", "t0", "t1", "t2", "t3", "after"]


def test_second_producer_fences_the_first(tbroker):
    bs = tbroker.bootstrap
    topic = create_topic(bs, partitions=1)
    txn_id = "fence-" + topic
    first = txn_producer(bs, txn_id)
    first.begin_transaction()
    first.produce(topic, value="zombie", partition=0)
    first.flush()
    # The new instance aborts the open transaction and bumps the epoch.
    second = txn_producer(bs, txn_id)
    with pytest.raises(KafkaException) as err:
        first.commit_transaction(30)
    assert err.value.args[0].fatal() or "fenced" in str(err.value).lower(), err.value
    second.begin_transaction()
    second.produce(topic, value="live", partition=0)
    second.commit_transaction(60)
    wait_settled(bs, topic, partitions=1)
    got, _ = read_all(bs, topic, "read_committed", partitions=1)
    assert got[0] == ["live"]


def test_coordinator_aborts_a_transaction_past_its_timeout(tbroker):
    bs = tbroker.bootstrap
    topic = create_topic(bs, partitions=1)
    p = txn_producer(bs, "timeout-" + topic, **{"transaction.timeout.ms": 1500})
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"late{i}", partition=0)
    p.flush()
    # The coordinator aborts it: the LSO moves past the abort marker and
    # read_committed consumers see nothing of it.
    deadline = time.monotonic() + 30
    while True:
        got, end = read_all(bs, topic, "read_committed", partitions=1, timeout_s=5)
        if end[0] == 4 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert end[0] == 4 and got[0] == []
    with pytest.raises(KafkaException):
        p.commit_transaction(30)


def test_offsets_sent_to_the_transaction_commit_with_it(tbroker):
    """Consume-transform-produce: the group's offsets commit with the
    transaction and are dropped with an abort."""
    bs = tbroker.bootstrap
    src = create_topic(bs, partitions=1)
    dst = create_topic(bs, partitions=1)
    group = "ctp-" + src
    plain = Producer({"bootstrap.servers": bs})
    for i in range(20):
        plain.produce(src, value=f"v{i}", partition=0)
    plain.flush(30)
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe([src])
    p = txn_producer(bs, "ctp-" + src)
    try:
        for round_no, commit in ((0, True), (1, False)):
            batch = []
            deadline = time.monotonic() + 30
            while len(batch) < 10 and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    batch.append(m)
            assert len(batch) == 10, f"round {round_no}: {len(batch)} records"
            p.begin_transaction()
            for m in batch:
                p.produce(dst, value="x-" + m.value().decode(), partition=0)
            p.send_offsets_to_transaction([TopicPartition(src, 0, batch[-1].offset() + 1)],
                                          c.consumer_group_metadata(), 30)
            if commit:
                p.commit_transaction(60)
            else:
                p.abort_transaction(60)
        committed = c.committed([TopicPartition(src, 0)], timeout=30)[0].offset
    finally:
        c.close()
    assert committed == 10
    wait_settled(bs, dst, partitions=1)
    got, _ = read_all(bs, dst, "read_committed", partitions=1)
    assert got[0] == [f"x-v{i}" for i in range(10)]


def test_pipelined_transactional_produce(tbroker):
    """Many small batches in flight at once in one transaction: with
    partition verification each must still land in order (no
    OutOfOrderSequence), all visible once committed."""
    bs = tbroker.bootstrap
    topic = create_topic(bs, partitions=2)
    p = txn_producer(bs, "pipe-" + topic, **{"linger.ms": 0, "batch.size": 2000,
                                              "max.in.flight.requests.per.connection": 5})
    errors = []
    p.begin_transaction()
    for i in range(4000):
        p.produce(topic, value=f"p{i}".encode() * 20, partition=i % 2,
                  on_delivery=lambda err, _m: err is not None and errors.append(err))
        p.poll(0)
    assert p.flush(60) == 0 and not errors, errors[:3]
    p.commit_transaction(60)
    # The markers follow the commit's answer: the LSO moves a moment later.
    deadline = time.monotonic() + 30
    while True:
        got, _ = read_all(bs, topic, "read_committed", partitions=2)
        if sum(len(v) for v in got.values()) == 4000 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sum(len(v) for v in got.values()) == 4000


@pytest.mark.parametrize("version", VERSIONS)
def test_java_consume_transform_produce_with_aborts_and_fencing(tbroker, version):
    bs = tbroker.bootstrap
    src = create_topic(bs, partitions=3)
    dst = create_topic(bs, partitions=3)
    plain = Producer({"bootstrap.servers": bs})
    count = 60
    for i in range(count):
        plain.produce(src, key=str(i), value=f"in{i}", partition=i % 3)
    plain.flush(30)
    [r] = client(version, "txn-etl", "--bootstrap", bs, "--in", src, "--out", dst, "--group", "etl-" + src,
                 "--txn-id", "etl-" + src, "--count", str(count), "--abort-every", "3")
    assert r["aborted_txns"] >= 1 and r["committed_txns"] >= 1, r
    assert r["fenced"] == "ProducerFencedException", r
    # Exactly once: each input once in the committed output; the aborted
    # copies and the zombie's record only under read_uncommitted.
    assert sorted(r["read_committed"]) == sorted(f"x-in{i}" for i in range(count))
    assert len(r["read_uncommitted"]) > count
    assert "zombie" in r["read_uncommitted"] and "zombie" not in r["read_committed"]
    # A 4.x client runs transaction version 2 where the broker finalizes it
    # (kshard, Kafka 4): every end bumps the epoch. Kafka 3.9 keeps version 1.
    from conftest import KAFKA_VERSION, TARGET
    from test_transactions_raw import txn_tool

    rows = txn_tool(tbroker, "describe", "--transactional-id", "etl-" + src)
    epoch = int(dict(zip(rows[0], rows[1]))["ProducerEpoch"])
    v2 = not version.startswith("3.") and not (TARGET == "kafka" and KAFKA_VERSION.startswith("3."))
    ends = r["aborted_txns"] + r["committed_txns"]
    assert (epoch >= ends) if v2 else (epoch < ends), (version, epoch, r)


def test_transactions_survive_kill9_and_restart(tbroker):
    """Runs last: an aborted transaction stays hidden after a crash (the
    transaction index and producer state are recovered), and a transaction
    open across the crash commits afterwards (the coordinator reloads it)."""
    bs = tbroker.bootstrap
    topic = create_topic(bs, partitions=1)
    p = txn_producer(bs, "crash-" + topic)
    p.begin_transaction()
    p.produce(topic, value="gone", partition=0)
    p.flush()
    p.abort_transaction(60)
    p.begin_transaction()
    p.produce(topic, value="kept", partition=0)
    p.flush()
    tbroker.kill9()
    tbroker.start()
    got, end = read_all(bs, topic, "read_committed", partitions=1, timeout_s=5)
    assert got[0] == [] and end[0] == 2, (got, end)
    p.commit_transaction(120)
    # The marker follows the commit's answer: the LSO moves a moment later.
    deadline = time.monotonic() + 30
    while True:
        got, end = read_all(bs, topic, "read_committed", partitions=1)
        if end[0] == 4 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert got[0] == ["kept"] and end[0] == 4, (got, end)
