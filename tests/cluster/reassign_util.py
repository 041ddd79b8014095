"""Helpers for the partition reassignment suite (test_reassignment.py):
Kafka's kafka-reassign-partitions tool, raw AlterPartitionReassignments
(API 45) and ListPartitionReassignments (API 46) v0 requests sent to one
broker alone, replication throttle configs read back with a raw
DescribeConfigs, and bulk data written with raw Produce so that a
throttled follower cannot catch up."""

import json
import os
import tempfile
import threading
import time
from pathlib import Path

import cluster_util as cl
import compat_util as cu
import test_dynamic_config as dc  # raw DescribeConfigs / Produce helpers (tests/compat)

REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LEADER_ELECTION_TOOL = "org.apache.kafka.tools.LeaderElectionCommand"
CONFIG_TOOL = "kafka.admin.ConfigCommand"

ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REPLICA_ASSIGNMENT = 39
NOT_CONTROLLER = 41
NO_REASSIGNMENT_IN_PROGRESS = 85

BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


# --- the tool ------------------------------------------------------------------


def plan(topic, assignment):
    """The tool's reassignment JSON for {partition: replicas} of one topic."""
    return {"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": list(r)} for p, r in sorted(assignment.items())]}


def write_json(obj, directory=None):
    d = Path(directory or tempfile.mkdtemp(prefix="reassign-"))
    f = d / f"plan-{time.monotonic_ns()}.json"
    f.write_text(json.dumps(obj))
    return str(f)


def reassign(cluster, *args, check=True, bootstrap=None, timeout_s=120):
    """kafka-reassign-partitions --bootstrap-server <live brokers> args."""
    return cl.kafka_tool(REASSIGN_TOOL, "--bootstrap-server", bootstrap or cluster.bootstrap(), *args,
                         timeout_s=timeout_s, check=check)


def execute(cluster, plan_obj, *extra):
    return reassign(cluster, "--execute", "--reassignment-json-file", write_json(plan_obj), *extra).stdout


def verify(cluster, plan_obj, *extra):
    return reassign(cluster, "--verify", "--reassignment-json-file", write_json(plan_obj), *extra).stdout


def cancel(cluster, plan_obj, *extra):
    return reassign(cluster, "--cancel", "--reassignment-json-file", write_json(plan_obj), *extra).stdout


def list_tool(cluster):
    return reassign(cluster, "--list").stdout


def completed_lines(topic, partitions):
    return [f"Reassignment of partition {topic}-{p} is completed." for p in partitions]


def verify_until_complete(cluster, plan_obj, timeout_s=90):
    """Runs --verify until every partition of the plan reports completed;
    returns the last output (the run that also cleared the throttles)."""
    parts = [(e["topic"], e["partition"]) for e in plan_obj["partitions"]]
    want = [f"Reassignment of partition {t}-{p} is completed." for t, p in sorted(parts)]
    seen = []

    def done():
        out = verify(cluster, plan_obj)
        seen.append(out)
        lines = out.splitlines()
        return out if all(w in lines for w in want) else None

    try:
        return cl.wait_for(done, timeout_s, f"--verify reporting {want}", interval_s=0.5)
    except cl.ClusterError as e:
        raise cl.ClusterError(f"{e}\nlast --verify output:\n{seen[-1] if seen else None}") from None


def config_tool(cluster, *args):
    return cl.kafka_tool(CONFIG_TOOL, "--bootstrap-server", cluster.bootstrap(), *args).stdout


def remove_broker_throttles(cluster, broker_ids):
    for b in broker_ids:
        config_tool(cluster, "--entity-type", "brokers", "--entity-name", str(b), "--alter",
                    "--delete-config", ",".join(BROKER_THROTTLES))


# --- configs ----------------------------------------------------------------------


def broker_dynamic(port, broker_id, keys=BROKER_THROTTLES):
    """{key: value} of the broker's own dynamic (DYNAMIC_BROKER_CONFIG)
    values of `keys`, asked of the broker on `port`; unset keys absent."""
    err, msg, configs = dc.describe_configs(port, dc.BROKER, str(broker_id), list(keys))
    assert err == 0, (err, msg)
    return {k: v for k, (v, source, _) in configs.items() if source == dc.SOURCE_BROKER}


def topic_dynamic(port, topic, keys=TOPIC_THROTTLES):
    return {k: v for k, v in dc.topic_overrides(port, topic).items() if k in keys}


# --- data ----------------------------------------------------------------------------


def fill(port, topic, partition, batches, batch_records=16, value_size=8192):
    """Writes batches x batch_records records of value_size bytes to the
    leader on `port` (raw Produce v3, acks=all: the high watermark is past
    them when it returns)."""
    payload = b"r" * value_size
    with dc.Conn(port) as c:
        for i in range(batches):
            batch = cu.record_batch([(None, payload, [])] * batch_records, int(time.time() * 1000))
            c.sock.sendall(cu.produce_v3(i + 1, topic, partition, batch, acks=-1))
            _, res = cu.parse_produce_v3_response(cu.recv_frame(c.sock))
            err = res[(topic, partition)][0]
            assert err == 0, f"produce to {topic}-{partition}: error {err}"


# --- raw AlterPartitionReassignments / ListPartitionReassignments (v0, flexible) --------


def _compact_array(items):
    return cu.uvarint(len(items) + 1) + b"".join(items)


def _replicas(replicas):
    if replicas is None:
        return cu.uvarint(0)  # null: cancel
    return cu.uvarint(len(replicas) + 1) + b"".join(cu.i32(r) for r in replicas)


