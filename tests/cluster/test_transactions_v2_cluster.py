"""Transaction version 2 on a 3-broker cluster: the Produce v12 goes to a
partition leader that is not the transaction coordinator, which adds the
partition to the transaction over the network (AddPartitionsToTxn v4
without verify_only); the stale EndTxn and Produce of an ended
transaction are fenced there as on one broker (test_transactions_v2.py)."""

import time
import uuid

import pytest

import cluster_util as cl
import group_raw as gr
from test_transactions_raw import find_txn_coordinator, init_producer_id
from test_transactions_v2 import (
    INVALID_PRODUCER_EPOCH,
    NONE,
    PRODUCER_FENCED,
    batch,
    end_txn_v5,
    produce_v12,
    until_settled,
)

# The cluster suite runs Kafka 3.9.1 in ZooKeeper mode, which has no
# transaction version 2 (Kafka 4 dropped ZooKeeper); the single-broker
# scenario is proven against Kafka 4.1.1 (test_transactions_v2.py).
pytestmark = pytest.mark.skipif(cl.TARGET == "kafka", reason="Kafka 3.9 (ZooKeeper mode) has no transaction version 2")

TOPIC = "txn-v2-cluster"
PARTITIONS = 3
TXN_STATE = "__transaction_state"
TXN_STATE_PARTITIONS = 3
BROKER = {
    "transaction.state.log.num.partitions": TXN_STATE_PARTITIONS,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "offsets.topic.replication.factor": 3,
    "auto.leader.rebalance.enable": "false",
}


@pytest.mark.needs_replication
def test_partitions_added_by_leaders_on_other_brokers(cluster):
    cluster.start(3, BROKER)
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    cluster.wait_converged(topics=[TOPIC])
    coordinator_conn = gr.Conn(cluster.bootstrap().split(",")[0])
    deadline = time.monotonic() + 60
    while find_txn_coordinator(coordinator_conn, "probe") != 0:
        assert time.monotonic() < deadline, "no transaction coordinator"
        time.sleep(0.2)
    coordinator_conn.close()
    txn_id = "tv2-cluster-" + uuid.uuid4().hex[:8]
    coordinator = cluster.partition_state(TXN_STATE, cl.offsets_partition(txn_id, TXN_STATE_PARTITIONS))["leader"]
    partition, leader = next(
        (p, cluster.partition_state(TOPIC, p)["leader"]) for p in range(PARTITIONS)
        if cluster.partition_state(TOPIC, p)["leader"] != coordinator
    )
    to_coordinator = gr.Conn(cluster.broker(coordinator).bootstrap)
    to_leader = gr.Conn(cluster.broker(leader).bootstrap)
    try:
        _, pid, e = until_settled(lambda: init_producer_id(to_coordinator, txn_id), 60)
        produce = lambda epoch, seq, value: until_settled(  # noqa: E731
            lambda: produce_v12(to_leader, txn_id, TOPIC, batch(pid, epoch, seq, value), partition))
        assert produce(e, 0, "a1") == NONE
        assert until_settled(lambda: end_txn_v5(to_coordinator, txn_id, pid, e, True)) == (NONE, pid, e + 1)
        assert produce(e + 1, 0, "b1") == NONE
        assert end_txn_v5(to_coordinator, txn_id, pid, e, False) == (PRODUCER_FENCED, -1, -1)
        assert produce(e, 1, "a2") == INVALID_PRODUCER_EPOCH
        assert produce(e + 1, 1, "b2") == NONE
        assert until_settled(lambda: end_txn_v5(to_coordinator, txn_id, pid, e + 1, True)) == (NONE, pid, e + 2)
    finally:
        to_coordinator.close()
        to_leader.close()

    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "tv2-rc",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + 60
        while True:
            end = c.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=30, cached=False)[1]
            # a1, its marker, b1, b2, their marker: the LSO at the end.
            if end == 5:
                break
            assert time.monotonic() < deadline, end
            time.sleep(0.2)
        c.assign([TopicPartition(TOPIC, partition, 0)])
        got = []
        while len(got) < 3 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value().decode())
        assert got == ["a1", "b1", "b2"]
    finally:
        c.close()
