"""kill -9 of a consumer group's coordinator while a 3-member Java group
(kafka-clients 3.9.1, range assignor) consumes a 12-partition RF 3 topic
and commits synchronously after every poll, then the broker's return and a
preferred leader election that moves coordination back.

Kafka's GroupCoordinator for a group lives on the leader of
`__consumer_offsets` partition abs(hash(group.id)) % partitions. When that
broker dies the controller elects a new leader from the ISR (after the
dead broker's ZooKeeper session expires); the new leader loads the
partition (every commit acknowledged with acks=all is in its log) and the
members' heartbeats and commits find it through FindCoordinator. The
members keep their generation: no rebalance, no lost partitions.

Checked, from the members' own event log (compat_util.GroupEvents) and
from OffsetFetch polled through a surviving broker all along:
- every member commits again within zookeeper.session.timeout.ms plus the
  group's session timeout (and slack) after the kill, and again after the
  election, and the group never rebalances (its one generation holds);
- no committed offset goes backwards, and OffsetFetch never answers below
  a commit that was acknowledged before it asked (an acknowledged commit
  survives the loss of the coordinator);
- no batch starts below the last acknowledged commit of its partition
  (duplicates only after it), and every produced record is consumed.
"""

import threading
import time

import pytest

import cluster_util as cl
import compat_util as cu
import durability as du
import group_raw as gr

TOPIC = "coord-failover"
PARTITIONS = 12
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 3
ZK_SESSION_TIMEOUT_MS = 6000
BROKER = {
    "zookeeper.session.timeout.ms": ZK_SESSION_TIMEOUT_MS,
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    # the move back is the election command's, not the rebalance timer's
    "auto.leader.rebalance.enable": "false",
}
# The dead broker's ZooKeeper session expires, the controller elects new
# leaders, the new coordinator loads the group; the members then have a
# full session timeout to reach it.
RESUME_BOUND_S = (ZK_SESSION_TIMEOUT_MS + cu.GROUP_SESSION_TIMEOUT_MS) / 1000 + 10
RATE = 200  # records per second over the 12 partitions


def offsets_partition(group):
    return cl.offsets_partition(group, OFFSETS_PARTITIONS)


def find_coordinator(broker, group):
    """FindCoordinator v1 to that broker alone: (error, node id)."""
    conn = gr.Conn(broker.bootstrap, timeout_s=10)
    try:
        return gr.find_coordinator(conn, group)
    finally:
        conn.close()


def agreed_coordinator(cluster, group, brokers):
    """The node id every broker of `brokers` names, once they agree and it
    leads the group's __consumer_offsets partition in ZooKeeper."""
    answers = {b.broker_id: find_coordinator(b, group) for b in brokers}
    ids = {node for err, node in answers.values() if err == 0}
    if len(ids) != 1 or any(err != 0 for err, _ in answers.values()):
        return None
    (node,) = ids
    leader = cluster.partition_state(OFFSETS_TOPIC, offsets_partition(group))["leader"]
    assert node == leader, f"FindCoordinator names {node}, {OFFSETS_TOPIC}-{offsets_partition(group)} is led by {leader}"
    return node


# OffsetFetch errors while the coordinator moves: NOT_COORDINATOR,
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE.
COORDINATOR_MOVING = {14, 15, 16}


def offset_fetch(cluster, via, group):
    """FindCoordinator through broker `via`, then OffsetFetch v1 for every
    partition of TOPIC from that coordinator: {partition: offset}, -1 for
    none. Raises on any error (the coordinator moving included)."""
    err, node = find_coordinator(via, group)
    if err != 0:
        raise RuntimeError(f"FindCoordinator via {via.broker_id}: error {err}")
    conn = gr.Conn(cluster.broker(node).bootstrap, timeout_s=10)
    try:
        body = cu.string(group) + cu.i32(1) + cu.string(TOPIC) + cu.i32(PARTITIONS)
        body += b"".join(cu.i32(p) for p in range(PARTITIONS))
        r = conn.call(9, 1, body)
    finally:
        conn.close()
    got = {}
    errors = {}
    for _ in range(r.i32()):
        assert r.string() == TOPIC
        for _ in range(r.i32()):
            p, off = r.i32(), r.i64()
            r.string()  # metadata
            e = r.i16()
            if e:
                errors[p] = e
            got[p] = off
    if errors:
        assert set(errors.values()) <= COORDINATOR_MOVING, f"OffsetFetch from {node}: errors {errors}"
        raise RuntimeError(f"OffsetFetch from {node}: errors {errors}")
    return got


