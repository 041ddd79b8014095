"""Partition reassignment on a ZooKeeper-mode cluster, as Kafka 3.9.1 does
it: Kafka's kafka-reassign-partitions tool (org.apache.kafka.tools.reassign.
ReassignPartitionsCommand) end to end under a live idempotent producer and
a consumer, with a fourth broker joining; draining a broker; --cancel;
the controller killed mid-reassignment; the legacy /admin/reassign_partitions
znode; a pure reordering; raw AlterPartitionReassignments (API 45) and
ListPartitionReassignments (API 46) with Kafka's exact error codes and
messages; topic deletion during a reassignment.

A reassignment that must stay in flight is made slow the way operators do
it: `--throttle 1` (1 B/s) with ~6 MiB already in the partition. The
follower's first fetch brings at most replica.fetch.max.bytes (1 MiB), after
which the replication quota (window 11 x 1 s) holds every further fetch for
~11 s, so the new replica cannot catch up for a minute.

Every broker gets auto.leader.rebalance.enable=false: Kafka's automatic
preferred-leader election (first run 5 s after a controller starts) would
otherwise move leadership to the first replica of an in-flight reassignment
on its own. log.segment.delete.delay.ms / log.initial.task.delay.ms = 1 s
make Kafka delete a removed replica's renamed <topic>-<p>.<uuid>-delete
directory within seconds instead of after 30-60 s.

KSHARD_TEST_TARGET=kafka proves every assertion against Apache Kafka 3.9.1.
"""

import json
import time
from collections import Counter

import cluster_util as cl
import durability
import reassign_util as ru
import test_dynamic_config as dc

OVERRIDES = {
    "auto.leader.rebalance.enable": "false",
    "log.segment.delete.delay.ms": "1000",
    "log.initial.task.delay.ms": "1000",
    "zookeeper.session.timeout.ms": "3000",
}
STUCK_BATCHES = 48  # x 16 records x 8 KiB = 6 MiB
STUCK_RECORDS = STUCK_BATCHES * 16
RATES_1 = {k: "1" for k in ru.BROKER_THROTTLES}
NOT_CONTROLLER_MSG = "This is not the correct controller for this cluster."


def controller(cluster):
    return cluster.broker(cluster.controller_id())


def verify_done_lines(topic, partitions, brokers):
    """--verify once everything is done: the status, an empty line (the
    replica log-dir moves, none), then the throttles it clears."""
    return (["Status of partition reassignment:"] + ru.completed_lines(topic, partitions) +
            ["", f"Clearing broker-level throttles on brokers {','.join(map(str, brokers))}",
             f"Clearing topic-level throttles on topic {topic}"])


