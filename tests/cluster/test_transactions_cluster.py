"""Transactions on a 3-broker cluster (librdkafka's transactional producer,
read_committed consumers): markers written by the leaders of partitions
spread over every broker, including brokers other than the coordinator
(WriteTxnMarkers over the network), then kill -9 of the transaction
coordinator's broker and, separately, of a partition leader, each in the
middle of a transaction, in a loop.

Checked at the end, through a read_committed consumer: every transaction
whose commit was acknowledged is visible exactly once, no aborted record is
visible, no transaction is torn (all of its records or none), and the last
stable offset of every partition reaches the high watermark (no transaction
is left open once the coordinator is back)."""

import os
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

import cluster_util as cl

SESSION_TIMEOUT_MS = 6000
TOPIC = "txn-cluster"
PARTITIONS = 6
TXN_STATE_PARTITIONS = 3
RECORDS_PER_TXN = 12
BROKER = {
    "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
    "transaction.state.log.num.partitions": TXN_STATE_PARTITIONS,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "offsets.topic.replication.factor": 3,
    "auto.leader.rebalance.enable": "false",
}
TXN_STATE = "__transaction_state"


def run_txn(p, tag, commit):
    """One transaction of RECORDS_PER_TXN records over every partition:
    'committed', 'aborted' (the client aborted it), or 'unknown'."""
    p.begin_transaction()
    for i in range(RECORDS_PER_TXN):
        p.produce(TOPIC, value=f"{tag}-{i}", partition=i % PARTITIONS)
    p.flush(60)
    return end_txn(p, commit)


def end_txn(p, commit):
    deadline = time.monotonic() + 120
    while True:
        try:
            if commit:
                p.commit_transaction(60)
                return "committed"
            p.abort_transaction(60)
            return "aborted"
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                p.abort_transaction(60)
                return "aborted"
            if not err.retriable() or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def read_committed(bootstrap):
    """Values under read_committed, and per partition (LSO, high watermark)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc-" + uuid.uuid4().hex,
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    u = Consumer({"bootstrap.servers": bootstrap, "group.id": "ru-" + uuid.uuid4().hex,
                  "isolation.level": "read_uncommitted"})
    try:
        ends = {}
        for part in range(PARTITIONS):
            lso = c.get_watermark_offsets(TopicPartition(TOPIC, part), timeout=30, cached=False)[1]
            hw = u.get_watermark_offsets(TopicPartition(TOPIC, part), timeout=30, cached=False)[1]
            ends[part] = (lso, hw)
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        got = []
        done = set()
        deadline = time.monotonic() + 60
        while len(done) < PARTITIONS and time.monotonic() < deadline:
            for part in range(PARTITIONS):
                if c.position([TopicPartition(TOPIC, part)])[0].offset >= ends[part][0]:
                    done.add(part)
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value().decode())
        return got, ends
    finally:
        c.close()
        u.close()


def coordinator_of(cluster, txn_id):
    partition = cl.offsets_partition(txn_id, TXN_STATE_PARTITIONS)
    return cluster.partition_state(TXN_STATE, partition)["leader"]


@pytest.mark.needs_replication
def test_transactions_through_coordinator_and_leader_kills(cluster):
    cluster.start(3, BROKER)
    cluster.create_topic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    cluster.wait_converged(topics=[TOPIC])
    txn_id = "cluster-txn"
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": txn_id, "linger.ms": 5})
    p.init_transactions(120)
    outcomes = {"t0": run_txn(p, "t0", True), "t1": run_txn(p, "t1", False), "t2": run_txn(p, "t2", True)}
    assert outcomes == {"t0": "committed", "t1": "aborted", "t2": "committed"}
    leaders = {cluster.partition_state(TOPIC, part)["leader"] for part in range(PARTITIONS)}
    assert len(leaders) == 3, f"partitions led by {leaders}: markers must reach every broker"
    # CI runs 4 kills; a soak sets KSHARD_TXN_KILL_ROUNDS higher.
    rounds = int(os.environ.get("KSHARD_TXN_KILL_ROUNDS", "4"))
    kinds = ["coordinator", "leader"] * (rounds // 2) + ["coordinator"] * (rounds % 2)
    for round_no, kind in enumerate(kinds):
        tag = f"k{round_no}"
        coordinator = coordinator_of(cluster, txn_id)
        if kind == "coordinator":
            victim_id = coordinator
        else:
            victim_id = next(cluster.partition_state(TOPIC, part)["leader"] for part in range(PARTITIONS)
                             if cluster.partition_state(TOPIC, part)["leader"] != coordinator)
        p.begin_transaction()
        for i in range(RECORDS_PER_TXN):
            p.produce(TOPIC, value=f"{tag}-{i}", partition=i % PARTITIONS)
        p.flush(60)
        victim = cluster.broker(victim_id)
        victim.kill9()
        outcomes[tag] = end_txn(p, commit=True)
        victim.start()
        cluster.wait_converged(topics=[TOPIC])
        # The producer goes on with the next transaction at once.
        outcomes[f"{tag}-after"] = run_txn(p, f"{tag}-after", True)
    assert all(o in ("committed", "aborted") for o in outcomes.values()), outcomes
    assert sum(o == "committed" for o in outcomes.values()) >= 2 + rounds, outcomes

    def settled():
        got, ends = read_committed(cluster.bootstrap())
        return (got, ends) if all(lso == hw for lso, hw in ends.values()) else None

    got, ends = cluster.wait_for(settled, 60, "the LSO of every partition to reach its high watermark")
    assert len(got) == len(set(got)), "a record was read twice"
    for tag, outcome in outcomes.items():
        mine = {v for v in got if v.rsplit("-", 1)[0] == tag}
        if outcome == "committed":
            assert len(mine) == RECORDS_PER_TXN, f"{tag} committed, read {len(mine)}"
        else:
            assert not mine, f"{tag} aborted, read {sorted(mine)}"
    print(f"outcomes {outcomes}; ends {ends}")
