"""Transaction APIs with bad input, on the wire (v1 requests, as a 2.x
producer sends them): Kafka's error codes, and nothing written."""

import subprocess
import time
import uuid

import pytest

import compat_util as cu
import group_raw as gr
from compat_util import i8, i16, i32, i64, string

INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
UNKNOWN_TOPIC_OR_PARTITION = 3
OPERATION_NOT_ATTEMPTED = 55
INVALID_REQUEST = 42
COORDINATOR_LOAD_IN_PROGRESS = 14
NOT_COORDINATOR = 16


def find_group_coordinator(conn, group):
    """FindCoordinator v1 for a group: error code."""
    r = conn.call(10, 1, string(group) + i8(0))
    r.i32()
    return r.i16()


def find_txn_coordinator(conn, txn_id):
    """FindCoordinator v1 for a transactional id: error code."""
    r = conn.call(10, 1, string(txn_id) + i8(1))
    r.i32()
    return r.i16()


def init_producer_id(conn, txn_id, timeout_ms=60000):
    """InitProducerId v1: (error, producer id, epoch)."""
    r = conn.call(22, 1, string(txn_id) + i32(timeout_ms))
    r.i32()
    return r.i16(), r.i64(), r.i16()


def end_txn(conn, txn_id, producer_id, epoch, commit):
    r = conn.call(26, 1, string(txn_id) + i64(producer_id) + i16(epoch) + i8(1 if commit else 0))
    r.i32()
    return r.i16()


def add_partitions(conn, txn_id, producer_id, epoch, topics):
    """AddPartitionsToTxn v1: {(topic, partition): error}."""
    body = string(txn_id) + i64(producer_id) + i16(epoch) + i32(len(topics))
    for name, parts in topics.items():
        body += string(name) + i32(len(parts)) + b"".join(i32(p) for p in parts)
    r = conn.call(24, 1, body)
    r.i32()
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            p = r.i32()
            out[(name, p)] = r.i16()
    return out


@pytest.fixture(scope="module")
def tconn(broker):
    conn = gr.Conn(broker.bootstrap)
    deadline = time.monotonic() + 60
    while find_txn_coordinator(conn, "probe") != 0:
        assert time.monotonic() < deadline, "no transaction coordinator"
        time.sleep(0.2)
    yield conn
    conn.close()


def ready_id(conn, prefix):
    """A transactional id with a producer id and epoch (retried while its
    partition of __transaction_state loads)."""
    txn_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
    deadline = time.monotonic() + 60
    while True:
        err, pid, epoch = init_producer_id(conn, txn_id)
        if err == 0:
            return txn_id, pid, epoch
        assert time.monotonic() < deadline, f"InitProducerId: error {err}"
        time.sleep(0.2)


def test_end_txn_for_an_unknown_transactional_id(tconn):
    txn_id = "never-initialized-" + uuid.uuid4().hex
    # Retried while the id's partition of __transaction_state loads.
    deadline = time.monotonic() + 60
    while (err := end_txn(tconn, txn_id, 4242, 0, True)) in (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR):
        assert time.monotonic() < deadline, f"EndTxn: error {err}"
        time.sleep(0.2)
    assert err == INVALID_PRODUCER_ID_MAPPING


def test_end_txn_without_a_transaction(tconn):
    txn_id, pid, epoch = ready_id(tconn, "empty")
    # Empty: nothing to commit or abort.
    assert end_txn(tconn, txn_id, pid, epoch, True) == INVALID_TXN_STATE
    assert end_txn(tconn, txn_id, pid, epoch, False) == INVALID_TXN_STATE
    # Another producer id for the same transactional id.
    assert end_txn(tconn, txn_id, pid + 1, epoch, True) == INVALID_PRODUCER_ID_MAPPING


def test_stale_epoch_is_fenced(broker, tconn):
    topic = "txn-raw-" + uuid.uuid4().hex[:8]
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    cu.wait_topics_ready(broker.bootstrap, [topic], 2, 30)
    txn_id, pid, epoch = ready_id(tconn, "stale")
    err, pid2, epoch2 = init_producer_id(tconn, txn_id)
    assert err == 0 and pid2 == pid and epoch2 == epoch + 1
    # v1 predates PRODUCER_FENCED: the old epoch gets INVALID_PRODUCER_EPOCH.
    got = add_partitions(tconn, txn_id, pid, epoch, {topic: [0]})
    assert got == {(topic, 0): INVALID_PRODUCER_EPOCH}
    assert end_txn(tconn, txn_id, pid, epoch, True) == INVALID_PRODUCER_EPOCH
    # An unknown partition fails the request: the others are not attempted.
    got = add_partitions(tconn, txn_id, pid2, epoch2, {topic: [0, 1, 7]})
    assert got == {(topic, 0): OPERATION_NOT_ATTEMPTED, (topic, 1): OPERATION_NOT_ATTEMPTED,
                   (topic, 7): UNKNOWN_TOPIC_OR_PARTITION}
    # So nothing was added: ending the (still Empty) transaction is invalid.
    assert end_txn(tconn, txn_id, pid2, epoch2, True) == INVALID_TXN_STATE
    # The current epoch adds them and commits.
    assert add_partitions(tconn, txn_id, pid2, epoch2, {topic: [0, 1]}) == {(topic, 0): 0, (topic, 1): 0}
    assert end_txn(tconn, txn_id, pid2, epoch2, True) == 0


