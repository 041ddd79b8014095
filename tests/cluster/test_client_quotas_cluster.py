"""Client quotas on a 2-broker cluster (issue 18), against Kafka 3.9.1 in
ZooKeeper mode with KSHARD_TEST_TARGET=kafka: a quota set through one
broker (Kafka's kafka-configs) lands in ZooKeeper in Kafka's layout
(/config/clients/<id> plus a /config/changes/config_change_<seq>
notification), every broker picks it up and enforces it on its own (a
producer per broker with the same client id is held to the quota on each),
and deleting it through the other broker removes the znode. Also the
ZooKeeper mode's exact AlterClientQuotas / DescribeClientQuotas error texts
(the single-broker suite, tests/compat/test_client_quotas.py, runs Kafka as
a KRaft node, whose texts differ) and the znode paths of users, (user,
client id) pairs, defaults and names that need sanitising.
"""

import json
import re

import pytest

import cluster_util as cl
import test_client_quotas as cq  # tests/compat, on sys.path through cluster_util

TOPIC = "quota-cluster"
CLIENT = "quota-cluster-client"
NOTIFICATION = re.compile(r"^config_change_\d{10}$")


@pytest.fixture(scope="module")
def qcluster(module_cluster):
    module_cluster.start(2)
    from confluent_kafka.admin import NewTopic

    # Partition 0 on broker 1, partition 1 on broker 2.
    admin = module_cluster.admin()
    futs = admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=-1, replica_assignment=[[1], [2]])],
                               operation_timeout=30)
    futs[TOPIC].result(60)
    module_cluster.wait_converged(topics=[TOPIC])
    return module_cluster


def notifications(cluster):
    """{znode name: JSON} of /config/changes."""
    out = {}
    for name in cluster.zk_children("/config/changes"):
        assert NOTIFICATION.match(name), name
        out[name] = cluster.zk_json(f"/config/changes/{name}")
    return out


def new_notifications(cluster, before):
    now = notifications(cluster)
    return [now[n] for n in sorted(now) if n not in before]


def test_quota_set_via_one_broker_is_enforced_by_each(qcluster):
    c = qcluster
    b1, b2 = c.broker(1), c.broker(2)
    assert c.assignment(TOPIC) == {0: [1], 1: [2]}
    before = notifications(c) if c.zk_exists("/config/changes") else {}

    out = cq.configs_ok(b1.bootstrap, "--entity-type", "clients", "--entity-name", CLIENT, "--alter", "--add-config",
                        "producer_byte_rate=1048576")
    assert out.strip() == f"Completed updating config for client {CLIENT}."
    data, _ = c.zk_get(f"/config/clients/{CLIENT}")
    assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1048576"}}, data
    assert data == b'{"version":1,"config":{"producer_byte_rate":"1048576"}}', data
    assert new_notifications(c, before) == [{"version": 2, "entity_path": f"clients/{CLIENT}"}]

    # Both brokers describe it (Kafka's ZooKeeper mode reads the znodes, so
    # at once; a few seconds are allowed).
    want = (cq.NONE, "", {cq.entity(client_id=CLIENT): {"producer_byte_rate": 1048576.0}})
    for b in (b1, b2):
        c.wait_for(lambda: cq.describe_quotas(b.port, [("client-id", cq.MATCH_EXACT, CLIENT)], strict=True) == want,
                   5, f"broker {b.broker_id} describing the quota")
    line = f"Quota configs for client-id '{CLIENT}' are producer_byte_rate=1048576.0"
    assert cq.described(b2.bootstrap, "--entity-type", "clients", "--entity-name", CLIENT) == {line}

    # Two producers with that client id, bootstrapped through broker 1, one
    # writing to broker 1's partition and one to broker 2's: each broker
    # holds its own producer to the quota (no cluster-wide sum), and broker
    # 2 learnt the quota from the notification within the second or two the
    # JVM takes to start.
    res = cq.quota_load("produce", b1.bootstrap, cq.WINDOW_S, [(CLIENT, TOPIC, 0, None), (CLIENT, TOPIC, 1, None)])
    for r, leader in zip(res, (1, 2)):
        assert r["errors"] == 0, r
        cq.assert_held_to_quota(f"java producer to broker {leader}, producer_byte_rate=1 MiB/s", r["buckets"],
                                r["bucket_ms"])
        assert r["metrics"]["produce-throttle-time-max"] > 0, r["metrics"]

    # Deleting the last key through broker 2 removes the znode, with a new
    # notification for the same entity.
    before = notifications(c)
    out = cq.configs_ok(b2.bootstrap, "--entity-type", "clients", "--entity-name", CLIENT, "--alter",
                        "--delete-config", "producer_byte_rate")
    assert out.strip() == f"Completed updating config for client {CLIENT}."
    assert not c.zk_exists(f"/config/clients/{CLIENT}")
    assert new_notifications(c, before) == [{"version": 2, "entity_path": f"clients/{CLIENT}"}]
    assert cq.described(b1.bootstrap, "--entity-type", "clients", "--entity-name", CLIENT) == set()


