"""Kafka's own kafka-topics tool (org.apache.kafka.tools.TopicCommand from
the 3.9.1 jars) against the cluster: create, list, describe, alter, delete."""

import os
import re

import cluster_util as cl

TOPIC = "cli-topic"
DESCRIBE_LINE = re.compile(
    r"^\s*Topic: (?P<topic>\S+)\s+Partition: (?P<p>\d+)\s+Leader: (?P<leader>-?\d+|none)\s+"
    r"Replicas: (?P<replicas>[\d,]+)\s+Isr: (?P<isr>[\d,]*)"
)


def topics_cli(cluster, *args):
    return cl.kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", cluster.bootstrap(), *args)


def _ints(csv):
    return [int(x) for x in csv.split(",") if x]


def describe(cluster):
    out = topics_cli(cluster, "--describe", "--topic", TOPIC).stdout
    header = [line for line in out.splitlines() if line.startswith(f"Topic: {TOPIC}\t")]
    assert len(header) == 1, out
    parts = {}
    for line in out.splitlines():
        m = DESCRIBE_LINE.match(line)
        if m:
            assert m["topic"] == TOPIC
            parts[int(m["p"])] = (int(m["leader"]), _ints(m["replicas"]), _ints(m["isr"]))
    return header[0], parts, out


def _hosted_dirs(cluster, assignment):
    """{broker id: sorted partition dirs it must hold} for an assignment."""
    want = {b.broker_id: [] for b in cluster.live()}
    for p, replicas in assignment.items():
        for r in replicas:
            want[r].append(f"{TOPIC}-{p}")
    return {b: sorted(d) for b, d in want.items()}


def test_kafka_topics_cli(cluster):
    # File deletion of a deleted topic's logs waits log.segment.delete.delay.ms.
    brokers = cluster.start(3, {"log.segment.delete.delay.ms": 1000})

    res = topics_cli(cluster, "--create", "--topic", TOPIC, "--replication-factor", "2", "--partitions", "3")
    assert f"Created topic {TOPIC}." in res.stdout, res.stdout
    cluster.wait_converged(topics=[TOPIC])
    assert TOPIC in topics_cli(cluster, "--list").stdout.split()

    assignment = cluster.assignment(TOPIC)
    assert sorted(assignment) == [0, 1, 2] and all(len(set(r)) == 2 for r in assignment.values())
    topic_id = cluster.zk_json(f"/brokers/topics/{TOPIC}")["topic_id"]
    header, parts, out = describe(cluster)
    print(f"kafka-topics --describe:\n{out}")
    assert f"TopicId: {topic_id}" in header, header
    assert re.search(r"PartitionCount: 3\s+ReplicationFactor: 2", header), header
    assert sorted(parts) == [0, 1, 2], out
    for p, (leader, replicas, isr) in parts.items():
        state = cluster.partition_state(TOPIC, p)
        assert replicas == assignment[p], f"p{p}: described replicas {replicas} vs {assignment[p]}"
        assert leader == state["leader"] == assignment[p][0]
        assert sorted(isr) == sorted(state["isr"]) == sorted(assignment[p])

    # Every replica has its log directory on its broker.
    cluster.wait_for(lambda: {b.broker_id: b.partition_dirs(TOPIC) for b in brokers} == _hosted_dirs(cluster, assignment),
                     30, f"partition directories {_hosted_dirs(cluster, assignment)}")

    # --- alter: only the new partitions get assignments ---
    topics_cli(cluster, "--alter", "--topic", TOPIC, "--partitions", "5")
    cluster.wait_for(lambda: len(cluster.assignment(TOPIC)) == 5, 30, "5 partitions in ZooKeeper")
    after = cluster.assignment(TOPIC)
    for p in range(3):
        assert after[p] == assignment[p], f"p{p} was reassigned: {assignment[p]} -> {after[p]}"
    for p in (3, 4):
        assert len(after[p]) == 2 and len(set(after[p])) == 2, f"new p{p}: {after[p]}"
    view = cluster.wait_converged(topics=[TOPIC])
    assert sorted(view["topics"][TOPIC]["partitions"]) == list(range(5))
    for p in (3, 4):
        state = cluster.partition_state(TOPIC, p)
        assert state["leader"] == after[p][0] and state["isr"] == after[p] and state["leader_epoch"] == 0
    header, parts, out = describe(cluster)
    assert re.search(r"PartitionCount: 5\s+ReplicationFactor: 2", header), header
    assert {p: v[1] for p, v in parts.items()} == after, out
    cluster.wait_for(lambda: {b.broker_id: b.partition_dirs(TOPIC) for b in brokers} == _hosted_dirs(cluster, after),
                     30, f"partition directories {_hosted_dirs(cluster, after)}")

    # --- delete: gone from ZooKeeper, every broker's Metadata and disk ---
    topics_cli(cluster, "--delete", "--topic", TOPIC)

    def gone_from_zk():
        left = [p for p in (f"/brokers/topics/{TOPIC}", f"/config/topics/{TOPIC}", f"/admin/delete_topics/{TOPIC}")
                if cluster.zk_exists(p)]
        return not left or None

    cluster.wait_for(gone_from_zk, 30, f"{TOPIC} removed from /brokers/topics, /config/topics, /admin/delete_topics")
    assert cluster.zk_children("/admin/delete_topics") == []
    cluster.wait_for(lambda: all(TOPIC not in b.metadata()["topics"] for b in brokers), 30,
                     f"{TOPIC} absent from every broker's Metadata")
    cluster.wait_for(lambda: all(not b.partition_dirs(TOPIC) for b in brokers), 60,
                     f"{TOPIC} log directories removed: {[(b.broker_id, b.partition_dirs(TOPIC)) for b in brokers]}")
    for b in brokers:
        assert not [e for e in os.listdir(b.log_dirs) if e.startswith(TOPIC)], b.log_dirs
    assert TOPIC not in topics_cli(cluster, "--list").stdout.split()
