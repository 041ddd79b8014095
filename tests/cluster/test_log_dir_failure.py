"""A log directory on a small filesystem fills up (ZooKeeper mode): three
brokers with two log directories each (log.dirs=<tmp>/d0,<tmp>/d1); broker
1's d1 is an 8 MiB tmpfs. A topic of 6 partitions x RF 3 puts 3 replicas of
broker 1 in each directory (Kafka creates a new log in the directory with
the fewest logs, and creates the logs a broker leads before the ones it
follows, so broker 1's two led partitions land in different directories).
An idempotent acks=all producer (librdkafka) writes ~8 KiB records until d1
is full.

What Kafka 3.9.1 does (asserted unless marked as a log line):
- The write that does not fit fails with java.io.IOException "No space left
  on device" in FileRecords.append (log lines: "ERROR Error while appending
  records to ldf-1 in dir .../d1 (LogDirFailureChannel)", both for the
  leader's append and the follower's fetcher append). Kafka's write may be
  partial: before the restart DumpLogSegments reports e.g. "Found 3456
  invalid bytes at the end of 00000000000000000096.log" on the active
  segment of such a replica (every complete batch is still valid).
- The directory goes offline at once and the broker stays up, serving d0
  (log lines: "Stopping serving replicas in dir .../d1 with uuid None
  because the log directory has failed.", "Stopping serving logs in dir
  .../d1", "Logs for partitions ldf-5,ldf-2,ldf-1 are offline and logs for
  future partitions  are offline due to failure on log directory .../d1",
  "Stopped serving replicas in dir .../d1").
- The broker writes one /log_dir_event_notification/log_dir_event_<seq>
  znode, which the controller deletes at once: the parent ends with no
  children and cversion +2.
- ~0.1 s later the controller has rewritten the state znode of each of the
  three partitions in d1: broker 1 removed from the ISR (order kept), leader
  epoch +1, and where broker 1 led, the first other replica of the
  assignment in the ISR leads. The three partitions in d0 keep their state
  znodes unchanged (broker 1 still leads the one it led). Every broker's
  Metadata lists broker 1 in offline_replicas of the d1 partitions only.
- kafka-log-dirs --describe shows d1 with "error":
  "org.apache.kafka.common.errors.KafkaStorageException" and no partitions,
  d0 with "error": null and its three partitions. Raw DescribeLogDirs v4:
  d1 error KAFKA_STORAGE_ERROR (56) with total/usable bytes -1 and no
  topics. AlterReplicaLogDirs into the offline directory, or of a replica
  that is in it: KAFKA_STORAGE_ERROR (56).
- The producer sees only retriable errors: no record fails.
- SIGTERM of broker 1 works (log line on shutdown: "WARN [KafkaServer id=1]
  null" with a ClosedChannelException releasing the failed dir's lock).
  After growing the tmpfs (mount -o remount,size=64m) it starts again:
  "Recovering 3 logs from .../d1 since no clean shutdown file was found",
  "Corruption found in segment 96, truncating to offset 339" (the partial
  write); its replicas are back in d1, it rejoins every ISR; it leads
  nothing (controlled shutdown moved its leadership away and
  auto.leader.rebalance.enable=false).
- Every acknowledged record is read back exactly once at its offset, and
  DumpLogSegments --deep-iteration reads every segment of d1: all batches
  valid, offsets 0..end-1 each once, no trailing bytes; the offset and time
  indexes of the rolled segments verify.

Kafka preallocates an index file (segment.index.bytes) as a sparse file and
writes it through mmap: a first write to a page of it on a full tmpfs would
be SIGBUS (an InternalError in the JVM), not an IOException. So the test
writes its first segments (256 KiB each) while there is room, then sets
segment.bytes=1 GiB and index.interval.bytes=2^31-1 before filling, so that
no segment rolls and no index page is touched while d1 fills; both are
reset while broker 1 is down, so recovery rebuilds real indexes.
"""

import time

import pytest

import cluster_util as cl
import durability
import log_dir_util as ldu
import reassign_util as ru
import test_dynamic_config as dc

