"""Log truncation by leader epoch (KIP-101) instead of by high watermark.

Two brokers A (id 1, preferred leader) and B (id 2), one partition with
replicas [A, B], min.insync.replicas=1.

test_lagging_follower_leads_after_restart (KIP-101's first scenario): B
holds acknowledged records beyond the high watermark it has on disk (the
checkpoint interval is an hour, so the checkpoint never catches up) and
becomes leader straight after a restart, before it could fetch anything:
A and B are killed together, B comes back first. B must keep those records
(truncating to its HW would lose acknowledged records). A also holds a tail
B never saw (acks=1 while B was stopped); when A returns as follower it must
truncate that tail at the end of the epoch it was written in and then hold
exactly B's log.

test_divergent_tail_above_high_watermark (KIP-101's second scenario): A's
tail is committed on A alone (B was shut down, ISR {A}) and A's high
watermark checkpoint covers it; after A's death B is elected uncleanly and
writes new records at the same offsets. A must truncate below its own HW,
to where its epoch ends on B; truncating by HW would leave the logs
diverged.

Both finish by reading the partition through B as leader and through A as
leader (after a preferred election) and requiring the same records, offsets
and leader epochs."""

import re
import time
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import NewTopic

import durability as du

SESSION_TIMEOUT_MS = 4000
TOPIC = "truncation"
A, B = 1, 2
BATCH1 = 200
TAIL = 20
BATCH2 = 100
BATCH3 = 50


def _produce(bootstrap, tag, count, acks):
    """count records to partition 0; returns the acknowledged offsets in
    production order (all must be acknowledged)."""
    acked, errors = {}, []

    def report(err, msg):
        if err is not None:
            errors.append((msg.value(), err))
        else:
            acked[msg.value().decode()] = msg.offset()

    idempotent = acks == "all"
    prod = Producer({"bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": idempotent,
                     "linger.ms": 5, "message.timeout.ms": 30000})
    values = [f"{tag}-{i}" for i in range(count)]
    for v in values:
        prod.produce(TOPIC, value=v.encode(), partition=0, on_delivery=report)
    left = prod.flush(60)
    assert left == 0 and not errors, f"{tag}: {left} unreported, errors {errors[:5]}"
    return [acked[v] for v in values]


def _read(bootstrap):
    """[(offset, value, leader_epoch)] of partition 0 up to the high watermark."""
    out = []
    du.read_partitions(bootstrap, TOPIC, 1, lambda p, o, v, e: out.append((o, v.decode(), e)), timeout_s=60)
    return out


def _checkpoint_hw(broker):
    """The partition's offset in the broker's replication-offset-checkpoint
    (Kafka's text format: version, count, then 'topic partition offset'),
    or None."""
    path = Path(broker.log_dirs) / "replication-offset-checkpoint"
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == TOPIC and parts[1] == "0":
            return int(parts[2])
    return None


def _create_topic(cluster, config):
    admin = cluster.admin(A)
    futs = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=-1, replica_assignment=[[A, B]],
                                         config=config)], operation_timeout=30)
    futs[TOPIC].result(60)
    cluster.wait_converged(topics=[TOPIC])
    cluster.wait_for(lambda: sorted(cluster.partition_state(TOPIC, 0)["isr"]) == [A, B], 30, "ISR [A, B]")


def _wait_gone(cluster, *paths):
    cluster.wait_for(lambda: not any(cluster.zk_exists(p) for p in paths), SESSION_TIMEOUT_MS / 1000 * 3 + 10,
                     f"{paths} to vanish (ZooKeeper sessions expiring)")


def _start_alone_as_leader(cluster, broker, before):
    """Starts `broker` with its partner dead; it becomes controller and
    leader with a higher leader epoch (Kafka's controller may pass through
    leader -1 first, one bump each)."""
    broker.start()
    cluster.wait_converged(brokers=[broker], topics=[TOPIC])
    state = cluster.wait_for(lambda: (lambda s: s if s["leader"] == broker.broker_id else None)(
        cluster.partition_state(TOPIC, 0)), 30, f"broker {broker.broker_id} leading")
    assert state["leader_epoch"] > before["leader_epoch"], f"{before} -> {state}"
    assert state["isr"] == [broker.broker_id], state
    return state


