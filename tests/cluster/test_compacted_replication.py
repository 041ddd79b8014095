"""A compacted topic with replication factor 3: the leader's cleaner drops
records, a follower that was down while it cleaned copies the cleaned
segments (offset gaps above its log end offset) and rejoins the ISR, the
in-sync follower never leaves it, and after a kill -9 of the leader the
promoted follower serves every key's latest value.

Kafka's follower appends fetched batches at whatever offsets they carry
(only offsets below its log end offset are refused), and every replica
runs its own cleaner on its own copy, so each replica's log has gaps and
DumpLogSegments reads all of them: the same records are found in each copy
up to compaction, the last offset is the log end offset - 1, and the
latest record of every key carries its latest value.
"""

import re
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

import cluster_util as cl

TOPIC = "compacted-rf3"
KEYS = 300
UPDATES = 20_000  # ~100 segments of 16 KiB before cleaning
MORE_UPDATES = 3_000
ZK_SESSION_TIMEOUT_MS = 6000
LAG_MS = 5000  # a follower stuck on a gap leaves the ISR within the test
BROKER = {
    "zookeeper.session.timeout.ms": ZK_SESSION_TIMEOUT_MS,
    "replica.lag.time.max.ms": LAG_MS,
    "auto.leader.rebalance.enable": "false",
    "log.cleaner.backoff.ms": "500",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.dedupe.buffer.size": str(8 << 20),  # three JVM brokers on two cores
}
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": str(16 << 10),
    "segment.ms": "1000",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "2",
}
CLEAN_TIMEOUT_S = 90
REJOIN_TIMEOUT_S = 90


def key(k):
    return f"key-{k:04d}".encode()


class Updater:
    """acks=all idempotent updates "v<seq>-<k>xxx" to keys round-robin;
    remembers every key's latest value."""

    def __init__(self, bootstrap):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "batch.size": 8192})  # a batch must fit a segment
        self.latest = {}
        self.seq = 0
        self.errors = []

    def update(self, count):
        for _ in range(count):
            k = self.seq % KEYS
            value = f"v{self.seq:07d}-{k}".encode() + b"x" * (40 + k % 60)
            self.producer.produce(TOPIC, key=key(k), value=value, partition=0,
                                  on_delivery=lambda err, msg: err and self.errors.append(err))
            self.latest[key(k)] = value
            self.seq += 1
            if self.seq % 1000 == 0:
                self.producer.poll(0)
        assert self.producer.flush(60) == 0 and not self.errors, self.errors[:3]


def read_partition(bootstrap):
    """Partition 0 from offset 0 to the high watermark through its leader:
    ([(offset, key, value)], high watermark)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compacted-reader", "enable.auto.commit": False})
    try:
        _, end = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
        c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        records = []
        deadline = time.monotonic() + 60
        while end > 0 and (not records or records[-1][0] < end - 1):
            assert time.monotonic() < deadline, f"read stuck at {records[-1:]} of {end}"
            for m in c.consume(5000, 0.5):
                assert m.error() is None, m.error()
                records.append((m.offset(), m.key(), m.value()))
        return [r for r in records if r[0] < end], end
    finally:
        c.close()


def check_copy(records, end, latest, what):
    """One replica's records: increasing offsets ending at end - 1, with
    gaps, and every key's last record carrying its latest value."""
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)), f"{what}: offsets not increasing"
    assert offsets and offsets[-1] == end - 1, f"{what}: last offset {offsets[-1:]} but the log ends at {end}"
    assert len(offsets) < end, f"{what}: {len(offsets)} records for {end} offsets: not cleaned"
    last = {}
    for _, k, v in records:
        last[k] = v
    wrong = sorted(k for k in latest if last.get(k) != latest[k])
    assert not wrong, f"{what}: {len(wrong)} keys without their latest value, e.g. {wrong[:5]}"
    assert set(last) == set(latest), f"{what}: keys nobody wrote {sorted(set(last) - set(latest))[:5]}"


def dump_partition(broker):
    """kafka.tools.DumpLogSegments --deep-iteration over every segment of
    the broker's copy of partition 0 (the broker is stopped):
    [(offset, key, value)]."""
    d = Path(broker.log_dirs) / f"{TOPIC}-0"
    logs = sorted(d.glob("*.log"))
    assert logs, f"broker {broker.broker_id}: no segments in {d}"
    res = cl.kafka_tool("kafka.tools.DumpLogSegments", "--files", ",".join(str(s) for s in logs),
                        "--deep-iteration", "--print-data-log", timeout_s=180)
    for bad in ("Exception", "corrupt", "isvalid: false"):
        assert bad not in res.stdout + res.stderr, f"broker {broker.broker_id}: {bad!r}\n{(res.stdout + res.stderr)[-3000:]}"
    return [(int(o), k.encode(), v.encode())
            for o, k, v in re.findall(r"^\| offset: (\d+) .* key: (\S+) payload: (\S+)$", res.stdout, re.M)]


