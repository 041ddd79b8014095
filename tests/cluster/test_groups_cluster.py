"""Consumer groups on a 3-broker cluster whose `__consumer_offsets` has
replication factor 3 and 6 partitions, so every broker coordinates some
groups (issue 15: groups of 3 members, Kafka's ConsumerGroupCommand
against any broker, bad input).

Kafka 3.9.1 in ZooKeeper mode: a group's coordinator is the leader of
`__consumer_offsets` partition abs(group.id.hashCode()) % partitions
(GroupMetadataManager.partitionFor); FindCoordinator answers it from any
broker, and a group request sent to another broker gets NOT_COORDINATOR.
Groups are named so that their coordinators are different brokers, and
clients bootstrap from a broker that is not their group's coordinator.

- FindCoordinator (v0-v3 and batched v4) from every broker names the leader
  of the group's offsets partition, also for an empty and a 300-character
  key (Kafka does not check the key: it is just hashed).
- Groups of 3 members split a 12-partition RF 3 topic, commit, and rebalance
  on leave, on a killed member's session timeout and on join, for Java
  kafka-clients 3.9.1 and 4.4.0 (classic protocol: range,
  cooperative-sticky), librdkafka and kafka-python. Static members (Java,
  group.instance.id): one restarting in place gets its partitions back
  with no rebalance, a closed one sends no LeaveGroup and leaves the group
  only when its session times out.
- ConsumerGroupCommand with each broker as its bootstrap: --list,
  --describe (offsets, log end, lag, the coordinator in --state),
  --reset-offsets --to-earliest / --to-offset --execute, --delete-offsets,
  --delete.
- Bad input: JoinGroup and OffsetCommit sent to a broker that is not the
  coordinator (NOT_COORDINATOR), OffsetCommit to partition 99 of a topic
  and to a topic that does not exist (UNKNOWN_TOPIC_OR_PARTITION for those
  partitions, the rest of the request committed); no committed offset is
  lost. On its coordinator the empty group id commits and fetches offsets
  but cannot join (INVALID_GROUP_ID); a 300-character group id joins and
  commits like any other.
"""

import itertools
import time

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition

import cluster_util as cl
import compat_util as cu
import group_raw as gr
from compat_util import i8, i16, i32, i64, string, uvarint, compact_string

BROKERS = 3
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 6
OVERRIDES = {
    **cu.GROUP_BROKER_OVERRIDES,
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "offsets.topic.replication.factor": "3",
}
PARTITIONS = 12
ROUND_RECORDS = 600
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"

FIND_COORDINATOR = 10
JOIN_GROUP = 11
OFFSET_COMMIT = 8
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_COORDINATOR = 16
INVALID_GROUP_ID = 24


def offsets_partition(group):
    return cl.offsets_partition(group, OFFSETS_PARTITIONS)


class GroupCluster:
    """The cluster and the leaders of its offsets partitions."""

    def __init__(self, cluster, leaders):
        self.cluster = cluster
        self.leaders = leaders  # offsets partition -> broker id
        self.ids = sorted(b.broker_id for b in cluster.live())

    def coordinator(self, group):
        return self.leaders[offsets_partition(group)]

    def group_on(self, base, broker_id):
        """A group id starting with `base` that `broker_id` coordinates."""
        for n in range(1000):
            g = f"{base}-{n}"
            if self.coordinator(g) == broker_id:
                return g
        raise AssertionError(f"broker {broker_id} leads no offsets partition: {self.leaders}")

    def other(self, broker_id):
        """The next broker after `broker_id`."""
        return self.ids[(self.ids.index(broker_id) + 1) % len(self.ids)]

    def bootstrap(self, broker_id):
        return self.cluster.broker(broker_id).bootstrap


def find_coordinator_v1(port, group):
    conn = gr.Conn(f"127.0.0.1:{port}")
    try:
        return gr.find_coordinator(conn, group)
    finally:
        conn.close()


def wait_offsets_topic(c):
    """Creates `__consumer_offsets` (the first FindCoordinator does, as in
    Kafka) and waits until every broker's Metadata agrees that each of its
    partitions has a leader and 3 in-sync replicas; returns the leaders."""
    first = c.live()[0]
    cl.wait_for(lambda: find_coordinator_v1(first.port, "probe")[0] == NONE, 90, "a coordinator for group 'probe'")

    def agreed():
        views = []
        for b in c.live():
            t = b.metadata()["topics"].get(OFFSETS_TOPIC)
            if t is None or t["error"] != 0 or len(t["partitions"]) != OFFSETS_PARTITIONS:
                return None
            view = {p: (v["leader"], sorted(v["isr"])) for p, v in t["partitions"].items()}
            if any(leader < 0 or len(isr) != BROKERS for leader, isr in view.values()):
                return None
            views.append(view)
        return views[0] if all(v == views[0] for v in views) else None

    view = cl.wait_for(agreed, 90, f"{OFFSETS_TOPIC}: a leader and {BROKERS} in-sync replicas per partition", 0.2)
    return {p: leader for p, (leader, _) in view.items()}