class CommitPoller:
    """OffsetFetch for the group through broker `via`, twice a second, on
    its own thread: (monotonic ns when asked, {partition: offset})."""

    def __init__(self, cluster, via, group):
        self.cluster = cluster
        self.via = via
        self.group = group
        self.samples = []
        self.errors = []
        self.fatal = None  # an error no coordinator move explains
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="offset-fetch", daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping.is_set():
            asked = time.monotonic_ns()
            try:
                self.samples.append((asked, offset_fetch(self.cluster, self.via, self.group)))
            except AssertionError as e:
                self.errors.append(e)
                self.fatal = e
            except Exception as e:  # the coordinator moving: counted, not fatal
                self.errors.append(e)
            self.stopping.wait(0.5)

    def stop(self):
        self.stopping.set()
        self.thread.join(90)

    def after(self, ts):
        return [s for s in self.samples if s[0] > ts]

    def verify(self, events):
        """Per partition, OffsetFetch never goes backwards and never answers
        below a commit acknowledged before it asked."""
        with events.cond:
            commits = sorted((e["ts"], int(p), off) for e in events.events if e["ev"] == "commit"
                             for p, off in e["offsets"].items())
        acked = {}
        i = 0
        last = {}
        for asked, got in self.samples:
            while i < len(commits) and commits[i][0] < asked:
                _, p, off = commits[i]
                acked[p] = max(acked.get(p, -1), off)
                i += 1
            for p, off in got.items():
                assert off >= last.get(p, -1), f"OffsetFetch p{p}: {off} after {last[p]}"
                assert off >= acked.get(p, -1), f"OffsetFetch p{p}: {off}, but {acked[p]} was acknowledged before"
                last[p] = off


def wait_commits_after(events, ts, members, timeout_s, what):
    """Until every member and every partition has an acknowledged commit
    stamped after ts; returns the seconds from ts."""
    def done():
        after = [e for e in events.events if e["ev"] == "commit" and e["ts"] > ts]
        return ({e["m"] for e in after} >= set(members)
                and {int(p) for e in after for p in e["offsets"]} == set(range(PARTITIONS)))

    events.wait(done, timeout_s, what)
    with events.cond:
        first = max(min(e["ts"] for e in events.events if e["ev"] == "commit" and e["ts"] > ts and e["m"] == m)
                    for m in members)
    return (first - ts) / 1e9


def verify_no_rewind(events):
    """A batch never starts below the last acknowledged commit of its
    partition: records are consumed again only when their commit failed."""
    with events.cond:
        evs = sorted(events.events, key=lambda e: e["ts"])
    last = {}
    for e in evs:
        if e["ev"] == "commit":
            for p, off in e["offsets"].items():
                last[int(p)] = off
        elif e["ev"] == "consumed":
            assert e["from"] >= last.get(e["p"], 0), \
                f"{e['m']} consumed p{e['p']} from {e['from']}, below the acknowledged commit {last[e['p']]}"


def choose_group(cluster, controller):
    """A group whose coordinator is not the controller, so the kill below
    moves the coordinator and nothing else."""
    for i in range(100):
        group = f"failover-{i}"
        if cluster.partition_state(OFFSETS_TOPIC, offsets_partition(group))["leader"] != controller:
            return group
    raise AssertionError("no group name maps to a partition led away from the controller")


