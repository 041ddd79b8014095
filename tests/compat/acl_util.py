"""Helpers for the ACL authorization tests (test_acls.py): the broker
overrides (a SASL_PLAINTEXT listener with PLAIN users admin, alice and bob,
super.users, an authorizer), Kafka's kafka-acls tool (kafka.admin.AclCommand
from the 3.9.1 jars) and a parser for its listings, and a raw Kafka-protocol
client logged in over SASL/PLAIN with one function per API the tests check,
each returning the broker's error codes as they are on the wire."""

import contextlib
import time
import uuid

import compat_util as cu
import security_util as su
from compat_util import i8, i16, i32, i64, string, wait_for
from conftest import TARGET

# --- broker configuration ---------------------------------------------------------

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)
SASL = "SASL_PLAINTEXT"
# KRaft's authorizer for the reference broker; kshard accepts both names.
AUTHORIZER = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    if TARGET == "kafka"
    else "kafka.security.authorizer.AclAuthorizer"
)
# User:ANONYMOUS is the principal of every PLAINTEXT connection. Kafka's
# KRaft node needs it as a super user: its broker registers with its own
# controller over the PLAINTEXT CONTROLLER listener (BrokerRegistration and
# ControllerRegistration need CLUSTER_ACTION; with super.users=User:admin
# alone Kafka 3.9.1 never finishes starting, logging
# ClusterAuthorizationException for both). The PLAINTEXT client listener
# therefore bypasses ACLs too, on both targets; every ACL check here goes
# through the SASL listener.
SUPER_USERS = "User:admin;User:ANONYMOUS"


