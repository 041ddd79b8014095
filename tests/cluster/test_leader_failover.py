"""kill -9 of a partition leader: the controller elects new leaders from the
ISR and clients produce and consume through them; the broker re-registers
when it comes back."""

import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition

import cluster_util as cl

SESSION_TIMEOUT_MS = 6000
MARGIN_S = 10.0
TOPIC = "leader-failover"
PARTITIONS = 3


def _expected_after_death(before, assignment, dead):
    """Kafka's offline election: the first replica in assignment order that
    is alive and in the ISR; the dead broker leaves every ISR."""
    want = {}
    for p, state in before.items():
        isr = [r for r in state["isr"] if r != dead]
        leader = state["leader"]
        if leader == dead:
            leader = next(r for r in assignment[p] if r != dead and r in state["isr"])
        want[p] = (leader, sorted(isr))
    return want


def _kill_a_leader(cluster, topic):
    """Kills a non-controller broker that leads a partition of `topic` and
    waits until ZooKeeper and every survivor's Metadata show the new
    leaders. Returns (victim, survivors, state before, expected)."""
    controller = cluster.controller_id()
    before = {p: cluster.partition_state(topic, p) for p in range(PARTITIONS)}
    assignment = cluster.assignment(topic)
    victim_id = next(s["leader"] for s in before.values() if s["leader"] != controller)
    victim = cluster.broker(victim_id)
    want = _expected_after_death(before, assignment, victim_id)
    t0 = time.monotonic()
    victim.kill9()
    survivors = [b for b in cluster.live()]

    def settled():
        view = cluster.agreed_metadata(survivors)
        if view is None or victim_id in view["brokers"]:
            return None
        got = {p: (v[0], v[2]) for p, v in view["topics"][topic]["partitions"].items()}
        return view if got == want else None

    view = cluster.wait_for(settled, SESSION_TIMEOUT_MS / 1000 + MARGIN_S,
                            f"new leaders {want} after killing broker {victim_id}")
    elapsed = time.monotonic() - t0
    assert cluster.registered_ids() == sorted(b.broker_id for b in survivors)
    for p in range(PARTITIONS):
        state = cluster.partition_state(topic, p)
        assert (state["leader"], sorted(state["isr"])) == want[p], f"ZooKeeper p{p}: {state}"
        assert state["leader_epoch"] == before[p]["leader_epoch"] + 1, f"p{p}: {before[p]} -> {state}"
        assert state["controller_epoch"] == cluster.controller_epoch()
        assert view["topics"][topic]["partitions"][p][3] == [victim_id], "offline replicas"
    return victim, survivors, before, want, elapsed


def _produce_consume(cluster, topic, tag, count=20):
    """acks=1 records to every partition through the current leaders, read
    back from the offsets the leaders acknowledged."""
    acked = {}
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())

    prod = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": 1, "linger.ms": 5})
    for i in range(count):
        prod.produce(topic, value=f"{tag}-{i}".encode(), partition=i % PARTITIONS, on_delivery=report)
    assert prod.flush(60) == 0 and not errors, errors
    assert len(acked) == count

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap(), group_id=None, enable_auto_commit=False,
                             consumer_timeout_ms=1000)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            offsets = [o for v, (p, o) in acked.items() if p == tp.partition]
            consumer.seek(tp, min(offsets))
        got = {}
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=500).values():
                for r in recs:
                    if r.value in acked:
                        got[r.value] = (r.partition, r.offset)
    finally:
        consumer.close()
    assert got == acked, f"read back {len(got)} of {count}: missing {sorted(set(acked) - set(got))[:5]}"


def test_leader_failover(cluster):
    cluster.start(3, {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS})
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    cluster.wait_converged(topics=[TOPIC])
    victim, survivors, before, want, elapsed = _kill_a_leader(cluster, TOPIC)
    _produce_consume(cluster, TOPIC, "after-kill")

    assert not cluster.zk_exists(f"/brokers/ids/{victim.broker_id}")
    victim.start()
    _, reg = cluster.zk_get(f"/brokers/ids/{victim.broker_id}")
    assert reg.ephemeralOwner not in {cluster.zk_get(f"/brokers/ids/{b.broker_id}")[1].ephemeralOwner
                                      for b in survivors}
    view = cluster.wait_converged(topics=[TOPIC])
    assert sorted(view["brokers"]) == sorted(b.broker_id for b in cluster.all_brokers)
    for p, (leader, replicas, isr, offline) in view["topics"][TOPIC]["partitions"].items():
        assert offline == [], f"p{p}: offline {offline} after the broker returned"
    print(f"leaders moved off broker {victim.broker_id} in {elapsed:.2f}s: {want}")


@pytest.mark.needs_replication
def test_preferred_election_after_return(cluster):
    cluster.start(3, {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                      # the election below is the command's, not the timer's
                      "auto.leader.rebalance.enable": "false"})
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    cluster.wait_converged(topics=[TOPIC])
    _produce_consume(cluster, TOPIC, "before-kill")
    victim, survivors, before, want, _ = _kill_a_leader(cluster, TOPIC)
    _produce_consume(cluster, TOPIC, "after-kill")
    victim.start()
    assignment = cluster.assignment(TOPIC)

    # Replication brings the returned broker back into every ISR.
    def rejoined():
        states = {p: cluster.partition_state(TOPIC, p) for p in range(PARTITIONS)}
        return states if all(victim.broker_id in s["isr"] for s in states.values()) else None

    states = cluster.wait_for(rejoined, 60, f"broker {victim.broker_id} back in every ISR")
    moved = [p for p, s in states.items() if s["leader"] != assignment[p][0]]
    assert moved, f"no partition away from its preferred leader: {states}"

    res = cl.kafka_tool("org.apache.kafka.tools.LeaderElectionCommand", "--bootstrap-server",
                        cluster.bootstrap(), "--election-type", "preferred", "--all-topic-partitions")
    out = res.stdout
    print(f"LeaderElectionCommand: {out.strip()}")
    assert "Successfully completed leader election (PREFERRED) for partitions" in out, out
    for p in moved:
        assert f"{TOPIC}-{p}" in out, out

    def preferred():
        view = cluster.agreed_metadata()
        if view is None:
            return None
        parts = view["topics"][TOPIC]["partitions"]
        return view if all(parts[p][0] == assignment[p][0] for p in range(PARTITIONS)) else None

    cluster.wait_for(preferred, 30, "every partition led by its preferred replica in every broker's Metadata")
    for p in range(PARTITIONS):
        state = cluster.partition_state(TOPIC, p)
        assert state["leader"] == assignment[p][0], f"ZooKeeper p{p}: {state}"
    _produce_consume(cluster, TOPIC, "after-election")