def _rejoin_and_compare(cluster, expected):
    """A back as follower: waits for it in the ISR, reads through B, moves
    leadership to A (preferred election), reads through A. Both must equal
    `expected` [(offset, value, leader_epoch)]. Then A takes acks=all writes."""
    cluster.broker(A).start()
    cluster.wait_for(lambda: sorted(cluster.partition_state(TOPIC, 0)["isr"]) == [A, B], 60, "A back in the ISR")
    # Informational: how A says it truncated (the log lines differ per target).
    restart = cluster.broker(A).log_text().rsplit("==== broker-1 start", 1)[-1]
    for line in [ln for ln in restart.splitlines() if re.search(r"[Tt]runcat(e|ed|es|ing)\b", ln)][:4]:
        print(f"A: {line.strip()[:300]}")
    via_b = _read(cluster.broker(B).bootstrap)
    _assert_log(via_b, expected, "read through leader B")

    admin = cluster.admin(B)
    admin.elect_leaders(ElectionType.PREFERRED, [CTopicPartition(TOPIC, 0)]).result(60)

    def led_by_a():
        view = cluster.agreed_metadata()
        return view if view and view["topics"][TOPIC]["partitions"][0][0] == A else None

    cluster.wait_for(led_by_a, 30, "every broker's Metadata showing A as leader")
    state = cluster.partition_state(TOPIC, 0)
    assert state["leader"] == A and sorted(state["isr"]) == [A, B], state
    via_a = _read(cluster.broker(A).bootstrap)
    _assert_log(via_a, expected, "read through leader A")
    assert via_a == via_b

    # A leads with B following: new acks=all records land after the old log.
    base = len(expected)
    offsets = _produce(cluster.bootstrap(), "batch3", BATCH3, "all")
    assert offsets == list(range(base, base + BATCH3)), offsets[:5]
    final = _read(cluster.bootstrap())
    assert [(o, v) for o, v, _ in final[:base]] == [(o, v) for o, v, _ in expected]
    assert [v for _, v, _ in final[base:]] == [f"batch3-{i}" for i in range(BATCH3)]
    return via_a


def _assert_log(got, expected, what):
    if got == expected:
        return
    tail = [r for r in got if r[1].startswith("tail-")]
    diff = next((i for i, (g, e) in enumerate(zip(got, expected)) if g != e), min(len(got), len(expected)))
    raise AssertionError(f"{what}: {len(got)} records, want {len(expected)}; first difference at #{diff}: "
                         f"got {got[diff:diff + 3]}, want {expected[diff:diff + 3]}; "
                         f"{len(tail)} tail records present")


@pytest.mark.needs_replication
def test_lagging_follower_leads_after_restart(cluster):
    overrides = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                 # B must stay in the ISR while it is stopped below.
                 "replica.lag.time.max.ms": 10000,
                 # Neither HW checkpoint catches up: after kill -9 both
                 # brokers restart with logs beyond their recorded HW.
                 "replica.high.watermark.checkpoint.interval.ms": 3_600_000,
                 "log.flush.offset.checkpoint.interval.ms": 3_600_000,
                 "auto.leader.rebalance.enable": "false",
                 "unclean.leader.election.enable": "false"}
    cluster.start(2, overrides)
    _create_topic(cluster, {"min.insync.replicas": "1"})
    a, b = cluster.broker(A), cluster.broker(B)
    assert cluster.partition_state(TOPIC, 0)["leader"] == A

    epoch0 = cluster.partition_state(TOPIC, 0)["leader_epoch"]
    batch1 = _produce(a.bootstrap, "batch1", BATCH1, "all")
    assert batch1 == list(range(BATCH1))
    # B stops fetching; A appends a tail only it has (acks=1 is answered
    # by the leader alone).
    b.sigstop()
    tail = _produce(a.bootstrap, "tail", TAIL, "1")
    assert tail == list(range(BATCH1, BATCH1 + TAIL))
    before = cluster.partition_state(TOPIC, 0)
    # Both die with B still in the ISR; no controller survives to change it.
    a.kill9()
    b.kill9()
    _wait_gone(cluster, f"/brokers/ids/{A}", f"/brokers/ids/{B}", "/controller")
    state = cluster.partition_state(TOPIC, 0)
    assert (state["leader"], sorted(state["isr"])) == (A, [A, B]), f"ZooKeeper changed while nobody ran: {state}"
    print(f"HW checkpoints on disk: A {_checkpoint_hw(a)}, B {_checkpoint_hw(b)} (log end {BATCH1} on B)")

    # B restarts first and leads at once with the records beyond its HW.
    led = _start_alone_as_leader(cluster, b, before)
    on_b = _read(b.bootstrap)
    epoch1 = led["leader_epoch"]
    _assert_log(on_b, [(i, f"batch1-{i}", epoch0) for i in range(BATCH1)], "B after its restart")
    batch2 = _produce(b.bootstrap, "batch2", BATCH2, "all")
    assert batch2 == list(range(BATCH1, BATCH1 + BATCH2)), f"batch2 acknowledged at {batch2[:3]}..."

    # A returns with batch1 + tail in epoch0: the tail ends where B's
    # epoch0 ends, at BATCH1, so A truncates it and fetches batch2.
    expected = ([(i, f"batch1-{i}", epoch0) for i in range(BATCH1)]
                + [(BATCH1 + i, f"batch2-{i}", epoch1) for i in range(BATCH2)])
    _rejoin_and_compare(cluster, expected)


