"""Two log directories per broker (log.dirs=<tmp>/d0,<tmp>/d1) and moving a
replica between the directories of one broker: AlterReplicaLogDirs (API 34)
creates "<topic>-<p>.<uuid>-future" in the target directory, a log dir
fetcher copies the replica into it, and once it has caught up it is swapped
in (the old directory becomes "<topic>-<p>.<uuid>-delete", deleted after
log.segment.delete.delay.ms). One three-broker cluster for the module.

What Kafka 3.9.1 does (asserted):
- A new replica goes to the directory with the fewest logs: 8 partitions x
  RF 3 put exactly 4 replicas in each directory of every broker.
- kafka-log-dirs --describe lists, per broker and directory, "error": null
  and exactly the replicas on disk there, "size" = the sum of the replica's
  .log file sizes, "offsetLag" 0, "isFuture" false. Raw DescribeLogDirs v4:
  the same, plus totalBytes/usableBytes of the filesystem (statvfs);
  a topics filter lists only the named partitions hosted there (unknown
  ones left out, no error); an empty filter lists the directories with no
  topics.
- ApiVersions: AlterReplicaLogDirs v0-v2, DescribeLogDirs v0-v4.
- kafka-reassign-partitions --execute with "log_dirs" naming the other
  directory of the same brokers (replicas unchanged) and
  --replica-alter-log-dirs-throttle 1 prints the rollback JSON (log_dirs
  all "any"), the throttle warning, "The replica-alter-dir throttle limit
  was set to 1 B/s", "Successfully started partition reassignments for
  ard-move-0,ard-move-1" and, per move, "Successfully started moving log
  directory to <dir> for replica ard-move-0 with broker 1 " (trailing
  space). The reassignment itself completes at once (the same replicas; the
  leader epoch goes up by one). It sets
  replica.alter.log.dirs.io.max.bytes.per.second=1 in /config/brokers/<id>
  of the brokers with a move only (no znode for the other broker); no
  topic-level throttle.
- While throttled, the -future directory exists next to the current one;
  kafka-log-dirs shows it in the target directory with "isFuture": true, a
  size below the current replica's and "offsetLag" > 0 (the current
  replica's log end offset minus the future's); --verify prints
  "Reassignment of replica ard-move-0-1 is still in progress." (replica =
  <topic>-<partition>-<broker>) and clears nothing. Asking again for the
  same target answers NONE and changes nothing.
- With the throttle removed the move completes under the producer:
  --verify prints "Reassignment of replica ard-move-0-1 completed
  successfully." then "Clearing broker-level throttles on brokers 1,2,3"
  and "Clearing topic-level throttles on topic ard-move" (it writes
  {"version":1,"config":{}} for every broker, also the one that had no
  znode). The replica is then only in the target directory, no -future or
  -delete left, still in the ISR, and every acknowledged record is read.
- Raw AlterReplicaLogDirs errors, per partition, identical in v0, v1, v2:
  a path that is not one of the broker's log.dirs, exactly as configured
  (a relative path, the right path with a trailing "/", a path that does
  not exist) -> LOG_DIR_NOT_FOUND (57); a partition of an existing topic
  that the broker does not host -> REPLICA_NOT_AVAILABLE (9); an unknown
  topic or partition -> UNKNOWN_TOPIC_OR_PARTITION (3); the directory the
  replica is already in -> NONE, no -future. Nothing changes on disk. One
  partition named under two paths in one request: one answer, the last
  path wins.
- The broker remembers the target of a request it answered with 9 or 3:
  when it later gets that replica (reassignment, topic creation) it creates
  it in that directory, even where the other directory has fewer logs.
- Moving back to the current directory while a move runs cancels it: NONE,
  the -future directory goes (renamed -delete, then deleted), the replica
  stays where it was with its data.
"""

import json
import os
import time

import pytest

import cluster_util as cl
import durability
import log_dir_util as ldu
import reassign_util as ru
import test_dynamic_config as dc