def test_transaction_timeout_above_the_maximum(tconn):
    # transaction.max.timeout.ms defaults to 900000.
    err, pid, epoch = init_producer_id(tconn, "too-long-" + uuid.uuid4().hex[:8], timeout_ms=900_001)
    assert (err, pid, epoch) == (INVALID_TRANSACTION_TIMEOUT, -1, -1)


# kafka-transactions.sh (Kafka 3.9.1's TransactionsCommand) on a hanging
# transaction: a transactional batch written without AddPartitionsToTxn,
# which brokers accept with transaction.partition.verification.enable=false
# (the coordinator never learns of it, so only an operator can end it).
TXN_TOOL = "org.apache.kafka.tools.TransactionsCommand"


def txn_tool(b, *args):
    from conftest import kafka_classpath

    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", kafka_classpath(),
           TXN_TOOL, "--bootstrap-server", b.bootstrap, *args]
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    assert r.returncode == 0, f"{args} rc={r.returncode}\n{r.stdout.decode()}\n{r.stderr.decode()[-3000:]}"
    return [line.split() for line in r.stdout.decode().splitlines() if line.strip()]


def read_committed_end(bs, topic):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": "e-" + uuid.uuid4().hex, "isolation.level": "read_committed"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30, cached=False)[1]
    finally:
        c.close()


def test_transactions_tool_ends_a_hanging_transaction(broker_factory):
    from confluent_kafka.admin import AdminClient, NewTopic

    b = broker_factory({"transaction.partition.verification.enable": "false"})
    bs = b.bootstrap
    topic = "hanging-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    cu.wait_topics_ready(bs, [topic], 1, 30)
    conn = gr.Conn(bs)
    try:
        deadline = time.monotonic() + 60
        while find_txn_coordinator(conn, "probe") != 0:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        txn_id, pid, epoch = ready_id(conn, "hanging")
        recs = [(b"k", b"never-ended", [])]
        plain = cu.record_batch(recs, 1_700_000_000_000)
        batch = cu.record_batch(recs, 1_700_000_000_000, attributes=0x10, producer_id=pid,
                                producer_epoch=epoch, base_sequence=0)
        for corr, (b_, tid) in enumerate([(plain, None), (batch, txn_id), (plain, None)], start=1):
            conn.sock.sendall(cu.produce_v3(corr, topic, 0, b_, transactional_id=tid))
            _, res = cu.parse_produce_v3_response(cu.recv_frame(conn.sock))
            assert res[(topic, 0)][0] == 0, res
    finally:
        conn.close()
    # Offset 1 opens a transaction nothing will end: read_committed stops there.
    assert read_committed_end(bs, topic) == 1
    rows = txn_tool(b, "describe-producers", "--topic", topic, "--partition", "0")
    header, *producers = rows
    assert header[:2] == ["ProducerId", "ProducerEpoch"], rows
    mine = [r for r in producers if r[0] == str(pid)]
    assert len(mine) == 1 and mine[0][-1] == "1", rows
    rows = txn_tool(b, "list")
    assert any(r[0] == txn_id and r[-1] == "Empty" for r in rows[1:]), rows
    rows = txn_tool(b, "describe", "--transactional-id", txn_id)
    described = dict(zip(rows[0], rows[1]))
    assert described["TransactionalId"] == txn_id and described["TransactionState"] == "Empty", rows
    # Open on the partition with no transaction at the coordinator, and open
    # longer than the (zero) timeout given: hanging.
    rows = txn_tool(b, "find-hanging", "--topic", topic, "--partition", "0", "--max-transaction-timeout", "0")
    hanging = [r for r in rows[1:] if r[:3] == [topic, "0", str(pid)]]
    assert len(hanging) == 1 and hanging[0][5] == "1", rows
    txn_tool(b, "abort", "--topic", topic, "--partition", "0", "--start-offset", "1")
    # The abort marker (offset 3) ends it: the LSO reaches the high watermark.
    deadline = time.monotonic() + 30
    while read_committed_end(bs, topic) != 4:
        assert time.monotonic() < deadline, read_committed_end(bs, topic)
        time.sleep(0.2)


