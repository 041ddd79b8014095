"""ACL authorization (Kafka's ZooKeeper-mode AclAuthorizer) on a 3-broker
cluster, against Apache Kafka 3.9.1 with KSHARD_TEST_TARGET=kafka.

Every broker runs `authorizer.class.name=kafka.security.authorizer.AclAuthorizer`
with two listeners: PLAINTEXT (the inter-broker listener, listed first so the
harness's readiness probe and admin clients use it) and SASL_PLAINTEXT with
PLAIN users admin, alice and bob. `super.users=User:admin;User:ANONYMOUS`.

Why ANONYMOUS is a super user: the PLAINTEXT listener's principal is
User:ANONYMOUS, and in ZooKeeper mode every inter-broker request needs
CLUSTER_ACTION on the cluster (LeaderAndIsr, UpdateMetadata, StopReplica,
ControlledShutdown, AlterPartition, follower Fetch, OffsetForLeaderEpoch,
WriteTxnMarkers (or ALTER), AllocateProducerIds). A CLUSTER_ACTION ACL alone
would do for the brokers, but it would have to be in ZooKeeper before the
first broker starts (or no broker can follow or take leadership), and the
harness itself talks to the PLAINTEXT listener (raw Metadata for readiness
and convergence needs DESCRIBE on every topic, CreateTopics needs CREATE on
the cluster), so the ANONYMOUS super user is the smallest setup that leaves
the harness unchanged. (Seen with Kafka 3.9.1: with super.users=User:admin
only and ANONYMOUS given ClusterAction + Create on the cluster and Describe
on Topic:* in ZooKeeper before start-up, brokers start, create RF-3 topics
and serve acks=all with min.insync.replicas=3.)
test_deny_for_a_super_user_does_not_break_the_cluster shows super users
bypass even a DENY ALL on the cluster (without ANONYMOUS in super.users that
test fails at once: CreateTopics answers TOPIC_AUTHORIZATION_FAILED).

What is tested (each proven against Kafka 3.9.1 in ZooKeeper mode):

1. ZooKeeper layout. At start-up Kafka creates /kafka-acl/<Type> and
   /kafka-acl-extended/prefixed/<Type> for Topic, Group, Cluster,
   TransactionalId, DelegationToken, User, plus /kafka-acl-changes and
   /kafka-acl-extended-changes. kafka-acls --bootstrap-server --add writes
   /kafka-acl/Topic/<t>, /kafka-acl/Group/<g>, /kafka-acl/Cluster/kafka-cluster
   and /kafka-acl-extended/prefixed/Topic/<prefix>, each holding
   {"version":1,"acls":[{"principal":..,"permissionType":"Allow"|"Deny",
   "operation":"Read"|..,"host":..}]}, and one sequential notification per
   changed resource: /kafka-acl-changes/acl_changes_<10 digits> with the
   bytes "TOPIC:<t>" (ResourceType enum name, upper case), and
   /kafka-acl-extended-changes/acl_changes_<10 digits> with
   {"version":1,"resourceType":"TOPIC","name":"<prefix>","patternType":"PREFIXED"}.
   Removing one of two ACLs rewrites the znode; removing the last deletes it
   (parents stay); both write a notification.
2. An ACL added through broker 1 is enforced by brokers 1, 2 and 3 within a
   second (alice's Produce to each broker's own partition goes from
   TOPIC_AUTHORIZATION_FAILED to success); removing it through broker 2
   makes all three deny again.
3. ACLs written by `kafka-acls --authorizer-properties zookeeper.connect=..`
   (AclCommand running the AclAuthorizer itself, no broker involved) are
   enforced by every broker, listed by every broker's DescribeAcls and by
   kafka-acls --list --bootstrap-server; removing them the same way is seen too.
4. A broker killed with kill -9 and started again enforces the ACLs it reads
   from ZooKeeper at start-up, including ACLs added while it was down whose
   change notifications were deleted (Kafka purges notifications after 15
   minutes), and follows changes made after its restart.
5. CreateAcls racing on the same resources through broker 1 (alice READ) and
   broker 2 (bob WRITE): both ACLs of every topic survive, in ZooKeeper and
   in every broker's DescribeAcls (the AclAuthorizer writes with conditional
   create/setData and retries on NODEEXISTS/BADVERSION).
6. DENY ALL on the cluster for User:ANONYMOUS (a super user) changes
   nothing: topics are created over PLAINTEXT and an acks=all produce with
   min.insync.replicas=3 succeeds (followers fetch as ANONYMOUS).

Raw CreateAcls/DescribeAcls/DeleteAcls v1 and Produce v3 go over SASL PLAIN
connections to one chosen broker (a client library would pick any broker).
Kafka 3.9.1's success messages there: CreateAcls result errorMessage "" (not
null), DescribeAcls errorMessage "", DeleteAcls filter result and matching
ACL errorMessage null; only the DescribeAcls one is asserted (test 1).

Seen on Kafka 3.9.1 (bytes): /kafka-acl/Topic/<t> =
{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*","operation":"Read"}],"version":1}
(the same shape for every resource znode; compared here as parsed JSON),
/kafka-acl-changes/acl_changes_0000000000 = TOPIC:<t> (GROUP:<g>,
CLUSTER:kafka-cluster), /kafka-acl-extended-changes/acl_changes_0000000000 =
{"version":1,"resourceType":"TOPIC","name":"<prefix>","patternType":"PREFIXED"}.
A new ACL reaches all three brokers' enforcement within ~0.1 s. Racing
CreateAcls through brokers 1 and 2 made Kafka retry its conditional
create/setData about 11 times in 30 rounds, and nothing was lost.
"""