def tool_json(topic, assignment):
    """Kafka's formatAsReassignmentJson, byte for byte."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for p, r in sorted(assignment.items())]}, separators=(",", ":"))


def execute_lines(topic, current, throttle=None):
    parts = sorted(current)
    started = "reassignments" if len(parts) > 1 else "reassignment"
    out = ["Current partition replica assignment", "", tool_json(topic, current), "",
           "Save this to use as the --reassignment-json-file option during rollback"]
    if throttle is not None:
        out += ["Warning: You must run --verify periodically, until the reassignment completes, "
                "to ensure the throttle is removed.",
                f"The inter-broker throttle limit was set to {throttle} B/s"]
    return out + [f"Successfully started partition {started} for {','.join(f'{topic}-{p}' for p in parts)}"]


def wait_dirs(cluster, topic, want, timeout_s=30):
    """Every live broker's log dir holds exactly the partition directories
    of `want` ({partition: replicas}) for it, no renamed -delete ones."""
    def ok():
        got = {b.broker_id: b.partition_dirs(topic) for b in cluster.live()}
        exp = {b.broker_id: sorted(f"{topic}-{p}" for p, r in want.items() if b.broker_id in r)
               for b in cluster.live()}
        return got == exp or None

    try:
        cluster.wait_for(ok, timeout_s, f"partition directories of {topic} matching {want}", 0.25)
    except cl.ClusterError as e:
        got = {b.broker_id: b.partition_dirs(topic) for b in cluster.live()}
        raise cl.ClusterError(f"{e}\ndirectories now: {got}") from None


def wait_broker_throttles(cluster, brokers, want, timeout_s=15):
    """Each broker's own dynamic throttle rates, read from itself (a broker
    applies its /config/brokers/<id> change on the ZooKeeper notification,
    a moment after the write)."""
    for b in brokers:
        cluster.wait_for(lambda: ru.broker_dynamic(cluster.broker(b).port, b) == want, timeout_s,
                         f"broker {b} throttle rates {want}")


def wait_metadata(cluster, topic, want, leaders=None):
    """Every live broker's Metadata lists `want` as the replicas (in
    order) with the ISR equal to them; `leaders` {p: id} if given."""
    def ok():
        view = cluster.agreed_metadata()
        if view is None or topic not in view["topics"]:
            return None
        parts = view["topics"][topic]["partitions"]
        for p, reps in want.items():
            leader, replicas, isr, offline = parts[p]
            if replicas != reps or isr != sorted(reps) or offline or leader not in reps:
                return None
            if leaders is not None and leader != leaders[p]:
                return None
        return view

    return cluster.wait_for(ok, 30, f"Metadata of {topic} on every broker showing {want}", 0.25)


def test_tool_moves_partitions_to_a_new_broker_under_load(cluster):
    """kafka-reassign-partitions --generate / --execute --throttle / --verify
    onto a fourth broker while an idempotent acks=all producer and a
    consumer run. Kafka facts asserted: --generate prints the current and
    the proposed JSON (round-robin over --broker-list: 4 partitions x RF 3
    on 4 brokers puts every broker in exactly 3 partitions); --execute sets
    leader/follower.replication.throttled.rate on every broker the moves
    touch (sources and destinations) and the topic's
    leader.replication.throttled.replicas = every "<p>:<current replica>" of
    the plan, follower... = every "<p>:<added replica>" (sorted as strings);
    a --verify that finds nothing in flight clears the rates on all brokers
    and both topic keys, leaving empty {"version":1,"config":{}} znodes;
    the topic znode ends as version 3 with adding_replicas and
    removing_replicas both {}."""
    t, n = "ra-move", 4
    cluster.start(3, OVERRIDES)
    cluster.create_topic(t, n, 3, {"min.insync.replicas": "2"})
    cluster.wait_converged(topics=[t])
    topic_id = ru.topic_znode(cluster, t)["topic_id"]
    producer = durability.RdkafkaProducer(cluster.bootstrap(), t, n, tag="ra", rate=150)
    consumer = ru.TailConsumer(cluster.bootstrap(), t, n)
    try:
        durability.wait_acked_more([producer], 100, 60)
        cluster.wait_for(lambda: consumer.count() > 0, 30, "the consumer reading")

        b4 = cluster.new_broker(4, OVERRIDES)
        b4.start()
        cluster.wait_converged(topics=[t])
        assert b4.partition_dirs(t) == []
        current = cluster.assignment(t)

        topics_file = ru.write_json({"version": 1, "topics": [{"topic": t}]})
        gen = ru.reassign(cluster, "--generate", "--topics-to-move-json-file", topics_file,
                          "--broker-list", "1,2,3,4").stdout
        lines = gen.splitlines()
        assert len(lines) == 5, gen
        assert lines[0] == "Current partition replica assignment", gen
        assert lines[1] == tool_json(t, current), gen
        assert lines[2:4] == ["", "Proposed partition reassignment configuration"], gen
        plan = json.loads(lines[4])
        proposed = {e["partition"]: e["replicas"] for e in plan["partitions"]}
        assert sorted(proposed) == list(range(n)), gen
        assert all(e["log_dirs"] == ["any"] * 3 and e["topic"] == t for e in plan["partitions"]), gen
        assert all(len(set(r)) == 3 for r in proposed.values()), gen
        assert Counter(b for r in proposed.values() for b in r) == {1: 3, 2: 3, 3: 3, 4: 3}, gen

        acked_at_execute = producer.log.acked
        out = ru.execute(cluster, plan, "--throttle", "10000000")
        assert out.splitlines() == execute_lines(t, current, throttle=10000000), out

        leader_thr = ",".join(sorted(f"{p}:{b}" for p in range(n) for b in current[p]))
        follower_thr = ",".join(sorted(f"{p}:{b}" for p in range(n) for b in proposed[p] if b not in current[p]))
        rates = {k: "10000000" for k in ru.BROKER_THROTTLES}
        for b in (1, 2, 3, 4):
            assert cluster.zk_json(f"/config/brokers/{b}") == {"version": 1, "config": rates}
        wait_broker_throttles(cluster, (1, 2, 3, 4), rates)
        want_topic = {"leader.replication.throttled.replicas": leader_thr,
                      "follower.replication.throttled.replicas": follower_thr}
        assert ru.topic_dynamic(b4.port, t) == want_topic
        assert cluster.zk_json(f"/config/topics/{t}") == {
            "version": 1, "config": {"min.insync.replicas": "2", **want_topic}}

        out = ru.verify_until_complete(cluster, plan)
        assert out.splitlines() == verify_done_lines(t, range(n), (1, 2, 3, 4)), out
        for b in (1, 2, 3, 4):
            assert cluster.zk_json(f"/config/brokers/{b}") == {"version": 1, "config": {}}
        wait_broker_throttles(cluster, (1, 2, 3, 4), {})
        assert cluster.zk_json(f"/config/topics/{t}") == {"version": 1, "config": {"min.insync.replicas": "2"}}
        assert dc.topic_overrides(cluster.broker(1).port, t) == {"min.insync.replicas": "2"}

        assert ru.topic_znode(cluster, t) == {
            "version": 3, "topic_id": topic_id, "partitions": {str(p): r for p, r in proposed.items()},
            "adding_replicas": {}, "removing_replicas": {}}
        assert ru.list_reassignments(controller(cluster).port) == (0, "", {})
        assert ru.list_tool(cluster) == "No partition reassignments found.\n"
        wait_metadata(cluster, t, proposed)
        wait_dirs(cluster, t, proposed)
        assert b4.partition_dirs(t) == sorted(f"{t}-{p}" for p, r in proposed.items() if 4 in r)
        assert len(b4.partition_dirs(t)) == 3

        # Producing goes on after the move, then everything is read back.
        durability.wait_acked_more([producer], 100, 60)
        assert producer.log.acked > acked_at_execute
        producer.stop()
        assert producer.log.failed == 0 and not producer.log.fatal, (producer.log.errors, producer.log.fatal)
        ends = ru.end_offsets(cluster.bootstrap(), t, n)
        records = consumer.finish(ends)
    finally:
        producer.kill()
        consumer.stop.set()
    # Idempotent producer, no failed sends: the log is exactly the
    # acknowledged records, each at the offset it was acknowledged at.
    check = durability.LogCheck([producer.log], n)
    for p, o, v in records:
        check.add(p, o, v, None)
    check.high_watermarks = ends
    summary = check.finish()
    assert check.problems() == [], check.problems()
    assert summary["unacked_present"] == 0, summary
    assert summary["records_read"] == summary["records_acked"] == producer.log.acked == sum(ends.values()), summary


def test_drain_a_broker(cluster):
    """Every partition moved off broker 3 with a hand-written plan (no
    throttle: --execute prints no warning lines). A partition whose leader
    was broker 3 gets a new leader from the target; broker 3 ends with no
    directory of the topic and in no assignment, ISR or Metadata replica
    list; no record is lost."""
    t = "ra-drain"
    cluster.start(3, OVERRIDES)
    before = {0: [1, 3], 1: [3, 2], 2: [2, 1], 3: [3, 1]}
    target = {0: [1, 2], 1: [1, 2], 2: [2, 1], 3: [2, 1]}
    ru.create(cluster, t, before)
    for p, reps in before.items():
        ru.fill(cluster.broker(reps[0]).port, t, p, 4)
    ends = ru.end_offsets(cluster.bootstrap(), t, 4)
    assert ends == {p: 64 for p in range(4)}
    wait_dirs(cluster, t, before)

    out = ru.execute(cluster, ru.plan(t, target))
    assert out.splitlines() == execute_lines(t, before), out
    out = ru.verify_until_complete(cluster, ru.plan(t, target))
    assert out.splitlines() == verify_done_lines(t, range(4), (1, 2, 3)), out

    assert ru.settled(cluster, t, target), ru.topic_znode(cluster, t)
    for p, reps in target.items():
        state = cluster.partition_state(t, p)
        assert state["leader"] in reps and sorted(state["isr"]) == sorted(reps), (p, state)
    # Partitions 1 and 3 were led by broker 3: a new leader from the target.
    assert cluster.partition_state(t, 1)["leader"] == 1 and cluster.partition_state(t, 3)["leader"] == 2
    wait_metadata(cluster, t, target)
    assert cluster.metadata(3)["topics"][t]["partitions"][1]["replicas"] == [1, 2]
    wait_dirs(cluster, t, target)
    assert cluster.broker(3).partition_dirs(t) == []
    assert ru.list_reassignments(controller(cluster).port) == (0, "", {})
    assert ru.end_offsets(cluster.bootstrap(), t, 4) == ends


def test_cancel(cluster):
    """--cancel of a reassignment that cannot finish (1 B/s, 6 MiB). While it
    runs: the topic znode holds replicas = target + the removed ones
    ([2,3,1]), adding {0:[3]}, removing {0:[1]}; the adding replica's
    directory exists on broker 3 but it is not in the ISR; --verify says
    "still in progress" and keeps the throttles. Cancelling makes the
    replicas the in-flight list minus the adding ones: [2,1], NOT the
    original order [1,2] (Kafka's cancel keeps the reassignment's order);
    the leader stays 1; broker 3's directory is deleted; --cancel clears
    the throttles. The tool's cancel output has no line break after "None
    of the specified partition moves are active." (System.out.print)."""
    t = "ra-cancel"
    cluster.start(3, OVERRIDES)
    ru.create(cluster, t, {0: [1, 2]})
    node0 = ru.topic_znode(cluster, t)
    ru.fill(cluster.broker(1).port, t, 0, STUCK_BATCHES)
    plan = ru.plan(t, {0: [2, 3]})

    out = ru.execute(cluster, plan, "--throttle", "1")
    assert out.splitlines() == execute_lines(t, {0: [1, 2]}, throttle=1), out
    cluster.wait_for(lambda: cluster.broker(3).partition_dirs(t) == [f"{t}-0"], 30,
                     "broker 3 creating the adding replica")
    moving = dict(node0, partitions={"0": [2, 3, 1]}, adding_replicas={"0": [3]}, removing_replicas={"0": [1]})
    assert ru.topic_znode(cluster, t) == moving
    assert ru.list_reassignments(controller(cluster).port) == (0, "", {(t, 0): ([2, 3, 1], [3], [1])})
    assert ru.list_tool(cluster) == f"Current partition reassignments:\n{t}-0: replicas: 2,3,1. adding: 3. removing: 1.\n"
    out = ru.verify(cluster, plan)
    assert out == f"Status of partition reassignment:\nReassignment of partition {t}-0 is still in progress.\n\n", out
    state = cluster.partition_state(t, 0)
    assert state["leader"] == 1 and sorted(state["isr"]) == [1, 2], state
    assert ru.topic_dynamic(cluster.broker(2).port, t) == {
        "leader.replication.throttled.replicas": "0:1,0:2", "follower.replication.throttled.replicas": "0:3"}
    wait_broker_throttles(cluster, (1, 2, 3), RATES_1)
    assert ru.topic_znode(cluster, t) == moving, "the reassignment finished despite the 1 B/s throttle"

    out = ru.cancel(cluster, plan)
    assert out == (f"Successfully cancelled partition reassignment for: {t}-0\n"
                   "None of the specified partition moves are active."
                   "Clearing broker-level throttles on brokers 1,2,3\n"
                   f"Clearing topic-level throttles on topic {t}\n"), out
    assert ru.topic_znode(cluster, t) == dict(node0, partitions={"0": [2, 1]})
    assert ru.list_reassignments(controller(cluster).port) == (0, "", {})
    assert ru.list_tool(cluster) == "No partition reassignments found.\n"
    state = cluster.partition_state(t, 0)
    assert state["leader"] == 1 and sorted(state["isr"]) == [1, 2], state
    wait_dirs(cluster, t, {0: [1, 2]})
    wait_broker_throttles(cluster, (1, 2, 3), {})
    assert ru.topic_dynamic(cluster.broker(1).port, t) == {}
    wait_metadata(cluster, t, {0: [2, 1]}, leaders={0: 1})

    out = ru.verify(cluster, plan)
    assert out == (f"Status of partition reassignment:\nThere is no active reassignment of partition {t}-0, "
                   "but replica set is 2,1 rather than 2,3.\n\n"
                   "Clearing broker-level throttles on brokers 1,2,3\n"
                   f"Clearing topic-level throttles on topic {t}\n"), out
    out = ru.cancel(cluster, plan)
    assert out == ("None of the specified partition reassignments are active.\n"
                   "None of the specified partition moves are active."
                   "Clearing broker-level throttles on brokers 1,2,3\n"
                   f"Clearing topic-level throttles on topic {t}\n"), out
    assert ru.end_offsets(cluster.bootstrap(), t, 1) == {0: STUCK_RECORDS}


