"""What a 3-broker cluster writes to ZooKeeper (byte for byte the shapes
Kafka 3.9 writes, since Kafka's own tools read them), and that every broker
answers the same Metadata."""

import json
import re
import time
from collections import Counter

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import cluster_util as cl

TOPIC_A = "layout-a"  # 6 partitions, RF 3, created through a non-controller
TOPIC_B = "layout-b"  # 3 partitions, RF 2, retention.ms=12345, through another

BROKER_REGISTRATION_KEYS = {
    "features",
    "listener_security_protocol_map",
    "endpoints",
    "jmx_port",
    "port",
    "host",
    "version",
    "timestamp",
}
# Children Kafka 3.9 has created under the chroot once a controller is elected
# and a producer id block was handed out.
ROOT_CHILDREN = [
    "admin",
    "brokers",
    "cluster",
    "config",
    "consumers",
    "controller",
    "controller_epoch",
    "feature",
    "isr_change_notification",
    "latest_producer_id_block",
    "log_dir_event_notification",
]
PERSISTENT_EMPTY_PATHS = [
    "/admin",
    "/admin/delete_topics",
    "/brokers",
    "/brokers/ids",
    "/brokers/seqid",
    "/brokers/topics",
    "/cluster",
    "/config",
    "/config/brokers",
    "/config/changes",
    "/config/clients",
    "/config/ips",
    "/config/topics",
    "/config/users",
    "/consumers",
    "/isr_change_notification",
    "/log_dir_event_notification",
]
KAFKA_UUID = re.compile(r"^[A-Za-z0-9_-]{22}$")


def _now_ms():
    return int(time.time() * 1000)


def _assert_timestamp(value, what):
    assert isinstance(value, str) and value.isdigit(), f"{what}: timestamp {value!r} is not a string of ms"
    assert abs(int(value) - _now_ms()) < 10 * 60 * 1000, f"{what}: timestamp {value} is not near now"


