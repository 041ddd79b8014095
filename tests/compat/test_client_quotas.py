"""Client quotas on one broker (issue 18): Kafka's own kafka-configs tool
(kafka.admin.ConfigCommand from the 3.9.1 jars) for users, client ids,
(user, client id) pairs and their defaults; raw DescribeClientQuotas (48)
and AlterClientQuotas (49), v0 and v1, for filters, errors and
validate_only; and enforcement: a Java producer (kafka-clients 3.9.1,
tests/compat/java QuotaLoad), a librdkafka producer and a Java consumer
held to 1 MiB/s while a client with another id keeps its full rate.

How Kafka holds a client to a quota Q with the default quota.window.num=11
and quota.window.size.seconds=1 (measured on Kafka 3.9.1): the rate is the
sum of the samples divided by at least 10 s, so a client that sends as fast
as it can gets ~10*Q through in its first second, and is then throttled
(throttle_time_ms ~1000 per request, the connection muted) until that first
sample leaves the window ~11 s after it started; it then bursts again. So
the tests compare, over the first 10.5 s after the client starts (inside
one window span, before the second burst): the average rate (~Q), the
burst (most of it in the first seconds) and the rate after the burst (far
below Q).

KSHARD_TEST_TARGET=kafka proves every assertion against Apache Kafka 3.9.1,
a KRaft node in this suite: its AlterClientQuotas/DescribeClientQuotas
error texts differ from the ZooKeeper mode's where both modes use their own
words (fractional LONG values, ip combined with a user, Describe filter
errors), so those are compared by error code and the part both share;
tests/cluster/test_client_quotas_cluster.py checks the ZooKeeper mode's
exact texts and znodes.
"""

import json
import os
import struct
import subprocess
import time
from pathlib import Path

import pytest

import compat_util as cu
from test_dynamic_config import configs_fail, configs_ok, kafka_configs  # noqa: F401

TARGET = os.environ.get("KSHARD_TEST_TARGET", "kshard")
KAFKA_VERSION = os.environ.get("KSHARD_KAFKA_VERSION", "3.9.1")
CACHE = Path(os.environ.get("KSHARD_CACHE_DIR", Path.home() / ".cache" / "kshard"))
KAFKA_LIBS = CACHE / f"kafka-{KAFKA_VERSION}" / "libs"
JAVA_DIR = Path(__file__).resolve().parent / "java"
JAVA_CLIENT_VERSION = "3.9.1"
QUOTA_LOAD_SOURCE = JAVA_DIR / "src" / "main" / "java" / "kshard" / "compat" / "QuotaLoad.java"

MiB = 1 << 20
QUOTA = MiB  # producer_byte_rate / consumer_byte_rate under test: 1 MiB/s

DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42


# --- raw DescribeClientQuotas / AlterClientQuotas ------------------------------


class Conn:
    def __init__(self, port, timeout_s=30.0):
        self.sock = cu.connect("127.0.0.1", port, timeout_s)
        self.corr = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()

    def call(self, api_key, version, body, flexible):
        self.corr += 1
        header = (cu.request_header_v2 if flexible else cu.request_header_v1)(api_key, version, self.corr)
        self.sock.sendall(cu.frame(header + body))
        r = cu.Reader(cu.recv_frame(self.sock))
        assert r.i32() == self.corr
        if flexible:
            r.skip_tags()
        return r


def _str(s, flexible):
    if not flexible:
        return cu.string(s)
    return cu.uvarint(0) if s is None else cu.compact_string(s)


def _array(items, flexible):
    return cu.uvarint(len(items) + 1) if flexible else cu.i32(len(items))


def _tags(flexible):
    return cu.uvarint(0) if flexible else b""


def _rstr(r, flexible):
    return r.compact_string() if flexible else r.string()


def _rlen(r, flexible):
    """Array length; None for a null array."""
    n = r.uvarint() - 1 if flexible else r.i32()
    return None if n < 0 else n


def _f64(r):
    return struct.unpack(">d", r.take(8))[0]


def entity(**names):
    """An entity as a frozenset of (type, name) pairs: entity(user="alice",
    client_id=None) is (user alice, the default client id)."""
    return frozenset((k.replace("_", "-"), v) for k, v in names.items())


def describe_quotas(port, components, strict=False, version=0):
    """DescribeClientQuotas: components [(entity type, match type, match)].
    Returns (error, message, {entity: {key: value}} or None)."""
    flex = version >= 1
    body = _array(components, flex)
    for etype, mtype, match in components:
        body += _str(etype, flex) + cu.i8(mtype) + _str(match, flex) + _tags(flex)
    body += cu.i8(1 if strict else 0) + _tags(flex)
    with Conn(port) as c:
        r = c.call(DESCRIBE_CLIENT_QUOTAS, version, body, flex)
    r.i32()  # throttle
    error, message = r.i16(), _rstr(r, flex)
    n = _rlen(r, flex)
    if n is None:
        return error, message, None
    entries = {}
    for _ in range(n):
        ent = []
        for _ in range(_rlen(r, flex)):
            ent.append((_rstr(r, flex), _rstr(r, flex)))
            if flex:
                r.skip_tags()
        values = {}
        for _ in range(_rlen(r, flex)):
            k = _rstr(r, flex)
            values[k] = _f64(r)
            if flex:
                r.skip_tags()
        if flex:
            r.skip_tags()
        key = frozenset(ent)
        assert key not in entries, f"entity {sorted(ent)} listed twice"
        entries[key] = values
    return error, message, entries