def test_controller_killed_mid_reassignment(cluster):
    """kill -9 of the controller while a throttled move [x] -> [y] runs (the
    controller is neither x nor y). The tool throttles only the brokers the
    move touches (x and y; no /config/brokers/<controller>). The new
    controller (epoch + 1) reads the in-flight reassignment from the topic
    znode: it lists it at once, and completes it once the rates are
    deleted with kafka-configs; the removed replica's directory goes."""
    t = "ra-failover"
    cluster.start(3, OVERRIDES)
    old = cluster.controller_id()
    x, y = [b for b in (1, 2, 3) if b != old]
    ru.create(cluster, t, {0: [x]})
    node0 = ru.topic_znode(cluster, t)
    ru.fill(cluster.broker(x).port, t, 0, STUCK_BATCHES)
    plan = ru.plan(t, {0: [y]})
    ru.execute(cluster, plan, "--throttle", "1")
    assert not cluster.zk_exists(f"/config/brokers/{old}")
    for b in (x, y):
        assert cluster.zk_json(f"/config/brokers/{b}") == {"version": 1, "config": RATES_1}
    cluster.wait_for(lambda: cluster.broker(y).partition_dirs(t) == [f"{t}-0"], 30,
                     f"broker {y} creating the adding replica")
    moving = dict(node0, partitions={"0": [y, x]}, adding_replicas={"0": [y]}, removing_replicas={"0": [x]})
    assert ru.topic_znode(cluster, t) == moving

    epoch = cluster.controller_epoch()
    _, old_stat = cluster.zk_get("/controller")
    cluster.broker(old).kill9()

    def new_controller():
        node = cluster.zk_exists("/controller")
        return None if node is None or node.czxid == old_stat.czxid else cluster.controller_id()

    new = cluster.wait_for(new_controller, 30, "a new controller")
    assert new in (x, y) and cluster.controller_epoch() == epoch + 1
    cluster.wait_for(lambda: ru.list_reassignments(cluster.broker(new).port) == (0, "", {(t, 0): ([y, x], [y], [x])}),
                     15, "the new controller listing the reassignment")
    assert ru.topic_znode(cluster, t) == moving, "completed while throttled"

    ru.remove_broker_throttles(cluster, (x, y))
    cluster.wait_for(lambda: ru.settled(cluster, t, {0: [y]}), 60, "the new controller completing the move")
    assert ru.topic_znode(cluster, t) == dict(node0, partitions={"0": [y]})
    state = cluster.partition_state(t, 0)
    assert state["leader"] == y and state["isr"] == [y] and state["controller_epoch"] == epoch + 1, state
    assert ru.list_reassignments(cluster.broker(new).port) == (0, "", {})
    wait_dirs(cluster, t, {0: [y]})
    wait_metadata(cluster, t, {0: [y]})
    assert ru.end_offsets(cluster.bootstrap(), t, 1) == {0: STUCK_RECORDS}
    out = ru.verify_until_complete(cluster, plan)
    assert out.splitlines() == verify_done_lines(t, [0], sorted((x, y))), out
    assert ru.topic_dynamic(cluster.broker(y).port, t) == {}


