"""Dynamic configuration on a 3-broker ZooKeeper cluster (issue 18), with
Kafka's own kafka-configs tool and raw requests: a change made through one
broker is seen through the others; Kafka's znodes and change notifications
(/config/topics|brokers/<entity>, /config/changes/config_change_<seq>); a
per-broker value stays on its broker while the cluster default reaches all;
a config written straight into ZooKeeper, as another Kafka tool would, is
applied; ZooKeeper mode's exact error texts; min.insync.replicas changed
live with a follower stopped.

KSHARD_TEST_TARGET=kafka proves every assertion against Apache Kafka 3.9.1
in ZooKeeper mode. The helpers come from tests/compat/test_dynamic_config.py.
"""

import json
import re

import pytest

import cluster_util  # noqa: F401  (puts tests/compat on sys.path)
import test_dynamic_config as dc

# Retention is checked every second (Kafka's first check otherwise waits
# log.initial.task.delay.ms, 30 s; kshard ignores the key).
OVERRIDES = {
    "log.retention.check.interval.ms": "1000",
    "log.initial.task.delay.ms": "1000",
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.replication.factor": "3",
}
CHANGE = re.compile(r"^config_change_\d{10}$")


@pytest.fixture(scope="module")
def dcluster(module_cluster):
    module_cluster.start(3, OVERRIDES)
    return module_cluster


def notifications(cluster):
    """[(seq, data)] of /config/changes, oldest first."""
    out = []
    for child in cluster.zk_children("/config/changes"):
        assert CHANGE.match(child), child
        data, _ = cluster.zk_get(f"/config/changes/{child}")
        out.append((int(child[len("config_change_"):]), json.loads(data)))
    return sorted(out)


def entity_paths_after(cluster, seq):
    return [d for s, d in notifications(cluster) if s > seq]


def last_seq(cluster):
    if not cluster.zk_exists("/config/changes"):
        return -1
    got = notifications(cluster)
    return got[-1][0] if got else -1


def test_topic_config_through_one_broker_seen_by_all(dcluster):
    c, t = dcluster, "dcc-topic"
    b1, b2, b3 = (c.broker(i) for i in (1, 2, 3))
    c.create_topic(t, 2, 2)
    c.wait_converged(topics=[t])
    # Created without a config: the znode exists, empty, and no notification.
    assert c.zk_json(f"/config/topics/{t}") == {"version": 1, "config": {}}
    before = last_seq(c)
    out = dc.configs_ok(b1.bootstrap, *dc.topic_args(t), "--alter", "--add-config",
                        "retention.ms=1000,cleanup.policy=[compact,delete]")
    assert out.strip() == f"Completed updating config for topic {t}."
    assert c.zk_json(f"/config/topics/{t}") == {
        "version": 1, "config": {"retention.ms": "1000", "cleanup.policy": "compact,delete"}}
    assert entity_paths_after(c, before) == [{"version": 2, "entity_path": f"topics/{t}"}]
    want = (f"Dynamic configs for topic {t} are:", {
        dc.topic_line("retention.ms", "1000"),
        dc.topic_line("cleanup.policy", "compact,delete", ("DEFAULT_CONFIG", "log.cleanup.policy", "delete")),
    })
    for b in (b2, b3):
        assert dc.describe_out(b.bootstrap, dc.topic_args(t)) == want
        assert dc.topic_overrides(b.port, t) == {"retention.ms": "1000", "cleanup.policy": "compact,delete"}

    before = last_seq(c)
    dc.configs_ok(b3.bootstrap, *dc.topic_args(t), "--alter", "--delete-config", "retention.ms,cleanup.policy")
    assert c.zk_json(f"/config/topics/{t}") == {"version": 1, "config": {}}
    assert entity_paths_after(c, before) == [{"version": 2, "entity_path": f"topics/{t}"}]
    assert dc.describe_out(b1.bootstrap, dc.topic_args(t)) == (f"Dynamic configs for topic {t} are:", set())
    err = dc.configs_fail(b2.bootstrap, *dc.topic_args(t), "--alter", "--delete-config", "retention.ms")
    assert err.strip() == "Invalid config(s): retention.ms"


