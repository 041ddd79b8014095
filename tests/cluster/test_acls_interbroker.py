"""Brokers authenticated and authorized to each other under ACLs, against
Apache Kafka 3.9.1 (ZooKeeper mode) with KSHARD_TEST_TARGET=kafka.

Setup (one 3-broker cluster for the module): every broker runs
`authorizer.class.name=kafka.security.authorizer.AclAuthorizer` with
`super.users=User:admin` only. Two listeners: PLAINTEXT (listed first: the
harness's readiness probe uses it) and SASL_PLAINTEXT with PLAIN, which is
the inter-broker listener (`inter.broker.listener.name=SASL_PLAINTEXT`,
`sasl.mechanism.inter.broker.protocol=PLAIN`). The listener's JAAS line
holds the users (broker, admin, alice, bob) and the brokers' own login,
`username="broker"`: replica fetchers, the controller's requests,
AlterPartition, ControlledShutdown, transaction markers and verification
all arrive as User:broker, which is NOT a super user.

Before any broker starts, exactly one ACL is written to ZooKeeper, the way
Kafka's documentation does it:

    kafka-acls --authorizer-properties zookeeper.connect=<zk>/<chroot> \\
        --add --allow-principal User:broker --operation ClusterAction --cluster

Seen on Kafka 3.9.1: that one ACL is all the brokers need. Start-up,
controller election, topic creation (CreateTopics by admin), LeaderAndIsr,
UpdateMetadata, follower Fetch, AlterPartition (ISR expansion after a
restart), ControlledShutdown, reassignment and preferred leader election,
the transaction coordinator's WriteTxnMarkers and the leaders'
AddPartitionsToTxn verification (transaction.partition.verification.enable,
on by default) all work with it, and over a whole run of this module the
authorizer log (kafka.authorizer.logger) shows no denial for User:broker
except while test 4 has removed the ACL (then Fetch and AlterPartition).
Internal topics (__consumer_offsets, __transaction_state) are created by the
brokers through ZooKeeper, not by an authorized request, and producer id
blocks come from ZooKeeper, so nothing else is needed. Without the ACL in
ZooKeeper at start-up (tried once, not a test here) every broker registers
but refuses the controller's UpdateMetadata ("Principal = User:broker is
Denied Operation = ClusterAction ... for request = UpdateMetadata"), so its
Metadata lists no brokers and no controller and it is never ready.

User:ANONYMOUS (the PLAINTEXT principal) gets no ACL at all: the harness's
readiness probe and convergence check (raw Metadata over PLAINTEXT) only
need the broker list and the controller id, which Metadata returns whatever
the topic ACLs say (topics the principal may not describe are left out, the
same on every broker). Topics are created, and their Metadata checked, over
SASL as admin, so ANONYMOUS needs neither CREATE nor DESCRIBE.

What is tested (each proven on Kafka 3.9.1 first):

1. A replication-factor-3 topic (3 partitions, partition p preferring
   broker p + 1) with min.insync.replicas=3 takes acks=all produces from
   alice (WRITE and READ on the topic only). Three rounds: the replica
   lists are rotated (AlterPartitionReassignments by admin, same replicas,
   so the ISRs stay full) and a preferred election (ElectLeaders) moves
   every leadership, so every replica of every partition leads once; each
   round adds acks=all records and reads everything back by raw Fetch from
   the leader ZooKeeper names. Then broker 1's SIGTERM is a controlled
   shutdown (leadership and ISR membership moved before it exits); the new
   leader of its partition answers an acks=all produce NOT_ENOUGH_REPLICAS
   (19); back, it rejoins every ISR, takes more acks=all records as a
   follower, and serves them all once a preferred election makes it leader.
2. A transactional producer (alice: WRITE on the transactional id and the
   topic) commits a transaction over three partitions led by three
   different brokers, aborts one, and commits another; a read_committed
   consumer sees exactly the committed records, and every leader's
   last stable offset reaches its high watermark (18: 15 records and three
   markers per partition, one aborted transaction listed).
3. Negative: alice (READ/WRITE on the topic, no CLUSTER_ACTION) sending a
   follower Fetch v4 (replica_id >= 0) gets TOPIC_AUTHORIZATION_FAILED (29)
   and no records for every partition, a nonexistent topic's included,
   while her consumer Fetch of the same partition succeeds. Her
   hand-encoded UpdateMetadata v0 and LeaderAndIsr v0 (a controller epoch
   100 ahead, broker 3 made leader of broker 2's partition, broker 2 the
   only live broker) get CLUSTER_AUTHORIZATION_FAILED (31), LeaderAndIsr v0
   also per partition, and change nothing: broker 2 still leads and takes
   acks=all produces, its Metadata and ZooKeeper's state are as before.
   Then broker 2's SIGTERM is still a controlled shutdown and it rejoins
   every ISR after a restart.
4. Removing User:broker's ClusterAction ACL through ZooKeeper (kafka-acls
   --authorizer-properties --remove) stops replication: acks=all produces
   with min.insync.replicas=3 answer REQUEST_TIMED_OUT (7), not
   NOT_ENOUGH_REPLICAS: the followers' Fetch gets TOPIC_AUTHORIZATION_FAILED
   for every partition (fetchers log it and back off), and the leaders'
   AlterPartition to shrink the ISR is refused too ("Broker is not
   authorized to send AlterPartition to controller", retried), so the ISR
   in ZooKeeper never shrinks and each produce waits out its timeout. With
   the ACL added back the retried shrinks go through at once (for a moment
   produces answer NOT_ENOUGH_REPLICAS), the followers catch up, the ISRs
   are full again and acks=all produces succeed within about a second.

Other Kafka 3.9.1 behaviour the tests allow for: a leader whose ISR is
below min.insync.replicas does not advance its high watermark (a new
leader after a controlled shutdown serves nothing it had not already
exposed until the ISR is full again), and a new leader's high watermark
can lag its log end until its followers fetch again, so reads poll until
all records are visible.

Run time: about 40 s on Kafka 3.9.1, 25 s on kshard (two cores).
"""

