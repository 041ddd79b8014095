"""ApiVersions and old request versions over raw sockets. Every assertion is
Apache Kafka 3.9.1's behaviour (proven with KSHARD_TEST_TARGET=kafka):

- the advertised ranges equal Kafka 3.9.1's ZooKeeper-mode table for every
  API kshard serves (ApiVersions v0-v4);
- the versions the kafka-protocol crate no longer decodes (ListOffsets v0,
  CreateTopics v0-1, DeleteTopics v0, OffsetCommit v1, OffsetForLeaderEpoch
  v0-1, DescribeConfigs v0) and the 3.9 maxima (ListOffsets v9, Fetch v17,
  FindCoordinator v6) answer as Kafka does.

OffsetCommit v0 / OffsetFetch v0 keep offsets in ZooKeeper; the compat
suite's Kafka runs in KRaft mode, so they are tested in
tests/cluster/test_zk_offsets_v0.py against ZooKeeper-mode Kafka."""

import time

import pytest
from confluent_kafka import Producer

import compat_util as cu
from compat_util import i8, i16, i32, i64, string, uvarint, compact_string
from conftest import TARGET
from test_confluent import create_topics

TOPIC = "oldver"
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
COORDINATOR_NOT_AVAILABLE = 15
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_REQUEST = 42

