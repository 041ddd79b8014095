"""Replication between brokers: acks=all records survive the leader's
death, a stalled follower leaves the ISR and comes back, and acks=all is
refused with NOT_ENOUGH_REPLICAS when the ISR is below min.insync.replicas."""

import time

from confluent_kafka import KafkaError, Producer
from kafka import KafkaConsumer, TopicPartition

SESSION_TIMEOUT_MS = 6000
LAG_MS = 2000
TOPIC = "replicated"


def _produce_acks_all(bootstrap, topic, tag, count, partitions):
    acked = {}
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())

    prod = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5})
    for i in range(count):
        prod.produce(topic, value=f"{tag}-{i}".encode(), partition=i % partitions, on_delivery=report)
    assert prod.flush(60) == 0 and not errors, errors
    return acked


def _read_all(bootstrap, topic, partitions, expect):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=1000)
    got = {}
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + 60
        while len(got) < expect and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=500).values():
                for r in recs:
                    assert r.value not in got, f"{r.value} read twice"
                    got[r.value] = (r.partition, r.offset)
    finally:
        consumer.close()
    return got


def test_acks_all_survives_leader_kill(cluster):
    cluster.start(3, {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                      "replica.lag.time.max.ms": LAG_MS, "auto.leader.rebalance.enable": "false"})
    cluster.create_topic(TOPIC, 2, 3, {"min.insync.replicas": "2"})
    cluster.wait_converged(topics=[TOPIC])
    acked = _produce_acks_all(cluster.bootstrap(), TOPIC, "before", 400, 2)
    controller = cluster.controller_id()
    leader = next(cluster.partition_state(TOPIC, p)["leader"] for p in range(2)
                  if cluster.partition_state(TOPIC, p)["leader"] != controller)
    cluster.broker(leader).kill9()
    survivors = cluster.live()

    def moved():
        states = [cluster.partition_state(TOPIC, p) for p in range(2)]
        return states if all(s["leader"] not in (leader, -1) for s in states) else None

    cluster.wait_for(moved, SESSION_TIMEOUT_MS / 1000 + 10, "new leaders")
    cluster.wait_converged(brokers=survivors, topics=[TOPIC])
    acked.update(_produce_acks_all(cluster.bootstrap(survivors), TOPIC, "after", 200, 2))
    got = _read_all(cluster.bootstrap(survivors), TOPIC, 2, len(acked))
    missing = sorted(set(acked) - set(got))
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    for value, (p, off) in acked.items():
        assert got[value] == (p, off), f"{value}: acked at {p}/{off}, read at {got[value]}"


def test_follower_lag_leaves_and_rejoins_isr(cluster):
    cluster.start(3, {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                      "replica.lag.time.max.ms": LAG_MS, "auto.leader.rebalance.enable": "false"})
    cluster.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
    cluster.wait_converged(topics=[TOPIC])
    state = cluster.partition_state(TOPIC, 0)
    controller = cluster.controller_id()
    followers = [b for b in state["isr"] if b != state["leader"]]
    # Stall a follower that is not the controller (its session must outlive the stall).
    victim = next(b for b in followers if b != controller)
    cluster.broker(victim).sigstop()
    try:
        cluster.wait_for(lambda: victim not in cluster.partition_state(TOPIC, 0)["isr"] or None,
                         LAG_MS / 1000 * 3 + 5, f"broker {victim} out of the ISR")
        acked = _produce_acks_all(cluster.bootstrap([cluster.broker(state["leader"])]), TOPIC, "two-isr", 50, 1)
        assert len(acked) == 50
    finally:
        cluster.broker(victim).sigcont()
    cluster.wait_for(lambda: victim in cluster.partition_state(TOPIC, 0)["isr"] or None, 30,
                     f"broker {victim} back in the ISR")



def test_not_enough_replicas(cluster):
    """Both followers stalled: the ISR falls to the leader alone, below
    min.insync.replicas=2, and acks=all is refused."""
    from confluent_kafka.admin import NewTopic

    cluster.start(3, {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                      "replica.lag.time.max.ms": LAG_MS, "auto.leader.rebalance.enable": "false"})
    controller = cluster.controller_id()
    others = [b.broker_id for b in cluster.live() if b.broker_id != controller]
    # The controller leads, so stalling the two followers leaves it running.
    admin = cluster.admin(controller)
    futs = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=-1, replica_assignment=[[controller] + others],
                                         config={"min.insync.replicas": "2"})], operation_timeout=30)
    futs[TOPIC].result(60)
    cluster.wait_converged(topics=[TOPIC])
    assert _produce_acks_all(cluster.bootstrap(), TOPIC, "three-isr", 20, 1)
    for b in others:
        cluster.broker(b).sigstop()
    try:
        cluster.wait_for(lambda: cluster.partition_state(TOPIC, 0)["isr"] == [controller] or None,
                         LAG_MS / 1000 * 3 + 5, "ISR down to the leader")
        errors = []
        prod = Producer({"bootstrap.servers": cluster.broker(controller).bootstrap, "acks": "all",
                         "retries": 0, "enable.idempotence": False, "message.timeout.ms": 15000})
        prod.produce(TOPIC, value=b"refused", partition=0, on_delivery=lambda err, msg: errors.append(err))
        prod.flush(20)
        assert errors and errors[0] is not None, f"acks=all with one in-sync replica: {errors}"
        assert errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS, errors[0]
    finally:
        for b in others:
            cluster.broker(b).sigcont()
