"""Replication quotas (Kafka's ReplicationQuotaManager, what
kafka-reassign-partitions --throttle sets) on a 3-broker ZooKeeper cluster.

A follower is stopped while ~5 MB are produced with acks=1; the topic's
leader.replication.throttled.replicas and
follower.replication.throttled.replicas are set to `*` and the cluster
default's leader.replication.throttled.rate and
follower.replication.throttled.rate to 100000 bytes/s, all with Kafka's
kafka-configs tool. The restarted follower then catches up no faster than
the rate allows (its log on disk, measured after ~8 s, holds far less than
what it would have unthrottled), stays out of the ISR, and once the
throttle is removed it catches up and rejoins. The same with the leader
side alone and the follower side alone. Also: Kafka's validation
text for a bad throttled-replicas list.

KSHARD_TEST_TARGET=kafka proves every assertion against Apache Kafka 3.9.1
in ZooKeeper mode.
"""

import os
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

import cluster_util  # noqa: F401  (puts tests/compat on sys.path)
import test_dynamic_config as dc

TOPIC = "throttled"
RATE = 100_000
PAYLOAD = 5 * 1024 * 1024
RECORD = 1024
# Small follower fetches, so progress at the throttled rate is smooth.
FETCH_BYTES = 131072
OVERRIDES = {
    "zookeeper.session.timeout.ms": "6000",
    "auto.leader.rebalance.enable": "false",
    "replica.fetch.max.bytes": str(FETCH_BYTES),
}
# replication.quota.window.num x replication.quota.window.size.seconds.
WINDOW_S = 11
THROTTLED_REPLICAS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
THROTTLED_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LIST_FORMAT = "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


def log_bytes(broker, topic, partition=0):
    """Bytes of the partition's segment files (.log) on the broker's disk
    (the index files are preallocated, so the directory size says little)."""
    d = os.path.join(broker.log_dirs, f"{topic}-{partition}")
    total = 0
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return 0
    for name in names:
        if name.endswith(".log"):
            try:
                total += os.path.getsize(os.path.join(d, name))
            except FileNotFoundError:
                pass
    return total