def test_reassignment_written_to_zookeeper(cluster):
    """The legacy path: /admin/reassign_partitions written by hand. The
    controller starts every listed reassignment, rewrites the znode
    without the ones that completed (a bare {"version":1,"partitions":[...]}
    of topic/partition/replicas) and deletes it when the last completes.
    Unlike AlterPartitionReassignments, this path does not check that the
    target brokers are alive: a broker that does not exist is accepted and
    the reassignment (and the znode) stays in flight."""
    t, u = "ra-zk", "ra-zq"  # neither name a prefix of the other (partition_dirs matches "<topic>-")
    cluster.start(3, OVERRIDES)
    ru.create(cluster, t, {0: [1], 1: [2]})
    ru.create(cluster, u, {0: [1]})
    node_t, node_u = ru.topic_znode(cluster, t), ru.topic_znode(cluster, u)
    ru.fill(cluster.broker(1).port, t, 0, STUCK_BATCHES)
    ru.fill(cluster.broker(1).port, u, 0, 2)
    # Throttle t by hand, as the tool would: each broker's rates, sent to it.
    for b in (1, 2, 3):
        assert dc.incremental_alter(cluster.broker(b).port, [
            (dc.BROKER, str(b), [(k, dc.SET, "1") for k in ru.BROKER_THROTTLES])]) == [(0, None, dc.BROKER, str(b))]
    assert dc.incremental_alter(cluster.broker(1).port, [
        (dc.TOPIC, t, [(k, dc.SET, "*") for k in ru.TOPIC_THROTTLES])]) == [(0, None, dc.TOPIC, t)]
    wait_broker_throttles(cluster, (1, 2, 3), RATES_1)

    znode = "/admin/reassign_partitions"
    cluster.zk.create(cluster.path(znode), json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": 0, "replicas": [2, 3]},
        {"topic": u, "partition": 0, "replicas": [2]}]}).encode())
    only_t = {"version": 1, "partitions": [{"topic": t, "partition": 0, "replicas": [2, 3]}]}
    cluster.wait_for(lambda: cluster.zk_json(znode) == only_t, 30, f"the controller rewriting {znode} without {u}")
    cluster.wait_for(lambda: ru.settled(cluster, u, {0: [2]}), 10, f"{u} moved")
    assert ru.topic_znode(cluster, u) == dict(node_u, partitions={"0": [2]})
    moving = dict(node_t, partitions={"0": [2, 3, 1], "1": [2]}, adding_replicas={"0": [2, 3]},
                  removing_replicas={"0": [1]})
    assert ru.topic_znode(cluster, t) == moving
    assert ru.list_reassignments(controller(cluster).port) == (0, "", {(t, 0): ([2, 3, 1], [2, 3], [1])})
    time.sleep(2)
    assert cluster.zk_json(znode) == only_t and ru.topic_znode(cluster, t) == moving

    assert dc.incremental_alter(cluster.broker(1).port, [
        (dc.TOPIC, t, [(k, dc.DELETE, None) for k in ru.TOPIC_THROTTLES])]) == [(0, None, dc.TOPIC, t)]
    cluster.wait_for(lambda: not cluster.zk_exists(znode), 60, f"the controller deleting {znode}")
    assert ru.topic_znode(cluster, t) == dict(node_t, partitions={"0": [2, 3], "1": [2]})
    state = cluster.partition_state(t, 0)
    assert state["leader"] == 2 and sorted(state["isr"]) == [2, 3], state
    wait_dirs(cluster, t, {0: [2, 3], 1: [2]})
    assert ru.list_reassignments(controller(cluster).port) == (0, "", {})

    # A broker that does not exist: the API refuses it, the znode does not.
    ctl = controller(cluster)
    assert ru.alter_reassignments(ctl.port, [(t, [(1, [2, 9])])]) == (0, "", {(t, 1): (
        39, "Replica assignment has brokers that are not alive. Replica list: ArrayBuffer(9), "
            "live broker list: Set(1, 2, 3)")})
    bad = {"version": 1, "partitions": [{"topic": t, "partition": 1, "replicas": [2, 9]}]}
    cluster.zk.create(cluster.path(znode), json.dumps(bad).encode())
    stuck = dict(node_t, partitions={"0": [2, 3], "1": [2, 9]}, adding_replicas={"1": [9]})
    cluster.wait_for(lambda: ru.topic_znode(cluster, t) == stuck, 30, "the controller accepting broker 9")
    assert ru.list_reassignments(ctl.port) == (0, "", {(t, 1): ([2, 9], [9], [])})
    assert cluster.zk_json(znode) == bad


