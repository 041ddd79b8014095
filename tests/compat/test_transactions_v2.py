"""Transaction version 2 (KIP-890 part 2, Kafka 4.0's default) on the
wire: the broker finalizes the `transaction.version` feature at level 2,
a producer's Produce v12 adds its partition (no AddPartitionsToTxn),
EndTxn v5 bumps the epoch and answers it, and the delayed requests behind
Jepsen's 2024 finding (lost writes, aborted reads: a stale EndTxn or
Produce of an ended transaction landing in the next one, as under version
1 where every transaction of a producer has the same epoch) are fenced.

Kafka 3.9.1 does not finalize version 2: against Kafka, these tests run
with KSHARD_KAFKA_VERSION=4.1.1 (KRaft, whose default is version 2)."""

import os
import time
import uuid

import pytest

import compat_util as cu
import group_raw as gr
from compat_util import compact_string, i8, i16, i32, i64, uvarint
from test_transactions import read_all, wait_settled
from test_transactions_raw import find_txn_coordinator, ready_id

TARGET = os.environ.get("KSHARD_TEST_TARGET", "kshard")
KAFKA_VERSION = os.environ.get("KSHARD_KAFKA_VERSION", "3.9.1")
pytestmark = pytest.mark.skipif(
    TARGET == "kafka" and KAFKA_VERSION.startswith("3."),
    reason="transaction version 2 needs Kafka 4.0+ (KSHARD_KAFKA_VERSION=4.1.1)",
)

NONE = 0
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
CONCURRENT_TRANSACTIONS = 51
PRODUCER_FENCED = 90
RETRIABLE = (CONCURRENT_TRANSACTIONS, 14, 15, 16)  # + coordinator loading/not available/not coordinator


def api_versions_features(conn):
    """ApiVersions v3: ({api key: max version}, finalized features epoch,
    {feature: (min level, max level)})."""
    body = compact_string("compat-raw") + compact_string("1.0") + uvarint(0)
    # A flexible request, but the response header stays v0.
    r = conn.recv(conn.send(18, 3, body, flexible=True))
    assert r.i16() == 0
    maxima = {}
    for _ in range(r.uvarint() - 1):
        key, _, hi = r.i16(), r.i16(), r.i16()
        maxima[key] = hi
        r.skip_tags()
    r.i32()  # throttle
    epoch, finalized = -1, {}
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        field = cu.Reader(r.take(size))
        if tag == 1:
            epoch = field.i64()
        elif tag == 2:
            for _ in range(field.uvarint() - 1):
                name = field.compact_string()
                hi, lo = field.i16(), field.i16()
                field.skip_tags()
                finalized[name] = (lo, hi)
    return maxima, epoch, finalized


def produce_v12(conn, txn_id, topic, batch, partition=0):
    """Produce v12 of one batch: its error."""
    body = (
        compact_string(txn_id) + i16(-1) + i32(10000)
        + uvarint(2) + compact_string(topic)
        + uvarint(2) + i32(partition) + uvarint(len(batch) + 1) + batch + uvarint(0)
        + uvarint(0) + uvarint(0)
    )
    r = conn.call(0, 12, body, flexible=True)
    assert r.uvarint() == 2 and r.compact_string() == topic
    assert r.uvarint() == 2 and r.i32() == partition
    return r.i16()


def end_txn_v5(conn, txn_id, pid, epoch, commit):
    """EndTxn v5: (error, producer id, producer epoch)."""
    body = compact_string(txn_id) + i64(pid) + i16(epoch) + i8(1 if commit else 0) + uvarint(0)
    r = conn.call(26, 5, body, flexible=True)
    r.i32()  # throttle
    return r.i16(), r.i64(), r.i16()


def txn_offset_commit_v5(conn, txn_id, group, pid, epoch, topic, offset):
    """TxnOffsetCommit v5 of one partition, without a group generation."""
    body = (
        compact_string(txn_id) + compact_string(group) + i64(pid) + i16(epoch)
        + i32(-1) + compact_string("") + uvarint(0)
        + uvarint(2) + compact_string(topic)
        + uvarint(2) + i32(0) + i64(offset) + i32(-1) + uvarint(0) + uvarint(0)
        + uvarint(0) + uvarint(0)
    )
    r = conn.call(28, 5, body, flexible=True)
    r.i32()  # throttle
    assert r.uvarint() == 2 and r.compact_string() == topic
    assert r.uvarint() == 2 and r.i32() == 0
    return r.i16()


def find_group_coordinator(conn, group, timeout_s=60):
    """FindCoordinator v1 for a group until it answers (Kafka creates
    __consumer_offsets on the first)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = conn.call(10, 1, cu.string(group) + i8(0))
        r.i32()
        if r.i16() == 0:
            return
        assert time.monotonic() < deadline, "no group coordinator"
        time.sleep(0.2)


def until_settled(call, timeout_s=30):
    """Repeats `call` while it answers a retriable error, as a client does."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = call()
        err = got[0] if isinstance(got, tuple) else got
        if err not in RETRIABLE:
            return got
        assert time.monotonic() < deadline, got
        time.sleep(0.05)