@pytest.fixture(scope="module")
def gcluster(module_cluster):
    module_cluster.start(BROKERS, OVERRIDES)
    g = GroupCluster(module_cluster, wait_offsets_topic(module_cluster))
    # 6 partitions over 3 brokers: each one leads some (preferred leaders).
    assert sorted(set(g.leaders.values())) == g.ids, g.leaders
    return g


# --- FindCoordinator ----------------------------------------------------------


def raw_call(port, api_key, version, body, flexible):
    s = cu.connect("127.0.0.1", port)
    try:
        header = (cu.request_header_v2 if flexible else cu.request_header_v1)(api_key, version, 7)
        s.sendall(cu.frame(header + body))
        r = cu.Reader(cu.recv_frame(s))
        assert r.i32() == 7
        if flexible:
            r.skip_tags()
        return r
    finally:
        s.close()


def find_coordinator(port, version, keys):
    """FindCoordinator for group keys at one version (v0-v3 one key each,
    v4 all in one batch): [(key, error, node id, host, port)]."""
    if version >= 4:
        body = i8(0) + uvarint(len(keys) + 1) + b"".join(compact_string(k) for k in keys) + uvarint(0)
        r = raw_call(port, FIND_COORDINATOR, version, body, True)
        r.i32()  # throttle
        out = []
        for _ in range(r.uvarint() - 1):
            key = r.compact_string()
            node, host, kport = r.i32(), r.compact_string(), r.i32()
            err = r.i16()
            r.compact_string()  # message
            r.skip_tags()
            out.append((key, err, node, host, kport))
        r.skip_tags()
        return out
    out = []
    for k in keys:
        if version == 0:
            r = raw_call(port, FIND_COORDINATOR, 0, string(k), False)
            err = r.i16()
            out.append((k, err, r.i32(), r.string(), r.i32()))
        elif version <= 2:
            r = raw_call(port, FIND_COORDINATOR, version, string(k) + i8(0), False)
            r.i32()
            err = r.i16()
            r.string()
            out.append((k, err, r.i32(), r.string(), r.i32()))
        else:
            r = raw_call(port, FIND_COORDINATOR, version, compact_string(k) + i8(0) + uvarint(0), True)
            r.i32()
            err = r.i16()
            r.compact_string()
            out.append((k, err, r.i32(), r.compact_string(), r.i32()))
            r.skip_tags()
    return out


def test_find_coordinator_follows_offsets_leaders(gcluster):
    """Every broker names the same coordinator for a group: the leader of its
    offsets partition, with that broker's host and port, at every version;
    an empty and a 300-character key are groups like any other."""
    c = gcluster.cluster
    groups = [gcluster.group_on(f"fc-p{p}", gcluster.leaders[p]) for p in range(OFFSETS_PARTITIONS)]
    keys = groups + ["", "k" * 300]
    want = []
    for k in keys:
        b = c.broker(gcluster.coordinator(k))
        want.append((k, NONE, b.broker_id, "127.0.0.1", b.port))
    assert gcluster.coordinator("") == gcluster.leaders[0]  # "".hashCode() == 0
    for b in c.live():
        for version in range(5):
            assert find_coordinator(b.port, version, keys) == want, f"FindCoordinator v{version} from {b.broker_id}"


# --- groups of 3 members ------------------------------------------------------