def test_reorder_completes_at_once(cluster):
    """[1,2,3] -> [3,2,1]: nothing to copy, so the reassignment is complete
    before the AlterPartitionReassignments answer (the topic znode is
    already rewritten when the tool returns). Only the order changes; the
    leader stays 1 but Kafka bumps its leader epoch by one; no directory is
    recreated (same inodes). A preferred election then makes 3 the leader."""
    t = "ra-order"
    cluster.start(3, OVERRIDES)
    ru.create(cluster, t, {0: [1, 2, 3]})
    node0 = ru.topic_znode(cluster, t)
    ru.fill(cluster.broker(1).port, t, 0, 2)
    cluster.wait_for(lambda: sorted(cluster.partition_state(t, 0)["isr"]) == [1, 2, 3], 30, "full ISR")
    state0 = cluster.partition_state(t, 0)
    inodes = {b.broker_id: ru.dir_inodes(b, t) for b in cluster.live()}
    assert all(list(v) == [f"{t}-0"] for v in inodes.values()), inodes

    out = ru.execute(cluster, ru.plan(t, {0: [3, 2, 1]}))
    assert out.splitlines() == execute_lines(t, {0: [1, 2, 3]}), out
    assert ru.topic_znode(cluster, t) == dict(node0, partitions={"0": [3, 2, 1]})
    assert ru.list_reassignments(controller(cluster).port) == (0, "", {})
    state = cluster.partition_state(t, 0)
    assert state["leader"] == 1 and sorted(state["isr"]) == [1, 2, 3], state
    assert state["leader_epoch"] == state0["leader_epoch"] + 1, (state0, state)
    out = ru.verify(cluster, ru.plan(t, {0: [3, 2, 1]}))
    assert out.splitlines() == verify_done_lines(t, [0], (1, 2, 3)), out
    wait_metadata(cluster, t, {0: [3, 2, 1]}, leaders={0: 1})
    time.sleep(1.5)  # a deleted replica's directory would be gone by now
    assert {b.broker_id: ru.dir_inodes(b, t) for b in cluster.live()} == inodes

    res = cl.kafka_tool(ru.LEADER_ELECTION_TOOL, "--bootstrap-server", cluster.bootstrap(),
                        "--election-type", "PREFERRED", "--topic", t, "--partition", "0")
    assert res.stdout == f"Successfully completed leader election (PREFERRED) for partitions {t}-0\n", res.stdout
    assert cluster.partition_state(t, 0)["leader"] == 3
    wait_metadata(cluster, t, {0: [3, 2, 1]}, leaders={0: 3})
    res = cl.kafka_tool(ru.LEADER_ELECTION_TOOL, "--bootstrap-server", cluster.bootstrap(),
                        "--election-type", "PREFERRED", "--topic", t, "--partition", "0")
    assert res.stdout == f"Valid replica already elected for partitions {t}-0\n", res.stdout
    assert {b.broker_id: ru.dir_inodes(b, t) for b in cluster.live()} == inodes


