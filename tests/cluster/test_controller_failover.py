"""kill -9 of the controller: another broker takes /controller with the
epoch bumped once its ZooKeeper session expires."""

import json
import time

SESSION_TIMEOUT_MS = 6000
MARGIN_S = 10.0  # expiry is detected on ZooKeeper's tick; JVM brokers are slow


def test_controller_failover(cluster):
    brokers = cluster.start(3, {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS})
    cluster.create_topic("failover-before", 3, 3)
    cluster.wait_converged(topics=["failover-before"])
    old = cluster.controller_id()
    old_epoch = cluster.controller_epoch()
    _, old_stat = cluster.zk_get("/controller")

    t0 = time.monotonic()
    cluster.broker(old).kill9()
    survivors = [b for b in brokers if b.broker_id != old]

    def new_controller():
        node = cluster.zk_exists("/controller")
        if node is None or node.czxid == old_stat.czxid:
            return None
        return cluster.controller_id()

    new = cluster.wait_for(new_controller, SESSION_TIMEOUT_MS / 1000 + MARGIN_S, "a new /controller")
    elapsed = time.monotonic() - t0
    assert new != old and new in [b.broker_id for b in survivors]
    assert cluster.controller_epoch() == old_epoch + 1

    data, stat = cluster.zk_get("/controller")
    ctl = json.loads(data)
    assert set(ctl) == {"version", "brokerid", "timestamp", "kraftControllerEpoch"}
    assert ctl["version"] == 2 and ctl["kraftControllerEpoch"] == -1
    _, reg = cluster.zk_get(f"/brokers/ids/{new}")
    assert stat.ephemeralOwner == reg.ephemeralOwner, "/controller must be held by the new controller's session"
    assert cluster.registered_ids() == sorted(b.broker_id for b in survivors)

    # Metadata from each survivor names the new controller and drops the dead broker.
    view = cluster.wait_converged(timeout_s=MARGIN_S, brokers=survivors, topics=["failover-before"])
    assert view["controller_id"] == new
    assert old not in view["brokers"]
    for p, (leader, replicas, isr, offline) in view["topics"]["failover-before"]["partitions"].items():
        assert leader != old and old not in isr, f"p{p}: leader {leader} isr {isr}"
        assert offline == [old], f"p{p}: offline replicas {offline}"
        state = cluster.partition_state("failover-before", p)
        # Every partition had a replica on the dead broker, so the new
        # controller rewrote every state.
        assert state["controller_epoch"] == old_epoch + 1, f"p{p}: {state}"

    # The new controller does controller work: a topic created now is placed
    # on the live brokers only.
    cluster.create_topic("failover-after", 2, 2)
    view = cluster.wait_converged(brokers=survivors, topics=["failover-after"])
    for p, (leader, replicas, isr, offline) in view["topics"]["failover-after"]["partitions"].items():
        assert sorted(replicas) == sorted(b.broker_id for b in survivors), f"p{p}: replicas {replicas}"
        assert leader == replicas[0] and offline == []
    assert cluster.partition_state("failover-after", 0)["controller_epoch"] == old_epoch + 1
    print(f"controller {old} -> {new} in {elapsed:.2f}s (session timeout {SESSION_TIMEOUT_MS} ms)")