@pytest.mark.needs_replication
def test_divergent_tail_above_high_watermark(cluster):
    overrides = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                 "replica.lag.time.max.ms": 10000,
                 # A's checkpointed HW covers its tail before A dies.
                 "replica.high.watermark.checkpoint.interval.ms": 200,
                 "log.flush.offset.checkpoint.interval.ms": 200,
                 "auto.leader.rebalance.enable": "false"}
    cluster.start(2, overrides)
    _create_topic(cluster, {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
    a, b = cluster.broker(A), cluster.broker(B)
    assert cluster.partition_state(TOPIC, 0)["leader"] == A

    epoch0 = cluster.partition_state(TOPIC, 0)["leader_epoch"]
    batch1 = _produce(a.bootstrap, "batch1", BATCH1, "all")
    assert batch1 == list(range(BATCH1))
    # Controlled shutdown takes B out of the ISR; the tail is then
    # committed on A alone (ISR {A} meets min.insync.replicas=1).
    b.stop()
    cluster.wait_for(lambda: cluster.partition_state(TOPIC, 0)["isr"] == [A], 30, "ISR [A]")
    tail = _produce(a.bootstrap, "tail", TAIL, "all")
    assert tail == list(range(BATCH1, BATCH1 + TAIL))
    # The scenario needs A's recorded HW above the point where the logs
    # will diverge.
    hw_a = cluster.wait_for(lambda: (lambda hw: hw if (hw or 0) >= BATCH1 + TAIL else None)(_checkpoint_hw(a)), 10,
                            f"A's replication-offset-checkpoint at {BATCH1 + TAIL}")
    before = cluster.partition_state(TOPIC, 0)
    a.kill9()
    _wait_gone(cluster, f"/brokers/ids/{A}", "/controller")

    # B, out of the ISR, is elected uncleanly and writes at A's tail offsets.
    led = _start_alone_as_leader(cluster, b, before)
    epoch1 = led["leader_epoch"]
    batch2 = _produce(b.bootstrap, "batch2", BATCH2, "all")
    assert batch2 == list(range(BATCH1, BATCH1 + BATCH2)), f"batch2 acknowledged at {batch2[:3]}..."

    # A's HW checkpoint says BATCH1 + TAIL; its epoch ends on B at BATCH1.
    print(f"A's HW checkpoint before its death: {hw_a}; tail in epoch {before['leader_epoch']}, "
          f"B's last epoch before {epoch1} ends at {BATCH1}")
    expected = ([(i, f"batch1-{i}", epoch0) for i in range(BATCH1)]
                + [(BATCH1 + i, f"batch2-{i}", epoch1) for i in range(BATCH2)])
    t0 = time.monotonic()
    _rejoin_and_compare(cluster, expected)
    print(f"A rejoined and matched B in {time.monotonic() - t0:.1f}s")