def test_alter_reassignments_errors(cluster):
    """Raw AlterPartitionReassignments v0 with bad input, to the controller:
    per-partition INVALID_REPLICA_ASSIGNMENT (39) with Kafka's messages (the
    replica lists are Scala ArrayBuffers; "not alive" names only the
    replicas being added, then the live broker set), checked in this order:
    empty, duplicates, negative ids, liveness. A missing partition or topic
    is UNKNOWN_TOPIC_OR_PARTITION (3) "The partition does not exist.";
    cancelling where nothing runs is NO_REASSIGNMENT_IN_PROGRESS (85), even
    for a partition that does not exist. The top-level error is 0 with an
    empty (not null) message; a good partition's message is null. Any other
    broker answers NOT_CONTROLLER (41) at the top level with no partitions.
    Nothing changes in ZooKeeper. A partition listed twice in one request:
    the last entry wins (Kafka builds a map), one answer."""
    t = "ra-errors"
    cluster.start(3, OVERRIDES)
    ru.create(cluster, t, {0: [1, 2], 1: [2, 3]})
    node0 = ru.topic_znode(cluster, t)
    ctl = controller(cluster)
    not_alive = "Replica assignment has brokers that are not alive. Replica list: ArrayBuffer({}), live broker list: Set(1, 2, 3)"
    cases = [
        ([(t, [(0, [1, 9])])], {(t, 0): (39, not_alive.format("9"))}),
        ([(t, [(0, [8, 1, 9])])], {(t, 0): (39, not_alive.format("8, 9"))}),
        ([(t, [(0, [1, 1])])], {(t, 0): (39, "Duplicate replica ids in partition reassignment replica list: ArrayBuffer(1, 1)")}),
        ([(t, [(0, [9, 9])])], {(t, 0): (39, "Duplicate replica ids in partition reassignment replica list: ArrayBuffer(9, 9)")}),
        ([(t, [(0, [])])], {(t, 0): (39, "Empty replica list specified in partition reassignment.")}),
        ([(t, [(0, [1, -1])])], {(t, 0): (39, "Invalid broker id in replica list: ArrayBuffer(1, -1)")}),
        ([(t, [(0, [-1, -1])])], {(t, 0): (39, "Duplicate replica ids in partition reassignment replica list: ArrayBuffer(-1, -1)")}),
        ([(t, [(7, [1, 2])])], {(t, 7): (3, "The partition does not exist.")}),
        ([("ra-no-such", [(0, [1, 2])])], {("ra-no-such", 0): (3, "The partition does not exist.")}),
        ([(t, [(0, None)])], {(t, 0): (85, "No partition reassignment is in progress.")}),
        ([(t, [(7, None)])], {(t, 7): (85, "No partition reassignment is in progress.")}),
        ([(t, [(0, [1, 9]), (1, [2, 2])])], {(t, 0): (39, not_alive.format("9")),
                                            (t, 1): (39, "Duplicate replica ids in partition reassignment replica list: ArrayBuffer(2, 2)")}),
    ]
    for req, want in cases:
        assert ru.alter_reassignments(ctl.port, req) == (0, "", want), req
        assert ru.topic_znode(cluster, t) == node0, req
        assert not cluster.zk_exists("/admin/reassign_partitions"), req
    for b in cluster.live():
        if b.broker_id != ctl.broker_id:
            assert ru.alter_reassignments(b.port, [(t, [(0, [2, 3])])]) == (41, NOT_CONTROLLER_MSG, {})
            assert ru.alter_reassignments(b.port, [(t, [(0, None)])]) == (41, NOT_CONTROLLER_MSG, {})
    assert ru.list_reassignments(ctl.port) == (0, "", {})
    assert ru.topic_znode(cluster, t) == node0

    # The same partition twice: [2,9] is dropped unchecked, [3,2] runs (a
    # reordering of [2,3], complete at once).
    assert ru.alter_reassignments(ctl.port, [(t, [(1, [2, 9]), (1, [3, 2])])]) == (0, "", {(t, 1): (0, None)})
    assert ru.topic_znode(cluster, t) == dict(node0, partitions={"0": [1, 2], "1": [3, 2]})