def test_topic_errors_zookeeper_texts(dcluster):
    c, t = dcluster, "dcc-errors"
    b = c.broker(2)
    c.create_topic(t, 1, 1)
    c.wait_converged(topics=[t])
    resource = f"ConfigResource(type=TOPIC, name='{t}')"
    cases = [
        ([("retention.ms", dc.SET, "abc")], dc.INVALID_CONFIG,
         f"Invalid config value for resource {resource}: Invalid value abc for configuration retention.ms: "
         "Not a number of type LONG"),
        ([("retention.ms", dc.SET, "-5")], dc.INVALID_CONFIG,
         f"Invalid config value for resource {resource}: Invalid value -5 for configuration retention.ms: "
         "Value must be at least -1"),
        ([("retention.ms", dc.SET, "5000"), ("foo.bar", dc.SET, "1")], dc.INVALID_CONFIG,
         "Unknown topic config name: foo.bar"),
        ([("retention.ms", dc.APPEND, "5")], dc.INVALID_CONFIG,
         "Config value append is not allowed for config key: retention.ms"),
        ([("retention.ms", dc.SUBTRACT, "5")], dc.INVALID_CONFIG,
         "Config value subtract is not allowed for config key: retention.ms"),
        # ConfigAdminManager looks the key up with Map.apply: an unknown key
        # fails with NoSuchElementException, an unknown server error.
        ([("foo.bar", dc.APPEND, "5")], -1, None),
    ]
    for ops, code, message in cases:
        assert dc.incremental_alter(b.port, [(dc.TOPIC, t, ops)]) == [(code, message, dc.TOPIC, t)], ops
    assert c.zk_json(f"/config/topics/{t}") == {"version": 1, "config": {}}
    assert dc.incremental_alter(b.port, [(dc.TOPIC, "dcc-no-such", [("retention.ms", dc.SET, "1")])]) == [
        (dc.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'dcc-no-such' does not exist.", dc.TOPIC, "dcc-no-such")]
    assert not c.zk_exists("/config/topics/dcc-no-such")
    err = dc.configs_fail(b.bootstrap, *dc.topic_args("dcc-no-such"), "--alter", "--add-config", "retention.ms=1")
    assert "UnknownTopicOrPartitionException" in err, err
    # The same resource twice: both refused, nothing written. (Legacy
    # AlterConfigs with a duplicate is not tested: Kafka 3.9.1 fails to build
    # its response, IllegalStateException "Duplicate key", and never answers.)
    res = dc.incremental_alter(b.port, [(dc.TOPIC, t, [("retention.ms", dc.SET, "100")]),
                                        (dc.TOPIC, t, [("retention.ms", dc.SET, "200")])])
    assert res == [(dc.INVALID_REQUEST, "Each resource must appear at most once.", dc.TOPIC, t)] * 2
    assert c.zk_json(f"/config/topics/{t}") == {"version": 1, "config": {}}


def broker_describe(b, key):
    """(value, source) of one of the broker's own configs, from itself."""
    _, _, configs = dc.describe_configs(b.port, dc.BROKER, str(b.broker_id), [key])
    return configs[key][:2]


def test_broker_configs(dcluster):
    c = dcluster
    b1, b2, b3 = (c.broker(i) for i in (1, 2, 3))
    bs = c.bootstrap()
    before = last_seq(c)
    out = dc.configs_ok(bs, *dc.broker_args(1), "--alter", "--add-config", "log.cleaner.threads=2")
    assert out.strip() == "Completed updating config for broker 1."
    threads = dc.line("log.cleaner.threads", "2", ("DYNAMIC_BROKER_CONFIG", "log.cleaner.threads", "2"),
                      ("DEFAULT_CONFIG", "log.cleaner.threads", "1"))
    dc.wait_describe(bs, dc.broker_args(1), "Dynamic configs for broker 1 are:", [threads])
    assert c.zk_json("/config/brokers/1") == {"version": 1, "config": {"log.cleaner.threads": "2"}}
    assert entity_paths_after(c, before) == [{"version": 2, "entity_path": "brokers/1"}]
    # Broker 1's value is its own.
    assert dc.describe_out(bs, dc.broker_args(2)) == ("Dynamic configs for broker 2 are:", set())
    assert broker_describe(b2, "log.cleaner.threads") == ("1", dc.SOURCE_DEFAULT)
    assert broker_describe(b3, "log.cleaner.threads") == ("1", dc.SOURCE_DEFAULT)
    assert not c.zk_exists("/config/brokers/2")
    # A broker answers only for itself.
    assert dc.alter_configs(b2.port, [(dc.BROKER, "1", {"log.cleaner.threads": "2"})]) == [
        (dc.INVALID_REQUEST, "Unexpected broker id, expected 2, but received 1", dc.BROKER, "1")]
    assert dc.describe_configs(b2.port, dc.BROKER, "1", ["log.cleaner.threads"])[:2] == (
        dc.INVALID_REQUEST, "Unexpected broker id, expected 2 or empty string, but received 1")

    # The cluster default reaches every broker.
    before = last_seq(c)
    out = dc.configs_ok(b2.bootstrap, *dc.broker_args(None), "--alter", "--add-config", "log.retention.ms=3600000")
    assert out.strip() == "Completed updating default config for brokers in the cluster."
    assert c.zk_json("/config/brokers/<default>") == {"version": 1, "config": {"log.retention.ms": "3600000"}}
    assert entity_paths_after(c, before) == [{"version": 2, "entity_path": "brokers/<default>"}]
    for b in (b1, b2, b3):
        c.wait_for(lambda: broker_describe(b, "log.retention.ms") == ("3600000", dc.SOURCE_DEFAULT_BROKER), 15,
                   f"broker {b.broker_id} log.retention.ms from the default")
        assert dc.describe_out(b.bootstrap, dc.broker_args(None)) == (
            "Default configs for brokers in the cluster are:",
            {dc.line("log.retention.ms", "3600000", ("DYNAMIC_DEFAULT_BROKER_CONFIG", "log.retention.ms", "3600000"))})
    # Per-broker describes filter on DYNAMIC_BROKER_CONFIG: the default is not listed.
    assert dc.describe_out(bs, dc.broker_args(3)) == ("Dynamic configs for broker 3 are:", set())

    # A read-only key is refused at both levels, and nothing is written.
    for level in (1, None):
        err = dc.configs_fail(bs, *dc.broker_args(level), "--alter", "--add-config", "log.dirs=/x")
        assert "InvalidRequestException: Cannot update these configs dynamically: Set(log.dirs)" in err, err
    assert c.zk_json("/config/brokers/1") == {"version": 1, "config": {"log.cleaner.threads": "2"}}

    # Deleting everything leaves empty znodes.
    dc.configs_ok(bs, *dc.broker_args(1), "--alter", "--delete-config", "log.cleaner.threads")
    dc.configs_ok(bs, *dc.broker_args(None), "--alter", "--delete-config", "log.retention.ms")
    assert c.zk_json("/config/brokers/1") == {"version": 1, "config": {}}
    assert c.zk_json("/config/brokers/<default>") == {"version": 1, "config": {}}
    dc.wait_describe(bs, dc.broker_args(1), "Dynamic configs for broker 1 are:", [])
    for b in (b1, b2, b3):
        c.wait_for(lambda: broker_describe(b, "log.retention.ms") == (None, dc.SOURCE_DEFAULT), 15,
                   f"broker {b.broker_id} log.retention.ms unset again")


def test_config_written_to_zookeeper_is_applied(dcluster):
    """What Kafka's AdminZkClient does (the znode, then a sequential
    notification), done by hand: every broker applies it, and the leader
    enforces it. The legacy version 1 notification is understood too."""
    c, t = dcluster, "dcc-zk-write"
    c.create_topic(t, 1, 3)
    view = c.wait_converged(topics=[t])
    leader = c.broker(view["topics"][t]["partitions"][0][0])
    big = b"x" * 200_000
    assert dc.produce(leader.port, t, [big]) == dc.NONE
    c.zk.set(c.path(f"/config/topics/{t}"), json.dumps(
        {"version": 1, "config": {"max.message.bytes": "100000"}}).encode())
    c.zk.create(c.path("/config/changes/config_change_"), json.dumps(
        {"version": 2, "entity_path": f"topics/{t}"}).encode(), sequence=True)
    dc.wait_produce(leader.port, t, [big], dc.RECORD_TOO_LARGE, timeout_s=15)
    for b in c.live():
        assert dc.topic_overrides(b.port, t) == {"max.message.bytes": "100000"}
    c.zk.set(c.path(f"/config/topics/{t}"), json.dumps(
        {"version": 1, "config": {"max.message.bytes": "1000000"}}).encode())
    c.zk.create(c.path("/config/changes/config_change_"), json.dumps(
        {"version": 1, "entity_type": "topics", "entity_name": t}).encode(), sequence=True)
    dc.wait_produce(leader.port, t, [big], dc.NONE, timeout_s=15)


def test_unclean_leader_election_enabled_live(dcluster):
    """A partition whose only in-sync replica is down stays offline while
    unclean election is off; setting unclean.leader.election.enable=true on
    the topic makes the controller elect the live out-of-sync replica at
    once (Kafka's TopicConfigHandler -> enableTopicUncleanLeaderElection)."""
    c, t = dcluster, "dcc-unclean"
    controller = c.controller_id()
    first, second = [b.broker_id for b in c.live() if b.broker_id != controller][:2]
    from confluent_kafka.admin import NewTopic

    admin = c.admin(controller)
    futs = admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=-1,
                                         replica_assignment=[[first, second]])], operation_timeout=30)
    futs[t].result(60)
    c.wait_converged(topics=[t])
    leader, follower = c.broker(first), c.broker(second)
    assert dc.produce(leader.port, t, [b"before"]) == dc.NONE
    follower.stop()
    try:
        c.wait_for(lambda: c.partition_state(t, 0)["isr"] == [first] or None, 30,
                   f"ISR down to broker {first}")
        leader.stop()
        c.wait_for(lambda: c.partition_state(t, 0)["leader"] == -1 or None, 30, "partition offline")
        follower.start()
        c.wait_for(lambda: second in c.registered_ids() or None, 30, f"broker {second} back")
        # Clean election only: the returning replica is not in the ISR.
        import time
        time.sleep(2)
        assert c.partition_state(t, 0)["leader"] == -1, c.partition_state(t, 0)
        dc.configs_ok(c.broker(controller).bootstrap, *dc.topic_args(t), "--alter", "--add-config",
                      "unclean.leader.election.enable=true")
        c.wait_for(lambda: c.partition_state(t, 0)["leader"] == second or None, 30,
                   f"broker {second} elected uncleanly")
    finally:
        for b in (leader, follower):
            if not b.running():
                b.start()