def produce_acks_1(bootstrap, topic, total_bytes):
    errors = []
    prod = Producer({"bootstrap.servers": bootstrap, "acks": "1", "enable.idempotence": False,
                     "linger.ms": 20, "batch.size": 65536, "compression.type": "none"})
    for _ in range(total_bytes // RECORD):
        while True:
            try:
                prod.produce(topic, value=os.urandom(RECORD), partition=0,
                             on_delivery=lambda err, msg: err is not None and errors.append(err))
                break
            except BufferError:
                prod.poll(0.1)
        prod.poll(0)
    assert prod.flush(60) == 0 and not errors, errors[:3]


def test_bad_throttled_replica_lists_are_refused(cluster):
    cluster.start(1, OVERRIDES)
    cluster.create_topic("throttle-check", 1, 1)
    b = cluster.live()[0]
    resource = "ConfigResource(type=TOPIC, name='throttle-check')"
    for key, value, shown in [("leader.replication.throttled.replicas", "0:x", "[0:x]"),
                              ("follower.replication.throttled.replicas", "*,0:1", "[*, 0:1]"),
                              ("leader.replication.throttled.replicas", "0:1, 1", "[0:1, 1]")]:
        got = dc.incremental_alter(b.port, [(dc.TOPIC, "throttle-check", [(key, dc.SET, value)])])
        assert got == [(dc.INVALID_CONFIG,
                        f"Invalid config value for resource {resource}: Invalid value {shown} for configuration "
                        f"{key}: {key} must be the literal '*' or a list of replicas in the following format: "
                        f"{LIST_FORMAT}", dc.TOPIC, "throttle-check")], got
    # What kafka-reassign-partitions writes, and the wildcard, are accepted.
    ok = [(k, dc.SET, v) for k, v in zip(THROTTLED_REPLICAS, ("0:1,0:2", "*"))]
    assert dc.incremental_alter(b.port, [(dc.TOPIC, "throttle-check", ok)]) == [
        (dc.NONE, None, dc.TOPIC, "throttle-check")]
    assert dc.topic_overrides(b.port, "throttle-check") == {
        "leader.replication.throttled.replicas": "0:1,0:2", "follower.replication.throttled.replicas": "*"}


@pytest.mark.needs_replication
@pytest.mark.parametrize("sides", [("leader", "follower"), ("leader",), ("follower",)],
                         ids=["both", "leader", "follower"])
def test_throttled_follower_catches_up_at_the_rate_then_rejoins(cluster, sides):
    """Throttled on the leader (it answers the out-of-ISR follower empty
    while over its quota), on the follower (it leaves the partition out of
    its fetches while over its quota), or both."""
    throttled = [f"{side}.replication.throttled.replicas" for side in sides]
    cluster.start(3, OVERRIDES)
    leader_id = cluster.controller_id()
    victim_id, other_id = [b.broker_id for b in cluster.live() if b.broker_id != leader_id]
    admin = cluster.admin(leader_id)
    futs = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=-1,
                                         replica_assignment=[[leader_id, victim_id, other_id]])],
                               operation_timeout=30)
    futs[TOPIC].result(60)
    cluster.wait_converged(topics=[TOPIC])
    leader, victim = cluster.broker(leader_id), cluster.broker(victim_id)

    victim.stop()
    cluster.wait_for(lambda: victim_id not in cluster.partition_state(TOPIC, 0)["isr"] or None, 30,
                     f"broker {victim_id} out of the ISR")
    produce_acks_1(leader.bootstrap, TOPIC, PAYLOAD)
    total = log_bytes(leader, TOPIC)
    assert total >= PAYLOAD, total
    cluster.wait_for(lambda: log_bytes(cluster.broker(other_id), TOPIC) == total or None, 60,
                     f"broker {other_id} in step with the leader")

    bs = cluster.bootstrap()
    dc.configs_ok(bs, *dc.topic_args(TOPIC), "--alter", "--add-config", ",".join(f"{k}=*" for k in throttled))
    dc.configs_ok(bs, *dc.broker_args(None), "--alter", "--add-config",
                  ",".join(f"{k}={RATE}" for k in THROTTLED_RATES))
    # Every broker applies the change from its ZooKeeper notification.
    time.sleep(3)

    victim.start()
    started = time.monotonic()
    cluster.wait_for(lambda: log_bytes(victim, TOPIC) > 0 or None, 15, "the throttled follower to make progress")
    time.sleep(max(0.0, 8 - (time.monotonic() - started)))
    elapsed = time.monotonic() - started
    got = log_bytes(victim, TOPIC)
    print(f"throttled ({'+'.join(sides)}): {got} of {total} bytes after {elapsed:.1f} s")
    # Unthrottled, the whole log is there within a second or two. Throttled,
    # the rate over the quota's window (11 samples of 1 s) stays within the
    # bound: at most a window's worth at once, then RATE bytes a second (and
    # one fetch past the bound).
    assert got <= RATE * (elapsed + WINDOW_S) + FETCH_BYTES, (got, elapsed, total)
    assert got < total / 2, (got, total)
    assert victim_id not in cluster.partition_state(TOPIC, 0)["isr"]

    dc.configs_ok(bs, *dc.topic_args(TOPIC), "--alter", "--delete-config", ",".join(throttled))
    dc.configs_ok(bs, *dc.broker_args(None), "--alter", "--delete-config", ",".join(THROTTLED_RATES))
    unthrottled = time.monotonic()
    cluster.wait_for(lambda: log_bytes(victim, TOPIC) == total or None, 60, "the follower to catch up")
    print(f"unthrottled: caught up {total - got} more bytes in {time.monotonic() - unthrottled:.1f} s")
    cluster.wait_for(lambda: victim_id in cluster.partition_state(TOPIC, 0)["isr"] or None, 60,
                     f"broker {victim_id} back in the ISR")