def test_list_reassignments(cluster):
    """Raw ListPartitionReassignments v0 while three throttled reassignments
    of different shapes run. For each partition Kafka lists replicas =
    target followed by the original replicas not in the target, adding =
    target minus original, removing = original minus target (in replica
    order): [1,2]->[2,3] is [2,3,1] +[3] -[1]; [2,1]->[3] is [3,2,1] +[3]
    -[2,1]; [1,3]->[3,1,2] is [3,1,2] +[2] -[]. The topic znode carries the
    same: adding_replicas/removing_replicas only for partitions with
    entries. A topics filter lists only the named partitions that are
    reassigning (unknown ones are left out, no error); an empty filter lists
    nothing. A non-controller answers NOT_CONTROLLER. Cancelling all three
    (raw, replicas null) leaves each at its in-flight list minus the adding
    replicas: [2,1], [2,1], [3,1]."""
    t = "ra-list"
    cluster.start(3, OVERRIDES)
    before = {0: [1, 2], 1: [2, 1], 2: [1, 3]}
    target = {0: [2, 3], 1: [3], 2: [3, 1, 2]}
    ru.create(cluster, t, before)
    node0 = ru.topic_znode(cluster, t)
    for p, reps in before.items():
        ru.fill(cluster.broker(reps[0]).port, t, p, 32)
    ru.execute(cluster, ru.plan(t, target), "--throttle", "1")
    ctl = controller(cluster)
    want = {(t, 0): ([2, 3, 1], [3], [1]), (t, 1): ([3, 2, 1], [3], [2, 1]), (t, 2): ([3, 1, 2], [2], [])}
    assert ru.list_reassignments(ctl.port) == (0, "", want)
    assert ru.topic_znode(cluster, t) == dict(
        node0, partitions={"0": [2, 3, 1], "1": [3, 2, 1], "2": [3, 1, 2]},
        adding_replicas={"0": [3], "1": [3], "2": [2]}, removing_replicas={"0": [1], "1": [2, 1]})
    assert ru.list_reassignments(ctl.port, [(t, [0, 2, 9]), ("ra-no-such", [0])]) == (
        0, "", {(t, 0): want[(t, 0)], (t, 2): want[(t, 2)]})
    assert ru.list_reassignments(ctl.port, []) == (0, "", {})
    for b in cluster.live():
        if b.broker_id != ctl.broker_id:
            assert ru.list_reassignments(b.port) == (41, NOT_CONTROLLER_MSG, {})
    assert ru.list_tool(cluster) == (
        "Current partition reassignments:\n"
        f"{t}-0: replicas: 2,3,1. adding: 3. removing: 1.\n"
        f"{t}-1: replicas: 3,2,1. adding: 3. removing: 2,1.\n"
        f"{t}-2: replicas: 3,1,2. adding: 2.\n")
    assert ru.list_reassignments(ctl.port) == (0, "", want), "a reassignment finished despite the throttle"

    assert ru.alter_reassignments(ctl.port, [(t, [(0, None), (1, None), (2, None)])]) == (
        0, "", {(t, p): (0, None) for p in range(3)})
    assert ru.topic_znode(cluster, t) == dict(node0, partitions={"0": [2, 1], "1": [2, 1], "2": [3, 1]})
    assert ru.list_reassignments(ctl.port) == (0, "", {})


