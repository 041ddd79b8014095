"""ZooKeeper-mode answers to old versions, on one broker: the whole
ApiVersions table (client and controller-to-broker APIs) is Kafka 3.9.1's,
and OffsetCommit v0 / OffsetFetch v0 keep offsets in ZooKeeper at
/consumers/<group>/offsets/<topic>/<partition>, apart from the group
coordinator's, as Kafka 3.9's KafkaApis does for version 0."""

import time

import pytest

import cluster_util as cl
import compat_util as cu
from compat_util import i16, i32, i64, string

TOPIC = "zkoff"
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3

# Apache Kafka 3.9.1 in ZooKeeper mode, ApiVersions v3, for the APIs kshard
# serves in cluster mode (the session's kafka-3.9.1-apiversions.txt).
KAFKA_3_9_1_ZK = {
    0: (0, 11), 1: (0, 17), 2: (0, 9), 3: (0, 12), 4: (0, 7), 5: (0, 4), 6: (0, 8),
    7: (0, 3), 8: (0, 9), 9: (0, 9), 10: (0, 6), 11: (0, 9), 12: (0, 4), 13: (0, 5),
    14: (0, 5), 15: (0, 5), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (0, 7), 20: (0, 6), 21: (0, 2),
    22: (0, 5), 23: (0, 4), 32: (0, 4), 33: (0, 2), 34: (0, 2), 35: (0, 4), 36: (0, 2), 37: (0, 3), 42: (0, 2), 43: (0, 2), 44: (0, 1),
    45: (0, 0), 46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1), 50: (0, 0),
    51: (0, 0), 56: (0, 3), 60: (0, 1),
}


@pytest.fixture
def one(cluster):
    (b,) = cluster.start(1, {"offsets.topic.replication.factor": "1"})
    cluster.create_topic(TOPIC, 2, 1)
    cluster.wait_converged(topics=[TOPIC])
    return b


def call(b, api_key, version, body, correlation_id=5):
    with cu.connect("127.0.0.1", b.port) as s:
        s.sendall(cu.frame(cu.request_header_v1(api_key, version, correlation_id) + body))
        r = cu.Reader(cu.recv_frame(s))
    assert r.i32() == correlation_id
    return r


def array(items):
    return i32(len(items)) + b"".join(items)


def commit_v0(b, group, topic, offsets):
    parts = [i32(p) + i64(o) + string("meta") for p, o in offsets]
    r = call(b, 8, 0, string(group) + array([string(topic) + array(parts)]))
    assert r.i32() == 1 and r.string() == topic
    got = [(r.i32(), r.i16()) for _ in range(r.i32())]
    assert r.pos == len(r.data)
    return got


def fetch(b, version, group, topic, partitions):
    """[(partition, offset, metadata, error)]; [] when the answer has no topic
    (v1's form of a group-level error)."""
    r = call(b, 9, version, string(group) + array([string(topic) + array([i32(p) for p in partitions])]))
    got = []
    for _ in range(r.i32()):
        assert r.string() == topic
        got += [(r.i32(), r.i64(), r.string(), r.i16()) for _ in range(r.i32())]
    assert r.pos == len(r.data)
    return got


def test_api_versions_table(cluster, one):
    with cu.connect("127.0.0.1", one.port) as s:
        s.sendall(cu.api_versions_v3_request(1))
        _, err, table = cu.parse_api_versions_v3(cu.recv_frame(s))
    assert err == NONE
    want = dict(KAFKA_3_9_1_ZK)
    if cl.TARGET == "kshard":
        # Produce v12 belongs to transaction version 2 (Kafka 4.0), which
        # kshard serves (tests/compat/test_transactions_v2.py).
        want[0] = (0, 12)
    assert {k: table.get(k) for k in want} == want


def test_offsets_v0_live_in_zookeeper(cluster, one):
    group = "zk-g"
    assert commit_v0(one, group, TOPIC, [(0, 42), (1, 7)]) == [(0, NONE), (1, NONE)]
    data, _ = cluster.zk_get(f"/consumers/{group}/offsets/{TOPIC}/0")
    assert data == b"42"
    assert cluster.zk_get(f"/consumers/{group}/offsets/{TOPIC}/1")[0] == b"7"
    # Overwritten in place; metadata is not kept.
    assert commit_v0(one, group, TOPIC, [(0, 43)]) == [(0, NONE)]
    assert cluster.zk_get(f"/consumers/{group}/offsets/{TOPIC}/0")[0] == b"43"
    assert fetch(one, 0, group, TOPIC, [0, 1]) == [(0, 43, "", NONE), (1, 7, "", NONE)]
    # Read back from ZooKeeper, not from memory: a value written there directly.
    cluster.zk.set(cluster.path(f"/consumers/{group}/offsets/{TOPIC}/1"), b"99")
    assert fetch(one, 0, group, TOPIC, [1]) == [(1, 99, "", NONE)]
    # Never committed, or no such partition or topic: -1 and
    # UNKNOWN_TOPIC_OR_PARTITION (Kafka's OffsetFetchResponse.UNKNOWN_PARTITION).
    missing = UNKNOWN_TOPIC_OR_PARTITION
    assert fetch(one, 0, "zk-other", TOPIC, [0]) == [(0, -1, "", missing)]
    assert fetch(one, 0, group, TOPIC, [5]) == [(5, -1, "", missing)]
    assert fetch(one, 0, group, "zk-missing", [0]) == [(0, -1, "", missing)]
    # A commit to a partition that does not exist writes nothing.
    assert commit_v0(one, group, "zk-missing", [(0, 1)]) == [(0, UNKNOWN_TOPIC_OR_PARTITION)]
    assert not cluster.zk_exists(f"/consumers/{group}/offsets/zk-missing")