def test_min_insync_replicas_live(dcluster):
    """RF=3 with one follower stopped: min.insync.replicas=3 turns acks=all
    into NOT_ENOUGH_REPLICAS at once, 2 lets it through again. Last: it
    stops a broker (restarted at the end)."""
    c, t = dcluster, "dcc-min-isr"
    controller = c.controller_id()
    others = [b.broker_id for b in c.live() if b.broker_id != controller]
    from confluent_kafka.admin import NewTopic

    admin = c.admin(controller)
    futs = admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=-1,
                                         replica_assignment=[[controller] + others])], operation_timeout=30)
    futs[t].result(60)
    c.wait_converged(topics=[t])
    leader = c.broker(controller)
    assert dc.produce(leader.port, t, [b"three in sync"]) == dc.NONE
    victim = c.broker(others[0])
    victim.stop()
    try:
        c.wait_for(lambda: victim.broker_id not in c.partition_state(t, 0)["isr"] or None, 30,
                   f"broker {victim.broker_id} out of the ISR")
        dc.wait_produce(leader.port, t, [b"two in sync"], dc.NONE, timeout_s=15)
        dc.configs_ok(leader.bootstrap, *dc.topic_args(t), "--alter", "--add-config", "min.insync.replicas=3")
        dc.wait_produce(leader.port, t, [b"refused"], dc.NOT_ENOUGH_REPLICAS, timeout_s=15)
        dc.configs_ok(leader.bootstrap, *dc.topic_args(t), "--alter", "--add-config", "min.insync.replicas=2")
        dc.wait_produce(leader.port, t, [b"two are enough"], dc.NONE, timeout_s=15)
    finally:
        victim.start()