def _read_i32s(r):
    n = r.uvarint() - 1
    return None if n < 0 else [r.i32() for _ in range(n)]


def alter_body(topics, timeout_ms=30000):
    """topics: [(topic, [(partition, replicas or None)])] in wire order."""
    body = cu.i32(timeout_ms)
    tb = []
    for name, parts in topics:
        pb = [cu.i32(p) + _replicas(reps) + cu.uvarint(0) for p, reps in parts]
        tb.append(cu.compact_string(name) + _compact_array(pb) + cu.uvarint(0))
    return body + _compact_array(tb) + cu.uvarint(0)


def alter_reassignments(port, topics, timeout_ms=30000):
    """Raw AlterPartitionReassignments v0 to the broker on `port`:
    (error, message, {(topic, partition): (error, message)})."""
    with dc.Conn(port, timeout_s=timeout_ms / 1000 + 30) as c:
        r = c.call(ALTER_PARTITION_REASSIGNMENTS, 0, alter_body(topics, timeout_ms), flexible=True)
    r.i32()  # throttle
    err, msg = r.i16(), r.compact_string()
    out = {}
    for _ in range(r.uvarint() - 1):
        name = r.compact_string()
        for _ in range(r.uvarint() - 1):
            p = r.i32()
            out[(name, p)] = (r.i16(), r.compact_string())
            r.skip_tags()
        r.skip_tags()
    r.skip_tags()
    return err, msg, out


def list_reassignments(port, topics=None, timeout_ms=30000):
    """Raw ListPartitionReassignments v0 (topics None = all, else
    [(topic, [partitions])]): (error, message, {(topic, partition):
    (replicas, adding, removing)})."""
    body = cu.i32(timeout_ms)
    if topics is None:
        body += cu.uvarint(0)
    else:
        body += _compact_array([cu.compact_string(t) + cu.uvarint(len(ps) + 1) + b"".join(cu.i32(p) for p in ps)
                                + cu.uvarint(0) for t, ps in topics])
    body += cu.uvarint(0)
    with dc.Conn(port) as c:
        r = c.call(LIST_PARTITION_REASSIGNMENTS, 0, body, flexible=True)
    r.i32()  # throttle
    err, msg = r.i16(), r.compact_string()
    out = {}
    for _ in range(r.uvarint() - 1):
        name = r.compact_string()
        for _ in range(r.uvarint() - 1):
            p = r.i32()
            out[(name, p)] = (_read_i32s(r), _read_i32s(r), _read_i32s(r))
            r.skip_tags()
        r.skip_tags()
    r.skip_tags()
    return err, msg, out


# --- ZooKeeper views -------------------------------------------------------------------


def topic_znode(cluster, topic):
    return cluster.zk_json(f"/brokers/topics/{topic}")


def settled(cluster, topic, want):
    """The topic znode holds exactly `want` ({partition: replicas}) with
    no reassignment in flight."""
    node = topic_znode(cluster, topic)
    parts = {int(p): r for p, r in node["partitions"].items()}
    return (parts == want and all(v == [] for v in node.get("adding_replicas", {}).values())
            and all(v == [] for v in node.get("removing_replicas", {}).values()))


def dir_inodes(broker, topic):
    """{directory name: inode} of the topic's partition directories on
    `broker` (a directory moved away and back would get a new inode)."""
    return {d: os.stat(os.path.join(broker.log_dirs, d)).st_ino for d in broker.partition_dirs(topic)}


def create(cluster, topic, assignment, config=None):
    """Creates `topic` with an explicit {partition: replicas} assignment."""
    from confluent_kafka.admin import NewTopic

    admin = cluster.admin()
    parts = [assignment[p] for p in sorted(assignment)]
    futs = admin.create_topics([NewTopic(topic, num_partitions=len(parts), replication_factor=-1,
                                         replica_assignment=parts, config=config or {})],
                               operation_timeout=30, request_timeout=60)
    futs[topic].result(90)
    cluster.wait_converged(topics=[topic])


def end_offsets(bootstrap, topic, partitions):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: o for tp, o in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()


class TailConsumer:
    """A kafka-python consumer (no group) reading every partition from the
    beginning in its own thread while the test runs; finish(ends) lets it
    read up to `ends` and returns [(partition, offset, value)] in the
    order consumed."""

    def __init__(self, bootstrap, topic, partitions):
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.records = []
        self.ends = None
        self.error = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"tail-{topic}", daemon=True)
        self.thread.start()

    def count(self):
        return len(self.records)

    def _run(self):
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                 auto_offset_reset="earliest", metadata_max_age_ms=2000,
                                 request_timeout_ms=30000)
        try:
            tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            while not self.stop.is_set():
                for tp, recs in consumer.poll(timeout_ms=300).items():
                    self.records.extend((r.partition, r.offset, r.value) for r in recs)
                ends = self.ends
                if ends is not None and all(consumer.position(tp) >= ends[tp.partition] for tp in tps):
                    return
        except Exception as e:  # reported by finish()
            self.error = e
        finally:
            consumer.close()

    def finish(self, ends, timeout_s=60):
        self.ends = ends
        self.thread.join(timeout_s)
        if self.thread.is_alive():
            self.stop.set()
            self.thread.join(10)
            raise AssertionError(f"consumer did not reach {ends} in {timeout_s}s (read {len(self.records)})")
        if self.error is not None:
            raise AssertionError(f"consumer failed: {self.error!r}")
        return self.records