import time

import pytest

import cluster_util as cl
import conftest as _cluster_conftest  # tests/cluster/conftest.py

if not hasattr(_cluster_conftest, "TARGET"):
    _cluster_conftest.TARGET = cl.TARGET  # acl_util/security_util do `from conftest import TARGET`
import acl_util as au  # noqa: E402  (tests/compat)
import reassign_util as ru  # noqa: E402

cu = cl.cu
i8, i16, i32, i64, string = cu.i8, cu.i16, cu.i32, cu.i64, cu.string

BROKER_USER = "broker"
BROKER_PASSWORD = "broker-secret"
USERS = au.USERS  # admin, alice, bob: acl_util.Client logs in with these
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{BROKER_USER}" password="{BROKER_PASSWORD}" user_{BROKER_USER}="{BROKER_PASSWORD}" '
        + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
LAG_MS = 5000

# Kafka error codes.
NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
NOT_ENOUGH_REPLICAS = 19
TOPIC_AUTHORIZATION_FAILED = 29
CLUSTER_AUTHORIZATION_FAILED = 31
ELECTION_NOT_NEEDED = 84

FETCH, LEADER_AND_ISR, UPDATE_METADATA = 1, 4, 6
ALTER_PARTITION_REASSIGNMENTS, ELECT_LEADERS = 45, 43
ASSIGNMENT = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]  # partition p led by broker p + 1
IDS = [1, 2, 3]


def overrides():
    return {
        "zookeeper.session.timeout.ms": 6000,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "connection.failed.authentication.delay.ms": 0,
        "replica.lag.time.max.ms": LAG_MS,
        "unclean.leader.election.enable": "false",
        "auto.leader.rebalance.enable": "false",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": 3,
        "offsets.topic.num.partitions": 3,
        "transaction.state.log.replication.factor": 3,
        "transaction.state.log.min.isr": 2,
        "transaction.state.log.num.partitions": 3,
    }


def two_listeners(b):
    """PLAINTEXT first: the harness's readiness probe uses it."""
    b.sasl_port = cu.free_port()
    b.sasl_bootstrap = f"127.0.0.1:{b.sasl_port}"
    return {"listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}"}


def kafka_acls_zk(c, *args):
    """kafka-acls on the ZooKeeper path: AclCommand runs the AclAuthorizer
    itself, no broker involved."""
    return cl.kafka_tool("kafka.admin.AclCommand", "--authorizer-properties", f"zookeeper.connect={c.zk_connect}",
                         *args).stdout