T = "ldf"
N = 6
TMPFS_MB = 8
BIGGER_MB = 64
SMALL_SEGMENT = 256 * 1024
OVERRIDES = {
    "auto.leader.rebalance.enable": "false",
    "unclean.leader.election.enable": "false",
}
FILL_KEYS = (("segment.bytes", str(1 << 30)), ("index.interval.bytes", str((1 << 31) - 1)))


@pytest.fixture
def jbod(cluster):
    yield cluster
    ldu.unmount_all(cluster)


def states(cluster):
    return {p: cluster.partition_state(T, p) for p in range(N)}


def metadata_ok(cluster, want_offline):
    """Every live broker's Metadata: leaders as in ZooKeeper, and broker 1
    in offline_replicas exactly for the partitions in want_offline."""
    zk = states(cluster)
    for b in cluster.live():
        parts = b.metadata()["topics"][T]["partitions"]
        for p in range(N):
            v = parts[p]
            if v["leader"] != zk[p]["leader"] or sorted(v["isr"]) != sorted(zk[p]["isr"]):
                return None
            if v["offline"] != ([1] if p in want_offline else []):
                return None
    return True


def lead_with_broker_1(cluster, p):
    replicas = cluster.assignment(T)[p]
    target = [1] + [r for r in replicas if r != 1]
    ctl = cluster.broker(cluster.controller_id())
    assert ru.alter_reassignments(ctl.port, [(T, [(p, target)])]) == (0, "", {(T, p): (0, None)})
    cluster.wait_for(lambda: cluster.assignment(T)[p] == target, 30, f"{T}-{p} replicas {target}")
    cl.kafka_tool(ru.LEADER_ELECTION_TOOL, "--bootstrap-server", cluster.bootstrap(),
                  "--election-type", "PREFERRED", "--topic", T, "--partition", str(p))
    cluster.wait_for(lambda: states(cluster)[p]["leader"] == 1, 30, f"broker 1 leading {T}-{p}")
    cluster.wait_converged(topics=[T])