# kafka-python 3.0.12 sometimes never finishes a join: the broker answers
# its SyncGroup (error 0, its assignment) but ConsumerCoordinator.need_rejoin()
# has turned False while the join task was in flight, so join_group_async
# stops awaiting it, the member never enables heartbeats ("Received SyncGroup
# response" is its last group log line) and its session expires exactly
# session.timeout.ms after the SyncGroup. Seen in 2 of 12 kshard runs; with
# KSHARD_MEMBER_LOG=DEBUG the member hosts log to /tmp/member-host-*.err.
KAFKA_PYTHON_RETRY = pytest.mark.flaky(reruns=1, reruns_delay=2)
CASES = [
    ("3.9.1", "range"),
    ("3.9.1", "cooperative-sticky"),
    ("3.9.1", "static"),
    ("4.4.0", "range"),
    ("4.4.0", "cooperative-sticky"),
    ("4.4.0", "static"),
    ("librdkafka", "cooperative-sticky"),
    ("kafka-python", "range"),
]
ATTEMPTS = itertools.count()
PARAMS = [pytest.param(c, a, id=f"{c}-{a}", marks=[KAFKA_PYTHON_RETRY] if c == "kafka-python" else [])
          for c, a in CASES]


def case_brokers(g, index):
    """(coordinator, bootstrap broker): cases rotate over the brokers as
    coordinators; clients bootstrap from another broker."""
    coordinator = g.ids[index % len(g.ids)]
    return coordinator, g.other(coordinator)


@pytest.mark.parametrize("client,assignor", PARAMS)
def test_group_rebalance(gcluster, client, assignor):
    coordinator, via = case_brokers(gcluster, CASES.index((client, assignor)))
    # A fresh topic and group per attempt (a rerun must not find the last one's).
    tag = f"gc-{client.replace('.', '')}-{assignor}-{next(ATTEMPTS)}"
    group = gcluster.group_on(tag, coordinator)
    bootstrap = gcluster.bootstrap(via)
    if assignor == "static":
        timings = run_static_scenario(gcluster, bootstrap, tag, group, cu.java_classpath(client))
        print(f"{group} (coordinator {coordinator}, via {via}): {timings}")
        return

    def hosts(events):
        if client == "kafka-python":
            # One process per member (see tests/compat/test_groups_kafka_python.py).
            mk = lambda label: cu.python_host(events, f"{tag}-{label}", client, bootstrap, tag, group, assignor)
            a = mk("A")
            return {"A": a, "B": a, "V": mk("V"), "m2": mk("m2"), "m4": mk("m4")}
        if client == "librdkafka":
            mk = lambda label: cu.python_host(events, f"{tag}-{label}", "confluent", bootstrap, tag, group, assignor)
        else:
            cp = cu.java_classpath(client)
            mk = lambda label: cu.java_host(events, f"{tag}-{label}", cp, bootstrap, tag, group, assignor)
        a = mk("A")
        return {"A": a, "B": a, "V": mk("V")}

    timings = cu.run_group_scenario(bootstrap, tag, group, hosts, partitions=PARTITIONS,
                                    round_records=ROUND_RECORDS, replication_factor=BROKERS)
    assert gcluster.coordinator(group) == coordinator
    print(f"{group} (coordinator {coordinator}, via {via}): {timings}")