BROKER_ACL_ARGS = ("--allow-principal", f"User:{BROKER_USER}", "--operation", "ClusterAction", "--cluster")


@pytest.fixture(scope="module")
def ib(module_cluster):
    c = module_cluster
    c.zk.ensure_path(c.chroot)
    out = kafka_acls_zk(c, "--add", *BROKER_ACL_ARGS)
    assert "Adding ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster" in out, out
    c.start(3, overrides(), per_broker=two_listeners)
    return c


@pytest.fixture
def c(ib):
    """The module's cluster with every broker running and the broker ACL in
    place (a failed test must not take the later ones with it)."""
    node = "/kafka-acl/Cluster/kafka-cluster"
    if not ib.zk_exists(node) or f"User:{BROKER_USER}" not in ib.zk_get(node)[0].decode():
        kafka_acls_zk(ib, "--add", *BROKER_ACL_ARGS)
    down = [b for b in ib.all_brokers if not b.running()]
    for b in down:
        ib.wait_for(lambda: not ib.zk_exists(f"/brokers/ids/{b.broker_id}"), 30, f"broker {b.broker_id} gone")
        b.spawn()
    for b in down:
        b.wait_ready()
    if down:
        ib.wait_converged()
    return ib


# --- clients -----------------------------------------------------------------------


def sasl_conf(user):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user]}


def sasl_bootstrap(c):
    return ",".join(b.sasl_bootstrap for b in c.live())


def admin_client(c):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": sasl_bootstrap(c), **sasl_conf("admin")})


def add_acls(c, *bindings):
    """CreateAcls as admin through broker 1 (or any live one); waits until
    every live broker lists them."""
    b0 = c.live()[0]
    with au.Client(b0.sasl_port, "admin") as a:
        res = au.create_acls(a, list(bindings))
    assert [e for e, _ in res] == [NONE] * len(bindings), res
    for b in c.live():
        def listed(b=b):
            with au.Client(b.sasl_port, "admin") as a:
                err, _, acls = au.describe_acls(a)
            return err == NONE and set(bindings) <= acls
        cl.wait_for(listed, 15, f"broker {b.broker_id} to list the new ACLs")


def sasl_metadata(b, user="admin"):
    """Metadata v12 (all topics) from broker b alone, over SASL."""
    with au.Client(b.sasl_port, user, timeout_s=10) as a:
        a.conn.corr += 1
        a.conn.sock.sendall(cl._metadata_request(a.conn.corr, 12))
        return cl._parse_metadata(cu.recv_frame(a.conn.sock), 12)


def create_topic(c, topic, min_isr):
    """RF 3 with partition p led by broker p + 1, created by admin over
    SASL; waits until every broker's Metadata agrees with ZooKeeper."""
    from confluent_kafka.admin import NewTopic

    admin = admin_client(c)
    futs = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=-1,
                                         replica_assignment=ASSIGNMENT,
                                         config={"min.insync.replicas": str(min_isr)})],
                               operation_timeout=30, request_timeout=60)
    futs[topic].result(90)
    wait_leaders_agreed(c, topic)


def leaders(c, topic):
    return {p: c.partition_state(topic, p)["leader"] for p in range(len(ASSIGNMENT))}


def wait_leaders_agreed(c, topic, timeout_s=60):
    """Every live broker's Metadata names the leader ZooKeeper names, a live one."""
    live = sorted(b.broker_id for b in c.live())

    def agreed():
        zk = leaders(c, topic)
        if not set(zk.values()) <= set(live):
            return None
        for b in c.live():
            md = sasl_metadata(b)
            t = md["topics"].get(topic)
            if sorted(md["brokers"]) != live or t is None or t["error"] != NONE:
                return None
            if {p: v["leader"] for p, v in t["partitions"].items()} != zk:
                return None
        return zk

    return cl.wait_for(agreed, timeout_s, f"every broker to agree with ZooKeeper on {topic}'s leaders", 0.2)


def isr_full(c, topic):
    return all(sorted(c.partition_state(topic, p)["isr"]) == IDS for p in range(len(ASSIGNMENT)))


def wait_isr_full(c, topic, timeout_s=90):
    cl.wait_for(lambda: isr_full(c, topic), timeout_s, f"every replica back in {topic}'s ISRs", 0.2)