def alter_quotas(port, entries, validate_only=False, version=0):
    """AlterClientQuotas: entries [(entity pairs [(type, name)], ops [(key,
    value or None to remove)])]. Returns {entity: (error, message)}."""
    flex = version >= 1
    body = _array(entries, flex)
    for ent, ops in entries:
        body += _array(ent, flex)
        for etype, name in ent:
            body += _str(etype, flex) + _str(name, flex) + _tags(flex)
        body += _array(ops, flex)
        for key, value in ops:
            body += _str(key, flex) + struct.pack(">d", 0.0 if value is None else value)
            body += cu.i8(1 if value is None else 0) + _tags(flex)
        body += _tags(flex)
    body += cu.i8(1 if validate_only else 0) + _tags(flex)
    with Conn(port) as c:
        r = c.call(ALTER_CLIENT_QUOTAS, version, body, flex)
    r.i32()  # throttle
    out = {}
    for _ in range(_rlen(r, flex)):
        error, message = r.i16(), _rstr(r, flex)
        ent = []
        for _ in range(_rlen(r, flex)):
            ent.append((_rstr(r, flex), _rstr(r, flex)))
            if flex:
                r.skip_tags()
        if flex:
            r.skip_tags()
        out[frozenset(ent)] = (error, message)
    return out


def all_quotas(port):
    error, message, entries = describe_quotas(port, [], strict=False)
    # Both modes leave the success ErrorMessage at the generated default, "".
    assert (error, message) == (NONE, ""), (error, message)
    return entries


def wait_quotas(port, want, timeout_s=15):
    """All quotas of the broker become `want` ({entity: {key: value}}):
    immediate on a ZooKeeper-mode broker, a moment after the response on a
    KRaft one (the controller's record reaches the broker's metadata)."""
    deadline = time.monotonic() + timeout_s
    while True:
        have = all_quotas(port)
        if have == want:
            return
        assert time.monotonic() < deadline, f"quotas {have}, want {want}"
        time.sleep(0.05)


def set_quota(port, ent, **values):
    """Sets quotas on one entity (pairs) and waits until the broker lists them."""
    res = alter_quotas(port, [(list(ent), list(values.items()))])
    assert res == {frozenset(ent): (NONE, None)}, res
    deadline = time.monotonic() + 15
    while all_quotas(port).get(frozenset(ent)) != {k: float(v) for k, v in values.items()}:
        assert time.monotonic() < deadline, f"{ent} never showed {values}: {all_quotas(port)}"
        time.sleep(0.05)
    # A KRaft broker's quota managers learn the change from the same metadata
    # publication that Describe reads; give them a moment.
    time.sleep(0.3)


@pytest.fixture(autouse=True)
def no_quotas_left(broker):
    """Every test starts and ends with no quotas on the broker (a left-over
    default quota would throttle every later client)."""
    clear_quotas(broker.port)
    yield
    clear_quotas(broker.port)


def clear_quotas(port):
    have = all_quotas(port)
    if have:
        res = alter_quotas(port, [(list(ent), [(k, None) for k in values]) for ent, values in have.items()])
        assert all(v == (NONE, None) for v in res.values()), res
        wait_quotas(port, {})


# --- Kafka's kafka-configs tool ----------------------------------------------

# kafka_configs, configs_ok and configs_fail are test_dynamic_config's.


def described(bootstrap, *entity_args):
    """The set of lines kafka-configs --describe prints (their order follows
    a hash map's)."""
    out = configs_ok(bootstrap, *entity_args, "--describe")
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(set(lines)) == len(lines), out
    return set(lines)


def wait_described(bootstrap, entity_args, want, timeout_s=20):
    deadline = time.monotonic() + timeout_s
    while True:
        have = described(bootstrap, *entity_args)
        if have == want:
            return
        assert time.monotonic() < deadline, f"describe {entity_args}: {have}, want {want}"
        time.sleep(0.2)


USER_ALICE = ["--entity-type", "users", "--entity-name", "alice"]
CLIENT_APP1 = ["--entity-type", "clients", "--entity-name", "app1"]
ALICE_APP1 = USER_ALICE + CLIENT_APP1
USER_DEFAULT = ["--entity-type", "users", "--entity-default"]
CLIENT_DEFAULT = ["--entity-type", "clients", "--entity-default"]
DEFAULT_DEFAULT = USER_DEFAULT + CLIENT_DEFAULT
ALICE_CLIENT_DEFAULT = USER_ALICE + CLIENT_DEFAULT