def run_static_scenario(g, bootstrap, topic, group, classpath):
    """3 static members (group.instance.id = name) split the topic; m2 is
    closed and a new consumer with m2's instance id takes its place: it
    gets m2's partitions in the same generation, m1 and m3 see no
    rebalance. m4 joins (3 each), then m1 is closed: a static member sends
    no LeaveGroup, so the group rebalances only once m1's session times
    out."""
    cu.create_group_topic(bootstrap, topic, PARTITIONS, replication_factor=BROKERS)
    events = cu.GroupEvents(PARTITIONS)
    prod = cu.RoundProducer(bootstrap, topic, PARTITIONS)
    prod.produce(ROUND_RECORDS)
    host = cu.java_host(events, f"{topic}-A", classpath, bootstrap, topic, group, "range", static=True)
    timings = {}
    t0 = time.monotonic()
    try:
        host.add("m1", "m2", "m3")
        events.wait_stable(["m1", "m2", "m3"], each=PARTITIONS // 3)
        events.wait_caught_up(prod.produce(ROUND_RECORDS))
        timings["join3"] = time.monotonic() - t0

        with events.cond:
            before = {m: set(s) for m, s in events.owned.items()}
            gen = dict(events.gen)
            seen = len(events.events)
        host.close_member("m2")
        host.add("m2b", instance="m2")
        events.wait_stable(["m1", "m2b", "m3"], each=PARTITIONS // 3)
        with events.cond:
            assert events.owned["m2b"] == before["m2"], (events.owned["m2b"], before["m2"])
            assert events.gen["m2b"] == gen["m2"] == gen["m1"], events.gen
            moved = [e for e in events.events[seen:] if e["m"] in ("m1", "m3")
                     and e["ev"] in ("assigned", "revoked", "lost")]
        assert not moved, f"a static member's restart rebalanced the group: {moved}"
        events.wait_caught_up(prod.produce(ROUND_RECORDS))
        timings["restart"] = time.monotonic() - t0

        host.add("m4")
        events.wait_stable(["m1", "m2b", "m3", "m4"], each=PARTITIONS // 4)
        events.wait_caught_up(prod.produce(ROUND_RECORDS))
        timings["join"] = time.monotonic() - t0

        host.close_member("m1")
        events.wait(lambda: "m1" in events.dead, 60, "m1 closed")
        closed_ns = events.dead["m1"]
        events.wait_stable(["m2b", "m3", "m4"], each=PARTITIONS // 3, timeout_s=60)
        with events.cond:
            revoked = [e["ts"] for e in events.events if e["ev"] == "revoked" and e["m"] == "m3" and e["ts"] > closed_ns]
        # The session (6 s) runs from m1's last heartbeat (every 1 s, later on
        # a loaded machine); a LeaveGroup would rebalance within a heartbeat.
        waited_s = (min(revoked) - closed_ns) / 1e9 if revoked else None
        assert waited_s is not None and waited_s >= (cu.GROUP_SESSION_TIMEOUT_MS - 3 * cu.GROUP_HEARTBEAT_MS) / 1000, \
            f"rebalance {waited_s} s after a static member closed: it must wait for its session timeout"
        end = prod.produce(ROUND_RECORDS)
        events.wait_caught_up(end)
        timings["leave"] = time.monotonic() - t0
        host.exit()
        events.verify(end, replaced={"m2b": "m2"})
        assert cu.group_committed(bootstrap, group, topic, PARTITIONS) == end
        return timings
    finally:
        host.cleanup()


# --- ConsumerGroupCommand -----------------------------------------------------

CLI_TOPIC = "gcli"
PER_PARTITION = {0: 10, 1: 20, 2: 30}
COMMIT = {0: 10, 1: 15, 2: 5}


@pytest.fixture(scope="module")
def cli_topic(gcluster):
    bootstrap = gcluster.cluster.bootstrap()
    cu.create_group_topic(bootstrap, CLI_TOPIC, len(PER_PARTITION), replication_factor=BROKERS)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for part, n in PER_PARTITION.items():
        for i in range(n):
            p.produce(CLI_TOPIC, key=cu.rec_key(CLI_TOPIC, i), value=cu.rec_value(CLI_TOPIC, i), partition=part)
    assert p.flush(30) == 0
    return CLI_TOPIC


def cli(bootstrap, *args):
    res = cl.kafka_tool(GROUP_COMMAND, "--bootstrap-server", bootstrap, *args)
    return res.stdout, res.stderr


def table(out, flat_to=None):
    """Rows of the tool's whitespace-aligned table as dicts by header (see
    tests/compat/test_consumer_groups_cli.py). flat_to: the last column of
    a table whose rows 3.9.1 prints on the header's line (--reset-offsets,
    --delete-offsets)."""
    lines = [ln.split() for ln in out.splitlines() if ln.strip()]
    hdr = next(i for i, ln in enumerate(lines) if ln[0] in ("GROUP", "TOPIC"))
    if flat_to:
        cols = lines[hdr][:lines[hdr].index(flat_to) + 1]
        vals = lines[hdr][len(cols):] + [v for ln in lines[hdr + 1:] for v in ln]
        assert len(vals) % len(cols) == 0, out
        return [dict(zip(cols, vals[i:i + len(cols)])) for i in range(0, len(vals), len(cols))]
    cols = lines[hdr]
    return [dict(zip(cols, ln)) for ln in lines[hdr + 1:] if len(ln) == len(cols)]


def by_partition(rows):
    return {int(r["PARTITION"]): r for r in rows if r["TOPIC"] == CLI_TOPIC}


def committed(bootstrap, group):
    return cu.group_committed(bootstrap, group, CLI_TOPIC, len(PER_PARTITION))


@pytest.mark.parametrize("index", range(BROKERS), ids=[f"via-{i + 1}" for i in range(BROKERS)])
def test_consumer_group_command(gcluster, cli_topic, index):
    """Each broker in turn is the tool's only bootstrap, for a group another
    broker coordinates."""
    from confluent_kafka.admin import AdminClient

    via = gcluster.ids[index]
    coordinator = gcluster.other(via)
    group = gcluster.group_on(f"gcli-via{via}", coordinator)
    bs = gcluster.bootstrap(via)
    admin = AdminClient({"bootstrap.servers": gcluster.cluster.bootstrap()})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(CLI_TOPIC, p, off) for p, off in COMMIT.items()])
    admin.alter_consumer_group_offsets([req], request_timeout=30)[group].result(60)

    out, _ = cli(bs, "--list")
    assert group in out.split(), out

    out, err = cli(bs, "--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in err
    rows = by_partition(table(out))
    assert sorted(rows) == sorted(PER_PARTITION), out
    for part, r in rows.items():
        assert r["GROUP"] == group
        assert (int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]), int(r["LAG"])) == \
            (COMMIT[part], PER_PARTITION[part], PER_PARTITION[part] - COMMIT[part]), out
        assert r["CONSUMER-ID"] == "-"

    out, _ = cli(bs, "--describe", "--group", group, "--state")
    lines = [ln.split() for ln in out.splitlines() if ln.strip()]
    hdr = next(i for i, ln in enumerate(lines) if ln[:2] == ["GROUP", "COORDINATOR"])
    [row] = [ln for ln in lines[hdr + 1:] if ln[0] == group]
    # GROUP, COORDINATOR (ID) as "host:port (id)", no ASSIGNMENT-STRATEGY
    # for an empty group, STATE, #MEMBERS.
    assert row == [group, gcluster.bootstrap(coordinator), f"({coordinator})", "Empty", "0"], out

    out, _ = cli(bs, "--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", CLI_TOPIC)
    reset = by_partition(table(out, "NEW-OFFSET"))
    assert {p: int(r["NEW-OFFSET"]) for p, r in reset.items()} == {p: 0 for p in PER_PARTITION}, out
    assert committed(bs, group) == {p: 0 for p in PER_PARTITION}

    out, _ = cli(bs, "--reset-offsets", "--to-offset", "7", "--execute", "--group", group, "--topic", f"{CLI_TOPIC}:1")
    reset = by_partition(table(out, "NEW-OFFSET"))
    assert {p: int(r["NEW-OFFSET"]) for p, r in reset.items()} == {1: 7}, out
    assert committed(bs, group) == {0: 0, 1: 7, 2: 0}

    out, _ = cli(bs, "--delete-offsets", "--group", group, "--topic", f"{CLI_TOPIC}:2")
    rows = by_partition(table(out, "STATUS"))
    assert {p: r["STATUS"] for p, r in rows.items()} == {2: "Successful"}, out
    assert committed(bs, group) == {0: 0, 1: 7, 2: -1001}  # librdkafka's OFFSET_INVALID: none committed

    out, _ = cli(bs, "--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out, out
    listed = admin.list_consumer_groups(request_timeout=30).result(60)
    assert group not in {x.group_id for x in listed.valid}
    assert committed(bs, group) == {p: -1001 for p in PER_PARTITION}


# --- bad input ------------------------------------------------------------------


def offset_commit_v7(conn, group, topics, generation=-1, member_id=""):
    """OffsetCommit v7, {topic: {partition: offset}} -> {topic: {partition:
    error}}; generation -1 and no member: a commit from outside the group
    (admin tools), allowed while the group has no members."""
    body = string(group) + i32(generation) + string(member_id) + gr.nstring(None) + i32(len(topics))
    for t, parts in topics.items():
        body += string(t) + i32(len(parts))
        for p, off in parts.items():
            body += i32(p) + i64(off) + i32(-1) + gr.nstring("bad-input")
    r = conn.call(OFFSET_COMMIT, 7, body)
    r.i32()  # throttle
    out = {}
    for _ in range(r.i32()):
        t = r.string()
        out[t] = {}
        for _ in range(r.i32()):
            p = r.i32()
            out[t][p] = r.i16()
    return out


def test_bad_input_loses_nothing(gcluster, cli_topic):
    """Group requests on the wrong broker and commits to partitions that do
    not exist get Kafka's errors; committed offsets stay as they were, and
    the valid partitions of a partly bad commit are committed."""
    c = gcluster.cluster
    coordinator = gcluster.ids[-1]
    group = gcluster.group_on("gbad", coordinator)
    others = [i for i in gcluster.ids if i != coordinator]
    bs = gcluster.bootstrap(coordinator)
    conn = gr.Conn(bs)
    try:
        assert gr.find_coordinator(conn, group) == (NONE, coordinator)
        first = {0: 5, 1: 6, 2: 7}
        assert offset_commit_v7(conn, group, {CLI_TOPIC: first}) == {CLI_TOPIC: {p: NONE for p in first}}
        assert committed(bs, group) == first

        # Partition 99 of an existing topic, a topic that does not exist, and
        # one valid partition, in one request.
        res = offset_commit_v7(conn, group, {CLI_TOPIC: {0: 50, 99: 1}, "gbad-no-such-topic": {0: 1}})
        # Nothing is stored for them: OffsetFetch answers "none committed".
        got = offset_fetch_v5(conn, group, {CLI_TOPIC: [0, 99], "gbad-no-such-topic": [0]})
        assert (res, got) == (
            {CLI_TOPIC: {0: NONE, 99: UNKNOWN_TOPIC_OR_PARTITION}, "gbad-no-such-topic": {0: UNKNOWN_TOPIC_OR_PARTITION}},
            (NONE, {CLI_TOPIC: {0: (50, NONE), 99: (-1, NONE)}, "gbad-no-such-topic": {0: (-1, NONE)}}),
        )
        now = {**first, 0: 50}
        assert committed(bs, group) == now
    finally:
        conn.close()

    for other in others:
        oc = gr.Conn(gcluster.bootstrap(other))
        try:
            res = gr.parse_join(oc.call(JOIN_GROUP, 5, gr.join_body(group, "")))
            assert res["error"] == NOT_COORDINATOR, (other, res)
            # Kafka checks the partitions before asking the coordinator.
            res = offset_commit_v7(oc, group, {CLI_TOPIC: {1: 60, 99: 2}})
            assert res == {CLI_TOPIC: {1: NOT_COORDINATOR, 99: UNKNOWN_TOPIC_OR_PARTITION}}, (other, res)
        finally:
            oc.close()

    conn = gr.Conn(bs)
    try:
        err, state, members = gr.describe(conn, group)
        assert (err, state, members) == (NONE, "Empty", []), (err, state, members)
    finally:
        conn.close()
    for b in c.live():
        assert committed(b.bootstrap, group) == now, f"committed offsets via broker {b.broker_id}"



def offset_fetch_v5(conn, group, topics):
    """OffsetFetch v5, {topic: [partitions]} -> (error, {topic: {partition:
    (offset, error)}})."""
    body = string(group) + i32(len(topics))
    for t, parts in topics.items():
        body += string(t) + i32(len(parts)) + b"".join(i32(p) for p in parts)
    r = conn.call(9, 5, body)
    r.i32()  # throttle
    out = {}
    for _ in range(r.i32()):
        t = r.string()
        out[t] = {}
        for _ in range(r.i32()):
            p, off = r.i32(), r.i64()
            r.i32()  # leader epoch
            r.string()  # metadata
            out[t][p] = (off, r.i16())
    return r.i16(), out


def test_empty_and_long_group_ids(gcluster, cli_topic):
    """On its coordinator, an empty group id may commit and fetch offsets
    (Kafka keeps that for old clients) but not join (INVALID_GROUP_ID); a
    300-character one is a group like any other."""
    conn = gr.Conn(gcluster.bootstrap(gcluster.coordinator("")))
    try:
        assert gr.parse_join(conn.call(JOIN_GROUP, 5, gr.join_body("", "")))["error"] == INVALID_GROUP_ID
        assert offset_commit_v7(conn, "", {CLI_TOPIC: {0: 3}}) == {CLI_TOPIC: {0: NONE}}
        assert offset_fetch_v5(conn, "", {CLI_TOPIC: [0, 1]}) == (NONE, {CLI_TOPIC: {0: (3, NONE), 1: (-1, NONE)}})
    finally:
        conn.close()
    group = "g" * 300
    conn = gr.Conn(gcluster.bootstrap(gcluster.coordinator(group)))
    try:
        res = gr.join(conn, group, session_ms=6000, rebalance_ms=6000)
        assert (res["error"], res["generation"], res["members"]) == (NONE, 1, [res["member_id"]]), res
        assert gr.sync(conn, group, 1, res["member_id"], assignments=[(res["member_id"], b"")]) == NONE
        assert offset_commit_v7(conn, group, {CLI_TOPIC: {1: 4}}, 1, res["member_id"]) == {CLI_TOPIC: {1: NONE}}
        assert gr.describe(conn, group) == (NONE, "Stable", [res["member_id"]])
        assert offset_fetch_v5(conn, group, {CLI_TOPIC: [1]}) == (NONE, {CLI_TOPIC: {1: (4, NONE)}})
    finally:
        conn.close()
    assert committed(gcluster.cluster.bootstrap(), group) == {0: -1001, 1: 4, 2: -1001}