def produce_all(c, topic, values_by_partition, **conf):
    """acks=all produce as alice (librdkafka); fails on any delivery error."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": sasl_bootstrap(c), **sasl_conf("alice"), "acks": "all",
                  "enable.idempotence": False, "max.in.flight.requests.per.connection": 1,
                  "compression.type": "none", "linger.ms": 5, "message.timeout.ms": 60000, **conf})
    failed = []
    for part, values in values_by_partition.items():
        for v in values:
            p.produce(topic, value=v, partition=part,
                      on_delivery=lambda err, m: failed.append((m.partition(), err)) if err else None)
    assert p.flush(90) == 0, "undelivered records"
    assert not failed, failed[:5]


# --- raw Fetch --------------------------------------------------------------------


def fetch_v4(client, parts, replica_id=-1, isolation=0):
    """Fetch v4 (no wait): parts [(topic, partition, offset)]; returns
    {(topic, partition): (error, high watermark, last stable offset,
    aborted transactions, records bytes)}."""
    topics = []
    for topic, part, offset in parts:
        if not topics or topics[-1][0] != topic:
            topics.append((topic, []))
        topics[-1][1].append(i32(part) + i64(offset) + i32(1 << 20))
    body = i32(replica_id) + i32(0) + i32(0) + i32(4 << 20) + i8(isolation)
    body += au.array([string(t) + au.array(ps) for t, ps in topics])
    r = client.call(FETCH, 4, body)
    r.i32()  # throttle
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            idx = r.i32()
            err = r.i16()
            hw = r.i64()
            lso = r.i64()
            n_aborted = r.i32()
            aborted = [(r.i64(), r.i64()) for _ in range(max(n_aborted, 0))]
            n = r.i32()
            out[(name, idx)] = (err, hw, lso, aborted, r.take(n) if n > 0 else b"")
    return out


def _varint(data, pos):
    shift = v = 0
    while True:
        b = data[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return (v >> 1) ^ -(v & 1), pos
        shift += 7


def record_values(data):
    """[(offset, value)] of the data records in the whole magic-2 batches
    of a Fetch records field (control batches left out)."""
    out = []
    pos = 0
    while pos + 61 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
        if pos + size > len(data):
            break
        base = int.from_bytes(data[pos:pos + 8], "big", signed=True)
        attrs = int.from_bytes(data[pos + 21:pos + 23], "big")
        assert attrs & 0x07 == 0, f"compressed batch (attributes {attrs:#x})"
        if not attrs & 0x20:
            count = int.from_bytes(data[pos + 57:pos + 61], "big")
            q = pos + 61
            for _ in range(count):
                length, q = _varint(data, q)
                end = q + length
                q += 1  # attributes
                _, q = _varint(data, q)  # timestamp delta
                delta, q = _varint(data, q)
                klen, q = _varint(data, q)
                q += max(klen, 0)
                vlen, q = _varint(data, q)
                out.append((base + delta, data[q:q + vlen] if vlen >= 0 else None))
                q = end
        pos += size
    return out


def read_from(b, topic, part, user="alice"):
    """Every value of the partition, fetched from broker b (which must lead
    it); None while b answers an error (not leader yet)."""
    values, offset = [], 0
    with au.Client(b.sasl_port, user, timeout_s=10) as a:
        while True:
            err, hw, _, _, data = fetch_v4(a, [(topic, part, offset)])[(topic, part)]
            if err != NONE:
                return None
            if offset >= hw:
                return values
            got = record_values(data)
            assert got, f"no records below the high watermark {hw} at offset {offset}"
            values += [v for _, v in got]
            offset = got[-1][0] + 1


def wait_read(c, topic, part, want, leader_id):
    """Reads the partition from leader_id until it answers with as many
    records as want (a new leader's high watermark catches up when its
    followers fetch again); asserts the values."""
    b = c.broker(leader_id)

    def enough():
        got = read_from(b, topic, part)
        return got if got is not None and len(got) >= len(want) else None

    got = cl.wait_for(enough, 30, f"{len(want)} records of {topic}-{part} at broker {leader_id}", 0.2)
    assert got == want, f"{topic}-{part} at broker {leader_id}: {len(got)} records, want {len(want)}"


def raw_produce(b, topic, part, timeout_ms=10000, user="alice"):
    """One acks=all record by raw Produce v3 to broker b: the error code."""
    batch = cu.record_batch([(b"k", f"v{time.time_ns()}".encode(), [])], int(time.time() * 1000))
    body = (au.nstring(None) + i16(-1) + i32(timeout_ms)
            + au.array([string(topic) + au.array([i32(part) + i32(len(batch)) + batch])]))
    with au.Client(b.sasl_port, user, timeout_s=timeout_ms / 1000 + 20) as a:
        r = a.call(0, 3, body)
    res = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            idx, err = r.i32(), r.i16()
            r.i64()  # base offset
            r.i64()  # log append time
            res[(name, idx)] = err
    assert list(res) == [(topic, part)], res
    return res[(topic, part)]


def produce_answer(c, topic, part, leader_id=None):
    """The first answer other than NOT_LEADER_OR_FOLLOWER (a leader that has
    not had its LeaderAndIsr yet) to a raw acks=all produce at the leader."""
    def answer():
        b = c.broker(leader_id if leader_id is not None else leaders(c, topic)[part])
        err = raw_produce(b, topic, part)
        return None if err == NOT_LEADER_OR_FOLLOWER else (err,)

    return cl.wait_for(answer, 30, f"an answer to a produce to {topic}-{part}")[0]


def controlled_stop(c, b, topics):
    """SIGTERM; asserts it was a controlled shutdown: by the time the
    process is gone, the controller has moved every leadership away from it
    and taken it out of every ISR (the ZooKeeper session, 6 s, has not
    expired, and the controller could not have noticed the exit yet)."""
    bid = b.broker_id
    t0 = time.monotonic()
    rc = b.stop()
    took = time.monotonic() - t0
    states = {(t, p): c.partition_state(t, p) for t in topics for p in range(len(ASSIGNMENT))}
    assert rc in (0, 143), f"broker {bid} exited with {rc}"
    for tp, s in states.items():
        assert s["leader"] != bid and bid not in s["isr"], f"{tp} after broker {bid}'s SIGTERM ({took:.1f}s): {s}"
    assert took < 20, f"broker {bid}'s shutdown took {took:.1f}s"
    return took


# --- tests --------------------------------------------------------------------------


def rotated(r):
    """The assignment with every replica list rotated left by r: a preferred
    election then makes ASSIGNMENT[p][r] the leader of partition p."""
    return {p: reps[r:] + reps[:r] for p, reps in enumerate(ASSIGNMENT)}


def reorder_and_elect(c, topic, assignment):
    """Same replicas in a new order (AlterPartitionReassignments to the
    controller, as admin), then a preferred election (ElectLeaders): the
    leaders change while every ISR stays full."""
    ctrl = c.broker(c.controller_id())
    with au.Client(ctrl.sasl_port, "admin") as a:
        r = a.call(ALTER_PARTITION_REASSIGNMENTS, 0,
                   ru.alter_body([(topic, sorted(assignment.items()))]), flexible=True)
        r.i32()  # throttle
        err, msg = r.i16(), r.compact_string()
    assert err == NONE, (err, msg)
    cl.wait_for(lambda: ru.settled(c, topic, assignment), 30, f"{topic} reassigned to {assignment}")
    # ElectLeaders v1, PREFERRED; a partition whose leader is preferred
    # already answers ELECTION_NOT_NEEDED (84).
    body = i8(0) + au.array([string(topic) + au.array([i32(p) for p in sorted(assignment)])]) + i32(30000)
    with au.Client(c.broker(c.controller_id()).sasl_port, "admin", timeout_s=60) as a:
        r = a.call(ELECT_LEADERS, 1, body)
        r.i32()  # throttle
        err = r.i16()
        results = {}
        for _ in range(r.i32()):
            name = r.string()
            for _ in range(r.i32()):
                part, perr, _ = r.i32(), r.i16(), r.string()
                results[(name, part)] = perr
    assert err == NONE and set(results.values()) <= {NONE, ELECTION_NOT_NEEDED}, (err, results)
    want = {p: reps[0] for p, reps in assignment.items()}
    cl.wait_for(lambda: leaders(c, topic) == want, 30, f"preferred leaders {want}")
    wait_leaders_agreed(c, topic)


def test_replication_under_cluster_action_only(c):
    """LeaderAndIsr, UpdateMetadata, follower Fetch, AlterPartition and
    ControlledShutdown work with the brokers holding only CLUSTER_ACTION."""
    topic = "ib-repl"
    create_topic(c, topic, min_isr=3)
    add_acls(c, au.allow("alice", au.WRITE, au.TOPIC, topic), au.allow("alice", au.READ, au.TOPIC, topic))
    want = {p: [] for p in range(3)}

    # Every replica of every partition leads in turn; each round adds
    # acks=all records and reads everything back from the leaders.
    for r in range(3):
        assignment = rotated(r)
        if r:
            reorder_and_elect(c, topic, assignment)
        assert leaders(c, topic) == {p: reps[0] for p, reps in assignment.items()}
        assert isr_full(c, topic)
        more = {p: [f"round{r}-p{p}-{i}".encode() for i in range(10)] for p in range(3)}
        produce_all(c, topic, more)
        for p in range(3):
            want[p] += more[p]
            wait_read(c, topic, p, want[p], assignment[p][0])

    # Broker 1's controlled shutdown moves its leadership and ISR membership;
    # the new leader refuses acks=all below min.insync.replicas=3.
    led = [p for p, lead in leaders(c, topic).items() if lead == 1]
    assert led, leaders(c, topic)
    took = controlled_stop(c, c.broker(1), [topic])
    for p in led:
        assert produce_answer(c, topic, p) == NOT_ENOUGH_REPLICAS
    # Back: it fetches as User:broker and the leaders expand the ISRs (AlterPartition).
    c.broker(1).start()
    wait_isr_full(c, topic)
    wait_leaders_agreed(c, topic)
    more = {p: [f"after-restart-p{p}-{i}".encode() for i in range(10)] for p in range(3)}
    produce_all(c, topic, more)
    final = leaders(c, topic)
    for p in range(3):
        want[p] += more[p]
        wait_read(c, topic, p, want[p], final[p])
    # And broker 1 leads again after a preferred election: what it fetched as a follower is all there.
    reorder_and_elect(c, topic, rotated(0))
    for p in range(3):
        wait_read(c, topic, p, want[p], ASSIGNMENT[p][0])
    print(f"broker 1's controlled shutdown took {took:.1f}s")


def test_transaction_across_three_leaders(c):
    """WriteTxnMarkers (and AddPartitionsToTxn verification) between brokers
    as User:broker."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    topic, txn_id, group = "ib-txn", "ib-txn-id", "ib-txn-reader"
    create_topic(c, topic, min_isr=3)
    add_acls(c, au.allow("alice", au.WRITE, au.TRANSACTIONAL_ID, txn_id),
             au.allow("alice", au.WRITE, au.TOPIC, topic), au.allow("alice", au.READ, au.TOPIC, topic),
             au.allow("alice", au.READ, au.GROUP, group))
    assert leaders(c, topic) == {0: 1, 1: 2, 2: 3}

    p = Producer({"bootstrap.servers": sasl_bootstrap(c), **sasl_conf("alice"), "transactional.id": txn_id,
                  "transaction.timeout.ms": 60000, "compression.type": "none", "linger.ms": 5})
    p.init_transactions(60)
    committed = []

    def txn(tag, commit):
        p.begin_transaction()
        for part in range(3):
            for i in range(5):
                v = f"{tag}-p{part}-{i}".encode()
                p.produce(topic, value=v, partition=part)
                if commit:
                    committed.append(v)
        if commit:
            p.commit_transaction(60)
        else:
            p.flush(60)  # the aborted records are in the logs
            p.abort_transaction(60)

    txn("commit1", True)
    txn("abort", False)
    txn("commit2", True)

    # Every marker written: each leader's last stable offset is its high watermark.
    def stable(part):
        b = c.broker(part + 1)
        with au.Client(b.sasl_port, "alice") as a:
            err, hw, lso, aborted, _ = fetch_v4(a, [(topic, part, 0)], isolation=1)[(topic, part)]
        return (err, hw, lso, len(aborted)) if err == NONE and hw == lso else None

    for part in range(3):
        err, hw, lso, n_aborted = cl.wait_for(lambda: stable(part), 30, f"{topic}-{part}'s LSO to reach its HW")
        # 15 records and three markers per partition; one aborted transaction.
        assert (hw, n_aborted) == (18, 1), (part, hw, lso, n_aborted)

    cons = Consumer({"bootstrap.servers": sasl_bootstrap(c), **sasl_conf("alice"), "group.id": group,
                     "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        cons.assign([TopicPartition(topic, part, OFFSET_BEGINNING) for part in range(3)])
        seen = []
        deadline = time.monotonic() + 60
        while len(seen) < len(committed) and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                seen.append(m.value())
        # Anything after the committed records (an aborted one slipping through) shows in a last poll.
        end = time.monotonic() + 2
        while time.monotonic() < end:
            m = cons.poll(0.2)
            if m is not None and m.error() is None:
                seen.append(m.value())
    finally:
        cons.close()
    assert sorted(seen) == sorted(committed), (len(seen), len(committed),
                                               [v for v in seen if v.startswith(b"abort")][:3])


def test_client_without_cluster_action_is_refused_inter_broker_requests(c):
    topic = "ib-neg"
    create_topic(c, topic, min_isr=3)
    add_acls(c, au.allow("alice", au.WRITE, au.TOPIC, topic), au.allow("alice", au.READ, au.TOPIC, topic))
    produce_all(c, topic, {p: [f"neg-p{p}-{i}".encode() for i in range(3)] for p in range(3)})
    assert leaders(c, topic) == {0: 1, 1: 2, 2: 3}

    # Follower Fetch (replica_id >= 0) as alice: 29 for every partition, even
    # one of a topic that does not exist; her consumer Fetch is served.
    parts = [(topic, p, 0) for p in range(3)] + [("ib-no-such-topic", 0, 0)]
    for b in c.live():
        own = b.broker_id - 1
        with au.Client(b.sasl_port, "alice") as a:
            as_follower = fetch_v4(a, parts, replica_id=(b.broker_id % 3) + 1)
            as_consumer = fetch_v4(a, [(topic, own, 0)])
        assert {tp: r[0] for tp, r in as_follower.items()} == \
            {(t, p): TOPIC_AUTHORIZATION_FAILED for t, p, _ in parts}, (b.broker_id, as_follower)
        assert all(r[4] == b"" for r in as_follower.values())
        err, hw, *_ = as_consumer[(topic, own)]
        assert (err, hw) == (NONE, 3), (b.broker_id, as_consumer)

    # Forged controller requests to broker 2 (leader of partition 1).
    target = c.broker(2)
    with au.Client(target.sasl_port, "alice") as a:
        _, versions = a.conn.api_versions()
    for key in (LEADER_AND_ISR, UPDATE_METADATA):
        assert key in versions and versions[key][0] == 0, (key, versions.get(key))
    before_md = sasl_metadata(target)
    before_zk = {p: c.partition_state(topic, p) for p in range(3)}
    epoch = c.controller_epoch() + 100
    controller = c.controller_id()
    s1 = before_zk[1]
    b3 = c.broker(3)

    def partition_state_v0(leader, isr, replicas, zk_version):
        return (string(topic) + i32(1) + i32(epoch) + i32(leader) + i32(s1["leader_epoch"] + 100)
                + au.array([i32(r) for r in isr]) + i32(zk_version) + au.array([i32(r) for r in replicas]))

    # UpdateMetadata v0: broker 3 leads partition 1, broker 2 is the only live broker.
    um = (i32(controller) + i32(epoch)
          + au.array([partition_state_v0(3, [3], ASSIGNMENT[1], s1["version"] + 100)])
          + au.array([i32(2) + string("127.0.0.1") + i32(target.sasl_port)]))
    # LeaderAndIsr v0: broker 2 becomes a follower of broker 3 for partition 1.
    lai = (i32(controller) + i32(epoch)
           + au.array([partition_state_v0(3, [3], ASSIGNMENT[1], s1["version"] + 100)])
           + au.array([i32(3) + string("127.0.0.1") + i32(b3.sasl_port)]))
    with au.Client(target.sasl_port, "alice") as a:
        r = a.call(UPDATE_METADATA, 0, um)
        um_err = r.i16()
        r = a.call(LEADER_AND_ISR, 0, lai)
        lai_err = r.i16()
        lai_parts = [(r.string(), r.i32(), r.i16()) for _ in range(r.i32())]
    assert um_err == CLUSTER_AUTHORIZATION_FAILED, um_err
    assert lai_err == CLUSTER_AUTHORIZATION_FAILED, lai_err
    assert lai_parts == [(topic, 1, CLUSTER_AUTHORIZATION_FAILED)], lai_parts

    # Nothing changed: broker 2 still leads partition 1, knows all three
    # brokers, and takes acks=all produces there.
    assert raw_produce(target, topic, 1) == NONE
    after_md = sasl_metadata(target)
    assert cl.comparable_metadata(after_md) == cl.comparable_metadata(before_md)
    assert after_md["topics"][topic]["partitions"][1]["leader_epoch"] == \
        before_md["topics"][topic]["partitions"][1]["leader_epoch"]
    assert {p: c.partition_state(topic, p) for p in range(3)} == before_zk
    assert c.controller_epoch() == epoch - 100

    # Controlled shutdown of that broker still works, and it comes back.
    controlled_stop(c, target, [topic])
    target.start()
    wait_isr_full(c, topic)
    for p in range(3):
        assert produce_answer(c, topic, p) == NONE, p


def broker_acl_listed(b):
    with au.Client(b.sasl_port, "admin") as a:
        err, _, acls = au.describe_acls(a)
    assert err == NONE
    return au.allow(f"User:{BROKER_USER}", au.CLUSTER_ACTION, au.CLUSTER, au.CLUSTER_NAME) in acls


def test_revoking_cluster_action_stops_replication(c):
    """Without CLUSTER_ACTION the followers cannot fetch and the leaders
    cannot shrink the ISR: acks=all with min.insync.replicas=3 times out.
    With the ACL back the same produces succeed."""
    topic = "ib-revoke"
    create_topic(c, topic, min_isr=3)
    add_acls(c, au.allow("alice", au.WRITE, au.TOPIC, topic))
    for p in range(3):
        assert produce_answer(c, topic, p) == NONE, p
    isr_before = {p: c.partition_state(topic, p)["isr"] for p in range(3)}

    try:
        kafka_acls_zk(c, "--remove", "--force", *BROKER_ACL_ARGS)
        assert not c.zk_exists("/kafka-acl/Cluster/kafka-cluster")
        for b in c.live():
            cl.wait_for(lambda: not broker_acl_listed(b), 15, f"broker {b.broker_id} to drop the broker ACL")
        # A follower Fetch authorized before the removal may still be parked
        # at the leader and deliver one more time: poll until a produce fails.
        t0 = time.monotonic()
        first = cl.wait_for(lambda: (lambda e: (e,) if e != NONE else None)(raw_produce(c.broker(1), topic, 0, 2000)),
                            30, "an acks=all produce to fail without the broker ACL", 0)
        assert first == (REQUEST_TIMED_OUT,), first
        # Now every partition: each waits out its timeout (the ISR still
        # holds followers that cannot fetch). Together longer than
        # replica.lag.time.max.ms, so the leaders have tried to shrink.
        errs = {p: raw_produce(c.broker(p + 1), topic, p, 3000) for p in range(3)}
        took = time.monotonic() - t0
        assert errs == {0: REQUEST_TIMED_OUT, 1: REQUEST_TIMED_OUT, 2: REQUEST_TIMED_OUT}, errs
        assert took > LAG_MS / 1000 * 1.5
        # AlterPartition needs CLUSTER_ACTION too: ZooKeeper's ISRs are unchanged.
        assert {p: c.partition_state(topic, p)["isr"] for p in range(3)} == isr_before
    finally:
        if not c.zk_exists("/kafka-acl/Cluster/kafka-cluster"):
            kafka_acls_zk(c, "--add", *BROKER_ACL_ARGS)
    t0 = time.monotonic()
    for p in range(3):
        cl.wait_for(lambda: raw_produce(c.broker(p + 1), topic, p, 3000) == NONE, 60,
                    f"acks=all produce to {topic}-{p} with the broker ACL back", 0.2)
    wait_isr_full(c, topic, 60)
    print(f"ACL removed: produces timed out for {took:.1f}s; back: all produce again after "
          f"{time.monotonic() - t0:.1f}s")