def acl_overrides(allow_everyone=False):
    ov = {
        "authorizer.class.name": AUTHORIZER,
        "super.users": SUPER_USERS,
        "sasl.enabled.mechanisms": "PLAIN",
        f"listener.name.{SASL.lower()}.plain.sasl.jaas.config": JAAS,
        # One partition each: the coordinators load in a moment.
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    if allow_everyone:
        ov["allow.everyone.if.no.acl.found"] = "true"
    return ov


def start_acl_broker(factory, allow_everyone=False):
    """PLAINTEXT (ANONYMOUS, a super user) first, then SASL_PLAINTEXT; the
    broker gets .sasl_port and .sasl_bootstrap."""
    b = su.start_broker(factory, [(SASL, SASL)], acl_overrides(allow_everyone))
    b.sasl_port = b.ports[SASL]
    b.sasl_bootstrap = f"127.0.0.1:{b.sasl_port}"
    return b


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --- wire constants ---------------------------------------------------------------

# Error codes.
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
TOPIC_ALREADY_EXISTS = 36
CONCURRENT_TRANSACTIONS = 51
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
SECURITY_DISABLED = 54
MEMBER_ID_REQUIRED = 79
RETRIABLE = {
    UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
    COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS,
}

# ANY (1) in every ACL enum: resource type, pattern type, operation and
# permission type filters.
ANY = 1
# Resource types (org.apache.kafka.common.resource.ResourceType).
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
# Pattern types.
MATCH, LITERAL, PREFIXED = 2, 3, 4
# Operations (AclOperation).
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS = 13, 14
# Permission types.
DENY, ALLOW = 2, 3
CLUSTER_NAME = "kafka-cluster"
# Config resource types (DescribeConfigs / AlterConfigs).
CONFIG_TOPIC, CONFIG_BROKER = 2, 4
# IncrementalAlterConfigs operations.
OP_SET = 0


def nstring(s):
    return i16(-1) if s is None else string(s)


def array(items):
    return i32(len(items)) + b"".join(items)


# --- the raw SASL client -----------------------------------------------------------


class Client:
    """One connection to the SASL listener, logged in with PLAIN as `user`
    (ApiVersions, SaslHandshake v1, SaslAuthenticate v1)."""

    def __init__(self, port, user, timeout_s=30.0):
        self.user = user
        self.conn = su.RawConn(port, timeout_s=timeout_s)
        self.conn.api_versions()
        err, mechs = self.conn.handshake("PLAIN")
        assert err == NONE, (err, mechs)
        err, msg, _, _ = self.conn.authenticate(su.plain_token(user, USERS[user]))
        assert err == NONE, f"login of {user}: {err} {msg}"

    def call(self, api_key, version, body, flexible=False):
        return self.conn.call(api_key, version, body, flexible)

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --- data APIs ---------------------------------------------------------------------


def records(n, tag="acl"):
    return [(f"{tag}-k{i}".encode(), f"{tag}-v{i}".encode(), []) for i in range(n)]


def produce(c, topic, partition=0, n=1, transactional_id=None, attributes=0, producer_id=-1,
            epoch=-1, base_sequence=-1, acks=-1):
    """Produce v3, one batch of n records: (error, base offset)."""
    batch = cu.record_batch(records(n), int(time.time() * 1000), attributes=attributes,
                            producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence)
    body = (nstring(transactional_id) + i16(acks) + i32(10000)
            + array([string(topic) + array([i32(partition) + i32(len(batch)) + batch])]))
    r = c.call(0, 3, body)
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            idx = r.i32()
            err = r.i16()
            base = r.i64()
            r.i64()
            out[(name, idx)] = (err, base)
    r.i32()  # throttle
    assert list(out) == [(topic, partition)], out
    return out[(topic, partition)]


def fetch(c, topic, partition=0, offset=0):
    """Fetch v4 (read_uncommitted, no wait): (error, high watermark, number
    of records in whole batches)."""
    body = (i32(-1) + i32(0) + i32(0) + i32(1 << 20) + i8(0)
            + array([string(topic) + array([i32(partition) + i64(offset) + i32(1 << 20)])]))
    r = c.call(1, 4, body)
    r.i32()  # throttle
    out = []
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            idx = r.i32()
            err = r.i16()
            hw = r.i64()
            r.i64()
            n_aborted = r.i32()
            r.take(16 * max(n_aborted, 0))
            size = r.i32()
            data = r.take(size) if size > 0 else b""
            out.append((name, idx, err, hw, _count_records(data)))
    assert [(n, p) for n, p, *_ in out] == [(topic, partition)], out
    return out[0][2:]


def _count_records(data):
    """Records in the whole batches of a Fetch records field (the count at
    byte 57 of each magic-2 batch header)."""
    return sum(int.from_bytes(data[pos + 57:pos + 61], "big") for pos, _ in _batch_positions(data))


def _batch_positions(data):
    out = []
    pos = 0
    while pos + 61 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
        if pos + size > len(data):
            break
        out.append((pos, size))
        pos += size
    return out


def list_offsets(c, topic, partition=0, timestamp=-1):
    """ListOffsets v1: (error, timestamp, offset)."""
    body = i32(-1) + array([string(topic) + array([i32(partition) + i64(timestamp)])])
    r = c.call(2, 1, body)
    out = []
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            out.append((name, r.i32(), r.i16(), r.i64(), r.i64()))
    assert [(n, p) for n, p, *_ in out] == [(topic, partition)], out
    return out[0][2:]


def metadata(c, topics=None, allow_auto=False):
    """Metadata v4: [(name, error, is_internal, [(partition, error, leader)])]
    in response order (topics=None: all topics)."""
    body = (i32(-1) if topics is None else array([string(t) for t in topics])) + i8(1 if allow_auto else 0)
    r = c.call(3, 4, body)
    r.i32()  # throttle
    for _ in range(r.i32()):
        r.i32()
        r.string()
        r.i32()
        r.string()
    r.string()  # cluster id
    r.i32()  # controller
    out = []
    for _ in range(r.i32()):
        err = r.i16()
        name = r.string()
        internal = r.i8() == 1
        parts = []
        for _ in range(r.i32()):
            perr = r.i16()
            idx = r.i32()
            leader = r.i32()
            for _ in range(2):  # replicas, isr
                for _ in range(r.i32()):
                    r.i32()
            parts.append((idx, perr, leader))
        out.append((name, err, internal, parts))
    return out


def metadata_errors(c, topics=None, allow_auto=False):
    """{name: error} of a Metadata v4 response (names unique)."""
    md = metadata(c, topics, allow_auto)
    out = {name: err for name, err, _, _ in md}
    assert len(out) == len(md), md
    return out


# --- admin APIs ----------------------------------------------------------------------


def create_topics(c, names, partitions=1, validate_only=False):
    """CreateTopics v2: {name: (error, message)}."""
    body = array([string(n) + i32(partitions) + i16(1) + i32(0) + i32(0) for n in names])
    body += i32(30000) + i8(1 if validate_only else 0)
    r = c.call(19, 2, body)
    r.i32()
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        out[name] = (r.i16(), r.string())
    return out


def delete_topics(c, names):
    """DeleteTopics v1: {name: error}."""
    r = c.call(20, 1, array([string(n) for n in names]) + i32(30000))
    r.i32()
    return {r.string(): r.i16() for _ in range(r.i32())}


def create_partitions(c, topic, count):
    """CreatePartitions v0 (validate_only=false): (error, message)."""
    body = array([string(topic) + i32(count) + i32(-1)]) + i32(30000) + i8(0)
    r = c.call(37, 0, body)
    r.i32()
    out = [(r.string(), r.i16(), r.string()) for _ in range(r.i32())]
    assert [o[0] for o in out] == [topic], out
    return out[0][1:]


def delete_records(c, topic, partition, offset):
    """DeleteRecords v0: (error, low watermark)."""
    body = array([string(topic) + array([i32(partition) + i64(offset)])]) + i32(30000)
    r = c.call(21, 0, body)
    r.i32()
    out = []
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            idx = r.i32()
            low = r.i64()
            out.append((name, idx, r.i16(), low))
    assert [(n, p) for n, p, *_ in out] == [(topic, partition)], out
    return out[0][2], out[0][3]


def describe_configs(c, resources):
    """DescribeConfigs v1 (all keys): {(type, name): (error, message,
    {key: value})}."""
    body = array([i8(t) + string(n) + i32(-1) for t, n in resources]) + i8(0)
    r = c.call(32, 1, body)
    r.i32()
    out = {}
    for _ in range(r.i32()):
        err = r.i16()
        msg = r.string()
        rtype = r.i8()
        name = r.string()
        configs = {}
        for _ in range(r.i32()):
            key = r.string()
            configs[key] = r.string()
            r.i8()
            r.i8()
            r.i8()
            for _ in range(r.i32()):
                r.string()
                r.string()
                r.i8()
        out[(rtype, name)] = (err, msg, configs)
    assert len(out) == len(resources), out
    return out


def alter_configs(c, resources, validate_only=False):
    """AlterConfigs v0; resources [(type, name, {key: value})]:
    [(type, name, error, message)] in response order."""
    body = array([
        i8(t) + string(n) + array([string(k) + nstring(v) for k, v in cfg.items()])
        for t, n, cfg in resources
    ]) + i8(1 if validate_only else 0)
    return _alter_configs_response(c.call(33, 0, body))


def incremental_alter_configs(c, resources, validate_only=False):
    """IncrementalAlterConfigs v0, every key SET; resources [(type, name,
    {key: value})]: [(type, name, error, message)]."""
    body = array([
        i8(t) + string(n) + array([string(k) + i8(OP_SET) + nstring(v) for k, v in cfg.items()])
        for t, n, cfg in resources
    ]) + i8(1 if validate_only else 0)
    return _alter_configs_response(c.call(44, 0, body))


def _alter_configs_response(r):
    r.i32()
    out = []
    for _ in range(r.i32()):
        err = r.i16()
        msg = r.string()
        out.append((r.i8(), r.string(), err, msg))
    return out


def init_producer_id(c, transactional_id=None, timeout_ms=60000):
    """InitProducerId v0: (error, producer id, epoch)."""
    r = c.call(22, 0, nstring(transactional_id) + i32(timeout_ms))
    r.i32()
    return r.i16(), r.i64(), r.i16()


def find_coordinator(c, key, key_type=0):
    """FindCoordinator v1 (0 group, 1 transaction): (error, message, node)."""
    r = c.call(10, 1, string(key) + i8(key_type))
    r.i32()
    err = r.i16()
    msg = r.string()
    return err, msg, r.i32()


def coordinator(c, key, key_type=0):
    """FindCoordinator v1 retried while the coordinator's topic is being
    made (the first FindCoordinator makes __consumer_offsets or
    __transaction_state and answers COORDINATOR_NOT_AVAILABLE):
    (error, message, node) once the error is not retriable."""
    deadline = time.monotonic() + 60
    while True:
        res = find_coordinator(c, key, key_type)
        if res[0] not in RETRIABLE:
            return res
        assert time.monotonic() < deadline, f"FindCoordinator {key}: {res}"
        time.sleep(0.1)


# --- groups ----------------------------------------------------------------------------

# A ConsumerProtocolSubscription v0 with no topics (as group_raw).
SUBSCRIPTION = i16(0) + i32(0) + i32(-1)


def join_group(c, group, member_id=""):
    """JoinGroup v5 (a dynamic member is asked for a member id first):
    (error, generation, member id). Retried, with a FindCoordinator (which
    makes __consumer_offsets) in between, while the coordinator is not
    there yet; an authorization error comes before that check."""

    def once(mid):
        body = (string(group) + i32(10000) + i32(10000) + string(mid) + nstring(None)
                + string("consumer") + array([string("range") + i32(len(SUBSCRIPTION)) + SUBSCRIPTION]))
        r = c.call(11, 5, body)
        r.i32()
        err = r.i16()
        gen = r.i32()
        r.string()
        r.string()
        mid = r.string()
        return err, gen, mid

    deadline = time.monotonic() + 60
    while True:
        err, gen, mid = once(member_id)
        if err == MEMBER_ID_REQUIRED:
            err, gen, mid = once(mid)
        if err not in RETRIABLE:
            return err, gen, mid
        assert time.monotonic() < deadline, f"JoinGroup {group}: {err}"
        find_coordinator(c, group)
        time.sleep(0.1)


def heartbeat(c, group, generation, member_id):
    """Heartbeat v3: error."""
    r = c.call(12, 3, string(group) + i32(generation) + string(member_id) + nstring(None))
    r.i32()
    return r.i16()


def offset_commit(c, group, topic, partition=0, offset=0, generation=-1, member_id=""):
    """OffsetCommit v2: error of the one partition."""
    body = (string(group) + i32(generation) + string(member_id) + i64(-1)
            + array([string(topic) + array([i32(partition) + i64(offset) + nstring("")])]))
    r = c.call(8, 2, body)
    out = []
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            out.append((name, r.i32(), r.i16()))
    assert [(n, p) for n, p, _ in out] == [(topic, partition)], out
    return out[0][2]


def offset_fetch(c, group, topics=None):
    """OffsetFetch v3; topics {name: [partitions]} or None (all):
    (top-level error, {(topic, partition): (offset, error)})."""
    body = string(group) + (i32(-1) if topics is None else array([
        string(t) + array([i32(p) for p in parts]) for t, parts in topics.items()
    ]))
    r = c.call(9, 3, body)
    r.i32()
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            p = r.i32()
            off = r.i64()
            r.string()
            out[(name, p)] = (off, r.i16())
    return r.i16(), out


def list_groups(c):
    """ListGroups v1: (error, {group ids})."""
    r = c.call(16, 1, b"")
    r.i32()
    err = r.i16()
    groups = set()
    for _ in range(r.i32()):
        groups.add(r.string())
        r.string()
    return err, groups


def describe_groups(c, groups):
    """DescribeGroups v1: [(group, error, state)] in response order."""
    r = c.call(15, 1, array([string(g) for g in groups]))
    r.i32()
    out = []
    for _ in range(r.i32()):
        err = r.i16()
        gid = r.string()
        state = r.string()
        r.string()
        r.string()
        for _ in range(r.i32()):
            r.string()
            r.string()
            r.string()
            r.take(r.i32())
            r.take(r.i32())
        out.append((gid, err, state))
    return out


def delete_groups(c, groups):
    """DeleteGroups v0: {group: error}."""
    r = c.call(42, 0, array([string(g) for g in groups]))
    r.i32()
    return {r.string(): r.i16() for _ in range(r.i32())}


# --- ACL APIs --------------------------------------------------------------------------


def binding(principal, op, rtype, name, pattern=LITERAL, perm=ALLOW, host="*"):
    """An ACL binding tuple (resource type, name, pattern type, principal,
    host, operation, permission type); principal a bare user name or
    "Type:name"."""
    if ":" not in principal:
        principal = f"User:{principal}"
    return (rtype, name, pattern, principal, host, op, perm)


def allow(principal, op, rtype, name, pattern=LITERAL, host="*"):
    return binding(principal, op, rtype, name, pattern, ALLOW, host)


def deny(principal, op, rtype, name, pattern=LITERAL, host="*"):
    return binding(principal, op, rtype, name, pattern, DENY, host)


def _binding_bytes(b):
    rtype, name, pattern, principal, host, op, perm = b
    return i8(rtype) + string(name) + i8(pattern) + string(principal) + string(host) + i8(op) + i8(perm)


def _filter_bytes(f):
    rtype, name, pattern, principal, host, op, perm = f
    return i8(rtype) + nstring(name) + i8(pattern) + nstring(principal) + nstring(host) + i8(op) + i8(perm)


ANY_FILTER = (ANY, None, ANY, None, None, ANY, ANY)


def create_acls(c, bindings):
    """CreateAcls v1: [(error, message)] in request order."""
    r = c.call(30, 1, array([_binding_bytes(b) for b in bindings]))
    r.i32()
    return [(r.i16(), r.string()) for _ in range(r.i32())]


def delete_acls(c, filters):
    """DeleteAcls v1: [(error, message, {matching bindings}, {(error,
    message) of the matching bindings})] per filter."""
    r = c.call(31, 1, array([_filter_bytes(f) for f in filters]))
    r.i32()
    out = []
    for _ in range(r.i32()):
        err = r.i16()
        msg = r.string()
        matched, results = set(), set()
        for _ in range(r.i32()):
            results.add((r.i16(), r.string()))
            rtype = r.i8()
            name = r.string()
            pattern = r.i8()
            principal = r.string()
            host = r.string()
            op = r.i8()
            perm = r.i8()
            matched.add((rtype, name, pattern, principal, host, op, perm))
        out.append((err, msg, matched, results))
    return out


def describe_acls(c, flt=ANY_FILTER):
    """DescribeAcls v1: (error, message, {bindings})."""
    r = c.call(29, 1, _filter_bytes(flt))
    r.i32()
    err = r.i16()
    msg = r.string()
    out = set()
    for _ in range(r.i32()):
        rtype = r.i8()
        name = r.string()
        pattern = r.i8()
        for _ in range(r.i32()):
            principal = r.string()
            host = r.string()
            op = r.i8()
            perm = r.i8()
            out.add((rtype, name, pattern, principal, host, op, perm))
    return err, msg, out




def wait_acls(admin, present=(), absent=()):
    """Until the broker's DescribeAcls (what its authorizer holds) lists
    every binding of `present` and none of `absent`: with KRaft the
    controller commits an ACL change before the broker applies it."""
    present, absent = set(present), set(absent)

    def seen():
        err, msg, acls = describe_acls(admin)
        assert err == NONE, (err, msg)
        return present <= acls and not (absent & acls)

    wait_for(seen, f"ACLs present {sorted(present)} absent {sorted(absent)}")


class Acls:
    """ACLs a test adds as admin (or makes with kafka-acls and tracks here);
    remove_all (the fixture's teardown) deletes them again, so each test
    starts from the ACLs it makes."""

    def __init__(self, admin):
        self.admin = admin
        self.added = []

    def track(self, *bindings):
        self.added += [b for b in bindings if b not in self.added]

    def add(self, *bindings):
        res = create_acls(self.admin, bindings)
        # Success: message "" (the schema's default; both Kafka modes
        # leave it), not null.
        assert res == [(NONE, "")] * len(bindings), res
        self.track(*bindings)
        wait_acls(self.admin, present=bindings)

    def remove(self, *bindings):
        """DeleteAcls with each binding as an exact filter; each must match
        just itself."""
        res = delete_acls(self.admin, bindings)
        assert len(res) == len(bindings), res
        for (err, msg, matched, results), b in zip(res, bindings):
            # Success: message null, for the filter and each deleted ACL.
            assert (err, msg, matched, results) == (NONE, None, {b}, {(NONE, None)}), (b, err, msg, matched, results)
        self.added = [b for b in self.added if b not in bindings]
        wait_acls(self.admin, absent=bindings)

    def remove_all(self):
        if self.added:
            res = delete_acls(self.admin, self.added)
            assert all(err == NONE for err, *_ in res), res
            wait_acls(self.admin, absent=self.added)
            self.added = []


# --- topics and groups made by admin ------------------------------------------------


def make_topics(admin, names, partitions=1, n_records=0):
    """CreateTopics as admin, then until every partition has a leader and
    takes a produce; n_records records produced to partition 0 of each."""
    res = create_topics(admin, names, partitions)
    assert res == {n: (NONE, None) for n in names}, res
    for name in names:
        for p in range(partitions):
            wait_for(lambda: list_offsets(admin, name, p)[0] == NONE, f"{name}-{p} led")
        if n_records:
            err, _ = produce(admin, name, 0, n_records)
            assert err == NONE, (name, err)
    return names


def group_with_offsets(admin, group, topic):
    """A group (Empty, protocol type "") made by a standalone OffsetCommit
    as admin; retried while the coordinator loads."""

    def committed():
        # FindCoordinator makes __consumer_offsets; OffsetCommit does not.
        if find_coordinator(admin, group)[0] != NONE:
            return False
        err = offset_commit(admin, group, topic, 0, 1)
        assert err == NONE or err in RETRIABLE, err
        return err == NONE

    wait_for(committed, f"offset commit of {group}", timeout_s=60, interval_s=0.2)


def txn_ready(c, txn_id):
    """InitProducerId (transactional when txn_id is not None), retried while
    the transaction coordinator loads (FindCoordinator first: it makes
    __transaction_state) and, for an idempotent producer, while the broker
    fetches a block of producer ids: (error, pid, epoch) once the error is
    not a retriable one."""
    deadline = time.monotonic() + 60
    while True:
        if txn_id is not None:
            err = find_coordinator(c, txn_id, 1)[0]
            if err != NONE and err not in RETRIABLE:
                return err, -1, -1
        res = init_producer_id(c, txn_id)
        if res[0] not in RETRIABLE:
            return res
        assert time.monotonic() < deadline, f"InitProducerId {txn_id}: {res}"
        time.sleep(0.1)


# --- kafka-acls ------------------------------------------------------------------------


def kafka_acls(bootstrap, *args, command_config=None, timeout_s=90):
    """kafka-acls.sh --bootstrap-server `bootstrap` [--command-config f]
    `args`: the CompletedProcess (text), whatever its exit status."""
    import subprocess

    from conftest import kafka_classpath
    from test_dynamic_config import _tool_log4j

    cmd = [
        "java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto",
        f"-Dlog4j.configuration=file:{_tool_log4j()}", "-cp", kafka_classpath(),
        "kafka.admin.AclCommand", "--bootstrap-server", bootstrap,
    ]
    if command_config is not None:
        cmd += ["--command-config", str(command_config)]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=timeout_s,
                          stdin=subprocess.DEVNULL)


