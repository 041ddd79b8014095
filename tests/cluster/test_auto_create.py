"""Metadata auto-creation and admin request bounds in ZooKeeper mode.

A ZooKeeper-mode broker answers a Metadata request for a topic it is
auto-creating with LEADER_NOT_AVAILABLE and no partitions, creating the
topic with the defaults behind the answer (Kafka's AutoTopicCreationManager
with timeout 0); right after a DeleteTopics the same holds, and the answer
never shows a topic re-created inside it. (A KRaft broker answers
UNKNOWN_TOPIC_OR_PARTITION instead; see tests/compat/test_admin_limits.py.)

The partition bound of CreateTopics/CreatePartitions is kshard's alone here:
ZooKeeper-mode Kafka 3.9.1 has none (AdminZkClient builds the whole
assignment, so 2^31-1 partitions exhaust its heap, and 350,000 make a topic
znode far over ZooKeeper's jute.maxbuffer). kshard answers as Kafka's KRaft
controller does, POLICY_VIOLATION, in both modes. So is a manual assignment
with an empty replica list (ZooKeeper-mode Kafka writes a partition that
can never get a leader; kshard refuses it as the KRaft controller does)."""

import time

import pytest

import cluster_util as cl
from cluster_util import cu

LEADER_NOT_AVAILABLE = 5
POLICY_VIOLATION = 44
INVALID_REPLICA_ASSIGNMENT = 39
TOO_MANY = "Excessively large number of partitions per request."
INT_MAX = 2**31 - 1


def call(port, api_key, version, body):
    with cu.connect("127.0.0.1", port, 30.0) as s:
        s.sendall(cu.frame(cu.request_header_v1(api_key, version, 7) + body))
        r = cu.Reader(cu.recv_frame(s))
        assert r.i32() == 7
        return r


def array(items):
    return cu.i32(len(items)) + b"".join(items)


def metadata_v8(port, names):
    """{name: (error, partition count)} from a Metadata v8 with auto-creation."""
    body = array([cu.string(n) for n in names]) + cu.i8(1) + cu.i8(0) + cu.i8(0)
    r = call(port, 3, 8, body)
    r.i32()  # throttle
    for _ in range(r.i32()):
        r.i32(), r.string(), r.i32(), r.string()
    r.string(), r.i32()  # cluster id, controller
    out = {}
    for _ in range(r.i32()):
        err, name, _internal = r.i16(), r.string(), r.i8()
        n = r.i32()
        for _ in range(n):
            r.i16(), r.i32(), r.i32(), r.i32()
            for _ in range(3):
                for _ in range(r.i32()):
                    r.i32()
        r.i32()  # topic authorized operations
        out[name] = (err, n)
    r.i32()  # cluster authorized operations
    return out


def create_topics_v4(port, name, partitions, validate_only, assignment=None):
    """assignment: [(partition, [broker ids])] (then partitions must be -1)."""
    manual = [cu.i32(p) + array([cu.i32(b) for b in brokers]) for p, brokers in assignment or []]
    body = array([cu.string(name) + cu.i32(partitions) + cu.i16(-1) + array(manual) + array([])])
    body += cu.i32(30000) + cu.i8(1 if validate_only else 0)
    r = call(port, 19, 4, body)
    r.i32()
    return [(r.string(), r.i16(), r.string()) for _ in range(r.i32())]


def create_partitions_v1(port, name, count):
    body = array([cu.string(name) + cu.i32(count) + cu.i32(-1)]) + cu.i32(30000) + cu.i8(0)
    r = call(port, 37, 1, body)
    r.i32()
    return [(r.string(), r.i16(), r.string()) for _ in range(r.i32())]


def wait_created(cluster, port, name, partitions):
    cluster.wait_for(
        lambda: metadata_v8(port, [name])[name] == (0, partitions),
        60,
        f"{name} auto-created with {partitions} partitions",
    )


def test_auto_creation_answers_leader_not_available(cluster):
    (b,) = cluster.start(1, {"num.partitions": 2, "auto.create.topics.enable": "true"})
    t0 = time.monotonic()
    assert metadata_v8(b.port, ["zk-auto"]) == {"zk-auto": (LEADER_NOT_AVAILABLE, 0)}
    assert time.monotonic() - t0 < 10
    wait_created(cluster, b.port, "zk-auto", 2)

    cluster.create_topic("zk-deleted", 3, 1)
    admin = cluster.admin()
    admin.delete_topics(["zk-deleted"], operation_timeout=30)["zk-deleted"].result(60)
    got = metadata_v8(b.port, ["zk-deleted"])["zk-deleted"]
    # The old topic, or none while deletion and creation are in flight:
    # never a new topic in this answer.
    assert got in ((0, 3), (LEADER_NOT_AVAILABLE, 0)), got
    wait_created(cluster, b.port, "zk-deleted", 2)


@pytest.mark.skipif(cl.TARGET == "kafka", reason="ZooKeeper-mode Kafka 3.9.1 has no partition bound (module doc)")
def test_partition_counts_over_the_bound_are_refused(cluster):
    (b,) = cluster.start(1)
    for name, n, validate_only in (("zk-huge", 350_000, False), ("zk-max", INT_MAX, True), ("zk-max", INT_MAX, False)):
        t0 = time.monotonic()
        assert create_topics_v4(b.port, name, n, validate_only) == [(name, POLICY_VIOLATION, TOO_MANY)]
        assert time.monotonic() - t0 < 10
    # An empty replica list would be a partition that can never lead.
    assert create_topics_v4(b.port, "zk-empty", -1, False, [(0, [])]) == [
        ("zk-empty", INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    ]
    cluster.create_topic("zk-grow", 1, 1)
    assert create_partitions_v1(b.port, "zk-grow", INT_MAX) == [("zk-grow", POLICY_VIOLATION, TOO_MANY)]
    cluster.create_topic("zk-after", 1, 1)
    cluster.wait_converged(topics=["zk-grow", "zk-after"])
    assert len(cluster.metadata(b.broker_id)["topics"]["zk-grow"]["partitions"]) == 1