def test_full_directory_goes_offline_and_comes_back(jbod):
    cluster = jbod
    b1, b2, b3 = ldu.start_two_dir_brokers(cluster, 3, OVERRIDES, tmpfs_mb={1: TMPFS_MB})
    d0, d1 = b1.dirs
    cluster.create_topic(T, N, 3, {"min.insync.replicas": "2", "segment.bytes": str(SMALL_SEGMENT)})
    cluster.wait_converged(topics=[T])
    cluster.wait_for(lambda: all(sorted(s["isr"]) == [1, 2, 3] for s in states(cluster).values()), 30, "full ISRs")
    placement = ldu.replica_dirs(b1, T)
    failing = sorted(p for p, d in placement.items() if d == 1)
    healthy = sorted(p for p, d in placement.items() if d == 0)
    assert len(failing) == len(healthy) == 3, placement
    # Which dir a new log gets depends on the order the broker creates them
    # (Kafka: leaders first); where broker 1 leads in only one dir, it is
    # made to lead one partition of the other (replicas reordered, then a
    # preferred election), the same on either broker.
    for dir_parts in (failing, healthy):
        if not any(states(cluster)[p]["leader"] == 1 for p in dir_parts):
            lead_with_broker_1(cluster, dir_parts[0])
    before = states(cluster)
    led_failing = [p for p in failing if before[p]["leader"] == 1]
    led_healthy = [p for p in healthy if before[p]["leader"] == 1]
    assert led_failing and led_healthy, f"broker 1 leads a partition in each dir: {placement} {before}"
    for b in (b2, b3):
        assert sorted(ldu.replica_dirs(b, T)) == list(range(N))
        assert [len(v) for v in ldu.entries(b, T).values()] == [3, 3]

    top, dirs = ldu.describe_log_dirs(b1.port)
    assert top == 0 and sorted(dirs) == [d0, d1], dirs
    assert dirs[d1]["error"] == 0 and dirs[d1]["total"] == TMPFS_MB << 20, dirs[d1]
    assert 0 < dirs[d1]["usable"] < dirs[d1]["total"], dirs[d1]
    assert dirs[d0]["error"] == 0 and dirs[d0]["total"] == ldu.fs_stats(d0)[0], dirs[d0]
    assert {k for k in dirs[d1]["replicas"]} == {(T, p) for p in failing}
    assert {k for k in dirs[d0]["replicas"]} == {(T, p) for p in healthy}

    events = cluster.path("/log_dir_event_notification")
    cversion0 = cluster.zk.exists(events).cversion
    assert cluster.zk.get_children(events) == []

    producer = ldu.PaddedProducer(cluster.bootstrap(), T, N, tag="ldf", rate=250, key_bytes=8000)
    try:
        # A few 256 KiB segments per replica while there is room, then no
        # more rolls and no more index entries (see the module docstring).
        durability.wait_acked_more([producer], 600, 90)
        producer.pause()
        segs = ldu.segment_files(b1, 1, T)
        assert sorted(segs) == failing and all(len(f) >= 3 for f in segs.values()), segs
        assert dc.incremental_alter(b2.port, [(dc.TOPIC, T, [(k, dc.SET, v) for k, v in FILL_KEYS])]) == [
            (0, None, dc.TOPIC, T)]
        time.sleep(3)  # every broker applies the topic config change
        producer.resume()

        t_fill = time.monotonic()
        cluster.wait_for(lambda: ldu.describe_log_dirs(b1.port)[1][d1]["error"] == ldu.KAFKA_STORAGE_ERROR,
                         120, f"{d1} offline", 0.1)
        t_offline = time.monotonic()
        assert b1.running()

        def moved():
            s = states(cluster)
            return s if all(s[p]["leader_epoch"] > before[p]["leader_epoch"] for p in failing) else None

        after = cluster.wait_for(moved, 60, "the controller moving the failed dir's partitions", 0.05)
        print(f"d1 offline after {t_offline - t_fill:.1f}s of filling; state znodes rewritten "
              f"{time.monotonic() - t_offline:.2f}s later")
        for p in failing:
            reps = cluster.assignment(T)[p]
            isr = [r for r in before[p]["isr"] if r != 1]
            leader = before[p]["leader"] if before[p]["leader"] != 1 else next(r for r in reps if r in isr)
            assert after[p] == dict(before[p], leader=leader, isr=isr, leader_epoch=before[p]["leader_epoch"] + 1), (
                p, before[p], after[p])
        for p in healthy:
            assert after[p] == before[p], (p, before[p], after[p])
        cluster.wait_for(lambda: cluster.zk.get_children(events) == [] and
                         cluster.zk.exists(events).cversion == cversion0 + 2, 10,
                         "one log_dir_event znode, created and deleted")
        assert cluster.registered_ids() == [1, 2, 3]
        cluster.wait_for(lambda: metadata_ok(cluster, failing), 30, "Metadata with broker 1 offline in d1 partitions")

        # Broker 1 keeps serving d0: the partitions there (one led by it)
        # keep taking records.
        ends_failed = ru.end_offsets(cluster.bootstrap(), T, N)
        durability.wait_acked_more([producer], 300, 90)
        ends_later = ru.end_offsets(cluster.bootstrap(), T, N)
        assert all(ends_later[p] > ends_failed[p] for p in range(N)), (ends_failed, ends_later)
        assert states(cluster) == after
        assert b1.running()

        tool = ldu.log_dirs_tool(cluster, [1], [T])
        assert sorted(tool) == [1] and sorted(tool[1]) == [d0, d1], tool
        assert tool[1][d1] == (ldu.STORAGE_EXCEPTION, {}), tool
        err, parts = tool[1][d0]
        assert err is None and sorted(parts) == sorted(f"{T}-{p}" for p in healthy), tool
        assert all(size > 0 and not fut for size, _, fut in parts.values()), tool
        top, dirs = ldu.describe_log_dirs(b1.port)
        assert top == 0 and dirs[d1] == {"error": ldu.KAFKA_STORAGE_ERROR, "total": -1, "usable": -1, "replicas": {}}
        assert dirs[d0]["error"] == 0 and {k for k in dirs[d0]["replicas"]} == {(T, p) for p in healthy}, dirs
        assert ldu.alter_replica_log_dirs(b1.port, [(d1, [(T, [healthy[0]])])]) == {(T, healthy[0]): 56}
        assert ldu.alter_replica_log_dirs(b1.port, [(d0, [(T, [failing[0]])])]) == {(T, failing[0]): 56}
        assert ldu.replica_dirs(b1, T) == placement

        # Down, grow the filesystem, up again.
        b1.stop()
        files = [f for p in failing for f in ldu.segment_files(b1, 1, T)[p]]
        res, parsed = ldu.dump_segments(files)
        assert res.returncode == 0 and sorted(parsed) == sorted(files), res.stderr[-3000:]
        for p, fs in ldu.segment_files(b1, 1, T).items():
            for f in fs:
                assert parsed[f]["batches"] and all(valid for *_, valid in parsed[f]["batches"]), f
                if f != fs[-1]:
                    assert parsed[f]["trailing"] == 0, (f, parsed[f]["trailing"])
        print("trailing bytes before the restart:",
              {f.rsplit("/", 2)[-2] + "/" + f.rsplit("/", 1)[-1]: d["trailing"] for f, d in parsed.items() if d["trailing"]})
        assert dc.incremental_alter(b2.port, [(dc.TOPIC, T, [(k, dc.DELETE, None) for k, _ in FILL_KEYS])]) == [
            (0, None, dc.TOPIC, T)]
        ldu.remount_tmpfs(d1, BIGGER_MB)
        b1.start()
        assert durability.wait_in_every_isr(cluster, T, N, 1, 90), states(cluster)
        cluster.wait_for(lambda: metadata_ok(cluster, []), 30, "Metadata without offline replicas")
        assert all(s["leader"] != 1 for s in states(cluster).values()), states(cluster)
        assert ldu.replica_dirs(b1, T) == placement
        assert ldu.entries(b1, T) == {0: [f"{T}-{p}" for p in healthy], 1: [f"{T}-{p}" for p in failing]}
        durability.wait_acked_more([producer], 200, 90)
        producer.stop()
    finally:
        producer.kill()
    assert producer.log.failed == 0 and not producer.log.fatal, (producer.log.errors, producer.log.fatal)
    summary = ldu.check_all_acked(cluster.bootstrap(), T, N, producer)
    print("read back", summary)
    ends = summary["high_watermarks"]
    assert sum(ends.values()) == producer.log.acked

    tool = ldu.log_dirs_tool(cluster, [1], [T])
    assert tool[1][d1][0] is None and sorted(tool[1][d1][1]) == sorted(f"{T}-{p}" for p in failing), tool
    assert tool[1][d0][0] is None and sorted(tool[1][d0][1]) == sorted(f"{T}-{p}" for p in healthy), tool
    top, dirs = ldu.describe_log_dirs(b1.port)
    assert dirs[d1]["error"] == 0 and dirs[d1]["total"] == BIGGER_MB << 20, dirs[d1]

    # Every segment of the formerly full directory, read by Kafka's tool
    # (the indexes of the active segments are left out: preallocated).
    logs = ldu.segment_files(b1, 1, T)
    idx = ldu.segment_files(b1, 1, T, ".index")
    tidx = ldu.segment_files(b1, 1, T, ".timeindex")
    files = [f for p in failing for f in logs[p] + idx[p][:-1] + tidx[p][:-1]]
    res, parsed = ldu.dump_segments(files, "--deep-iteration", "--verify-index-only")
    assert res.returncode == 0, res.stderr[-3000:]
    assert not [m for m in ldu.DUMP_ERROR_MARKERS if m in res.stderr], res.stderr[-3000:]
    assert sorted(parsed) == sorted(files)
    for p in failing:
        assert len(logs[p]) >= 4, logs[p]
        batches = ldu.check_dump_covers(parsed, logs[p], ends[p])
        assert sum(parsed[f]["records"] for f in logs[p]) == ends[p], p
        assert batches > 0
        for f in idx[p][:-1] + tidx[p][:-1]:
            assert parsed[f]["other"] == [], (f, parsed[f]["other"][:5])