import json
import re
import threading
import time
from collections import namedtuple

import pytest

import cluster_util as cl
import conftest as _cluster_conftest  # tests/cluster/conftest.py

if not hasattr(_cluster_conftest, "TARGET"):
    _cluster_conftest.TARGET = cl.TARGET  # security_util does `from conftest import TARGET`
import security_util as su  # noqa: E402  (tests/compat)

cu = cl.cu

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
SESSION_TIMEOUT_MS = 3000
PROPAGATE_S = 15.0
NOTIFICATION = re.compile(r"^acl_changes_\d{10}$")
ACL_TYPES = ["Cluster", "DelegationToken", "Group", "Topic", "TransactionalId", "User"]

# Kafka error codes.
NONE = 0
TOPIC_AUTHORIZATION_FAILED = 29

# org.apache.kafka.common.resource / acl enums.
RESOURCE_TYPES = {"ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5}
PATTERN_TYPES = {"ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
OPERATIONS = {"ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
              "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12}
PERMISSIONS = {"ANY": 1, "DENY": 2, "ALLOW": 3}
_BY_CODE = {name: {v: k for k, v in table.items()}
            for name, table in [("rtype", RESOURCE_TYPES), ("pattern", PATTERN_TYPES),
                                ("op", OPERATIONS), ("perm", PERMISSIONS)]}

CREATE_ACLS, DESCRIBE_ACLS, DELETE_ACLS = 30, 29, 31


class Acl(namedtuple("Acl", "rtype name pattern principal host op perm")):
    """One ACL binding (enum names as strings); as a filter, None name /
    principal / host match anything."""


def acl(rtype, name, principal, op, perm="ALLOW", pattern="LITERAL", host="*"):
    return Acl(rtype, name, pattern, principal, host, op, perm)


def acl_filter(rtype="ANY", name=None, pattern="ANY", principal=None, host=None, op="ANY", perm="ANY"):
    return Acl(rtype, name, pattern, principal, host, op, perm)


def _encode(a):
    return (cu.i8(RESOURCE_TYPES[a.rtype]) + cu.string(a.name) + cu.i8(PATTERN_TYPES[a.pattern])
            + cu.string(a.principal) + cu.string(a.host) + cu.i8(OPERATIONS[a.op]) + cu.i8(PERMISSIONS[a.perm]))


def _decode_binding(r):
    rtype, name, pattern = r.i8(), r.string(), r.i8()
    principal, host, op, perm = r.string(), r.string(), r.i8(), r.i8()
    return Acl(_BY_CODE["rtype"].get(rtype, rtype), name, _BY_CODE["pattern"].get(pattern, pattern), principal,
               host, _BY_CODE["op"].get(op, op), _BY_CODE["perm"].get(perm, perm))


# --- raw clients over SASL_PLAINTEXT / PLAIN ---------------------------------


class Client:
    """A SASL PLAIN connection to one broker's SASL_PLAINTEXT listener."""

    def __init__(self, broker, user):
        self.broker = broker
        self.conn, (err, msg, _, _) = su.plain_login(broker.sasl_port, user, USERS[user])
        if err != NONE:
            self.conn.close()
            raise cl.ClusterError(f"PLAIN login of {user} on broker {broker.broker_id}: {err} {msg}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.conn.close()

    def create_acls(self, acls):
        """CreateAcls v1: [(error, message)] in request order."""
        r = self.conn.call(CREATE_ACLS, 1, cu.i32(len(acls)) + b"".join(_encode(a) for a in acls))
        r.i32()  # throttle
        return [(r.i16(), r.string()) for _ in range(r.i32())]

    def describe_acls(self, f):
        """DescribeAcls v1: (error, message, set of Acl)."""
        r = self.conn.call(DESCRIBE_ACLS, 1, _encode(f))
        r.i32()  # throttle
        err, msg = r.i16(), r.string()
        out = set()
        for _ in range(r.i32()):
            rtype, name, pattern = r.i8(), r.string(), r.i8()
            for _ in range(r.i32()):
                principal, host, op, perm = r.string(), r.string(), r.i8(), r.i8()
                out.add(Acl(_BY_CODE["rtype"][rtype], name, _BY_CODE["pattern"][pattern], principal, host,
                            _BY_CODE["op"][op], _BY_CODE["perm"][perm]))
        return err, msg, out

    def delete_acls(self, filters):
        """DeleteAcls v1: [(error, message, [(error, message, Acl)])] per filter."""
        r = self.conn.call(DELETE_ACLS, 1, cu.i32(len(filters)) + b"".join(_encode(f) for f in filters))
        r.i32()  # throttle
        out = []
        for _ in range(r.i32()):
            err, msg = r.i16(), r.string()
            matching = []
            for _ in range(r.i32()):
                merr, mmsg = r.i16(), r.string()
                matching.append((merr, mmsg, _decode_binding(r)))
            out.append((err, msg, matching))
        return out

    def produce(self, topic, partition, acks=1, timeout_ms=10000):
        """Produce v3 of one record: the partition's error code."""
        self.conn.corr += 1
        batch = cu.record_batch([(b"k", f"v{time.time_ns()}".encode(), [])], int(time.time() * 1000))
        self.conn.sock.sendall(cu.produce_v3(self.conn.corr, topic, partition, batch, acks=acks, timeout_ms=timeout_ms))
        corr, res = cu.parse_produce_v3_response(cu.recv_frame(self.conn.sock))
        assert corr == self.conn.corr
        return res[(topic, partition)][0]


def create_acls(broker, acls, user="admin", messages=None):
    """CreateAcls; asserts every result is NONE. `messages` a list to get
    the error messages appended."""
    with Client(broker, user) as c:
        res = c.create_acls(acls)
    assert [err for err, _ in res] == [NONE] * len(acls), f"CreateAcls via broker {broker.broker_id}: {res}"
    if messages is not None:
        messages.extend(msg for _, msg in res)


def delete_acls(broker, filters, user="admin", messages=None):
    """DeleteAcls; asserts no error; returns the set of deleted bindings.
    `messages` a list to get (filter message, [matching ACL messages]) appended."""
    with Client(broker, user) as c:
        res = c.delete_acls(filters)
    deleted = set()
    for err, msg, matching in res:
        assert err == NONE, res
        for merr, _, a in matching:
            assert merr == NONE, res
            deleted.add(a)
        if messages is not None:
            messages.append((msg, [m for _, m, _ in matching]))
    return deleted


def describe_acls(broker, f, user="admin", message=None):
    """The set of Acl matching filter f; `message` a list to get the
    response's error message appended."""
    with Client(broker, user) as c:
        err, msg, acls = c.describe_acls(f)
    assert err == NONE, (broker.broker_id, err, msg)
    if message is not None:
        message.append(msg)
    return acls


def produce_error(broker, user, topic, partition, acks=1):
    with Client(broker, user) as c:
        return c.produce(topic, partition, acks=acks)


def topic_acls(broker, topic):
    return describe_acls(broker, acl_filter("TOPIC", topic, "LITERAL"))


# --- the cluster --------------------------------------------------------------


def acl_overrides():
    return {
        "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connection.failed.authentication.delay.ms": "0",
        "offsets.topic.replication.factor": "3",
        "offsets.topic.num.partitions": "3",
        "auto.create.topics.enable": "false",
    }


def listeners(b):
    """PLAINTEXT first: the harness's readiness probe and admin clients use it."""
    b.sasl_port = cu.free_port()
    return {"listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}"}


@pytest.fixture(scope="module")
def acluster(module_cluster, tmp_path_factory):
    c = module_cluster
    c.start(3, acl_overrides(), per_broker=listeners)
    cfg = tmp_path_factory.mktemp("acl-cli") / "admin.properties"
    cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                   "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                   f'username="admin" password="{USERS["admin"]}";\n')
    c.admin_config = str(cfg)
    return c


@pytest.fixture
def c(acluster):
    """The module's cluster with every broker running (a failed restart test
    must not take the later tests with it)."""
    down = [b for b in acluster.all_brokers if not b.running()]
    for b in down:
        wait_registration_gone(acluster, b.broker_id)
        b.start()
    if down:
        acluster.wait_converged()
    return acluster


def wait_registration_gone(c, bid):
    c.wait_for(lambda: not c.zk_exists(f"/brokers/ids/{bid}"), SESSION_TIMEOUT_MS / 1000 * 3 + 10,
               f"/brokers/ids/{bid} to vanish")


def kafka_acls(c, *args, via=None, check=True):
    """kafka-acls --bootstrap-server <via's SASL_PLAINTEXT> as admin."""
    b = c.broker(via or 1)
    return cl.kafka_tool("kafka.admin.AclCommand", "--bootstrap-server", f"127.0.0.1:{b.sasl_port}",
                         "--command-config", c.admin_config, *args, check=check)


def kafka_acls_zk(c, *args):
    """The deprecated path: AclCommand runs the AclAuthorizer on ZooKeeper itself."""
    return cl.kafka_tool("kafka.admin.AclCommand", "--authorizer-properties",
                         f"zookeeper.connect={c.zk_connect}", *args)


def create_per_broker_topic(c, topic, config=None):
    """Partition p has one replica, broker p + 1 (its leader)."""
    from confluent_kafka.admin import NewTopic

    admin = c.admin()
    futs = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=-1,
                                         replica_assignment=[[1], [2], [3]], config=config or {})],
                               operation_timeout=30)
    futs[topic].result(60)
    c.wait_converged(topics=[topic])


def own_partition(b):
    return b.broker_id - 1


def produce_everywhere(c, user, topic):
    """{broker id: error} of `user` producing to each broker's own partition at that broker."""
    return {b.broker_id: produce_error(b, user, topic, own_partition(b)) for b in c.live()}


def wait_produce(c, user, topic, want, brokers=None, timeout_s=PROPAGATE_S):
    """Polls each broker until `user`'s Produce to its own partition answers
    `want`; returns the seconds it took."""
    t0 = time.monotonic()
    for b in brokers or c.live():
        cl.wait_for(lambda: produce_error(b, user, topic, own_partition(b)) == want, timeout_s,
                    f"{user}'s produce to {topic}-{own_partition(b)} at broker {b.broker_id} to answer {want}", 0.05)
    return time.monotonic() - t0


def acl_json(principal, perm, op, host="*"):
    return {"principal": principal, "permissionType": perm, "operation": op, "host": host}


def znode_acls(c, path):
    """(raw bytes, parsed) of an ACL znode; asserts its shape."""
    raw, _ = c.zk_get(path)
    node = json.loads(raw)
    assert sorted(node) == ["acls", "version"] and node["version"] == 1, (path, raw)
    for e in node["acls"]:
        assert sorted(e) == ["host", "operation", "permissionType", "principal"], (path, raw)
    return raw, node


def acl_set(node):
    return sorted(json.dumps(e, sort_keys=True) for e in node["acls"])


def notifications(c, path):
    """{name: raw bytes} of a change notification path."""
    out = {}
    for name in c.zk_children(path):
        assert NOTIFICATION.match(name), (path, name)
        out[name] = c.zk_get(f"{path}/{name}")[0]
    return out


def new_notifications(c, path, before):
    now = notifications(c, path)
    return [now[n] for n in sorted(now) if n not in before]


def both_notifications(c):
    return notifications(c, "/kafka-acl-changes"), notifications(c, "/kafka-acl-extended-changes")


def new_both(c, before):
    return (new_notifications(c, "/kafka-acl-changes", before[0]),
            new_notifications(c, "/kafka-acl-extended-changes", before[1]))


# --- tests --------------------------------------------------------------------


def test_acl_znodes_and_change_notifications(c):
    for root in ("/kafka-acl", "/kafka-acl-extended/prefixed"):
        assert set(ACL_TYPES) <= set(c.zk_children(root)), (root, c.zk_children(root))
    assert c.zk_exists("/kafka-acl-changes") and c.zk_exists("/kafka-acl-extended-changes")
    topic, group, prefix = "acl-layout", "acl-layout-group", "acl-layout-pre-"
    print("ZooKeeper data written by", cl.TARGET)

    before = both_notifications(c)
    out = kafka_acls(c, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
                     "--topic", topic, "--group", group).stdout
    assert out.count("Adding ACLs for resource") == 2, out
    lit, ext = new_both(c, before)
    # One notification per changed resource (the tool sends one CreateAcls per resource).
    assert sorted(lit) == sorted([f"TOPIC:{topic}".encode(), f"GROUP:{group}".encode()]) and ext == [], (lit, ext)
    want_two = sorted(json.dumps(acl_json("User:alice", "Allow", op), sort_keys=True) for op in ("Read", "Describe"))
    for path in (f"/kafka-acl/Topic/{topic}", f"/kafka-acl/Group/{group}"):
        raw, node = znode_acls(c, path)
        print(f"  {path} = {raw!r}")
        assert acl_set(node) == want_two, raw

    before = both_notifications(c)
    kafka_acls(c, "--add", "--deny-principal", "User:bob", "--operation", "Alter", "--cluster")
    assert new_both(c, before) == ([b"CLUSTER:kafka-cluster"], [])
    raw, node = znode_acls(c, "/kafka-acl/Cluster/kafka-cluster")
    print(f"  /kafka-acl/Cluster/kafka-cluster = {raw!r}")
    assert node["acls"] == [acl_json("User:bob", "Deny", "Alter")], raw

    before = both_notifications(c)
    kafka_acls(c, "--add", "--allow-principal", "User:bob", "--allow-host", "127.0.0.1", "--operation", "Write",
               "--topic", prefix, "--resource-pattern-type", "prefixed")
    lit, ext = new_both(c, before)
    assert lit == [] and len(ext) == 1, (lit, ext)
    print(f"  extended notification = {ext[0]!r}")
    assert json.loads(ext[0]) == {"version": 1, "resourceType": "TOPIC", "name": prefix, "patternType": "PREFIXED"}
    assert not c.zk_exists(f"/kafka-acl/Topic/{prefix}")
    raw, node = znode_acls(c, f"/kafka-acl-extended/prefixed/Topic/{prefix}")
    print(f"  /kafka-acl-extended/prefixed/Topic/{prefix} = {raw!r}")
    assert node["acls"] == [acl_json("User:bob", "Allow", "Write", "127.0.0.1")], raw
    print("  notification names:", sorted(notifications(c, "/kafka-acl-changes"))[-3:],
          sorted(notifications(c, "/kafka-acl-extended-changes")))

    # Every broker describes the same (its cache follows the notifications).
    want = {acl("TOPIC", topic, "User:alice", op) for op in ("READ", "DESCRIBE")} | \
           {acl("GROUP", group, "User:alice", op) for op in ("READ", "DESCRIBE")} | \
           {acl("CLUSTER", "kafka-cluster", "User:bob", "ALTER", "DENY"),
            acl("TOPIC", prefix, "User:bob", "WRITE", pattern="PREFIXED", host="127.0.0.1")}
    for b in c.live():
        cl.wait_for(lambda: describe_acls(b, acl_filter()) >= want, PROPAGATE_S, f"broker {b.broker_id}'s ACLs")
        msg = []
        got = {a for a in describe_acls(b, acl_filter(), message=msg) if a.name in (topic, group, prefix, "kafka-cluster")}
        assert got == want, (b.broker_id, got ^ want)
        # Kafka answers a successful DescribeAcls with an empty, not null, message.
        assert msg == [""], msg

    # Removing one of two ACLs rewrites the znode, removing the last deletes it.
    before = both_notifications(c)
    _, stat0 = c.zk_get(f"/kafka-acl/Topic/{topic}")
    deleted = delete_acls(c.broker(1), [acl_filter("TOPIC", topic, "LITERAL", op="DESCRIBE")])
    assert deleted == {acl("TOPIC", topic, "User:alice", "DESCRIBE")}
    raw, node = znode_acls(c, f"/kafka-acl/Topic/{topic}")
    assert node["acls"] == [acl_json("User:alice", "Allow", "Read")], raw
    assert c.zk_get(f"/kafka-acl/Topic/{topic}")[1].version == stat0.version + 1
    assert new_both(c, before) == ([f"TOPIC:{topic}".encode()], [])

    before = both_notifications(c)
    out = kafka_acls(c, "--remove", "--force", "--topic", topic).stdout
    assert out == "", out
    assert not c.zk_exists(f"/kafka-acl/Topic/{topic}")
    assert new_both(c, before) == ([f"TOPIC:{topic}".encode()], [])

    before = both_notifications(c)
    deleted = delete_acls(c.broker(2), [acl_filter("GROUP", group, "LITERAL"),
                                        acl_filter("CLUSTER", "kafka-cluster", "LITERAL", principal="User:bob"),
                                        acl_filter("TOPIC", prefix, "PREFIXED")])
    assert deleted == want - {acl("TOPIC", topic, "User:alice", op) for op in ("READ", "DESCRIBE")}
    for path in (f"/kafka-acl/Group/{group}", "/kafka-acl/Cluster/kafka-cluster",
                 f"/kafka-acl-extended/prefixed/Topic/{prefix}"):
        assert not c.zk_exists(path), path
    lit, ext = new_both(c, before)
    assert sorted(lit) == sorted([f"GROUP:{group}".encode(), b"CLUSTER:kafka-cluster"]), lit
    assert [json.loads(e) for e in ext] == [{"version": 1, "resourceType": "TOPIC", "name": prefix,
                                             "patternType": "PREFIXED"}], ext
    for root in ("/kafka-acl", "/kafka-acl-extended/prefixed"):
        assert set(ACL_TYPES) <= set(c.zk_children(root))
    for b in c.live():
        cl.wait_for(lambda: not {a for a in describe_acls(b, acl_filter())
                                 if a.name in (topic, group, prefix, "kafka-cluster")},
                    PROPAGATE_S, f"broker {b.broker_id} to drop the removed ACLs")


def test_acl_added_through_one_broker_is_enforced_by_all(c):
    topic = "acl-prop"
    create_per_broker_topic(c, topic)
    assert produce_everywhere(c, "alice", topic) == {1: 29, 2: 29, 3: 29}
    # Super users are not subject to ACLs.
    assert produce_everywhere(c, "admin", topic) == {1: 0, 2: 0, 3: 0}

    msgs = []
    create_acls(c.broker(1), [acl("TOPIC", topic, "User:alice", "WRITE")], messages=msgs)
    print("CreateAcls success messages:", msgs)
    took = wait_produce(c, "alice", topic, NONE)
    print(f"ALLOW via broker 1 enforced everywhere after {took:.2f}s")
    assert produce_everywhere(c, "bob", topic) == {1: 29, 2: 29, 3: 29}

    msgs = []
    deleted = delete_acls(c.broker(2), [acl_filter("TOPIC", topic, "LITERAL", principal="User:alice"),
                                        acl_filter("TOPIC", "acl-nothing-here", "LITERAL")], messages=msgs)
    print("DeleteAcls success messages:", msgs)
    assert deleted == {acl("TOPIC", topic, "User:alice", "WRITE")}
    took = wait_produce(c, "alice", topic, TOPIC_AUTHORIZATION_FAILED)
    print(f"removal via broker 2 enforced everywhere after {took:.2f}s")
    assert not c.zk_exists(f"/kafka-acl/Topic/{topic}")

    # A PREFIXED ALLOW covers the topic too; a DENY on the literal name wins.
    create_acls(c.broker(3), [acl("TOPIC", "acl-pr", "User:bob", "WRITE", pattern="PREFIXED")])
    wait_produce(c, "bob", topic, NONE)
    create_acls(c.broker(2), [acl("TOPIC", topic, "User:bob", "WRITE", perm="DENY")])
    wait_produce(c, "bob", topic, TOPIC_AUTHORIZATION_FAILED)
    delete_acls(c.broker(1), [acl_filter("TOPIC", "acl-pr", "PREFIXED"), acl_filter("TOPIC", topic, "LITERAL")])
    wait_produce(c, "bob", topic, TOPIC_AUTHORIZATION_FAILED)


def test_acls_written_through_zookeeper_are_enforced_and_listed(c):
    topic = "acl-zk"
    create_per_broker_topic(c, topic)
    assert produce_everywhere(c, "bob", topic) == {1: 29, 2: 29, 3: 29}
    before = both_notifications(c)
    out = kafka_acls_zk(c, "--add", "--allow-principal", "User:bob", "--operation", "Write", "--topic", topic).stdout
    assert out.startswith("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=acl-zk, "
                          "patternType=LITERAL)`: \n"), out
    assert "Error" not in out, out
    raw, node = znode_acls(c, f"/kafka-acl/Topic/{topic}")
    print(f"AclCommand --authorizer-properties wrote {raw!r}, notifications {new_both(c, before)!r}")
    assert node["acls"] == [acl_json("User:bob", "Allow", "Write")], raw
    assert new_both(c, before) == ([f"TOPIC:{topic}".encode()], [])

    took = wait_produce(c, "bob", topic, NONE)
    print(f"ZooKeeper-written ACL enforced everywhere after {took:.2f}s")
    assert produce_everywhere(c, "alice", topic) == {1: 29, 2: 29, 3: 29}
    for b in c.live():
        assert topic_acls(b, topic) == {acl("TOPIC", topic, "User:bob", "WRITE")}, b.broker_id
    out = kafka_acls(c, "--list", "--topic", topic, via=3).stdout
    assert out == (f"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)`: \n"
                   " \t(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW) \n\n"), out

    kafka_acls_zk(c, "--remove", "--force", "--allow-principal", "User:bob", "--operation", "Write", "--topic", topic)
    assert not c.zk_exists(f"/kafka-acl/Topic/{topic}")
    wait_produce(c, "bob", topic, TOPIC_AUTHORIZATION_FAILED)
    for b in c.live():
        assert topic_acls(b, topic) == set(), b.broker_id


def test_restarted_broker_loads_acls_from_zookeeper(c):
    t1, t2 = "acl-restart-1", "acl-restart-2"
    create_per_broker_topic(c, t1)
    create_per_broker_topic(c, t2)
    b3 = c.broker(3)
    create_acls(c.broker(1), [acl("TOPIC", t1, "User:alice", "WRITE"), acl("TOPIC", t1, "User:bob", "WRITE")])
    wait_produce(c, "alice", t1, NONE)
    wait_produce(c, "bob", t1, NONE)

    b3.kill9()
    wait_registration_gone(c, 3)
    # While broker 3 is down: a DENY on an existing resource, an ALLOW on a new one.
    create_acls(c.broker(1), [acl("TOPIC", t1, "User:alice", "WRITE", perm="DENY")])
    create_acls(c.broker(2), [acl("TOPIC", t2, "User:bob", "WRITE")])
    # Kafka deletes notifications older than 15 minutes: the restarted
    # broker must read the ACL znodes themselves.
    for path in ("/kafka-acl-changes", "/kafka-acl-extended-changes"):
        for name in c.zk_children(path):
            c.zk.delete(c.path(f"{path}/{name}"))
    b3.start()
    c.wait_converged()
    # bob's produce at broker 3 succeeding shows both its leadership and the ACLs loaded.
    cl.wait_for(lambda: produce_error(b3, "bob", t2, 2) == NONE, 60, "bob's produce to acl-restart-2-2 at broker 3")
    assert produce_error(b3, "bob", t1, 2) == NONE
    assert produce_error(b3, "alice", t1, 2) == TOPIC_AUTHORIZATION_FAILED
    assert produce_error(b3, "alice", t2, 2) == TOPIC_AUTHORIZATION_FAILED
    assert topic_acls(b3, t1) == {acl("TOPIC", t1, "User:alice", "WRITE"), acl("TOPIC", t1, "User:bob", "WRITE"),
                                  acl("TOPIC", t1, "User:alice", "WRITE", perm="DENY")}
    assert topic_acls(b3, t2) == {acl("TOPIC", t2, "User:bob", "WRITE")}

    # It follows changes made after its restart.
    delete_acls(c.broker(1), [acl_filter("TOPIC", t1, "LITERAL", perm="DENY")])
    wait_produce(c, "alice", t1, NONE, brokers=[b3])
    delete_acls(c.broker(2), [acl_filter("TOPIC", t1, "LITERAL"), acl_filter("TOPIC", t2, "LITERAL")])
    wait_produce(c, "bob", t2, TOPIC_AUTHORIZATION_FAILED, brokers=[b3])


CONCURRENT_TOPICS = 30


def test_concurrent_adds_through_two_brokers_all_survive(c):
    topics = [f"acl-conc-{i}" for i in range(CONCURRENT_TOPICS)]
    barrier = threading.Barrier(2)
    errors = []

    def adder(broker, principal, op):
        try:
            with Client(broker, "admin") as cl_:
                for t in topics:
                    barrier.wait(30)
                    res = cl_.create_acls([acl("TOPIC", t, principal, op)])
                    if [err for err, _ in res] != [NONE]:
                        errors.append((broker.broker_id, t, res))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append((broker.broker_id, repr(e)))
            barrier.abort()

    threads = [threading.Thread(target=adder, args=(c.broker(1), "User:alice", "READ")),
               threading.Thread(target=adder, args=(c.broker(2), "User:bob", "WRITE"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors

    want_json = sorted(json.dumps(e, sort_keys=True) for e in (acl_json("User:alice", "Allow", "Read"),
                                                               acl_json("User:bob", "Allow", "Write")))
    lost = {}
    for t in topics:
        raw, node = znode_acls(c, f"/kafka-acl/Topic/{t}")
        if acl_set(node) != want_json:
            lost[t] = raw
    assert not lost, f"ACLs lost in ZooKeeper: {lost}"

    want = {acl("TOPIC", t, "User:alice", "READ") for t in topics} | \
           {acl("TOPIC", t, "User:bob", "WRITE") for t in topics}

    def described(b):
        return {a for a in describe_acls(b, acl_filter("TOPIC")) if a.name.startswith("acl-conc-")}

    for b in c.live():
        cl.wait_for(lambda: described(b) == want, PROPAGATE_S, f"broker {b.broker_id} to list all {len(want)} ACLs")

    deleted = delete_acls(c.broker(3), [acl_filter("TOPIC", t, "LITERAL") for t in topics])
    assert deleted == want
    assert not [t for t in topics if c.zk_exists(f"/kafka-acl/Topic/{t}")]


def test_deny_for_a_super_user_does_not_break_the_cluster(c):
    """Super users bypass the ACLs, a DENY included."""
    create_acls(c.broker(1), [acl("CLUSTER", "kafka-cluster", "User:ANONYMOUS", "ALL", perm="DENY"),
                              acl("TOPIC", "*", "User:ANONYMOUS", "ALL", perm="DENY")])
    try:
        for b in c.live():
            cl.wait_for(lambda: acl("CLUSTER", "kafka-cluster", "User:ANONYMOUS", "ALL", perm="DENY")
                        in describe_acls(b, acl_filter("CLUSTER")), PROPAGATE_S, f"broker {b.broker_id}'s ACLs")
        from confluent_kafka.admin import NewTopic

        topic = "acl-anonymous"
        admin = c.admin()  # PLAINTEXT: User:ANONYMOUS
        futs = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=-1,
                                             replica_assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]],
                                             config={"min.insync.replicas": "3"})], operation_timeout=30)
        futs[topic].result(60)
        c.wait_converged(topics=[topic])
        create_acls(c.broker(2), [acl("TOPIC", topic, "User:alice", "WRITE")])
        for b in c.live():
            # acks=all with min.insync.replicas=3: both followers (fetching as ANONYMOUS) must keep up.
            cl.wait_for(lambda: produce_error(b, "alice", topic, own_partition(b), acks=-1) == NONE, 60,
                        f"alice's acks=all produce to {topic}-{own_partition(b)} at broker {b.broker_id}", 0.2)
        for p in range(3):
            assert sorted(c.partition_state(topic, p)["isr"]) == [1, 2, 3]
    finally:
        delete_acls(c.broker(1), [acl_filter("CLUSTER", "kafka-cluster", "LITERAL", principal="User:ANONYMOUS"),
                                  acl_filter("TOPIC", "*", "LITERAL", principal="User:ANONYMOUS"),
                                  acl_filter("TOPIC", "acl-anonymous", "LITERAL")])