# Apache Kafka 3.9.1 in ZooKeeper mode (kafka.Kafka with zookeeper.connect),
# ApiVersions v3 answer, for the APIs a single kshard broker serves; the
# full table is in /work/shared/kafka-3.9.1-apiversions.txt of the session
# that wrote this test (it lists 0-9 for ListOffsets, 0-17 for Fetch, ...).
KAFKA_3_9_1_ZK = {
    0: (0, 11),  # Produce
    1: (0, 17),  # Fetch
    2: (0, 9),  # ListOffsets
    3: (0, 12),  # Metadata
    8: (0, 9),  # OffsetCommit
    9: (0, 9),  # OffsetFetch
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups
    17: (0, 1),  # SaslHandshake
    18: (0, 4),  # ApiVersions
    19: (0, 7),  # CreateTopics
    20: (0, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId
    23: (0, 4),  # OffsetForLeaderEpoch
    32: (0, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    34: (0, 2),  # AlterReplicaLogDirs
    35: (0, 4),  # DescribeLogDirs
    36: (0, 2),  # SaslAuthenticate
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    47: (0, 0),  # OffsetDelete
    48: (0, 1),  # DescribeClientQuotas
    49: (0, 1),  # AlterClientQuotas
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    60: (0, 1),  # DescribeCluster
}

# kshard advertises Kafka's ranges (Produce v0-v2 and Fetch v0-v3 with
# message formats v0/v1: test_old_message_format.py), but for Produce v12,
# which belongs to transaction version 2 (Kafka 4.0, test_transactions_v2.py).
KSHARD_EXCEPTIONS = {0: (0, 12)}


@pytest.fixture(scope="module")
def ob(broker_module_factory):
    b = broker_module_factory()
    create_topics(b.bootstrap, [TOPIC], partitions=2)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        p.produce(TOPIC, value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    return b


def call(b, api_key, version, body, flexible=False, correlation_id=11):
    """One request; returns a Reader over the body after the response header."""
    header = (cu.request_header_v2 if flexible else cu.request_header_v1)(api_key, version, correlation_id)
    host, port = b.bootstrap.split(":")
    with cu.connect(host, int(port)) as s:
        s.sendall(cu.frame(header + body))
        payload = cu.recv_frame(s)
    r = cu.Reader(payload)
    assert r.i32() == correlation_id
    if flexible and api_key != 18:
        r.skip_tags()
    return r


def array(items):
    return i32(len(items)) + b"".join(items)


def compact_array(items):
    return uvarint(len(items) + 1) + b"".join(items)


# --- ApiVersions -------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_table_is_kafka_3_9_1(ob, version):
    if version >= 3:
        body = compact_string("kshard-compat") + compact_string("1.0") + uvarint(0)
        r = call(ob, 18, version, body, flexible=True)
        err = r.i16()
        table = {}
        for _ in range(r.uvarint() - 1):
            k = r.i16()
            table[k] = (r.i16(), r.i16())
            r.skip_tags()
    else:
        r = call(ob, 18, version, b"")
        err = r.i16()
        table = {}
        for _ in range(r.i32()):
            k = r.i16()
            table[k] = (r.i16(), r.i16())
    assert err == NONE
    want = dict(KAFKA_3_9_1_ZK)
    if TARGET == "kshard":
        want.update(KSHARD_EXCEPTIONS)
    got = {k: table.get(k) for k in want}
    assert got == want


# --- ListOffsets ---------------------------------------------------------------


def list_offsets_v0(b, parts, replica_id=-1):
    """parts: [(topic, partition, timestamp, max_num_offsets)] ->
    {(topic, partition): (error, [offsets])}."""
    by_topic = {}
    for t, p, ts, n in parts:
        by_topic.setdefault(t, []).append(i32(p) + i64(ts) + i32(n))
    body = i32(replica_id) + array([string(t) + array(ps) for t, ps in by_topic.items()])
    r = call(b, 2, 0, body)
    out = {}
    for _ in range(r.i32()):
        t = r.string()
        for _ in range(r.i32()):
            p = r.i32()
            err = r.i16()
            out[(t, p)] = (err, [r.i64() for _ in range(r.i32())])
    return out


def test_list_offsets_v0(ob):
    future_ms = int(time.time() * 1000) + 3_600_000
    got = list_offsets_v0(
        ob,
        [
            (TOPIC, 0, -1, 10),
            (TOPIC, 1, -1, 10),
            ("oldver-missing", 0, -1, 1),
        ],
    )
    # One segment holding data: [log end offset, segment base offset].
    assert got[(TOPIC, 0)] == (NONE, [10, 0])
    # An empty active segment contributes only its base offset.
    assert got[(TOPIC, 1)] == (NONE, [0])
    assert got[("oldver-missing", 0)] == (UNKNOWN_TOPIC_OR_PARTITION, [])
    assert list_offsets_v0(ob, [(TOPIC, 0, -1, 1)])[(TOPIC, 0)] == (NONE, [10])
    assert list_offsets_v0(ob, [(TOPIC, 0, -2, 10)])[(TOPIC, 0)] == (NONE, [0])
    # By time: segments last modified at or before the timestamp.
    assert list_offsets_v0(ob, [(TOPIC, 0, future_ms, 10)])[(TOPIC, 0)] == (NONE, [10, 0])
    assert list_offsets_v0(ob, [(TOPIC, 0, 1000, 10)])[(TOPIC, 0)] == (NONE, [])
    # v0 knows only -1 and -2.
    assert list_offsets_v0(ob, [(TOPIC, 0, -3, 10)])[(TOPIC, 0)] == (UNSUPPORTED_VERSION, [])


def list_offsets_v9(b, parts, version=9):
    """parts: [(partition, timestamp)] on TOPIC -> [(partition, error, ts, offset, epoch)]."""
    body = (
        i32(-1)
        + i8(0)
        + compact_array(
            [
                compact_string(TOPIC)
                + compact_array([i32(p) + i32(-1) + i64(ts) + uvarint(0) for p, ts in parts])
                + uvarint(0)
            ]
        )
        + uvarint(0)
    )
    r = call(b, 2, version, body, flexible=True)
    r.i32()  # throttle
    out = []
    for _ in range(r.uvarint() - 1):
        assert r.compact_string() == TOPIC
        for _ in range(r.uvarint() - 1):
            out.append((r.i32(), r.i16(), r.i64(), r.i64(), r.i32()))
            r.skip_tags()
        r.skip_tags()
    return out


def test_list_offsets_v9_latest_tiered(ob):
    # No tiered storage: no offset, no epoch, no error.
    assert list_offsets_v9(ob, [(0, -5)]) == [(0, NONE, -1, -1, -1)]
    assert list_offsets_v9(ob, [(0, -5)], version=8) == [(0, UNSUPPORTED_VERSION, -1, -1, -1)]
    assert list_offsets_v9(ob, [(0, -6)]) == [(0, UNSUPPORTED_VERSION, -1, -1, -1)]
    assert list_offsets_v9(ob, [(0, -1)]) == [(0, NONE, -1, 10, 0)]


def test_list_offsets_duplicate_partition(ob):
    got = list_offsets_v9(ob, [(0, -1), (0, -2), (1, -1)])
    assert got == [
        (0, INVALID_REQUEST, -1, -1, -1),
        (0, INVALID_REQUEST, -1, -1, -1),
        (1, NONE, -1, 0, 0),
    ]


# --- CreateTopics / DeleteTopics ------------------------------------------------


def create_topics_old(b, version, names, validate_only=False):
    topics = [string(n) + i32(1) + i16(1) + array([]) + array([]) for n in names]
    body = array(topics) + i32(30000)
    if version >= 1:
        body += i8(1 if validate_only else 0)
    r = call(b, 19, version, body)
    out = []
    for _ in range(r.i32()):
        name, err = r.string(), r.i16()
        msg = r.string() if version >= 1 else "<absent>"
        out.append((name, err, msg))
    assert r.pos == len(r.data)
    return out


def delete_topics_v0(b, names):
    r = call(b, 20, 0, array([string(n) for n in names]) + i32(30000))
    out = [(r.string(), r.i16()) for _ in range(r.i32())]
    assert r.pos == len(r.data)
    return out


def test_create_and_delete_topics_old_versions(ob):
    assert create_topics_old(ob, 0, ["oldver-c0"]) == [("oldver-c0", NONE, "<absent>")]
    cu.wait_topics_ready(ob.bootstrap, ["oldver-c0"], 1)
    assert create_topics_old(ob, 0, ["oldver-c0"]) == [("oldver-c0", TOPIC_ALREADY_EXISTS, "<absent>")]
    assert create_topics_old(ob, 1, ["oldver-c0"]) == [
        ("oldver-c0", TOPIC_ALREADY_EXISTS, "Topic 'oldver-c0' already exists.")
    ]
    # validateOnly: answered, nothing created.
    assert create_topics_old(ob, 1, ["oldver-c1"], validate_only=True) == [("oldver-c1", NONE, None)]
    assert delete_topics_v0(ob, ["oldver-c1"]) == [("oldver-c1", UNKNOWN_TOPIC_OR_PARTITION)]
    assert create_topics_old(ob, 1, ["oldver-c1"]) == [("oldver-c1", NONE, None)]
    # Kafka answers in no particular order.
    assert sorted(delete_topics_v0(ob, ["oldver-c0", "oldver-c1"])) == [
        ("oldver-c0", NONE),
        ("oldver-c1", NONE),
    ]


# --- OffsetCommit v1, OffsetFetch v1 ------------------------------------------------


def find_coordinator_v0(b, group, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while True:
        r = call(b, 10, 0, string(group))
        err = r.i16()
        if err == NONE or time.monotonic() > deadline:
            return err
        time.sleep(0.2)


def test_offset_commit_v1_is_read_back(ob):
    group = "oldver-g1"
    assert find_coordinator_v0(ob, group) == NONE
    part = i32(0) + i64(7) + i64(-1) + string("m")
    body = string(group) + i32(-1) + string("") + array([string(TOPIC) + array([part])])
    deadline = time.monotonic() + 30
    while True:
        # Retriable while the coordinator loads its partition, as clients do.
        r = call(ob, 8, 1, body)
        assert r.i32() == 1 and r.string() == TOPIC and r.i32() == 1
        p, err = r.i32(), r.i16()
        assert r.pos == len(r.data)
        if err not in (14, 15, 16) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (p, err) == (0, NONE)
    r = call(ob, 9, 1, string(group) + array([string(TOPIC) + array([i32(0), i32(1)])]))
    assert r.i32() == 1 and r.string() == TOPIC and r.i32() == 2
    assert (r.i32(), r.i64(), r.string(), r.i16()) == (0, 7, "m", NONE)
    assert (r.i32(), r.i64(), r.string(), r.i16()) == (1, -1, "", NONE)


# --- OffsetForLeaderEpoch v0-1 -----------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_offset_for_leader_epoch_old_versions(ob, version):
    parts = array([i32(0) + i32(0), i32(9) + i32(0)])
    r = call(ob, 23, version, array([string(TOPIC) + parts]))
    assert r.i32() == 1 and r.string() == TOPIC and r.i32() == 2
    got = []
    for _ in range(2):
        err, p = r.i16(), r.i32()
        epoch = r.i32() if version >= 1 else None
        got.append((err, p, epoch, r.i64()))
    assert r.pos == len(r.data)
    epoch = 0 if version >= 1 else None
    none_epoch = -1 if version >= 1 else None
    assert got == [(NONE, 0, epoch, 10), (UNKNOWN_TOPIC_OR_PARTITION, 9, none_epoch, -1)]


# --- DescribeConfigs v0 ------------------------------------------------------------


def test_describe_configs_v0(ob):
    keys = array([string("cleanup.policy"), string("retention.ms")])
    body = array([i8(2) + string(TOPIC) + keys, i8(2) + string("oldver-missing") + i32(-1)])
    r = call(ob, 32, 0, body)
    assert r.i32() == 0  # throttle
    results = []
    for _ in range(r.i32()):
        err, msg, rtype, rname = r.i16(), r.string(), r.i8(), r.string()
        configs = [(r.string(), r.string(), r.i8(), r.i8(), r.i8()) for _ in range(r.i32())]
        results.append((err, msg, rtype, rname, sorted(configs)))
    assert r.pos == len(r.data)
    assert results[0] == (
        NONE,
        "",
        2,
        TOPIC,
        # name, value, read only, is default (never set by Kafka 3.9), sensitive
        [("cleanup.policy", "delete", 0, 0, 0), ("retention.ms", "604800000", 0, 0, 0)],
    )
    # Kafka leaves the message at its default, "", unless an exception set it.
    assert results[1] == (UNKNOWN_TOPIC_OR_PARTITION, "", 2, "oldver-missing", [])


# --- FindCoordinator v6 ------------------------------------------------------------


def test_find_coordinator_share_key_type(ob):
    body = i8(2) + compact_array([compact_string("share-group")]) + uvarint(0)
    r = call(ob, 10, 6, body, flexible=True)
    r.i32()  # throttle
    assert r.uvarint() - 1 == 1
    key, node, host, port, err = r.compact_string(), r.i32(), r.compact_string(), r.i32(), r.i16()
    assert (key, node, host, port, err) == ("share-group", -1, "", -1, COORDINATOR_NOT_AVAILABLE)
    # Before v6 the share key type does not exist.
    r = call(ob, 10, 5, body, flexible=True)
    r.i32()
    assert r.uvarint() - 1 == 1
    r.compact_string(), r.i32(), r.compact_string(), r.i32()
    assert r.i16() == INVALID_REQUEST


# --- Fetch v17 --------------------------------------------------------------------


def topic_id(b):
    """Metadata v12 for TOPIC: its 16-byte id."""
    body = compact_array([bytes(16) + compact_string(TOPIC) + uvarint(0)]) + i8(0) + i8(0) + uvarint(0)
    r = call(b, 3, 12, body, flexible=True)
    r.i32()  # throttle
    for _ in range(r.uvarint() - 1):  # brokers
        r.i32(), r.compact_string(), r.i32(), r.compact_string(), r.skip_tags()
    r.compact_string(), r.i32()  # cluster id, controller
    assert r.uvarint() - 1 == 1
    assert r.i16() == NONE
    assert r.compact_string() == TOPIC
    return r.take(16)


def test_fetch_v17(ob):
    tid = topic_id(ob)
    part = i32(0) + i32(-1) + i64(0) + i32(-1) + i64(-1) + i32(1 << 20) + uvarint(0)
    body = (
        i32(500) + i32(1) + i32(1 << 20) + i8(0) + i32(0) + i32(-1)
        + compact_array([tid + compact_array([part]) + uvarint(0)])
        + compact_array([])
        + compact_string("")
        + uvarint(0)
    )
    r = call(ob, 1, 17, body, flexible=True)
    r.i32()  # throttle
    assert r.i16() == NONE
    r.i32()  # session id
    assert r.uvarint() - 1 == 1
    assert r.take(16) == tid
    assert r.uvarint() - 1 == 1
    p, err, hw = r.i32(), r.i16(), r.i64()
    assert (p, err, hw) == (0, NONE, 10)