def test_delete_topic_during_reassignment(cluster):
    """Deleting a topic while a throttled reassignment of it runs. Kafka
    3.9.1 does NOT wait: KafkaController.processTopicDeletion marks the
    topic ineligible ("topic reassignment in progress") before queueing it,
    and TopicDeletionManager.markTopicIneligibleForDeletion only marks
    topics already queued, so the mark is lost and the topic goes at once
    (DeleteTopics answers NONE at once). The in-flight reassignment goes
    with it (nothing listed), the adding replica's directory too; the
    tool-set broker rates stay until a --verify, which then fails on the
    topic-level clear (exit 1, UnknownTopicOrPartitionException)."""
    t = "ra-delete"
    cluster.start(3, OVERRIDES)
    ru.create(cluster, t, {0: [1, 2], 1: [2, 3]})
    ru.fill(cluster.broker(1).port, t, 0, STUCK_BATCHES)
    plan = ru.plan(t, {0: [2, 3]})
    ru.execute(cluster, plan, "--throttle", "1")
    cluster.wait_for(lambda: cluster.broker(3).partition_dirs(t) == [f"{t}-0", f"{t}-1"], 30,
                     "broker 3 creating the adding replica")
    ctl = controller(cluster)
    assert ru.list_reassignments(ctl.port) == (0, "", {(t, 0): ([2, 3, 1], [3], [1])})

    admin = cluster.admin()
    assert admin.delete_topics([t], operation_timeout=30)[t].result(60) is None
    cluster.wait_for(lambda: not cluster.zk_exists(f"/brokers/topics/{t}"), 20, f"{t} deleted")
    cluster.wait_for(lambda: cluster.zk_children("/admin/delete_topics") == [], 10, "/admin/delete_topics emptied")
    assert not cluster.zk_exists(f"/config/topics/{t}")
    assert ru.list_reassignments(ctl.port) == (0, "", {})
    cluster.wait_for(lambda: all(t not in b.metadata()["topics"] for b in cluster.live()), 15,
                     f"every broker's Metadata without {t}")
    wait_dirs(cluster, t, {})
    wait_broker_throttles(cluster, (1, 2, 3), RATES_1)

    res = ru.reassign(cluster, "--verify", "--reassignment-json-file", ru.write_json(plan), check=False)
    assert res.returncode == 1, res
    assert res.stdout.splitlines()[:6] == [
        "Status of partition reassignment:",
        f"There is no active reassignment of partition {t}-0, but replica set is  rather than 2,3.",
        "",
        "Clearing broker-level throttles on brokers 1,2,3",
        f"Clearing topic-level throttles on topic {t}",
        f"Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: The topic '{t}' does not exist.",
    ], res.stdout
    wait_broker_throttles(cluster, (1, 2, 3), {})