L_ALICE = "Quota configs for user-principal 'alice' are consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0"
L_APP1 = "Quota configs for client-id 'app1' are request_percentage=23.45, producer_byte_rate=1024.0"
L_ALICE_APP1 = "Quota configs for user-principal 'alice', client-id 'app1' are consumer_byte_rate=4096.0"
L_USER_DEFAULT = "Quota configs for the default user-principal are producer_byte_rate=5000.0"
L_CLIENT_DEFAULT = ("Quota configs for the default client-id are consumer_byte_rate=6000.0, "
                    "controller_mutation_rate=10.0")
L_DEFAULT_DEFAULT = "Quota configs for the default user-principal, the default client-id are producer_byte_rate=7000.0"
L_ALICE_CLIENT_DEFAULT = "Quota configs for user-principal 'alice', the default client-id are producer_byte_rate=8000.0"


def test_kafka_configs_quotas(broker):
    bs = broker.bootstrap
    alters = [
        (USER_ALICE, "producer_byte_rate=1048576,consumer_byte_rate=2097152", "Completed updating config for user alice."),
        (CLIENT_APP1, "producer_byte_rate=1024,request_percentage=23.45", "Completed updating config for client app1."),
        (ALICE_APP1, "consumer_byte_rate=4096", "Completed updating config for user alice."),
        (USER_DEFAULT, "producer_byte_rate=5000", "Completed updating default config for users in the cluster."),
        (CLIENT_DEFAULT, "consumer_byte_rate=6000,controller_mutation_rate=10",
         "Completed updating default config for clients in the cluster."),
        (DEFAULT_DEFAULT, "producer_byte_rate=7000", "Completed updating default config for users in the cluster."),
        (ALICE_CLIENT_DEFAULT, "producer_byte_rate=8000", "Completed updating config for user alice."),
    ]
    for args, add, done in alters:
        assert configs_ok(bs, *args, "--alter", "--add-config", add).strip() == done

    # The broker's own view, straight from DescribeClientQuotas.
    wait_quotas(broker.port, {
        entity(user="alice"): {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
        entity(client_id="app1"): {"producer_byte_rate": 1024.0, "request_percentage": 23.45},
        entity(user="alice", client_id="app1"): {"consumer_byte_rate": 4096.0},
        entity(user=None): {"producer_byte_rate": 5000.0},
        entity(client_id=None): {"consumer_byte_rate": 6000.0, "controller_mutation_rate": 10.0},
        entity(user=None, client_id=None): {"producer_byte_rate": 7000.0},
        entity(user="alice", client_id=None): {"producer_byte_rate": 8000.0},
    })

    # --describe with a name or --entity-default: exactly that entity.
    assert described(bs, *USER_ALICE) == {L_ALICE}
    assert described(bs, *CLIENT_APP1) == {L_APP1}
    assert described(bs, *ALICE_APP1) == {L_ALICE_APP1}
    assert described(bs, *USER_DEFAULT) == {L_USER_DEFAULT}
    assert described(bs, *CLIENT_DEFAULT) == {L_CLIENT_DEFAULT}
    assert described(bs, *DEFAULT_DEFAULT) == {L_DEFAULT_DEFAULT}
    # An entity type without a name: every entity of exactly those types,
    # the default one included.
    assert described(bs, "--entity-type", "users") == {L_ALICE, L_USER_DEFAULT}
    assert described(bs, "--entity-type", "clients") == {L_APP1, L_CLIENT_DEFAULT}
    assert described(bs, "--entity-type", "users", "--entity-type", "clients") == {
        L_ALICE_APP1, L_DEFAULT_DEFAULT, L_ALICE_CLIENT_DEFAULT}
    assert described(bs, *USER_ALICE, "--entity-type", "clients") == {L_ALICE_APP1, L_ALICE_CLIENT_DEFAULT}
    assert described(bs, "--entity-type", "users", "--entity-name", "bob") == set()

    # --delete-config: one key, then the last keys (the entity disappears).
    assert configs_ok(bs, *CLIENT_APP1, "--alter", "--delete-config", "request_percentage").strip() == \
        "Completed updating config for client app1."
    wait_described(bs, CLIENT_APP1, {"Quota configs for client-id 'app1' are producer_byte_rate=1024.0"})
    # The tool refuses to delete a key the entity does not have (it asks the
    # broker first).
    assert "Invalid config(s): consumer_byte_rate" in configs_fail(
        bs, *CLIENT_APP1, "--alter", "--delete-config", "consumer_byte_rate")
    # A fractional LONG quota is refused by the broker (ZooKeeper mode:
    # "Configuration producer_byte_rate must be a LONG value", KRaft:
    # "producer_byte_rate cannot be a fractional value.").
    err = configs_fail(bs, *CLIENT_APP1, "--alter", "--add-config", "producer_byte_rate=1.5")
    assert "org.apache.kafka.common.errors.InvalidRequestException: " in err and "producer_byte_rate" in err, err
    assert described(bs, *CLIENT_APP1) == {"Quota configs for client-id 'app1' are producer_byte_rate=1024.0"}

    for args, keys in [
        (CLIENT_APP1, "producer_byte_rate"),
        (USER_ALICE, "producer_byte_rate,consumer_byte_rate"),
        (ALICE_APP1, "consumer_byte_rate"),
        (USER_DEFAULT, "producer_byte_rate"),
        (CLIENT_DEFAULT, "consumer_byte_rate,controller_mutation_rate"),
        (DEFAULT_DEFAULT, "producer_byte_rate"),
        (ALICE_CLIENT_DEFAULT, "producer_byte_rate"),
    ]:
        configs_ok(bs, *args, "--alter", "--delete-config", keys)
    wait_quotas(broker.port, {})
    assert described(bs, "--entity-type", "users") == set()
    assert described(bs, "--entity-type", "users", "--entity-type", "clients") == set()


# --- raw requests ---------------------------------------------------------------

ALICE = [("user", "alice")]
APP1 = [("client-id", "app1")]
ALICE_APP1_E = [("user", "alice"), ("client-id", "app1")]
DEF_USER = [("user", None)]
DEF_CLIENT = [("client-id", None)]
DEF_DEF = [("user", None), ("client-id", None)]

RAW_QUOTAS = {
    frozenset(ALICE): {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
    frozenset(APP1): {"producer_byte_rate": 1024.0, "request_percentage": 23.45},
    frozenset(ALICE_APP1_E): {"consumer_byte_rate": 4096.0},
    frozenset(DEF_USER): {"producer_byte_rate": 5000.0},
    frozenset(DEF_CLIENT): {"controller_mutation_rate": 10.0},
    frozenset(DEF_DEF): {"producer_byte_rate": 7000.0},
}


@pytest.mark.parametrize("version", [0, 1])
def test_alter_and_describe_filters(broker, version):
    port = broker.port
    entries = [(list(e), list(v.items())) for e, v in RAW_QUOTAS.items()]
    res = alter_quotas(port, entries, version=version)
    assert res == {e: (NONE, None) for e in RAW_QUOTAS}, res
    wait_quotas(port, RAW_QUOTAS)
    sub = lambda *ents: {frozenset(e): RAW_QUOTAS[frozenset(e)] for e in ents}  # noqa: E731

    def check(components, strict, want):
        got = describe_quotas(port, components, strict, version)
        assert got == (NONE, "", want), f"filter {components} strict={strict}: {got}"

    # No components: everything (contains), nothing (containsOnly).
    check([], False, RAW_QUOTAS)
    check([], True, {})
    # ofEntity: that name; not strict also matches entities with more types.
    check([("user", MATCH_EXACT, "alice")], True, sub(ALICE))
    check([("user", MATCH_EXACT, "alice")], False, sub(ALICE, ALICE_APP1_E))
    check([("client-id", MATCH_EXACT, "app1")], True, sub(APP1))
    check([("client-id", MATCH_EXACT, "app1")], False, sub(APP1, ALICE_APP1_E))
    check([("user", MATCH_EXACT, "alice"), ("client-id", MATCH_EXACT, "app1")], True, sub(ALICE_APP1_E))
    check([("user", MATCH_EXACT, "bob")], False, {})
    # ofDefaultEntity: only the default name.
    check([("user", MATCH_DEFAULT, None)], True, sub(DEF_USER))
    check([("user", MATCH_DEFAULT, None)], False, sub(DEF_USER, DEF_DEF))
    check([("client-id", MATCH_DEFAULT, None)], False, sub(DEF_CLIENT, DEF_DEF))
    check([("user", MATCH_DEFAULT, None), ("client-id", MATCH_DEFAULT, None)], True, sub(DEF_DEF))
    # ofEntityType: any name of that type, the default included.
    check([("user", MATCH_SPECIFIED, None)], True, sub(ALICE, DEF_USER))
    check([("user", MATCH_SPECIFIED, None)], False, sub(ALICE, DEF_USER, ALICE_APP1_E, DEF_DEF))
    check([("client-id", MATCH_SPECIFIED, None)], True, sub(APP1, DEF_CLIENT))
    check([("user", MATCH_SPECIFIED, None), ("client-id", MATCH_SPECIFIED, None)], True, sub(ALICE_APP1_E, DEF_DEF))
    check([("user", MATCH_EXACT, "alice"), ("client-id", MATCH_SPECIFIED, None)], False, sub(ALICE_APP1_E))
    check([("ip", MATCH_SPECIFIED, None)], False, {})

    # Removing keys: the rest stays; removing the last key drops the entity;
    # removing a key the entity does not have is no error.
    res = alter_quotas(port, [(APP1, [("request_percentage", None), ("consumer_byte_rate", None)]),
                              (DEF_USER, [("producer_byte_rate", None)])], version=version)
    assert res == {frozenset(APP1): (NONE, None), frozenset(DEF_USER): (NONE, None)}, res
    want = dict(RAW_QUOTAS)
    want[frozenset(APP1)] = {"producer_byte_rate": 1024.0}
    del want[frozenset(DEF_USER)]
    wait_quotas(port, want)
    # Setting a key again replaces its value and keeps the others.
    assert alter_quotas(port, [(ALICE, [("producer_byte_rate", 3000.0)])], version=version) == {
        frozenset(ALICE): (NONE, None)}
    want[frozenset(ALICE)] = {"producer_byte_rate": 3000.0, "consumer_byte_rate": 2097152.0}
    wait_quotas(port, want)


def test_alter_errors(broker):
    port = broker.port
    cases = {
        # (entity, ops): (error code, exact message or a prefix ending in "...")
        "unknown_key": ([("client-id", "e-unknown")], [("foo", 1.0)], (INVALID_REQUEST, "Invalid configuration key foo")),
        # ZooKeeper mode: "Configuration producer_byte_rate must be a LONG
        # value"; KRaft: "producer_byte_rate cannot be a fractional value.".
        "fractional": ([("client-id", "e-fraction")], [("producer_byte_rate", 1048576.5)], (INVALID_REQUEST, None)),
        "negative": ([("client-id", "e-negative")], [("consumer_byte_rate", -5.0)], (INVALID_REQUEST, None)),
        "empty_entity": ([], [("producer_byte_rate", 1000.0)], (INVALID_REQUEST, "Invalid empty client quota entity")),
        "unknown_type": ([("group", "g1")], [("producer_byte_rate", 1000.0)],
                         (INVALID_REQUEST, "Unhandled client quota entity type: group")),
        "empty_user": ([("user", "")], [("producer_byte_rate", 1000.0)], (INVALID_REQUEST, "Empty user not supported")),
        # ZooKeeper mode: "... IP entity should not be used with user/client
        # ID entity."; KRaft: "... IP entity shouldnot be combined with User
        # or ClientId".
        "ip_with_user": ([("user", "e-ipuser"), ("ip", "127.0.0.1")], [("producer_byte_rate", 1000.0)],
                         (INVALID_REQUEST, "Invalid quota entity combination, IP entity should...")),
        # One bad key spoils the whole entity: nothing of it is stored.
        "partial": ([("client-id", "e-partial")], [("producer_byte_rate", 2048.0), ("foo", 1.0)],
                    (INVALID_REQUEST, "Invalid configuration key foo")),
        # Entries are independent: these two succeed next to the failures.
        "good": ([("client-id", "e-good")], [("consumer_byte_rate", 4096.0)], (NONE, None)),
        "remove_absent": ([("client-id", "e-remove")], [("foo", None)], (NONE, None)),
    }
    res = alter_quotas(port, [(e, ops) for e, ops, _ in cases.values()])
    assert set(res) == {frozenset(e) for e, _, _ in cases.values()}, res
    for name, (ent, _, (code, message)) in cases.items():
        got = res[frozenset(ent)]
        assert got[0] == code, f"{name}: {got}"
        if message is not None and message.endswith("..."):
            assert got[1] is not None and got[1].startswith(message[:-3]), f"{name}: {got}"
        elif message is not None or code == NONE:
            assert got[1] == message, f"{name}: {got}"
        else:
            assert got[1], f"{name}: {got}"
    assert "producer_byte_rate" in res[frozenset(cases["fractional"][0])][1]
    assert "consumer_byte_rate" in res[frozenset(cases["negative"][0])][1]
    wait_quotas(port, {entity(client_id="e-good"): {"consumer_byte_rate": 4096.0}})


def test_validate_only_writes_nothing(broker):
    port = broker.port
    for version in (0, 1):
        res = alter_quotas(port, [(APP1, [("producer_byte_rate", 1024.0)]), (DEF_USER, [("request_percentage", 50.0)])],
                           validate_only=True, version=version)
        assert res == {frozenset(APP1): (NONE, None), frozenset(DEF_USER): (NONE, None)}, res
        res = alter_quotas(port, [(APP1, [("foo", 1.0)])], validate_only=True, version=version)
        assert res == {frozenset(APP1): (INVALID_REQUEST, "Invalid configuration key foo")}, res
    # A real change after them: once it shows, the validations would have.
    assert alter_quotas(port, [(ALICE, [("consumer_byte_rate", 1000.0)])]) == {frozenset(ALICE): (NONE, None)}
    wait_quotas(port, {entity(user="alice"): {"consumer_byte_rate": 1000.0}})


def test_describe_filter_errors(broker):
    """Bad filters fail the whole Describe (a top-level error, entries null).
    The messages are the ZooKeeper mode's own in the cluster suite."""
    port = broker.port
    set_quota(port, APP1, producer_byte_rate=1024)
    for components, code in [
        ([("group", MATCH_SPECIFIED, None)], UNSUPPORTED_VERSION),
        ([("", MATCH_SPECIFIED, None)], INVALID_REQUEST),
        ([("user", MATCH_EXACT, "alice"), ("ip", MATCH_SPECIFIED, None)], INVALID_REQUEST),
        ([("user", MATCH_EXACT, "alice"), ("user", MATCH_EXACT, "bob")], INVALID_REQUEST),
    ]:
        for version in (0, 1):
            error, message, entries = describe_quotas(port, components, False, version)
            assert error == code and entries is None, (components, version, error, message, entries)
            assert message, (components, version, error, message)


# --- enforcement -------------------------------------------------------------


def quota_load_classpath():
    """kafka-clients 3.9.1 plus QuotaLoad: the Maven build's classes when they
    are current, else a javac build of the one source file into a scratch
    directory (scripts/setup.sh rebuilds only when a source is newer than
    Client.class)."""
    base = JAVA_DIR / "target" / f"kc-{JAVA_CLIENT_VERSION}"
    libs = base / "libs"
    if not libs.is_dir():
        pytest.fail(f"{libs} missing: run scripts/setup.sh")
    built = base / "classes" / "kshard" / "compat" / "QuotaLoad.class"
    if built.exists() and built.stat().st_mtime >= QUOTA_LOAD_SOURCE.stat().st_mtime:
        return f"{base / 'classes'}:{libs}/*"
    out = Path(f"/tmp/kshard-quota-load-{JAVA_CLIENT_VERSION}")
    cls = out / "kshard" / "compat" / "QuotaLoad.class"
    if not cls.exists() or cls.stat().st_mtime < QUOTA_LOAD_SOURCE.stat().st_mtime:
        out.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(["javac", "-d", str(out), "-cp", f"{libs}/*", str(QUOTA_LOAD_SOURCE)],
                             capture_output=True, text=True)
        assert res.returncode == 0, f"javac QuotaLoad failed:\n{res.stderr}"
    return f"{out}:{libs}/*"


def quota_load(mode, bootstrap, seconds, loads, timeout_s=90):
    """Runs kshard.compat.QuotaLoad; loads [(client id, topic, partition,
    max bytes or None[, start delay s])]. Returns their results, in order."""
    spec = ",".join(f"{c}:{t}:{p}:{m or 0}:{int(d[0] * 1000) if d else 0}" for c, t, p, m, *d in loads)
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto",
           "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", quota_load_classpath(), "kshard.compat.QuotaLoad",
           mode, "--bootstrap", bootstrap, "--seconds", str(seconds), "--loads", spec]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"QuotaLoad {mode} failed rc={r.returncode}:\n{r.stderr[-3000:]}"
    out = [json.loads(ln) for ln in r.stdout.splitlines() if ln.strip()]
    assert [(o["client_id"], o["topic"], o["partition"]) for o in out] == [tuple(x[:3]) for x in loads], out
    return out


# Measured over the first WINDOW_S seconds after the client starts: one quota
# window span (11 samples of 1 s), before the first sample expires and lets
# a second burst through.
WINDOW_S = 10.5
BURST_S = 3.0
# Bounds on Kafka 3.9.1 measurements (in the first 10.5 s: Java producer
# 10.6-11.0 MiB, librdkafka 10.6-11.05, Java consumer 8.8-9.8; after the
# first 3 s at most 0.12 MiB): the average is 0.83-1.05 x the quota, the rate
# after the burst under 0.02 x.
AVG_LOW, AVG_HIGH = 0.65, 1.3
BURST_MIN = 6 * MiB
AFTER_BURST_MAX_RATE = 0.25  # x the quota
UNTHROTTLED_MIN_RATE = 3  # x the quota
FREE_START_S = 4.0  # the unthrottled client starts while the other one is held


def timeline_bytes(buckets, bucket_ms, t_from, t_to):
    a, b = int(t_from * 1000 / bucket_ms), int(t_to * 1000 / bucket_ms)
    return sum(buckets[a:b])


def rate_profile(buckets, bucket_ms):
    """(bytes in the first WINDOW_S s, in the first BURST_S s, between them)
    and a per-second listing for messages."""
    total = timeline_bytes(buckets, bucket_ms, 0, WINDOW_S)
    burst = timeline_bytes(buckets, bucket_ms, 0, BURST_S)
    per_s = [round(timeline_bytes(buckets, bucket_ms, s, s + 1) / MiB, 2) for s in range(int(WINDOW_S) + 1)]
    return total, burst, total - burst, per_s


def assert_held_to_quota(what, buckets, bucket_ms):
    total, burst, after, per_s = rate_profile(buckets, bucket_ms)
    print(f"{what}: {total / MiB:.2f} MiB in {WINDOW_S} s ({total / WINDOW_S / QUOTA:.2f} x quota), "
          f"{burst / MiB:.2f} MiB in the first {BURST_S} s, {after / MiB:.3f} MiB after; MiB per second {per_s}")
    detail = f"{what}: MiB per second after the start {per_s}"
    assert AVG_LOW * QUOTA * WINDOW_S <= total <= AVG_HIGH * QUOTA * WINDOW_S, \
        f"{detail}: {total / WINDOW_S / QUOTA:.2f} x the quota over the first {WINDOW_S} s"
    # The quota window (11 x 1 s, the rate over at least 10 s) lets ~10 s
    # worth through at once, then holds the client back.
    assert burst >= BURST_MIN, f"{detail}: only {burst / MiB:.2f} MiB in the first {BURST_S} s"
    assert after <= AFTER_BURST_MAX_RATE * QUOTA * (WINDOW_S - BURST_S), \
        f"{detail}: {after / MiB:.2f} MiB between {BURST_S} s and {WINDOW_S} s"


def assert_unthrottled(what, res, want_bytes, start_s=0.0):
    """The load (started start_s after t0) got want_bytes through at more
    than UNTHROTTLED_MIN_RATE x the quota."""
    assert res["bytes"] >= want_bytes, f"{what}: {res['bytes']} bytes of {want_bytes}"
    last = max(i for i, b in enumerate(res["buckets"]) if b) + 1
    seconds = last * res["bucket_ms"] / 1000 - start_s
    rate = res["bytes"] / seconds
    print(f"{what}: {res['bytes'] / MiB:.1f} MiB in {seconds:.1f} s = {rate / MiB:.1f} MiB/s")
    assert rate > UNTHROTTLED_MIN_RATE * QUOTA, f"{what}: {rate / MiB:.2f} MiB/s"


def create_topic(bootstrap, topic, partitions=1):
    cu.create_group_topic(bootstrap, topic, partitions)


def test_java_producer_held_to_quota(broker):
    bs, port = broker.bootstrap, broker.port
    create_topic(bs, "quota-java")
    create_topic(bs, "quota-java-free")
    set_quota(port, [("client-id", "quota-java")], producer_byte_rate=QUOTA)
    free_bytes = 32 * MiB
    # The other client starts once the first one is being throttled.
    res = quota_load("produce", bs, WINDOW_S, [("quota-java", "quota-java", 0, None),
                                              ("quota-java-free", "quota-java-free", 0, free_bytes, FREE_START_S)])
    q, free = res
    for r in (q, free):
        assert r["errors"] == 0, r
    assert_held_to_quota("java producer, producer_byte_rate=1 MiB/s", q["buckets"], q["bucket_ms"])
    print(f"java producer metrics: {q['metrics']}")
    assert q["metrics"]["produce-throttle-time-max"] > 0, q["metrics"]
    assert q["metrics"]["produce-throttle-time-avg"] > 0, q["metrics"]
    # Another client id on the same broker at the same time runs unthrottled.
    assert_unthrottled("java producer, another client id", free, free_bytes, FREE_START_S)
    assert free["metrics"]["produce-throttle-time-max"] == 0, free["metrics"]

    # Removing the quota (kafka-configs --delete-config) frees the client.
    configs_ok(bs, "--entity-type", "clients", "--entity-name", "quota-java", "--alter", "--delete-config",
               "producer_byte_rate")
    wait_quotas(port, {})
    time.sleep(0.3)
    res = quota_load("produce", bs, 8, [("quota-java", "quota-java", 0, 16 * MiB)])
    [after] = res
    assert after["errors"] == 0, after
    assert_unthrottled("java producer, quota removed", after, 16 * MiB)
    assert after["metrics"]["produce-throttle-time-max"] == 0, after["metrics"]


def test_librdkafka_producer_held_to_quota(broker):
    """librdkafka does not delay itself on throttle_time_ms (no KIP-219
    client side): the broker muting the connection is what holds it."""
    from confluent_kafka import KafkaError, Producer

    bs, port = broker.bootstrap, broker.port
    topic = "quota-rdkafka"
    create_topic(bs, topic)
    set_quota(port, [("client-id", "quota-rdkafka")], producer_byte_rate=QUOTA)
    throttles, errors, acked = [], [], []
    p = Producer({"bootstrap.servers": bs, "client.id": "quota-rdkafka", "acks": 1, "linger.ms": 0,
                  "queue.buffering.max.kbytes": 1024, "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    p.list_topics(topic, timeout=30)
    value = b"q" * 1024
    stop = False

    def on_delivery(err, msg):
        if err is None:
            acked.append(time.monotonic())
        elif not (stop and err.code() in (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)):
            errors.append(err)

    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < WINDOW_S:
        try:
            p.produce(topic, value, partition=0, on_delivery=on_delivery)
            n += 1
            if n % 64 == 0:
                p.poll(0)
        except BufferError:
            p.poll(0.005)
    p.poll(0)
    stop = True
    p.purge()
    p.flush(10)
    bucket_ms = 100
    buckets = [0] * (int(WINDOW_S * 1000 / bucket_ms) + 1)
    for t in acked:
        i = int((t - t0) * 1000 / bucket_ms)
        if i < len(buckets):
            buckets[i] += len(value)
    assert not errors, errors[:5]
    assert_held_to_quota("librdkafka producer, producer_byte_rate=1 MiB/s", buckets, bucket_ms)
    positive = [t for t in throttles if t > 0]
    print(f"librdkafka throttle_cb: {len(throttles)} events, {len(positive)} > 0, max {max(throttles, default=0)} s")
    assert positive, throttles


@pytest.fixture(scope="module")
def filled_topic(broker):
    """32 MiB of 1 KiB records in one partition, produced without a quota."""
    from confluent_kafka import Producer

    topic, count = "quota-consume", 32 * 1024
    create_topic(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 5})
    value = b"c" * 1024
    errors = []
    for i in range(count):
        while True:
            try:
                p.produce(topic, value, partition=0,
                          on_delivery=lambda err, msg: errors.append(err) if err is not None else None)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0 and not errors, errors[:3]
    return topic, count * len(value)


def test_consumer_held_to_quota(broker, filled_topic):
    bs, port = broker.bootstrap, broker.port
    topic, size = filled_topic
    set_quota(port, [("client-id", "quota-consumer")], consumer_byte_rate=QUOTA)
    res = quota_load("consume", bs, WINDOW_S, [("quota-consumer", topic, 0, None),
                                              ("quota-consumer-free", topic, 0, size, FREE_START_S)])
    q, free = res
    assert_held_to_quota("java consumer, consumer_byte_rate=1 MiB/s", q["buckets"], q["bucket_ms"])
    print(f"java consumer metrics: {q['metrics']}")
    assert q["metrics"]["fetch-throttle-time-max"] > 0, q["metrics"]
    assert q["metrics"]["fetch-throttle-time-avg"] > 0, q["metrics"]
    assert_unthrottled("java consumer, another client id", free, size, FREE_START_S)
    assert free["metrics"]["fetch-throttle-time-max"] == 0, free["metrics"]


# --- controller_mutation_rate (KIP-599) ----------------------------------------

CREATE_TOPICS = 19
THROTTLING_QUOTA_EXCEEDED = 89


def create_topic_v6(port, client_id, topic, partitions):
    """CreateTopics v6 (flexible, strict quota) of one topic: returns
    (throttle_time_ms, error, message)."""
    body = cu.uvarint(2) + cu.compact_string(topic) + cu.i32(partitions) + cu.i16(1)
    body += cu.uvarint(1) + cu.uvarint(1) + cu.uvarint(0)  # no assignments, no configs, tags
    body += cu.i32(30000) + cu.i8(0) + cu.uvarint(0)
    header = cu.request_header_v2(CREATE_TOPICS, 6, 7, client_id=client_id)
    with Conn(port) as c:
        c.sock.sendall(cu.frame(header + body))
        r = cu.Reader(cu.recv_frame(c.sock))
    assert r.i32() == 7
    r.skip_tags()
    throttle = r.i32()
    assert r.uvarint() - 1 == 1
    assert r.compact_string() == topic
    error = r.i16()
    n = r.uvarint()
    message = None if n == 0 else r.take(n - 1).decode()
    return throttle, error, message


def test_controller_mutation_rate_refuses_topic_creation(broker):
    """A client over its controller_mutation_rate (partitions per second,
    a token bucket holding the rate times the quota windows) gets
    THROTTLING_QUOTA_EXCEEDED with a throttle time from CreateTopics v6+;
    another client is not limited."""
    set_quota(broker.port, entity(client_id="mutator"), controller_mutation_rate=5.0)
    outcomes = []
    for i in range(4):
        outcomes.append(create_topic_v6(broker.port, "mutator", f"mutation-{i}", 50))
        if outcomes[-1][1] == THROTTLING_QUOTA_EXCEEDED:
            break
    assert outcomes[0] == (0, NONE, None), outcomes
    throttle, error, message = outcomes[-1]
    assert (error, message) == (THROTTLING_QUOTA_EXCEEDED, None), outcomes
    assert 1000 <= throttle <= 20000, outcomes
    assert create_topic_v6(broker.port, "other", "mutation-other", 50)[1:] == (NONE, None)


# --- request_percentage --------------------------------------------------------


def metadata_rounds(port, client_id, seconds):
    """Metadata v1 requests for every topic, one after the other on one
    connection for `seconds`: how many were answered."""
    body = cu.i32(-1)  # all topics
    done = 0
    deadline = time.monotonic() + seconds
    sock = cu.connect("127.0.0.1", port, seconds + 15)
    try:
        while time.monotonic() < deadline:
            done += 1
            header = cu.request_header_v1(3, 1, done, client_id=client_id)
            sock.sendall(cu.frame(header + body))
            assert cu.Reader(cu.recv_frame(sock)).i32() == done
    finally:
        sock.close()
    return done


def test_request_percentage_slows_a_busy_client(broker):
    """A client over its request_percentage (the broker time its requests
    take, as a share of one second) is muted after each answer, so even a
    client that ignores throttle times is slowed; another client is not."""
    set_quota(broker.port, entity(client_id="busy"), request_percentage=0.01)
    busy = metadata_rounds(broker.port, "busy", 3.0)
    free = metadata_rounds(broker.port, "free", 3.0)
    print(f"Metadata requests in 3 s: busy {busy}, free {free}")
    # How many get through depends on what one request costs the broker,
    # so only the ratio is compared.
    assert busy * 20 < free, (busy, free)