def batch(pid, epoch, seq, value):
    return cu.record_batch([(b"k", value.encode(), [])], int(time.time() * 1000), attributes=0x10,
                           producer_id=pid, producer_epoch=epoch, base_sequence=seq)


@pytest.fixture
def ready(broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "tv2-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    cu.wait_topics_ready(broker.bootstrap, [topic], 1, 30)
    conn = gr.Conn(broker.bootstrap)
    deadline = time.monotonic() + 60
    while find_txn_coordinator(conn, "probe") != 0:
        assert time.monotonic() < deadline, "no transaction coordinator"
        time.sleep(0.2)
    yield conn, topic
    conn.close()


def test_transaction_version_2_is_finalized(broker):
    conn = gr.Conn(broker.bootstrap)
    try:
        maxima, epoch, finalized = api_versions_features(conn)
    finally:
        conn.close()
    assert epoch >= 0
    assert finalized.get("transaction.version", (0, 0))[1] >= 2, finalized
    # What a version-2 producer needs: Produce 12, EndTxn 5, TxnOffsetCommit 5.
    assert maxima[0] >= 12 and maxima[26] >= 5 and maxima[28] >= 5, maxima


def test_stale_end_and_produce_of_an_ended_transaction_are_fenced(broker, ready):
    conn, topic = ready
    txn_id, pid, e = ready_id(conn, "tv2")
    # T1: a Produce v12 adds the partition; no AddPartitionsToTxn.
    assert until_settled(lambda: produce_v12(conn, txn_id, topic, batch(pid, e, 0, "a1"))) == NONE
    assert end_txn_v5(conn, txn_id, pid, e, True) == (NONE, pid, e + 1)
    # The same EndTxn again (a client's retry): the new epoch, nothing else.
    assert until_settled(lambda: end_txn_v5(conn, txn_id, pid, e, True)) == (NONE, pid, e + 1)
    assert until_settled(lambda: end_txn_v5(conn, txn_id, pid, e, False))[0] == INVALID_TXN_STATE
    # T2 at the bumped epoch, sequences from 0.
    assert until_settled(lambda: produce_v12(conn, txn_id, topic, batch(pid, e + 1, 0, "b1"))) == NONE
    # Jepsen's delayed messages of T1, arriving during T2: a stale abort or
    # commit would end T2 under version 1; a stale batch would join it.
    assert end_txn_v5(conn, txn_id, pid, e, False) == (PRODUCER_FENCED, -1, -1)
    assert end_txn_v5(conn, txn_id, pid, e, True) == (PRODUCER_FENCED, -1, -1)
    assert produce_v12(conn, txn_id, topic, batch(pid, e, 1, "a2")) == INVALID_PRODUCER_EPOCH
    group = "tv2-group-" + uuid.uuid4().hex[:6]
    find_group_coordinator(conn, group)
    stale = until_settled(lambda: txn_offset_commit_v5(conn, txn_id, group, pid, e, topic, 1))
    assert stale == INVALID_PRODUCER_EPOCH
    # T2 goes on and commits whole.
    assert produce_v12(conn, txn_id, topic, batch(pid, e + 1, 1, "b2")) == NONE
    assert until_settled(lambda: txn_offset_commit_v5(conn, txn_id, group, pid, e + 1, topic, 2)) == NONE
    assert end_txn_v5(conn, txn_id, pid, e + 1, True) == (NONE, pid, e + 2)
    wait_settled(broker.bootstrap, topic, partitions=1)
    for isolation in ["read_committed", "read_uncommitted"]:
        got, _ = read_all(broker.bootstrap, topic, isolation, partitions=1)
        assert got[0] == ["a1", "b1", "b2"], (isolation, got)


def test_an_abort_with_nothing_sent_bumps_the_epoch(broker, ready):
    conn, topic = ready
    txn_id, pid, e = ready_id(conn, "tv2-empty")
    assert end_txn_v5(conn, txn_id, pid, e, True)[0] == INVALID_TXN_STATE
    assert until_settled(lambda: end_txn_v5(conn, txn_id, pid, e, False)) == (NONE, pid, e + 1)
    # Its retry, and a transaction at the new epoch.
    assert until_settled(lambda: end_txn_v5(conn, txn_id, pid, e, False)) == (NONE, pid, e + 1)
    assert until_settled(lambda: produce_v12(conn, txn_id, topic, batch(pid, e + 1, 0, "c1"))) == NONE
    assert end_txn_v5(conn, txn_id, pid, e + 1, False) == (NONE, pid, e + 2)
    wait_settled(broker.bootstrap, topic, partitions=1)
    got, _ = read_all(broker.bootstrap, topic, "read_committed", partitions=1)
    assert got[0] == [], got