@pytest.mark.needs_replication
def test_coordinator_failover_and_return(cluster):
    brokers = cluster.start(3, BROKER)
    ids = [b.broker_id for b in brokers]
    du.create_durability_topic(cluster, TOPIC, PARTITIONS, 3, 2)
    # The first FindCoordinator creates __consumer_offsets (RF 3, 3 partitions).
    cluster.wait_for(lambda: find_coordinator(brokers[0], "probe")[0] == 0, 60, "a coordinator for a probe group")
    cluster.wait_for(lambda: du.isr_full(cluster, OFFSETS_TOPIC, OFFSETS_PARTITIONS, ids), 60,
                     f"full ISRs for {OFFSETS_TOPIC}")
    controller = cluster.controller_id()
    group = choose_group(cluster, controller)
    coordinator = cluster.wait_for(lambda: agreed_coordinator(cluster, group, brokers), 30,
                                   f"every broker to name {group}'s coordinator")
    assignment = cluster.assignment(OFFSETS_TOPIC)[offsets_partition(group)]
    assert assignment[0] == coordinator, f"{group}: coordinator {coordinator} is not the preferred replica {assignment}"
    victim = cluster.broker(coordinator)
    survivors = [b for b in brokers if b is not victim]

    events = cu.GroupEvents(PARTITIONS)
    members = ["m1", "m2", "m3"]
    producer = host = poller = None
    timings = {}
    t0 = time.monotonic()
    try:
        producer = du.JavaProducer(cluster.bootstrap(), TOPIC, PARTITIONS, "fo", RATE)
        du.wait_acked_more([producer], 100, 90)
        host = cu.java_host(events, "java", cu.java_classpath("3.9.1"), cluster.bootstrap(), TOPIC, group, "range")
        host.add(*members)
        events.wait_stable(members, each=PARTITIONS // len(members), timeout_s=90)
        t_stable = time.monotonic_ns()
        wait_commits_after(events, t_stable, members, 60, "commits from every member")
        poller = CommitPoller(cluster, survivors[0], group)
        cluster.wait_for(lambda: len(poller.samples) >= 2, 60, "OffsetFetch answers")
        timings["consuming_s"] = time.monotonic() - t0

        # 1. The coordinator's broker dies while the group consumes.
        t_kill = time.monotonic_ns()
        victim.kill9()
        timings["resumed_after_kill_s"] = wait_commits_after(
            events, t_kill, members, RESUME_BOUND_S, f"commits from every member after killing coordinator {coordinator}")
        new_coordinator = cluster.wait_for(lambda: agreed_coordinator(cluster, group, survivors), 30,
                                           "the survivors to agree on the new coordinator")
        assert new_coordinator != coordinator
        cluster.wait_for(lambda: poller.after(t_kill), 30, "an OffsetFetch answer from the new coordinator")
        events.wait_stable(members, each=PARTITIONS // len(members))

        # 2. It returns, catches up into every ISR, and a preferred election
        # moves the group's coordinator back to it.
        victim.start()
        cluster.wait_for(lambda: du.isr_full(cluster, TOPIC, PARTITIONS, ids)
                         and du.isr_full(cluster, OFFSETS_TOPIC, OFFSETS_PARTITIONS, ids), 90,
                         f"broker {coordinator} back in every ISR")
        timings["rejoined_s"] = time.monotonic() - t0
        t_elect = time.monotonic_ns()
        res = cl.kafka_tool("org.apache.kafka.tools.LeaderElectionCommand", "--bootstrap-server",
                            cluster.bootstrap(survivors), "--election-type", "preferred", "--all-topic-partitions")
        done = res.stdout.partition("Successfully completed leader election (PREFERRED) for partitions")[2]
        assert f"{OFFSETS_TOPIC}-{offsets_partition(group)}" in done, res.stdout
        cluster.wait_for(lambda: agreed_coordinator(cluster, group, brokers) == coordinator, 30,
                         f"every broker to name {coordinator} as coordinator again")
        t_moved = time.monotonic_ns()
        timings["election_to_agreed_s"] = (t_moved - t_elect) / 1e9
        timings["resumed_after_election_s"] = wait_commits_after(
            events, t_moved, members, RESUME_BOUND_S, "commits from every member after the election")
        cluster.wait_for(lambda: poller.after(t_moved), 30, "an OffsetFetch answer after the election")

        # 3. Everything produced is consumed and committed.
        producer.stop()
        assert producer.log.failed == 0, f"produce failures: {dict(producer.log.errors)}"
        end = {p: 0 for p in range(PARTITIONS)}
        for seq in producer.log.acked_seqs():
            end[seq % PARTITIONS] = max(end[seq % PARTITIONS], producer.log.acked_offset(seq) + 1)
        events.wait_caught_up(end)
        poller.stop()
        with events.cond:
            moved = [e for e in events.events if e["ev"] in ("assigned", "revoked", "lost") and e["ts"] > t_stable]
        # The new coordinator loads the group's members and generation with
        # its offsets: the members keep their partitions through both moves.
        assert not moved, f"the group rebalanced: {moved}"
        host.exit()
        timings["total_s"] = time.monotonic() - t0
    finally:
        if poller is not None:
            poller.stop()
        if producer is not None:
            producer.kill()
        if host is not None:
            host.cleanup()

    events.verify(end)
    verify_no_rewind(events)
    poller.verify(events)
    assert poller.fatal is None, poller.fatal
    assert offset_fetch(cluster, victim, group) == end
    with events.cond:
        failed = [e for e in events.events if e["ev"] == "commit_failed"]
    print(f"{group} (coordinator {coordinator} -> {new_coordinator} -> {coordinator}): {timings}; "
          f"{producer.log.acked} records, {len(poller.samples)} OffsetFetch answers "
          f"({len(poller.errors)} errors while it moved, e.g. {poller.errors[:1]}), {len(failed)} failed commits")