OVERRIDES = {
    "auto.leader.rebalance.enable": "false",
    "log.segment.delete.delay.ms": "1000",
    "log.initial.task.delay.ms": "1000",
}
DIR_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"


@pytest.fixture(scope="module")
def jbod(module_cluster):
    ldu.start_two_dir_brokers(module_cluster, 3, OVERRIDES)
    return module_cluster


def tool_json(topic, assignment):
    """Kafka's formatAsReassignmentJson of the current assignment."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for p, r in sorted(assignment.items())]}, separators=(",", ":"))


def future_and_delete(cluster, topic):
    return {b.broker_id: [n for names in ldu.entries(b, topic).values() for n in names
                          if ldu.parse_entry(topic, n)[1] is not None] for b in cluster.live()}


def wait_plain(cluster, topic, want, timeout_s=30):
    """Every broker holds exactly `want` {broker: {dir index: [partitions]}}
    of `topic` and nothing else (no -future, no -delete)."""
    def ok():
        return all(ldu.entries(b, topic) == {i: [f"{topic}-{p}" for p in sorted(ps)] for i, ps in want[b.broker_id].items()}
                   for b in cluster.live())

    try:
        cluster.wait_for(ok, timeout_s, f"{topic} directories {want}", 0.2)
    except cl.ClusterError as e:
        raise cl.ClusterError(f"{e}\nnow: { {b.broker_id: ldu.entries(b, topic) for b in cluster.live()} }") from None


def test_partitions_spread_and_log_dirs_tool_matches_files(jbod):
    cluster = jbod
    t = "ard-spread"
    versions = ldu.api_versions(cluster.broker(1).port)
    assert versions[ldu.ALTER_REPLICA_LOG_DIRS] == (0, 2) and versions[ldu.DESCRIBE_LOG_DIRS] == (0, 4), versions
    cluster.create_topic(t, 8, 3)
    cluster.wait_converged(topics=[t])
    for p in range(8):
        ru.fill(cluster.broker(cluster.partition_state(t, p)["leader"]).port, t, p, 1 + p % 3, batch_records=4)
    ends = ru.end_offsets(cluster.bootstrap(), t, 8)
    assert ends == {p: 4 * (1 + p % 3) for p in range(8)}

    def on_disk(b):
        return {b.dirs[i]: {p: ldu.log_bytes(b, i, t, p) for p in ldu.segment_files(b, i, t)} for i in (0, 1)}

    def raw_matches():
        for b in cluster.live():
            top, dirs = ldu.describe_log_dirs(b.port, [(t, list(range(8)))])
            if top != 0 or {d: {p: v[0] for (_, p), v in x["replicas"].items()} for d, x in dirs.items()} != on_disk(b):
                return None
        return True

    cluster.wait_for(raw_matches, 30, "every replica caught up: DescribeLogDirs sizes equal to the files")
    for b in cluster.live():
        counts = {i: len(v) for i, v in ldu.entries(b, t).items()}
        assert counts == {0: 4, 1: 4}, (b.broker_id, ldu.entries(b, t))
        assert sorted(ldu.replica_dirs(b, t)) == list(range(8))

    tool = ldu.log_dirs_tool(cluster, topics=[t])
    assert sorted(tool) == [1, 2, 3], tool
    for b in cluster.live():
        want = {d: (None, {f"{t}-{p}": (size, 0, False) for p, size in parts.items()})
                for d, parts in on_disk(b).items()}
        assert tool[b.broker_id] == want, (b.broker_id, tool[b.broker_id], want)

    for b in cluster.live():
        total = ldu.fs_stats(b.dirs[0])[0]
        top, dirs = ldu.describe_log_dirs(b.port)  # all topics
        assert top == 0 and sorted(dirs) == sorted(b.dirs), dirs
        for i, d in enumerate(b.dirs):
            x = dirs[d]
            assert x["error"] == 0 and x["total"] == total and 0 < x["usable"] <= total, x
            mine = {k: v for k, v in x["replicas"].items() if k[0] == t}
            assert mine == {(t, p): (size, 0, False) for p, size in on_disk(b)[d].items()}, (d, mine)
        top, dirs = ldu.describe_log_dirs(b.port, [(t, [0, 1, 99]), ("ard-no-such", [0])])
        assert top == 0 and sorted(dirs) == sorted(b.dirs)
        where = ldu.replica_dirs(b, t)
        for i, d in enumerate(b.dirs):
            assert dirs[d]["replicas"] == {(t, p): (on_disk(b)[d][p], 0, False) for p in (0, 1) if where[p] == i}
        top, dirs = ldu.describe_log_dirs(b.port, [])
        assert top == 0 and {d: x["replicas"] for d, x in dirs.items()} == {d: {} for d in b.dirs}


def test_tool_moves_replicas_between_dirs_under_load(jbod):
    cluster = jbod
    t = "ard-move"
    assignment = {0: [1, 2, 3], 1: [2, 3, 1]}
    ru.create(cluster, t, assignment, {"min.insync.replicas": "2"})
    cluster.wait_for(lambda: all(sorted(cluster.partition_state(t, p)["isr"]) == [1, 2, 3] for p in (0, 1)), 30,
                     "full ISRs")
    b1, b3 = cluster.broker(1), cluster.broker(3)
    where = {b.broker_id: ldu.replica_dirs(b, t) for b in cluster.live()}
    src1, src3 = where[1][0], where[3][1]
    dst1, dst3 = b1.dirs[1 - src1], b3.dirs[1 - src3]
    state0 = {p: cluster.partition_state(t, p) for p in (0, 1)}
    assert not cluster.zk_exists("/config/brokers/2")
    producer = ldu.PaddedProducer(cluster.bootstrap(), t, 2, tag="ard", rate=300, key_bytes=8000)
    try:
        # ~2.5 MiB per partition, then a trickle while the moves run.
        durability.wait_acked_more([producer], 600, 90)
        producer.pause()
        producer.resume(rate=20)
        plan = {"version": 1, "partitions": [
            {"topic": t, "partition": 0, "replicas": [1, 2, 3], "log_dirs": [dst1, "any", "any"]},
            {"topic": t, "partition": 1, "replicas": [2, 3, 1], "log_dirs": ["any", dst3, "any"]}]}
        out = ru.execute(cluster, plan, "--replica-alter-log-dirs-throttle", "1")
        assert out == "\n".join([
            "Current partition replica assignment", "", tool_json(t, assignment), "",
            "Save this to use as the --reassignment-json-file option during rollback",
            "Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
            "throttle is removed.",
            "The replica-alter-dir throttle limit was set to 1 B/s",
            f"Successfully started partition reassignments for {t}-0,{t}-1",
            f"Successfully started moving log directory to {dst1} for replica {t}-0 with broker 1 ",
            f"Successfully started moving log directory to {dst3} for replica {t}-1 with broker 3 ",
        ]) + "\n", out
        assert ru.topic_znode(cluster, t)["partitions"] == {"0": [1, 2, 3], "1": [2, 3, 1]}
        for p in (0, 1):
            s = cluster.partition_state(t, p)
            assert s == dict(state0[p], leader_epoch=state0[p]["leader_epoch"] + 1), (state0[p], s)
        for b in (1, 3):
            assert cluster.zk_json(f"/config/brokers/{b}") == {"version": 1, "config": {DIR_THROTTLE: "1"}}
        assert not cluster.zk_exists("/config/brokers/2")
        assert cluster.zk_json(f"/config/topics/{t}") == {"version": 1, "config": {"min.insync.replicas": "2"}}

        # The future replicas, held back by the 1 B/s throttle.
        def futures():
            got = {}
            for b, p in ((b1, 0), (b3, 1)):
                e = ldu.entries(b, t)
                fut = [n for n in e[1 - where[b.broker_id][p]] if ldu.parse_entry(t, n)[1] == "future"]
                if len(fut) != 1 or ldu.parse_entry(t, fut[0])[0] != p or f"{t}-{p}" not in e[where[b.broker_id][p]]:
                    return None
                got[b.broker_id] = fut[0]
            return got

        fut = cluster.wait_for(futures, 30, "the -future directories")
        time.sleep(2)
        assert futures() == fut
        assert future_and_delete(cluster, t) == {1: [fut[1]], 2: [], 3: [fut[3]]}
        tool = ldu.log_dirs_tool(cluster, [1, 3], [t])
        for b, p in ((b1, 0), (b3, 1)):
            src, dst = b.dirs[where[b.broker_id][p]], b.dirs[1 - where[b.broker_id][p]]
            err, src_parts = tool[b.broker_id][src]
            assert err is None and src_parts[f"{t}-{p}"][2] is False, tool
            err, dst_parts = tool[b.broker_id][dst]
            size, lag, is_future = dst_parts[f"{t}-{p}"]
            assert err is None and is_future is True and 0 < size < src_parts[f"{t}-{p}"][0] and lag > 0, tool
            top, dirs = ldu.describe_log_dirs(b.port, [(t, [p])])
            assert dirs[src]["replicas"][(t, p)][2] is False and dirs[dst]["replicas"][(t, p)][2] is True, dirs
        out = ru.verify(cluster, plan)
        assert out == "\n".join([
            "Status of partition reassignment:",
            f"Reassignment of partition {t}-0 is completed.",
            f"Reassignment of partition {t}-1 is completed.",
            f"Reassignment of replica {t}-0-1 is still in progress.",
            f"Reassignment of replica {t}-1-3 is still in progress.",
        ]) + "\n", out
        for b in (1, 3):
            assert cluster.zk_json(f"/config/brokers/{b}") == {"version": 1, "config": {DIR_THROTTLE: "1"}}
        assert ldu.alter_replica_log_dirs(b1.port, [(dst1, [(t, [0])])]) == {(t, 0): ldu.NONE}
        assert futures() == fut

        acked_before = producer.log.acked
        for b in (1, 3):
            ru.config_tool(cluster, "--entity-type", "brokers", "--entity-name", str(b), "--alter",
                           "--delete-config", DIR_THROTTLE)
        done = [
            "Status of partition reassignment:",
            f"Reassignment of partition {t}-0 is completed.",
            f"Reassignment of partition {t}-1 is completed.",
            f"Reassignment of replica {t}-0-1 completed successfully.",
            f"Reassignment of replica {t}-1-3 completed successfully.",
            "Clearing broker-level throttles on brokers 1,2,3",
            f"Clearing topic-level throttles on topic {t}",
        ]
        seen = []

        def verified():
            o = ru.verify(cluster, plan)
            seen.append(o)
            return o if "still in progress" not in o else None

        out = cluster.wait_for(verified, 90, "--verify reporting both moves done", 0.5)
        assert out == "\n".join(done) + "\n", (out, seen[:-1])
        for b in (1, 2, 3):
            assert cluster.zk_json(f"/config/brokers/{b}") == {"version": 1, "config": {}}
        want = {b: {0: [], 1: []} for b in (1, 2, 3)}
        for b, parts in where.items():
            for p, i in parts.items():
                moved = (b, p) in ((1, 0), (3, 1))
                want[b][1 - i if moved else i].append(p)
        wait_plain(cluster, t, want)
        for p in (0, 1):
            s = cluster.partition_state(t, p)
            assert s["leader"] == state0[p]["leader"] and sorted(s["isr"]) == [1, 2, 3], s
        tool = ldu.log_dirs_tool(cluster, [1, 3], [t])
        assert tool[1][dst1][1][f"{t}-0"][2] is False and f"{t}-0" not in tool[1][b1.dirs[src1]][1], tool
        assert tool[3][dst3][1][f"{t}-1"][2] is False and f"{t}-1" not in tool[3][b3.dirs[src3]][1], tool

        durability.wait_acked_more([producer], 40, 60)
        assert producer.log.acked > acked_before
        producer.stop()
    finally:
        producer.kill()
    assert producer.log.failed == 0 and not producer.log.fatal, (producer.log.errors, producer.log.fatal)
    summary = ldu.check_all_acked(cluster.bootstrap(), t, 2, producer)
    # The moved replicas hold the whole log: same size as the leader's copy.
    ends = summary["high_watermarks"]
    sizes = {b.broker_id: {p: ldu.log_bytes(b, i, t, p) for p, i in ldu.replica_dirs(b, t).items()}
             for b in cluster.live()}
    assert sizes[1] == sizes[2] == sizes[3], (sizes, ends)


def test_alter_replica_log_dirs_errors(jbod):
    cluster = jbod
    t, unknown = "ard-err", "ard-later"
    ru.create(cluster, t, {0: [1, 2], 1: [2, 3]})
    b1 = cluster.broker(1)
    x = ldu.replica_dirs(b1, t)[0]
    X, Y = b1.dirs[x], b1.dirs[1 - x]
    snap = ldu.all_entries(cluster, [t, unknown])
    state = {p: cluster.partition_state(t, p) for p in (0, 1)}
    cases = [
        ([("/nonexistent/dir", [(t, [0])])], {(t, 0): ldu.LOG_DIR_NOT_FOUND}),
        ([(os.path.basename(Y), [(t, [0])])], {(t, 0): ldu.LOG_DIR_NOT_FOUND}),
        ([(Y + "/", [(t, [0])])], {(t, 0): ldu.LOG_DIR_NOT_FOUND}),
        ([(Y + "/../" + os.path.basename(Y), [(t, [0])])], {(t, 0): ldu.LOG_DIR_NOT_FOUND}),
        ([(X, [(t, [7])])], {(t, 7): ldu.UNKNOWN_TOPIC_OR_PARTITION}),
        ([(X, [(t, [0])])], {(t, 0): ldu.NONE}),
        ([("/nonexistent/dir", [(t, [0])]), (X, [("ard-no-such", [0]), (t, [7])])],
         {(t, 0): ldu.LOG_DIR_NOT_FOUND, ("ard-no-such", 0): ldu.UNKNOWN_TOPIC_OR_PARTITION,
          (t, 7): ldu.UNKNOWN_TOPIC_OR_PARTITION}),
    ]
    for req, want in cases:
        for version in (2, 1, 0):
            assert ldu.alter_replica_log_dirs(b1.port, req, version) == want, (version, req)
        time.sleep(0.3)
        assert ldu.all_entries(cluster, [t, unknown]) == snap, req
    assert {p: cluster.partition_state(t, p) for p in (0, 1)} == state

    # The target of a replica the broker does not have is remembered: pick
    # the directory with more logs, where Kafka would not put a new one.
    def counts():
        return {i: sum(1 for n in os.listdir(d) if os.path.isdir(os.path.join(d, n)) and "." not in n)
                for i, d in enumerate(b1.dirs)}

    if counts()[0] == counts()[1]:
        ru.create(cluster, "ard-pad", {0: [1]})
    c = counts()
    assert c[0] != c[1], c
    full = 0 if c[0] > c[1] else 1
    for version in (2, 1, 0):
        assert ldu.alter_replica_log_dirs(b1.port, [(b1.dirs[full], [(t, [1]), (unknown, [0])])], version) == {
            (t, 1): ldu.REPLICA_NOT_AVAILABLE, (unknown, 0): ldu.UNKNOWN_TOPIC_OR_PARTITION}
    time.sleep(0.3)
    assert ldu.all_entries(cluster, [t, unknown]) == snap
    ru.create(cluster, unknown, {0: [1, 2]})
    assert ldu.replica_dirs(b1, unknown) == {0: full}, (ldu.entries(b1, unknown), c)
    ctl = cluster.broker(cluster.controller_id())
    assert ru.alter_reassignments(ctl.port, [(t, [(1, [2, 3, 1])])]) == (0, "", {(t, 1): (0, None)})
    cluster.wait_for(lambda: ru.settled(cluster, t, {0: [1, 2], 1: [2, 3, 1]}), 30, f"{t}-1 on broker 1")
    cluster.wait_for(lambda: ldu.replica_dirs(b1, t).get(1) is not None, 10, f"broker 1 creating {t}-1")
    assert ldu.replica_dirs(b1, t) == {0: x, 1: full}, (ldu.entries(b1, t), c)
    assert future_and_delete(cluster, t) == {1: [], 2: [], 3: []}

    # One partition under two paths in one request: the last one wins.
    assert ldu.alter_replica_log_dirs(b1.port, [(X, [(t, [0])]), (Y, [(t, [0])])]) == {(t, 0): ldu.NONE}
    cluster.wait_for(lambda: ldu.replica_dirs(b1, t).get(0) == 1 - x, 30, f"{t}-0 moved to {Y}")
    wait_plain(cluster, t, {1: {x: [1] if full == x else [], 1 - x: [0] + ([1] if full != x else [])},
                            2: {i: [p for p, j in ldu.replica_dirs(cluster.broker(2), t).items() if j == i] for i in (0, 1)},
                            3: {i: [p for p, j in ldu.replica_dirs(cluster.broker(3), t).items() if j == i] for i in (0, 1)}})


def test_move_cancelled_by_moving_back(jbod):
    cluster = jbod
    t = "ard-cancel"
    ru.create(cluster, t, {0: [1]})
    b1 = cluster.broker(1)
    x = ldu.replica_dirs(b1, t)[0]
    X, Y = b1.dirs[x], b1.dirs[1 - x]
    ru.fill(b1.port, t, 0, 24)  # 3 MiB
    size = ldu.log_bytes(b1, x, t, 0)
    assert dc.incremental_alter(b1.port, [(dc.BROKER, "1", [(DIR_THROTTLE, dc.SET, "1")])]) == [
        (0, None, dc.BROKER, "1")]
    cluster.wait_for(lambda: ru.broker_dynamic(b1.port, 1, (DIR_THROTTLE,)) == {DIR_THROTTLE: "1"}, 15,
                     "broker 1 applying its throttle")
    try:
        assert ldu.alter_replica_log_dirs(b1.port, [(Y, [(t, [0])])]) == {(t, 0): ldu.NONE}
        fut = cluster.wait_for(lambda: [n for n in ldu.entries(b1, t)[1 - x] if n.endswith("-future")], 15,
                               "the -future directory")
        # The first throttled step lands, then the copy is held back (on a
        # loaded machine the first step can take a while to come).
        def future_replica():
            replicas = ldu.describe_log_dirs(b1.port, [(t, [0])])[1][Y]["replicas"]
            return replicas.get((t, 0), (0, 0, False))[0] > 0
        cluster.wait_for(future_replica, 15, "the first throttled copy step")
        time.sleep(2)  # held back by the throttle
        assert ldu.entries(b1, t) == {x: [f"{t}-0"], 1 - x: fut}
        top, dirs = ldu.describe_log_dirs(b1.port, [(t, [0])])
        fsize, lag, is_future = dirs[Y]["replicas"][(t, 0)]
        assert is_future and 0 < fsize < size and lag > 0, dirs
        assert dirs[X]["replicas"][(t, 0)] == (size, 0, False), dirs

        assert ldu.alter_replica_log_dirs(b1.port, [(X, [(t, [0])])]) == {(t, 0): ldu.NONE}
        wait_plain(cluster, t, {1: {x: [0], 1 - x: []}, 2: {0: [], 1: []}, 3: {0: [], 1: []}})
        top, dirs = ldu.describe_log_dirs(b1.port, [(t, [0])])
        assert dirs[X]["replicas"] == {(t, 0): (size, 0, False)} and dirs[Y]["replicas"] == {}, dirs
    finally:
        assert dc.incremental_alter(b1.port, [(dc.BROKER, "1", [(DIR_THROTTLE, dc.DELETE, None)])]) == [
            (0, None, dc.BROKER, "1")]
    assert ru.end_offsets(cluster.bootstrap(), t, 1) == {0: 24 * 16}
    assert ldu.log_bytes(b1, x, t, 0) == size