def test_znode_paths(qcluster):
    """Users, (user, client id) pairs and defaults, with names sanitised as
    Kafka's Sanitizer does (URL encoding, then * as %2A and + as %20)."""
    c = qcluster
    port = c.broker(2).port
    before = notifications(c)
    entries = [
        ([("user", "CN=some user"), ("client-id", "app*1")], [("consumer_byte_rate", 2048.0)]),
        ([("user", "alice")], [("producer_byte_rate", 1024.0), ("request_percentage", 23.45)]),
        ([("user", None)], [("producer_byte_rate", 5000.0)]),
        ([("user", None), ("client-id", None)], [("producer_byte_rate", 7000.0)]),
        ([("user", "alice"), ("client-id", None)], [("controller_mutation_rate", 10.0)]),
        ([("client-id", None)], [("consumer_byte_rate", 6000.0)]),
        ([("client-id", "<default>")], [("consumer_byte_rate", 3000.0)]),
    ]
    res = cq.alter_quotas(port, entries)
    assert res == {frozenset(e): (cq.NONE, None) for e, _ in entries}, res
    want = {
        "users/CN%3Dsome%20user/clients/app%2A1": {"consumer_byte_rate": "2048"},
        "users/alice": {"producer_byte_rate": "1024", "request_percentage": "23.45"},
        "users/<default>": {"producer_byte_rate": "5000"},
        "users/<default>/clients/<default>": {"producer_byte_rate": "7000"},
        "users/alice/clients/<default>": {"controller_mutation_rate": "10.0"},
        "clients/<default>": {"consumer_byte_rate": "6000"},
        "clients/%3Cdefault%3E": {"consumer_byte_rate": "3000"},
    }
    for path, config in want.items():
        assert c.zk_json(f"/config/{path}") == {"version": 1, "config": config}, path
    got = new_notifications(c, before)
    assert sorted(n["entity_path"] for n in got) == sorted(want), got
    assert all(n["version"] == 2 for n in got), got

    # Describe gives the names back unsanitised, the defaults as null, and
    # keeps a client id spelled "<default>" apart from the default.
    cq.wait_quotas(c.broker(1).port, {
        cq.entity(user="CN=some user", client_id="app*1"): {"consumer_byte_rate": 2048.0},
        cq.entity(user="alice"): {"producer_byte_rate": 1024.0, "request_percentage": 23.45},
        cq.entity(user=None): {"producer_byte_rate": 5000.0},
        cq.entity(user=None, client_id=None): {"producer_byte_rate": 7000.0},
        cq.entity(user="alice", client_id=None): {"controller_mutation_rate": 10.0},
        cq.entity(client_id=None): {"consumer_byte_rate": 6000.0},
        cq.entity(client_id="<default>"): {"consumer_byte_rate": 3000.0},
    }, timeout_s=5)

    # Removing every key removes the znodes (a user node goes once its
    # clients are gone too).
    res = cq.alter_quotas(port, [(e, [(k, None) for k, _ in ops]) for e, ops in entries])
    assert all(v == (cq.NONE, None) for v in res.values()), res
    for path in want:
        assert not c.zk_exists(f"/config/{path}"), path
    assert not c.zk_exists("/config/users/alice")
    cq.wait_quotas(c.broker(1).port, {}, timeout_s=5)


def test_zk_mode_error_texts(qcluster):
    port = qcluster.broker(1).port
    res = cq.alter_quotas(port, [
        ([("client-id", "e-fraction")], [("producer_byte_rate", 1048576.5)]),
        ([("client-id", "e-negative")], [("consumer_byte_rate", -5.0)]),
        ([("user", "e-ipuser"), ("ip", "127.0.0.1")], [("producer_byte_rate", 1000.0)]),
        ([("client-id", "e-unknown")], [("foo", 1.0)]),
    ])
    assert res == {
        cq.entity(client_id="e-fraction"): (cq.INVALID_REQUEST, "Configuration producer_byte_rate must be a LONG value"),
        cq.entity(client_id="e-negative"): (cq.INVALID_REQUEST, "Configuration consumer_byte_rate must be a LONG value"),
        frozenset([("user", "e-ipuser"), ("ip", "127.0.0.1")]): (
            cq.INVALID_REQUEST,
            "Invalid quota entity combination, IP entity should not be used with user/client ID entity."),
        cq.entity(client_id="e-unknown"): (cq.INVALID_REQUEST, "Invalid configuration key foo"),
    }, res
    for components, want in [
        ([("group", cq.MATCH_SPECIFIED, None)], (cq.UNSUPPORTED_VERSION, "Custom entity type 'group' not supported")),
        ([("", cq.MATCH_SPECIFIED, None)], (cq.INVALID_REQUEST, "Unexpected empty filter component entity type")),
        ([("user", cq.MATCH_EXACT, "a"), ("ip", cq.MATCH_SPECIFIED, None)],
         (cq.INVALID_REQUEST, "Invalid entity filter component combination, IP filter component should not be used "
                              "with user or clientId filter component.")),
        ([("user", cq.MATCH_EXACT, "a"), ("user", cq.MATCH_EXACT, "b")],
         (cq.INVALID_REQUEST, "Duplicate user filter component entity type")),
        ([("user", 5, None)], (cq.UNKNOWN_SERVER_ERROR, None)),
    ]:
        for version in (0, 1):
            got = cq.describe_quotas(port, components, False, version)
            assert got == (*want, None), (components, version, got)
    assert cq.all_quotas(port) == {}
