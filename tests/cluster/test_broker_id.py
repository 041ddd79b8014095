"""broker.id: a duplicate id is refused at start-up; broker.id=-1 takes a
generated id (> reserved.broker.max.id) from /brokers/seqid and keeps it in
meta.properties across restarts."""

import json

import cluster_util as cl

RESERVED_BROKER_MAX_ID = 1000  # Kafka's default reserved.broker.max.id


def test_duplicate_broker_id(cluster):
    (first,) = cluster.start(1)
    data_before, stat_before = cluster.zk_get("/brokers/ids/1")

    dup = cluster.new_broker(1)
    dup.start(wait=False)
    rc = dup.wait_exit(90)
    log = dup.log_text()
    assert rc != 0, f"a second broker.id=1 exited {rc}\n{dup.log_text(tail_lines=40)}"
    print("duplicate broker.id refusal:", [line for line in log.splitlines() if "already exists" in line][:1])
    if cl.TARGET == "kafka":
        assert "Error while creating ephemeral at /brokers/ids/1, node already exists and owner" in log, \
            dup.log_text(tail_lines=40)
        assert "does not match current session" in log
    else:
        assert "/brokers/ids/1" in log or "broker.id" in log, \
            f"the refusal must name /brokers/ids/1 or broker.id:\n{dup.log_text(tail_lines=40)}"

    # The first broker is untouched: same registration, same session, still serving.
    assert first.running()
    data_after, stat_after = cluster.zk_get("/brokers/ids/1")
    assert (data_after, stat_after.czxid, stat_after.ephemeralOwner) == \
        (data_before, stat_before.czxid, stat_before.ephemeralOwner)
    assert json.loads(data_after)["port"] == first.port
    view = cluster.wait_converged(brokers=[first])
    assert view["brokers"] == {1: ("127.0.0.1", first.port, None)}


def test_generated_broker_id(cluster):
    a = cluster.new_broker(None)
    a.start()
    cluster_id = cluster.zk_json("/cluster/id")["id"]
    generated = a.broker_id
    assert generated is not None and generated > RESERVED_BROKER_MAX_ID, a.meta_properties()
    # The id is reserved.broker.max.id + the version of /brokers/seqid after
    # the broker bumped it.
    seqid = cluster.zk_exists("/brokers/seqid")
    assert generated == RESERVED_BROKER_MAX_ID + seqid.version == 1001
    assert a.meta_properties() == {"broker.id": str(generated), "version": "0", "cluster.id": cluster_id}
    reg = cluster.zk_json(f"/brokers/ids/{generated}")
    assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{a.port}"]
    assert cluster.registered_ids() == [generated]

    # A second generated id is the next sequence number.
    b = cluster.new_broker(None)
    b.start()
    assert b.broker_id == 1002 and cluster.zk_exists("/brokers/seqid").version == 2
    cluster.wait_converged()

    # Across a restart the id comes from meta.properties: no new sequence
    # number is drawn.
    meta_before = (a.tmp / "data" / "meta.properties").read_text()
    a.restart()
    assert a.broker_id == generated
    assert cluster.zk_exists("/brokers/seqid").version == 2
    assert a.meta_properties() == {"broker.id": str(generated), "version": "0", "cluster.id": cluster_id}
    view = cluster.wait_converged()
    assert sorted(view["brokers"]) == [1001, 1002]
    assert json.loads(cluster.zk_get(f"/brokers/ids/{generated}")[0])["port"] == a.port
    print(f"generated ids 1001, 1002; meta.properties of 1001:\n{meta_before}")