def test_offsets_v0_are_not_the_coordinators(cluster, one):
    group = "zk-sep"
    assert commit_v0(one, group, TOPIC, [(0, 42)]) == [(0, NONE)]
    # OffsetFetch v1 asks the group coordinator, which has none.
    deadline = time.monotonic() + 60
    while True:
        err = call(one, 10, 0, string(group)).i16()  # FindCoordinator v0
        if err == NONE or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert err == NONE
    while True:
        got = fetch(one, 1, group, TOPIC, [0])
        retriable = not got or got[0][3] in (14, 15, 16)
        if not retriable or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert got == [(0, -1, "", NONE)]


UNKNOWN_TOPIC = "zk-no-such-topic"
FENCED_LEADER_EPOCH = 74


def alter_partition(b, version, broker_epoch, topics):
    """AlterPartition v0/v1 (flexible, topics by name) to the controller:
    (top-level error, {(topic, partition): (error, leader, epoch, isr,
    partition epoch)})."""
    body = i32(b.broker_id) + i64(broker_epoch) + cu.uvarint(len(topics) + 1)
    for name, partitions in topics:
        body += cu.compact_string(name) + cu.uvarint(len(partitions) + 1)
        for partition, leader_epoch, isr, partition_epoch in partitions:
            body += i32(partition) + i32(leader_epoch) + cu.uvarint(len(isr) + 1)
            body += b"".join(i32(x) for x in isr)
            if version >= 1:
                body += bytes([0])
            body += i32(partition_epoch) + bytes([0])
        body += bytes([0])
    body += bytes([0])
    with cu.connect("127.0.0.1", b.port) as s:
        s.sendall(cu.frame(cu.request_header_v2(56, version, 9) + body))
        r = cu.Reader(cu.recv_frame(s))
    assert r.i32() == 9
    r.skip_tags()  # response header v1
    r.i32()  # throttle time
    error = r.i16()
    got = {}
    for _ in range(r.uvarint() - 1):
        name = r.compact_string()
        for _ in range(r.uvarint() - 1):
            partition, perr, leader, epoch = r.i32(), r.i16(), r.i32(), r.i32()
            isr = [r.i32() for _ in range(r.uvarint() - 1)]
            if version >= 1:
                r.take(1)
            got[(name, partition)] = (perr, leader, epoch, isr, r.i32())
            r.skip_tags()
        r.skip_tags()
    r.skip_tags()
    assert r.pos == len(r.data)
    return error, got


@pytest.mark.parametrize("version", [0, 1])
def test_alter_partition_by_topic_name(cluster, one, version):
    """The ISR a leader already has, sent as AlterPartition v0/v1 with the
    broker's registration epoch (the czxid of /brokers/ids/<id>): the
    controller answers the partition's state; a stale leader epoch is
    fenced and an unknown topic name is UNKNOWN_TOPIC_OR_PARTITION."""
    import json

    zk = cluster.zk
    _, registration = zk.get(f"{cluster.chroot}/brokers/ids/{one.broker_id}")
    data, stat = zk.get(f"{cluster.chroot}/brokers/topics/{TOPIC}/partitions/0/state")
    state = json.loads(data)
    leader_epoch, partition_epoch = state["leader_epoch"], stat.version
    assert state["isr"] == [one.broker_id]
    error, got = alter_partition(
        one,
        version,
        registration.czxid,
        [
            (TOPIC, [(0, leader_epoch, [one.broker_id], partition_epoch)]),
            (UNKNOWN_TOPIC, [(0, 0, [one.broker_id], 0)]),
        ],
    )
    assert error == NONE
    assert got[(TOPIC, 0)] == (NONE, one.broker_id, leader_epoch, [one.broker_id], partition_epoch)
    assert got[(UNKNOWN_TOPIC, 0)][0] == UNKNOWN_TOPIC_OR_PARTITION
    error, got = alter_partition(
        one, version, registration.czxid, [(TOPIC, [(1, -5, [one.broker_id], 0)])]
    )
    assert error == NONE and got[(TOPIC, 1)][0] == FENCED_LEADER_EPOCH