def test_transactional_batch_without_add_partitions_is_refused(broker, tconn):
    """Partition verification (KIP-890 part 1, on by default in Kafka 3.9):
    a transactional batch for a partition the producer never added to its
    transaction is refused with INVALID_TXN_STATE, and nothing is stored."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "unverified-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    cu.wait_topics_ready(broker.bootstrap, [topic], 1, 30)
    txn_id, pid, epoch = ready_id(tconn, "unverified")
    recs = [(b"k", b"v", [])]
    plain = cu.record_batch(recs, 1_700_000_000_000)
    batch = cu.record_batch(recs, 1_700_000_000_000, attributes=0x10, producer_id=pid,
                            producer_epoch=epoch, base_sequence=0)
    conn = gr.Conn(broker.bootstrap)
    try:
        got = []
        for corr, (b_, tid) in enumerate([(plain, None), (batch, txn_id), (plain, None)], start=1):
            conn.sock.sendall(cu.produce_v3(corr, topic, 0, b_, transactional_id=tid))
            _, res = cu.parse_produce_v3_response(cu.recv_frame(conn.sock))
            got.append(res[(topic, 0)])
    finally:
        conn.close()
    assert got == [(0, 0), (INVALID_TXN_STATE, -1), (0, 1)], got
    # Once added, the same batch is taken and its transaction commits.
    assert add_partitions(tconn, txn_id, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
    conn = gr.Conn(broker.bootstrap)
    try:
        conn.sock.sendall(cu.produce_v3(9, topic, 0, batch, transactional_id=txn_id))
        _, res = cu.parse_produce_v3_response(cu.recv_frame(conn.sock))
    finally:
        conn.close()
    assert res[(topic, 0)] == (0, 2), res
    assert end_txn(tconn, txn_id, pid, epoch, True) == 0


def txn_offset_commit_v2(conn, txn_id, group, pid, epoch, topic, offset):
    """TxnOffsetCommit v2 of partition 0: its error."""
    body = (string(txn_id) + string(group) + i64(pid) + i16(epoch) + i32(1) + string(topic)
            + i32(1) + i32(0) + i64(offset) + i32(-1) + i16(-1))
    r = tconn_call(conn, 28, 2, body)
    r.i32()  # throttle
    assert r.i32() == 1 and r.string() == topic
    assert r.i32() == 1 and r.i32() == 0
    return r.i16()


def add_offsets_v1(conn, txn_id, pid, epoch, group):
    r = conn.call(25, 1, string(txn_id) + i64(pid) + i16(epoch) + string(group))
    r.i32()
    return r.i16()


def tconn_call(conn, key, version, body):
    return conn.call(key, version, body)


def committed_offset(bs, group, topic):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        c.close()


def test_txn_offset_commit_for_an_unknown_group(broker, tconn):
    """A group nobody joined: its transactional offsets are taken (the group
    is made, as Kafka's GroupCoordinator does) once the offsets partition
    is in the transaction (verified, KIP-890 part 1: INVALID_TXN_STATE
    before AddOffsetsToTxn), and show after the commit."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "txn-offsets-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    cu.wait_topics_ready(broker.bootstrap, [topic], 1, 30)
    group = "never-joined-" + uuid.uuid4().hex[:8]
    deadline = time.monotonic() + 60
    while find_group_coordinator(tconn, group) != 0:  # makes __consumer_offsets
        assert time.monotonic() < deadline
        time.sleep(0.2)
    txn_id, pid, epoch = ready_id(tconn, "offsets")
    # Without AddOffsetsToTxn, verification finds the partition outside the
    # transaction.
    deadline = time.monotonic() + 60
    while (err := txn_offset_commit_v2(tconn, txn_id, group, pid, epoch, topic, 5)) in (
            COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, 15):
        assert time.monotonic() < deadline, err
        time.sleep(0.2)
    assert err == INVALID_TXN_STATE
    assert add_offsets_v1(tconn, txn_id, pid, epoch, group) == 0
    assert txn_offset_commit_v2(tconn, txn_id, group, pid, epoch - 1, topic, 7) == INVALID_PRODUCER_EPOCH
    assert txn_offset_commit_v2(tconn, txn_id, group, pid, epoch, topic, 7) == 0
    assert end_txn(tconn, txn_id, pid, epoch, True) == 0
    deadline = time.monotonic() + 30
    while committed_offset(broker.bootstrap, group, topic) != 7:
        assert time.monotonic() < deadline
        time.sleep(0.2)