def _assert_balanced(assignment, brokers, rf, what):
    for p, replicas in assignment.items():
        assert len(replicas) == rf and len(set(replicas)) == rf, f"{what} p{p}: replicas {replicas}"
        assert set(replicas) <= set(brokers), f"{what} p{p}: replicas {replicas} not in {brokers}"
    # Kafka's rack-unaware assignment spreads preferred leaders and replicas
    # evenly when the counts divide.
    firsts = Counter(r[0] for r in assignment.values())
    assert sorted(firsts.values()) == [len(assignment) // len(brokers)] * len(brokers), \
        f"{what}: preferred leaders {dict(firsts)} not balanced"
    counts = Counter(x for r in assignment.values() for x in r)
    assert sorted(counts.values()) == [len(assignment) * rf // len(brokers)] * len(brokers), \
        f"{what}: replicas per broker {dict(counts)} not balanced"


def test_zk_layout(cluster):
    brokers = cluster.start(3, {"offsets.topic.replication.factor": 3})
    ids = [b.broker_id for b in brokers]
    controller = cluster.controller_id()
    assert controller in ids
    others = [i for i in ids if i != controller]
    cluster.create_topic(TOPIC_A, 6, 3, via=others[0])
    cluster.create_topic(TOPIC_B, 3, 2, config={"retention.ms": "12345"}, via=others[1])
    view = cluster.wait_converged(topics=[TOPIC_A, TOPIC_B])

    # A producer id block is taken from ZooKeeper on the first idempotent
    # producer; InitProducerId goes to one chosen broker so the block's
    # owner is known.
    pid, pepoch = cl.init_producer_id(cluster.broker(others[0]).port)
    assert (pid, pepoch) == (0, 0)

    # --- /brokers/ids/<id> (ephemeral, one ZooKeeper session per broker) ---
    owners = {}
    for b in brokers:
        data, stat = cluster.zk_get(f"/brokers/ids/{b.broker_id}")
        reg = json.loads(data)
        assert set(reg) == BROKER_REGISTRATION_KEYS, f"/brokers/ids/{b.broker_id}: keys {sorted(reg)}"
        assert reg["version"] == 5
        assert reg["features"] == {}
        assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{b.port}"]
        assert reg["host"] == "127.0.0.1" and reg["port"] == b.port
        assert reg["jmx_port"] == -1
        assert "rack" not in reg
        _assert_timestamp(reg["timestamp"], f"/brokers/ids/{b.broker_id}")
        assert stat.ephemeralOwner != 0, f"/brokers/ids/{b.broker_id} is not ephemeral"
        owners[b.broker_id] = stat.ephemeralOwner
    assert len(set(owners.values())) == 3, f"brokers share ZooKeeper sessions: {owners}"

    # --- /controller, /controller_epoch ---
    data, stat = cluster.zk_get("/controller")
    ctl = json.loads(data)
    assert set(ctl) == {"version", "brokerid", "timestamp", "kraftControllerEpoch"}, f"/controller: {ctl}"
    assert ctl["version"] == 2 and ctl["brokerid"] == controller and ctl["kraftControllerEpoch"] == -1
    _assert_timestamp(ctl["timestamp"], "/controller")
    assert stat.ephemeralOwner == owners[controller], \
        "/controller must be owned by the controller broker's own ZooKeeper session"
    data, stat = cluster.zk_get("/controller_epoch")
    assert data == b"1", f"/controller_epoch of a new cluster: {data!r}"
    assert stat.ephemeralOwner == 0

    # --- /cluster/id, meta.properties ---
    cid = cluster.zk_json("/cluster/id")
    assert set(cid) == {"version", "id"} and cid["version"] == "1", f"/cluster/id: {cid}"
    assert KAFKA_UUID.match(cid["id"]), f"cluster id {cid['id']!r}"
    for b in brokers:
        assert b.meta_properties() == {"broker.id": str(b.broker_id), "version": "0", "cluster.id": cid["id"]}

    # --- /feature ---
    assert cluster.zk_json("/feature") == {"features": {}, "version": 2, "status": 1}

    # --- persistent paths, with no data ---
    assert cluster.zk_children("/") == ROOT_CHILDREN
    for p in PERSISTENT_EMPTY_PATHS:
        data, stat = cluster.zk_get(p)
        assert not data, f"{p} holds {data!r}"
        assert stat.ephemeralOwner == 0, f"{p} is ephemeral"
    assert cluster.zk_children("/brokers") == ["ids", "seqid", "topics"]
    assert cluster.zk_children("/admin") == ["delete_topics"]
    assert cluster.zk_children("/config") == ["brokers", "changes", "clients", "ips", "topics", "users"]
    assert cluster.zk_children("/brokers/topics") == [TOPIC_A, TOPIC_B]
    assert cluster.zk_children("/config/topics") == [TOPIC_A, TOPIC_B]

    # --- /latest_producer_id_block ---
    block = cluster.zk_json("/latest_producer_id_block")
    assert block == {"version": 1, "broker": others[0], "block_start": "0", "block_end": "999"}

    # --- topics ---
    epoch = cluster.controller_epoch()
    for topic, parts, rf, config in [(TOPIC_A, 6, 3, {}), (TOPIC_B, 3, 2, {"retention.ms": "12345"})]:
        tnode = cluster.zk_json(f"/brokers/topics/{topic}")
        assert set(tnode) == {"partitions", "topic_id", "adding_replicas", "removing_replicas", "version"}, tnode
        assert tnode["version"] == 3
        assert tnode["adding_replicas"] == {} and tnode["removing_replicas"] == {}
        assert sorted(tnode["partitions"], key=int) == [str(p) for p in range(parts)]
        assert KAFKA_UUID.match(tnode["topic_id"]), tnode["topic_id"]
        assignment = cluster.assignment(topic)
        _assert_balanced(assignment, ids, rf, topic)
        assert cluster.zk_children(f"/brokers/topics/{topic}") == ["partitions"]
        assert cluster.zk_children(f"/brokers/topics/{topic}/partitions") == sorted(str(p) for p in range(parts))
        for p in range(parts):
            assert cluster.zk_children(f"/brokers/topics/{topic}/partitions/{p}") == ["state"]
            data, _ = cluster.zk_get(f"/brokers/topics/{topic}/partitions/{p}")
            assert not data
            state = cluster.partition_state(topic, p)
            assert set(state) == {"controller_epoch", "leader", "version", "leader_epoch", "isr"}, state
            assert state["version"] == 1 and state["leader_epoch"] == 0
            assert state["controller_epoch"] == epoch
            assert state["leader"] == assignment[p][0], f"{topic} p{p}: leader is not the preferred replica"
            assert state["isr"] == assignment[p], f"{topic} p{p}: new ISR {state['isr']} != {assignment[p]}"
        assert cluster.zk_json(f"/config/topics/{topic}") == {"version": 1, "config": config}

        # Metadata (every broker returns the same, checked by wait_converged).
        mt = view["topics"][topic]
        assert mt["error"] == 0 and mt["topic_id"] == tnode["topic_id"]
        for p in range(parts):
            leader, replicas, isr, offline = mt["partitions"][p]
            state = cluster.partition_state(topic, p)
            assert (leader, replicas, isr, offline) == (state["leader"], assignment[p], sorted(state["isr"]), [])
    assert view["cluster_id"] == cid["id"]
    assert view["controller_id"] == controller
    assert view["brokers"] == {b.broker_id: ("127.0.0.1", b.port, None) for b in brokers}
    full = {b.broker_id: b.metadata() for b in brokers}
    for bid, md in full.items():
        for topic in (TOPIC_A, TOPIC_B):
            assert not md["topics"][topic]["internal"]
            for p, v in md["topics"][topic]["partitions"].items():
                assert v["error"] == 0 and v["leader_epoch"] == 0, f"broker {bid} {topic} p{p}: {v}"

    # --- the same through librdkafka, one bootstrap broker at a time ---
    for b in brokers:
        md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=30)
        assert md.controller_id == controller and md.cluster_id == cid["id"]
        assert {i: (x.host, x.port) for i, x in md.brokers.items()} == \
            {x.broker_id: ("127.0.0.1", x.port) for x in brokers}
        for topic in (TOPIC_A, TOPIC_B):
            got = {p: (pm.leader, list(pm.replicas), sorted(pm.isrs)) for p, pm in md.topics[topic].partitions.items()}
            want = {p: (v[0], v[1], v[2]) for p, v in view["topics"][topic]["partitions"].items()}
            assert got == want, f"librdkafka via broker {b.broker_id}: {topic}"

    # An idempotent producer through the cluster works end to end.
    errors = []
    prod = Producer({"bootstrap.servers": cluster.bootstrap(), "enable.idempotence": True})
    for i in range(30):
        prod.produce(TOPIC_A, value=b"v%d" % i, partition=i % 6, on_delivery=lambda e, m: e and errors.append(e))
    assert prod.flush(60) == 0 and not errors, errors
    block = cluster.zk_json("/latest_producer_id_block")
    assert set(block) == {"version", "broker", "block_start", "block_end"} and block["broker"] in ids
    assert int(block["block_end"]) == int(block["block_start"]) + 999 and int(block["block_start"]) % 1000 == 0


def test_replication_factor_above_broker_count(cluster):
    cluster.start(3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    futs = admin.create_topics([NewTopic("layout-rf4", num_partitions=1, replication_factor=4)],
                               request_timeout=30)
    with pytest.raises(KafkaException) as ei:
        futs["layout-rf4"].result(60)
    err = ei.value.args[0]
    assert err.code() == KafkaError.INVALID_REPLICATION_FACTOR == 38, err
    assert "Replication factor: 4 larger than available brokers: 3" in err.str(), err.str()
    print(f"RF 4 on 3 brokers: {err.name()} ({err.code()}): {err.str()!r}")
    assert not cluster.zk_exists("/brokers/topics/layout-rf4")
    assert not cluster.zk_exists("/config/topics/layout-rf4")