@pytest.mark.needs_replication
def test_compacted_topic_replicates_and_fails_over(cluster):
    brokers = cluster.start(3, BROKER)
    cluster.create_topic(TOPIC, 1, 3, TOPIC_CONFIG)
    cluster.wait_converged(topics=[TOPIC])
    ids = sorted(b.broker_id for b in brokers)
    cluster.wait_for(lambda: sorted(cluster.partition_state(TOPIC, 0)["isr"]) == ids, 60, "a full ISR")
    state = cluster.partition_state(TOPIC, 0)
    leader = cluster.broker(state["leader"])
    in_sync, behind = [cluster.broker(r) for r in cluster.assignment(TOPIC)[0] if r != leader.broker_id]
    t0 = time.monotonic()
    timings = {}

    # 1. One follower is down while the leader takes and cleans the updates.
    behind.kill9()
    cluster.wait_for(lambda: behind.broker_id not in cluster.partition_state(TOPIC, 0)["isr"],
                     ZK_SESSION_TIMEOUT_MS / 1000 + 20, f"broker {behind.broker_id} out of the ISR")
    updater = Updater(cluster.bootstrap([leader, in_sync]))
    updater.update(UPDATES)

    def cleaned():
        updater.update(1)  # an append lets the active segment roll (segment.ms)
        records, end = read_partition(leader.bootstrap)
        return (records, end) if len(records) < end else None

    records, end = cluster.wait_for(cleaned, CLEAN_TIMEOUT_S, "the leader's log to show cleaning (offset gaps)", 1.0)
    check_copy(records, end, updater.latest, f"leader {leader.broker_id} after cleaning")
    timings["cleaned_s"] = time.monotonic() - t0
    state = cluster.partition_state(TOPIC, 0)
    assert sorted(state["isr"]) == sorted([leader.broker_id, in_sync.broker_id]), \
        f"the in-sync follower left the ISR while the leader cleaned: {state}"

    # 2. The follower comes back behind the cleaned segments: it must append
    # batches with offset gaps to catch up, and rejoin the ISR.
    behind.start()
    cluster.wait_for(lambda: sorted(cluster.partition_state(TOPIC, 0)["isr"]) == ids, REJOIN_TIMEOUT_S,
                     f"broker {behind.broker_id} back in the ISR through the cleaned segments")
    timings["rejoined_s"] = time.monotonic() - t0
    _, full_isr = cluster.zk_get(f"/brokers/topics/{TOPIC}/partitions/0/state")

    # 3. More updates after cleaning; nobody leaves the ISR. acks=all with
    # three in the ISR: a follower stuck on a gap holds the high watermark
    # until the leader drops it after replica.lag.time.max.ms, so the
    # flush below returns only once both followers have the records, or
    # after the ISR changed.
    updater.update(MORE_UPDATES)
    state, stat = cluster.zk_get(f"/brokers/topics/{TOPIC}/partitions/0/state")
    assert stat.version == full_isr.version, f"the ISR changed after the follower rejoined: {state}"
    records, end = read_partition(leader.bootstrap)
    check_copy(records, end, updater.latest, f"leader {leader.broker_id}")

    # 4. The leader dies; a follower is promoted and serves every key's
    # latest value.
    leader.kill9()
    survivors = [in_sync, behind]
    cluster.wait_for(lambda: cluster.partition_state(TOPIC, 0)["leader"] in {b.broker_id for b in survivors},
                     ZK_SESSION_TIMEOUT_MS / 1000 + 20, "a follower promoted")
    cluster.wait_converged(brokers=survivors, topics=[TOPIC])
    promoted = cluster.partition_state(TOPIC, 0)["leader"]
    records, end_after = read_partition(cluster.bootstrap(survivors))
    assert end_after == end, f"the log ended at {end}, the promoted broker {promoted} ends at {end_after}"
    check_copy(records, end, updater.latest, f"promoted broker {promoted}")
    timings["failed_over_s"] = time.monotonic() - t0

    # 5. Every copy, read from its segment files by DumpLogSegments.
    for b in survivors:
        b.stop()
    counts = {}
    for b in (leader, in_sync, behind):
        copy = dump_partition(b)
        check_copy(copy, end, updater.latest, f"DumpLogSegments of broker {b.broker_id}")
        counts[b.broker_id] = len(copy)
    timings["total_s"] = time.monotonic() - t0
    print(f"leader {leader.broker_id}, in sync {in_sync.broker_id}, behind {behind.broker_id}, promoted {promoted}: "
          f"{end} offsets, records per copy {counts}; {timings}")