def command_config(path, user):
    """An Admin client properties file logging in as `user` over SASL/PLAIN."""
    return su.write_java_props(path, {
        "security.protocol": SASL,
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                             f'username="{user}" password="{USERS[user]}";'),
    })


def resource_str(rtype, name, pattern="LITERAL"):
    return f"ResourcePattern(resourceType={rtype}, name={name}, patternType={pattern})"


def ace_str(principal, operation, permission="ALLOW", host="*"):
    return f"(principal={principal}, host={host}, operation={operation}, permissionType={permission})"


def parse_blocks(out, verb="Current"):
    """kafka-acls output as {resource string: {entry strings}}, checking the
    exact layout of each block, which Kafka 3.9 prints as

        <verb> ACLs for resource `<resource>`: ␠
        ␠⇥<entry>
        ⇥<entry>␠
        <empty line>

    (the first entry line starts with a space and a tab, the others with a
    tab, the last ends with a space; a one-entry block is "␠⇥<entry>␠").
    Entry and block order is Scala Set/Map order, so it is not compared.
    Lines outside blocks (the "ACLs for principal" headers) are returned as
    a list too: (blocks, other lines)."""
    lines = out.split("\n")
    assert lines[-1] == "", f"output does not end with a newline: {out!r}"
    lines = lines[:-1]
    head = f"{verb} ACLs for resource `"
    blocks, other = {}, []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith(head):
            other.append(line)
            i += 1
            continue
        assert line.endswith("`: "), repr(line)
        resource = line[len(head):-3]
        body = []
        i += 1
        while lines[i] != "":
            body.append(lines[i])
            i += 1
        i += 1  # the empty line
        assert body, f"empty block for {resource}: {out!r}"
        assert body[0].startswith(" \t"), repr(body[0])
        assert all(b.startswith("\t") for b in body[1:]), body
        assert body[-1].endswith(" ") and not any(b.endswith(" ") for b in body[:-1]), body
        entries = {b.strip(" \t") for b in body}
        assert len(entries) == len(body), body
        assert resource not in blocks, f"{resource} printed twice: {out!r}"
        blocks[resource] = entries
    return blocks, other


@contextlib.contextmanager
def clients(port, *users):
    cs = [Client(port, u) for u in users]
    try:
        yield cs
    finally:
        for c in cs:
            c.close()
