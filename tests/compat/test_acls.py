"""ACL authorization: Kafka's kafka-acls tool (kafka.admin.AclCommand from
the 3.9.1 jars, --bootstrap-server with --command-config logging in as
admin over SASL/PLAIN) adding, listing and removing ACLs for every resource
type with LITERAL and PREFIXED patterns, --producer/--consumer,
--allow-host/--deny-host and --deny-principal; and a matrix of principals
(admin, a super user; alice; bob) x operations x resources where each
allowed call succeeds and each denied one gets Kafka's error code, checked
on the wire with a raw Kafka-protocol client logged in over SASL/PLAIN
(acl_util.Client) and, for the errors applications see, with confluent-kafka.

Brokers (acl_util.start_acl_broker, the same keys for kshard and Kafka):
`ab`, the module's broker: PLAINTEXT first, then SASL_PLAINTEXT with PLAIN
users admin, alice and bob from the listener's PlainLoginModule JAAS line,
super.users=User:admin;User:ANONYMOUS and an authorizer
(org.apache.kafka.metadata.authorizer.StandardAuthorizer on Kafka,
kafka.security.authorizer.AclAuthorizer on kshard); `open_broker`, the same
with allow.everyone.if.no.acl.found=true; conftest's `broker`, with no
authorizer. User:ANONYMOUS (every PLAINTEXT connection) is a super user
because Kafka's KRaft node needs it: its broker registers with its own
controller over the PLAINTEXT CONTROLLER listener, and with
super.users=User:admin alone Kafka 3.9.1 never finishes starting
(BrokerRegistration and ControllerRegistration fail with
ClusterAuthorizationException). So the PLAINTEXT listener bypasses ACLs;
every check here goes through the SASL listener. Each test makes its own
topics, groups and ACLs (unique names) and removes its ACLs when it ends.

What Kafka 3.9.1 (KRaft) was seen to do, beyond the asserts' own comments:
* kafka-acls prints, for --add, one "Adding ACLs for resource `...`: "
  block per resource *before* sending CreateAcls, and nothing after; for
  --list one "Current ACLs for resource `...`: " block per resource
  (acl_util.parse_blocks shows the exact whitespace), preceded by
  "ACLs for principal `User:x`" with --principal; for --remove --force
  nothing at all. Block and entry order follow Scala's Set/Map order, so
  they are compared as sets. A failure prints
  "Error while executing ACL command: <exception class>: <message>" and
  the stack trace, on stdout, and exits 1.
* Without ALTER (CreateAcls, DeleteAcls) or DESCRIBE (DescribeAcls) on the
  cluster every entry, or the DescribeAcls response, gets
  CLUSTER_AUTHORIZATION_FAILED with the message
  "Request Request(processor=..., connectionId=..., session=..., listenerName=..., ...) is not authorized."
  (Kafka's internal request description; only "Request ... is not
  authorized." is compared). Without an authorizer: SECURITY_DISABLED (54),
  "No Authorizer is configured on the broker" for DescribeAcls and
  "No Authorizer is configured." for CreateAcls / DeleteAcls.
* Success messages of the ACL APIs: "" for a CreateAcls entry and for
  DescribeAcls (the schemas' default string, though their docs say null),
  null for a DeleteAcls filter and each ACL it deleted (ApiError.NONE).
* Messages that differ between KRaft and the ZooKeeper mode kshard
  follows (kafka/server/KafkaApis.scala in 3.9), where both are accepted:
  AlterConfigs / IncrementalAlterConfigs denials carry the default
  text ("Topic authorization failed." / "Cluster authorization failed.")
  in KRaft, null in ZooKeeper mode; a CreatePartitions denial has a null
  message in KRaft, "The topic authorization is failed." in ZooKeeper mode.
  DescribeConfigs denials carry the default text in both;
  CreateTopics denials "Authorization failed." in both.
* Metadata auto-creation (auto.create.topics.enable) of a topic the
  principal may DESCRIBE and CREATE answers UNKNOWN_TOPIC_OR_PARTITION in
  KRaft (LEADER_NOT_AVAILABLE in ZooKeeper mode); both are accepted, and
  the topic must exist afterwards.
* FindCoordinator (v1) denials carry the default texts
  "Group authorization failed." / "Transactional Id authorization failed.";
  confluent-kafka's consumer reports GROUP_AUTHORIZATION_FAILED as
  "FindCoordinator response error: Group authorization failed.".
* An idempotent InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS while
  the broker fetches its first block of producer ids (retried here).
* __consumer_offsets is made by the first FindCoordinator, not by an
  OffsetCommit (which answers NOT_COORDINATOR until then). A denied
  FindCoordinator answers at once, before the coordinator's topic exists.
* Response order, not asserted: DescribeGroups puts the denied groups
  first; KRaft's DeleteTopics shuffles its results on purpose (ZooKeeper
  mode does not).
* StandardAuthorizer inherits Authorizer.authorizeByResourceType (the
  idempotent InitProducerId check), which asks first about a topic named
  "hardcode" and then scans the ACLs; AclAuthorizer has its own. The cases
  here (no ACL, a literal or prefixed ALLOW, a DENY on "*", on the same
  literal or on a covering prefix, allow.everyone.if.no.acl.found with no
  topic ACL) come out the same in both.
"""

import re
import time

import pytest

import acl_util as au
import security_util as su
from acl_util import (
    ALL, ALTER, ALTER_CONFIGS, ANY, CLUSTER, CLUSTER_ACTION, CLUSTER_NAME, CONFIG_BROKER, CONFIG_TOPIC, CREATE,
    DELETE, DESCRIBE, DESCRIBE_CONFIGS, GROUP, IDEMPOTENT_WRITE, NONE, PREFIXED, READ, TOPIC, TRANSACTIONAL_ID,
    WRITE, allow, deny, unique,
)
from describe_configs_util import broker_id

TAF = au.TOPIC_AUTHORIZATION_FAILED
GAF = au.GROUP_AUTHORIZATION_FAILED
CAF = au.CLUSTER_AUTHORIZATION_FAILED
TIDAF = au.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
UNKNOWN = au.UNKNOWN_TOPIC_OR_PARTITION
TOPIC_MSG = "Topic authorization failed."
CLUSTER_MSG = "Cluster authorization failed."
NOT_AUTHORIZED = re.compile(r"Request .* is not authorized\.")
TOOL_ERROR = "Error while executing ACL command: "
CAF_CLASS = "org.apache.kafka.common.errors.ClusterAuthorizationException"
SECURITY_DISABLED_CLASS = "org.apache.kafka.common.errors.SecurityDisabledException"


# --- fixtures -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ab(broker_module_factory):
    return au.start_acl_broker(broker_module_factory)


@pytest.fixture(scope="module")
def open_broker(broker_module_factory):
    return au.start_acl_broker(broker_module_factory, allow_everyone=True)


def _client(b, user):
    c = au.Client(b.sasl_port, user)
    yield c
    c.close()


@pytest.fixture
def admin(ab):
    yield from _client(ab, "admin")


@pytest.fixture
def alice(ab):
    yield from _client(ab, "alice")


@pytest.fixture
def bob(ab):
    yield from _client(ab, "bob")


@pytest.fixture
def acls(admin):
    a = au.Acls(admin)
    yield a
    a.remove_all()


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    d = tmp_path_factory.mktemp("acl-tool")
    return {u: au.command_config(d / f"{u}.properties", u) for u in au.USERS}


# --- kafka-acls helpers -----------------------------------------------------------------


def tool_ok(b, config, *args):
    r = au.kafka_acls(b.sasl_bootstrap, *args, command_config=config)
    assert r.returncode == 0, f"kafka-acls {args} exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def tool_error(r):
    """The one 'Error while executing ACL command: ' line of a failed
    kafka-acls run (exit status 1), without that prefix."""
    assert r.returncode == 1, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(TOOL_ERROR)]
    assert len(lines) == 1, r.stdout
    return lines[0][len(TOOL_ERROR):]


def assert_cluster_denied(err):
    """A tool_error line for a CLUSTER_AUTHORIZATION_FAILED answer."""
    assert err.startswith(f"{CAF_CLASS}: ") and NOT_AUTHORIZED.fullmatch(err[len(CAF_CLASS) + 2:]), err


def res(rtype, name, pattern="LITERAL"):
    return au.resource_str(rtype, name, pattern)


def ace(principal, op, perm="ALLOW", host="*"):
    return au.ace_str(principal, op, perm, host)


def blocks(out, verb="Current"):
    found, other = au.parse_blocks(out, verb)
    assert other == [], out
    return found


# --- kafka-acls ---------------------------------------------------------------------------


def test_cli_add_list_remove_every_resource_type(ab, cfg, admin, acls):
    """LITERAL ACLs on a topic, a group, the cluster, a transactional id, a
    delegation token and a user, added, listed (by resource and with
    --principal) and removed (--remove --force with no principal deletes
    every ACL of each named resource)."""
    p = f"User:{unique('carol')}"
    t, g, x, d, u = unique("cli-t"), unique("cli-g"), unique("cli-tx"), unique("cli-dt"), f"User:{unique('u')}"
    resources = ["--topic", t, "--group", g, "--cluster", "--transactional-id", x, "--delegation-token", d]
    bindings = [allow(p, DESCRIBE, rtype, name) for rtype, name in (
        (TOPIC, t), (GROUP, g), (CLUSTER, CLUSTER_NAME), (TRANSACTIONAL_ID, x), (au.DELEGATION_TOKEN, d))]
    bindings += [allow(p, au.CREATE_TOKENS, au.USER, u), allow(p, au.DESCRIBE_TOKENS, au.USER, u)]
    acls.track(*bindings)
    described = {
        res("TOPIC", t): {ace(p, "DESCRIBE")},
        res("GROUP", g): {ace(p, "DESCRIBE")},
        res("CLUSTER", CLUSTER_NAME): {ace(p, "DESCRIBE")},
        res("TRANSACTIONAL_ID", x): {ace(p, "DESCRIBE")},
        res("DELEGATION_TOKEN", d): {ace(p, "DESCRIBE")},
    }
    tokens = {res("USER", u): {ace(p, "CREATE_TOKENS"), ace(p, "DESCRIBE_TOKENS")}}

    out = tool_ok(ab, cfg["admin"], "--add", "--allow-principal", p, "--operation", "Describe", *resources)
    assert blocks(out, "Adding") == described
    out = tool_ok(ab, cfg["admin"], "--add", "--allow-principal", p, "--operation", "CreateTokens",
                  "--operation", "DescribeTokens", "--user-principal", u)
    assert blocks(out, "Adding") == tokens
    au.wait_acls(admin, present=bindings)
    # The same ACLs on the wire (DescribeAcls filtered by principal).
    assert au.describe_acls(admin, (ANY, None, ANY, p, None, ANY, ANY)) == (NONE, "", set(bindings))

    out = tool_ok(ab, cfg["admin"], "--list", *resources, "--user-principal", u)
    assert blocks(out) == {**described, **tokens}
    found, other = au.parse_blocks(tool_ok(ab, cfg["admin"], "--list", "--principal", p))
    assert other == [f"ACLs for principal `{p}`"]
    assert found == {**described, **tokens}

    assert tool_ok(ab, cfg["admin"], "--remove", "--force", *resources, "--user-principal", u) == ""
    au.wait_acls(admin, absent=bindings)
    assert tool_ok(ab, cfg["admin"], "--list", *resources, "--user-principal", u) == ""


def test_cli_prefixed(ab, cfg, admin, acls):
    """--resource-pattern-type prefixed for a topic, a group and a
    transactional id; --list with the LITERAL default does not show them,
    `match` shows the prefixed ACL that applies to a longer name, `any`
    the ACL on the exact name."""
    p = f"User:{unique('carol')}"
    pre = unique("cli-pre") + "-"
    resources = ["--topic", pre, "--group", pre, "--transactional-id", pre]
    bindings = [allow(p, DESCRIBE, rtype, pre, PREFIXED) for rtype in (TOPIC, GROUP, TRANSACTIONAL_ID)]
    acls.track(*bindings)
    expected = {res(rtype, pre, "PREFIXED"): {ace(p, "DESCRIBE")} for rtype in ("TOPIC", "GROUP", "TRANSACTIONAL_ID")}

    out = tool_ok(ab, cfg["admin"], "--add", "--allow-principal", p, "--operation", "Describe",
                  "--resource-pattern-type", "prefixed", *resources)
    assert blocks(out, "Adding") == expected
    au.wait_acls(admin, present=bindings)

    out = tool_ok(ab, cfg["admin"], "--list", "--resource-pattern-type", "prefixed", *resources)
    assert blocks(out) == expected
    assert tool_ok(ab, cfg["admin"], "--list", *resources) == ""
    out = tool_ok(ab, cfg["admin"], "--list", "--resource-pattern-type", "match", "--topic", pre + "x")
    assert blocks(out) == {res("TOPIC", pre, "PREFIXED"): {ace(p, "DESCRIBE")}}
    out = tool_ok(ab, cfg["admin"], "--list", "--resource-pattern-type", "any", "--group", pre)
    assert blocks(out) == {res("GROUP", pre, "PREFIXED"): {ace(p, "DESCRIBE")}}

    assert tool_ok(ab, cfg["admin"], "--remove", "--force", "--resource-pattern-type", "prefixed", *resources) == ""
    au.wait_acls(admin, absent=bindings)
    assert tool_ok(ab, cfg["admin"], "--list", "--resource-pattern-type", "prefixed", *resources) == ""


def test_cli_producer_consumer(ab, cfg, admin, alice, acls):
    """--producer --idempotent (WRITE, DESCRIBE, CREATE on the topic; WRITE,
    DESCRIBE on the transactional id; IDEMPOTENT_WRITE on the cluster) and
    --consumer (READ, DESCRIBE on the topic; READ on the group) for alice:
    what they let her do, and --remove of each taking effect."""
    t, g, x = unique("cli-pc"), unique("cli-pc-g"), unique("cli-pc-tx")
    au.make_topics(admin, [t], n_records=1)
    a = "User:alice"
    producer = ["--allow-principal", a, "--producer", "--idempotent", "--topic", t, "--transactional-id", x]
    consumer = ["--allow-principal", a, "--consumer", "--topic", t, "--group", g]
    acls.track(
        *(allow("alice", op, TOPIC, t) for op in (WRITE, DESCRIBE, CREATE, READ)),
        allow("alice", WRITE, TRANSACTIONAL_ID, x), allow("alice", DESCRIBE, TRANSACTIONAL_ID, x),
        allow("alice", IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME), allow("alice", READ, GROUP, g),
    )
    listing = ["--list", "--topic", t, "--group", g, "--transactional-id", x, "--cluster"]

    out = tool_ok(ab, cfg["admin"], "--add", *producer)
    assert blocks(out, "Adding") == {
        res("TOPIC", t): {ace(a, "WRITE"), ace(a, "DESCRIBE"), ace(a, "CREATE")},
        res("TRANSACTIONAL_ID", x): {ace(a, "WRITE"), ace(a, "DESCRIBE")},
        res("CLUSTER", CLUSTER_NAME): {ace(a, "IDEMPOTENT_WRITE")},
    }
    out = tool_ok(ab, cfg["admin"], "--add", *consumer)
    assert blocks(out, "Adding") == {
        res("TOPIC", t): {ace(a, "READ"), ace(a, "DESCRIBE")},
        res("GROUP", g): {ace(a, "READ")},
    }
    au.wait_acls(admin, present=acls.added)
    assert blocks(tool_ok(ab, cfg["admin"], *listing)) == {
        res("TOPIC", t): {ace(a, "WRITE"), ace(a, "DESCRIBE"), ace(a, "CREATE"), ace(a, "READ")},
        res("TRANSACTIONAL_ID", x): {ace(a, "WRITE"), ace(a, "DESCRIBE")},
        res("CLUSTER", CLUSTER_NAME): {ace(a, "IDEMPOTENT_WRITE")},
        res("GROUP", g): {ace(a, "READ")},
    }
    assert au.produce(alice, t)[0] == NONE
    assert au.fetch(alice, t)[0] == NONE
    assert au.join_group(alice, g)[0] == NONE
    assert au.txn_ready(alice, x)[0] == NONE

    # Removing the producer ACLs takes the topic's DESCRIBE too (the
    # consumer's DESCRIBE is the same ACL); READ still implies DESCRIBE.
    assert tool_ok(ab, cfg["admin"], "--remove", "--force", *producer) == ""
    au.wait_acls(admin, absent=[allow("alice", WRITE, TOPIC, t),
                                allow("alice", IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME)])
    assert blocks(tool_ok(ab, cfg["admin"], *listing)) == {
        res("TOPIC", t): {ace(a, "READ")},
        res("GROUP", g): {ace(a, "READ")},
    }
    assert au.produce(alice, t) == (TAF, -1)
    assert au.init_producer_id(alice, x) == (TIDAF, -1, -1)
    assert au.fetch(alice, t)[0] == NONE
    assert au.metadata_errors(alice, [t]) == {t: NONE}

    assert tool_ok(ab, cfg["admin"], "--remove", "--force", *consumer) == ""
    au.wait_acls(admin, absent=[allow("alice", READ, TOPIC, t), allow("alice", READ, GROUP, g)])
    assert tool_ok(ab, cfg["admin"], *listing) == ""
    assert au.fetch(alice, t) == (TAF, -1, 0)
    assert au.join_group(alice, g)[0] == GAF


def test_cli_hosts_and_deny_principal(ab, cfg, admin, alice, bob, acls):
    """--allow-host / --deny-host and --deny-principal: five ACLs from one
    --add (two principals x two hosts allowed, bob denied from 127.0.0.1,
    where the clients connect from); removing single entries by principal,
    host and operation."""
    t = au.make_topics(admin, [unique("cli-h")], n_records=1)[0]
    hosts = ("127.0.0.1", "10.0.0.1")
    acls.track(*(allow(u, READ, TOPIC, t, host=h) for u in ("alice", "bob") for h in hosts),
               deny("bob", READ, TOPIC, t, host="127.0.0.1"))
    out = tool_ok(ab, cfg["admin"], "--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
                  "--allow-host", hosts[0], "--allow-host", hosts[1], "--deny-principal", "User:bob",
                  "--deny-host", "127.0.0.1", "--operation", "Read", "--topic", t)
    entries = {ace(f"User:{u}", "READ", host=h) for u in ("alice", "bob") for h in hosts}
    entries.add(ace("User:bob", "READ", "DENY", "127.0.0.1"))
    assert blocks(out, "Adding") == {res("TOPIC", t): entries}
    au.wait_acls(admin, present=acls.added)
    assert blocks(tool_ok(ab, cfg["admin"], "--list", "--topic", t)) == {res("TOPIC", t): entries}
    assert au.fetch(alice, t)[0] == NONE
    assert au.fetch(bob, t)[0] == TAF  # DENY wins

    assert tool_ok(ab, cfg["admin"], "--remove", "--force", "--deny-principal", "User:bob", "--deny-host", "127.0.0.1",
                   "--operation", "Read", "--topic", t) == ""
    au.wait_acls(admin, absent=[deny("bob", READ, TOPIC, t, host="127.0.0.1")])
    assert au.fetch(bob, t)[0] == NONE

    assert tool_ok(ab, cfg["admin"], "--remove", "--force", "--allow-principal", "User:alice",
                   "--allow-host", "127.0.0.1", "--operation", "Read", "--topic", t) == ""
    au.wait_acls(admin, absent=[allow("alice", READ, TOPIC, t, host="127.0.0.1")])
    assert au.fetch(alice, t)[0] == TAF  # only the 10.0.0.1 entry is left
    assert blocks(tool_ok(ab, cfg["admin"], "--list", "--topic", t)) == {res("TOPIC", t): {
        ace("User:alice", "READ", host="10.0.0.1"), ace("User:bob", "READ", host="127.0.0.1"),
        ace("User:bob", "READ", host="10.0.0.1"),
    }}


def test_cli_needs_cluster_alter_and_describe(ab, cfg, admin, alice, acls):
    """kafka-acls as alice: --add and --remove need ALTER on the cluster,
    --list DESCRIBE (implied by ALTER). The raw CreateAcls / DeleteAcls /
    DescribeAcls answers: CLUSTER_AUTHORIZATION_FAILED per entry / per
    filter / top-level, with "Request ... is not authorized."."""
    t = unique("cli-deny")
    b = allow("bob", READ, TOPIC, t)
    add = ["--add", "--allow-principal", "User:bob", "--operation", "Read", "--topic", t]

    r = au.kafka_acls(ab.sasl_bootstrap, *add, command_config=cfg["alice"])
    assert_cluster_denied(tool_error(r))
    # The block is printed before the request is sent.
    assert au.parse_blocks(r.stdout.split(TOOL_ERROR)[0], "Adding")[0] == {res("TOPIC", t): {ace("User:bob", "READ")}}
    for args in (["--list"], ["--remove", "--force", "--topic", t]):
        assert_cluster_denied(tool_error(au.kafka_acls(ab.sasl_bootstrap, *args, command_config=cfg["alice"])))

    [(code, msg)] = au.create_acls(alice, [b])
    assert code == CAF and NOT_AUTHORIZED.fullmatch(msg), msg
    code, msg, found = au.describe_acls(alice)
    assert code == CAF and NOT_AUTHORIZED.fullmatch(msg) and found == set(), (code, msg, found)
    [(code, msg, found, _)] = au.delete_acls(alice, [au.ANY_FILTER])
    assert code == CAF and NOT_AUTHORIZED.fullmatch(msg) and found == set(), (code, msg, found)
    assert au.describe_acls(admin, (TOPIC, t, ANY, None, None, ANY, ANY))[2] == set()

    # DESCRIBE on the cluster: --list works, --add does not.
    acls.add(allow("alice", DESCRIBE, CLUSTER, CLUSTER_NAME))
    assert tool_ok(ab, cfg["alice"], "--list", "--topic", t) == ""
    assert_cluster_denied(tool_error(au.kafka_acls(ab.sasl_bootstrap, *add, command_config=cfg["alice"])))
    acls.remove(allow("alice", DESCRIBE, CLUSTER, CLUSTER_NAME))

    # ALTER on the cluster: both (ALTER implies DESCRIBE).
    acls.add(allow("alice", ALTER, CLUSTER, CLUSTER_NAME))
    acls.track(b)
    tool_ok(ab, cfg["alice"], *add)
    au.wait_acls(admin, present=[b])
    assert blocks(tool_ok(ab, cfg["alice"], "--list", "--topic", t)) == {res("TOPIC", t): {ace("User:bob", "READ")}}


def test_cli_without_authorizer(broker):
    """A broker with no authorizer.class.name: kafka-acls fails with
    SecurityDisabledException, exit status 1; on the wire SECURITY_DISABLED
    (54) with Kafka's two messages."""
    r = au.kafka_acls(broker.bootstrap, "--list")
    assert tool_error(r) == f"{SECURITY_DISABLED_CLASS}: No Authorizer is configured on the broker"
    r = au.kafka_acls(broker.bootstrap, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                      "--topic", "t")
    assert tool_error(r) == f"{SECURITY_DISABLED_CLASS}: No Authorizer is configured."
    with su.RawConn(broker.port) as c:
        assert au.describe_acls(c) == (au.SECURITY_DISABLED, "No Authorizer is configured on the broker", set())
        assert au.create_acls(c, [allow("alice", READ, TOPIC, "t")]) == [
            (au.SECURITY_DISABLED, "No Authorizer is configured.")]
        assert au.delete_acls(c, [au.ANY_FILTER]) == [
            (au.SECURITY_DISABLED, "No Authorizer is configured.", set(), set())]


# --- the matrix: data APIs ----------------------------------------------------------------


def test_produce(admin, alice, bob, acls):
    """Produce needs WRITE on the topic; a denied partition gets
    TOPIC_AUTHORIZATION_FAILED, checked before the topic's existence."""
    t = au.make_topics(admin, [unique("produce")])[0]
    missing = unique("produce-missing")
    acls.add(allow("alice", WRITE, TOPIC, t), allow("alice", WRITE, TOPIC, missing))
    assert au.produce(alice, t) == (NONE, 0)
    assert au.produce(bob, t) == (TAF, -1)
    assert au.produce(bob, unique("produce-missing")) == (TAF, -1)
    assert au.produce(alice, missing)[0] == UNKNOWN
    assert au.fetch(admin, t)[:2] == (NONE, 1)  # bob's record was not written


def test_fetch(admin, alice, bob, acls):
    """A consumer Fetch needs READ on the topic."""
    t = au.make_topics(admin, [unique("fetch")], n_records=3)[0]
    acls.add(allow("alice", READ, TOPIC, t))
    assert au.fetch(alice, t) == (NONE, 3, 3)
    assert au.fetch(bob, t) == (TAF, -1, 0)


def test_metadata_lists_only_describable_topics(admin, alice, bob, acls):
    """Metadata for all topics leaves out the topics the principal may not
    DESCRIBE (no error entry); named ones get TOPIC_AUTHORIZATION_FAILED,
    existing or not; a missing topic the principal may DESCRIBE is
    UNKNOWN_TOPIC_OR_PARTITION."""
    t1, t2, t3 = au.make_topics(admin, [unique("md1"), unique("md2"), unique("md3")])
    missing = unique("md-missing")
    acls.add(allow("alice", DESCRIBE, TOPIC, t1), allow("alice", READ, TOPIC, t2))
    every = au.metadata_errors(alice)
    assert every[t1] == NONE and every[t2] == NONE and t3 not in every
    assert set(every.values()) == {NONE}
    assert not {t1, t2, t3} & set(au.metadata_errors(bob))
    md = {name: (err, parts) for name, err, _, parts in au.metadata(alice, [t1, t3, missing])}
    assert md[t1][0] == NONE and [p for p, _, _ in md[t1][1]] == [0]
    assert md[t3] == (TAF, []) and md[missing] == (TAF, [])
    acls.add(allow("alice", DESCRIBE, TOPIC, missing))
    assert au.metadata_errors(alice, [missing]) == {missing: UNKNOWN}
    assert au.metadata_errors(admin, [t3]) == {t3: NONE}


def test_metadata_auto_creation_needs_create(admin, alice, bob, acls):
    """With auto.create.topics.enable (the harness sets it) a Metadata
    request that allows auto-creation creates a missing topic only for a
    principal with DESCRIBE and CREATE on it (or CREATE on the cluster);
    DESCRIBE alone gets TOPIC_AUTHORIZATION_FAILED instead of
    UNKNOWN_TOPIC_OR_PARTITION, and so does CREATE alone."""
    describe_only, create_only, both, via_cluster = (unique(n) for n in ("auto-d", "auto-c", "auto-dc", "auto-cl"))
    acls.add(allow("alice", DESCRIBE, TOPIC, describe_only), allow("alice", CREATE, TOPIC, create_only),
             allow("alice", DESCRIBE, TOPIC, both), allow("alice", CREATE, TOPIC, both))
    assert au.metadata_errors(alice, [describe_only], allow_auto=False) == {describe_only: UNKNOWN}
    got = au.metadata_errors(alice, [describe_only, create_only, both], allow_auto=True)
    assert got[describe_only] == TAF and got[create_only] == TAF
    assert got[both] in (UNKNOWN, au.LEADER_NOT_AVAILABLE), got
    au.wait_for(lambda: au.metadata_errors(admin, [both]) == {both: NONE}, f"{both} auto-created")
    assert au.metadata_errors(admin, [describe_only, create_only]) == {describe_only: UNKNOWN, create_only: UNKNOWN}

    acls.add(allow("bob", CREATE, CLUSTER, CLUSTER_NAME), allow("bob", DESCRIBE, TOPIC, via_cluster))
    assert au.metadata_errors(bob, [via_cluster], allow_auto=True)[via_cluster] in (UNKNOWN, au.LEADER_NOT_AVAILABLE)
    au.wait_for(lambda: au.metadata_errors(admin, [via_cluster]) == {via_cluster: NONE}, f"{via_cluster} auto-created")


def test_list_offsets(admin, alice, acls):
    """ListOffsets needs DESCRIBE on the topic; denied: offset and
    timestamp -1."""
    t1, t2 = au.make_topics(admin, [unique("lo1"), unique("lo2")], n_records=2)
    acls.add(allow("alice", DESCRIBE, TOPIC, t1))
    assert au.list_offsets(alice, t1) == (NONE, -1, 2)
    assert au.list_offsets(alice, t2) == (TAF, -1, -1)


# --- the matrix: admin APIs ----------------------------------------------------------------


def test_create_topics(admin, alice, bob, acls):
    """CreateTopics needs CREATE on the topic or on the cluster; a denied
    topic gets TOPIC_AUTHORIZATION_FAILED "Authorization failed.", also
    when it exists already."""
    ok, denied, by_cluster = unique("ct-ok"), unique("ct-denied"), unique("ct-cluster")
    existing = au.make_topics(admin, [unique("ct-existing")])[0]
    acls.add(allow("alice", CREATE, TOPIC, ok), allow("alice", CREATE, TOPIC, existing))
    assert au.create_topics(alice, [ok, denied]) == {ok: (NONE, None), denied: (TAF, "Authorization failed.")}
    assert au.create_topics(bob, [existing]) == {existing: (TAF, "Authorization failed.")}
    assert au.create_topics(alice, [existing])[existing][0] == au.TOPIC_ALREADY_EXISTS
    acls.add(allow("bob", CREATE, CLUSTER, CLUSTER_NAME))
    assert au.create_topics(bob, [by_cluster]) == {by_cluster: (NONE, None)}
    expected = {ok: NONE, denied: UNKNOWN, by_cluster: NONE}
    au.wait_for(lambda: au.metadata_errors(admin, list(expected)) == expected, f"topics {expected}")


def test_delete_topics(admin, alice, acls):
    """DeleteTopics needs DELETE on the topic; DESCRIBE alone or nothing:
    TOPIC_AUTHORIZATION_FAILED, existing or not; a missing topic the
    principal may delete: UNKNOWN_TOPIC_OR_PARTITION."""
    d1, d2, d3 = au.make_topics(admin, [unique("dt1"), unique("dt2"), unique("dt3")])
    missing, unlisted = unique("dt-missing"), unique("dt-unlisted")
    acls.add(allow("alice", DELETE, TOPIC, d1), allow("alice", DESCRIBE, TOPIC, d2),
             allow("alice", DELETE, TOPIC, missing))
    assert au.delete_topics(alice, [d1, d2, d3, missing, unlisted]) == {
        d1: NONE, d2: TAF, d3: TAF, missing: UNKNOWN, unlisted: TAF,
    }
    au.wait_for(lambda: au.metadata_errors(admin, [d1]) == {d1: UNKNOWN}, f"{d1} deleted")
    assert au.metadata_errors(admin, [d2, d3]) == {d2: NONE, d3: NONE}


def test_create_partitions(admin, alice, acls):
    """CreatePartitions needs ALTER on the topic."""
    c1, c2 = au.make_topics(admin, [unique("cp1"), unique("cp2")])
    acls.add(allow("alice", ALTER, TOPIC, c1))
    assert au.create_partitions(alice, c1, 2) == (NONE, None)
    err, msg = au.create_partitions(alice, c2, 2)
    assert err == TAF and msg in (None, "The topic authorization is failed."), (err, msg)
    assert au.create_partitions(alice, unique("cp-missing"), 2)[0] == TAF
    au.wait_for(lambda: len(au.metadata(admin, [c1])[0][3]) == 2, f"{c1} with 2 partitions")
    assert len(au.metadata(admin, [c2])[0][3]) == 1


def test_delete_records(admin, alice, acls):
    """DeleteRecords needs DELETE on the topic; denied: low watermark -1."""
    t1, t2 = au.make_topics(admin, [unique("dr1"), unique("dr2")], n_records=3)
    acls.add(allow("alice", DELETE, TOPIC, t1))
    assert au.delete_records(alice, t1, 0, 2) == (NONE, 2)
    assert au.delete_records(alice, t2, 0, 2) == (TAF, -1)
    assert au.list_offsets(admin, t2, timestamp=-2) == (NONE, -1, 0)


def test_describe_configs(ab, admin, alice, acls):
    """DescribeConfigs needs DESCRIBE_CONFIGS (or ALTER_CONFIGS) on the
    topic, or on the cluster for a broker; denied resources are answered
    with TOPIC_ / CLUSTER_AUTHORIZATION_FAILED, the default message and no
    configs."""
    t1, t2, t3 = au.make_topics(admin, [unique("dc1"), unique("dc2"), unique("dc3")])
    bid = str(broker_id(ab.port))
    acls.add(allow("alice", DESCRIBE_CONFIGS, TOPIC, t1), allow("alice", ALTER_CONFIGS, TOPIC, t3))
    got = au.describe_configs(alice, [(CONFIG_TOPIC, t1), (CONFIG_TOPIC, t2), (CONFIG_TOPIC, t3), (CONFIG_BROKER, bid)])
    assert got[(CONFIG_TOPIC, t1)][0] == NONE and "retention.ms" in got[(CONFIG_TOPIC, t1)][2]
    assert got[(CONFIG_TOPIC, t2)] == (TAF, TOPIC_MSG, {})
    assert got[(CONFIG_TOPIC, t3)][0] == NONE and "retention.ms" in got[(CONFIG_TOPIC, t3)][2]
    assert got[(CONFIG_BROKER, bid)] == (CAF, CLUSTER_MSG, {})
    acls.add(allow("alice", DESCRIBE_CONFIGS, CLUSTER, CLUSTER_NAME))
    err, _, configs = au.describe_configs(alice, [(CONFIG_BROKER, bid)])[(CONFIG_BROKER, bid)]
    assert err == NONE and "log.retention.hours" in configs


@pytest.mark.parametrize("api", ["AlterConfigs", "IncrementalAlterConfigs"])
def test_alter_configs(ab, admin, alice, acls, api):
    """AlterConfigs and IncrementalAlterConfigs need ALTER_CONFIGS on the
    topic, or on the cluster for a broker; results in request order."""
    alter = au.alter_configs if api == "AlterConfigs" else au.incremental_alter_configs
    t1, t2 = au.make_topics(admin, [unique("ac1"), unique("ac2")])
    bid = str(broker_id(ab.port))
    acls.add(allow("alice", ALTER_CONFIGS, TOPIC, t1))
    got = alter(alice, [(CONFIG_TOPIC, t1, {"retention.ms": "3600000"}),
                        (CONFIG_TOPIC, t2, {"retention.ms": "3600000"}),
                        (CONFIG_BROKER, bid, {"log.cleaner.threads": "2"})])
    assert [(rtype, name, err) for rtype, name, err, _ in got] == [
        (CONFIG_TOPIC, t1, NONE), (CONFIG_TOPIC, t2, TAF), (CONFIG_BROKER, bid, CAF)]
    assert got[1][3] in (None, TOPIC_MSG) and got[2][3] in (None, CLUSTER_MSG), got
    configs = au.describe_configs(admin, [(CONFIG_TOPIC, t1), (CONFIG_TOPIC, t2)])
    assert configs[(CONFIG_TOPIC, t1)][2]["retention.ms"] == "3600000"
    assert configs[(CONFIG_TOPIC, t2)][2]["retention.ms"] != "3600000"


# --- the matrix: groups ----------------------------------------------------------------------


def test_consumer_group(admin, alice, bob, acls):
    """FindCoordinator needs DESCRIBE on the group, JoinGroup / Heartbeat /
    OffsetCommit READ (GROUP_AUTHORIZATION_FAILED), then OffsetCommit READ
    on each topic (TOPIC_AUTHORIZATION_FAILED); OffsetFetch needs DESCRIBE
    on the group and leaves out the committed offsets of topics the
    principal may not DESCRIBE."""
    t1, t2 = au.make_topics(admin, [unique("cg1"), unique("cg2")])
    joined, offsets = unique("cg-join"), unique("cg-offsets")
    au.group_with_offsets(admin, offsets, t2)
    acls.add(allow("alice", READ, GROUP, joined), allow("alice", READ, GROUP, offsets), allow("alice", READ, TOPIC, t1),
             allow("bob", DESCRIBE, GROUP, offsets), allow("bob", READ, TOPIC, t1))

    assert au.coordinator(alice, joined)[0] == NONE
    assert au.find_coordinator(bob, joined) == (GAF, "Group authorization failed.", -1)
    err, gen, member = au.join_group(alice, joined)
    assert err == NONE
    assert au.join_group(bob, joined) == (GAF, -1, "")
    assert au.heartbeat(alice, joined, gen, member) == NONE
    assert au.heartbeat(bob, joined, gen, member) == GAF

    assert au.offset_commit(alice, offsets, t1, 0, 5) == NONE
    assert au.offset_commit(alice, offsets, t2, 0, 5) == TAF
    assert au.offset_commit(bob, offsets, t1, 0, 5) == GAF  # DESCRIBE on the group is not READ
    assert au.offset_fetch(alice, offsets) == (NONE, {(t1, 0): (5, NONE)})  # t2's offset left out
    assert au.offset_fetch(alice, offsets, {t1: [0], t2: [0]}) == (NONE, {(t1, 0): (5, NONE), (t2, 0): (-1, TAF)})
    assert au.offset_fetch(bob, offsets) == (NONE, {(t1, 0): (5, NONE)})
    assert au.offset_fetch(bob, joined) == (GAF, {})
    assert au.offset_fetch(admin, offsets) == (NONE, {(t1, 0): (5, NONE), (t2, 0): (1, NONE)})


def test_list_describe_delete_groups(admin, alice, bob, acls):
    """ListGroups lists the groups the principal may DESCRIBE (all of them
    with DESCRIBE on the cluster), never an error; DescribeGroups needs
    DESCRIBE on each group (implied by DELETE), DeleteGroups DELETE;
    denied groups get GROUP_AUTHORIZATION_FAILED, existing or not."""
    t = au.make_topics(admin, [unique("lg")])[0]
    g1, g2, g3 = unique("lg1"), unique("lg2"), unique("lg3")
    for g in (g1, g2, g3):
        au.group_with_offsets(admin, g, t)
    acls.add(allow("alice", DESCRIBE, GROUP, g1), allow("alice", DELETE, GROUP, g2))
    err, seen = au.list_groups(alice)
    assert err == NONE and {g1, g2, g3} & seen == {g1, g2}
    err, seen = au.list_groups(bob)
    assert err == NONE and not {g1, g2, g3} & seen
    acls.add(allow("bob", DESCRIBE, CLUSTER, CLUSTER_NAME))
    err, seen = au.list_groups(bob)
    assert err == NONE and {g1, g2, g3} <= seen

    missing = unique("lg-missing")
    got = au.describe_groups(alice, [g1, g2, g3, missing])
    assert {g: (e, s) for g, e, s in got} == {
        g1: (NONE, "Empty"), g2: (NONE, "Empty"), g3: (GAF, ""), missing: (GAF, ""),
    }
    assert au.delete_groups(alice, [g1, g2, g3]) == {g1: GAF, g2: NONE, g3: GAF}
    assert {g: s for g, _, s in au.describe_groups(admin, [g1, g2, g3])} == {g1: "Empty", g2: "Dead", g3: "Empty"}


# --- the matrix: producer ids and transactions --------------------------------------------


def test_transactional_id(admin, alice, acls):
    """A transactional id needs DESCRIBE (FindCoordinator) and WRITE
    (InitProducerId, and Produce of transactional batches, checked before
    WRITE on the topic): TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    t = au.make_topics(admin, [unique("txn")])[0]
    writable, describable, other = unique("tx-w"), unique("tx-d"), unique("tx-none")
    acls.add(allow("alice", WRITE, TRANSACTIONAL_ID, writable), allow("alice", DESCRIBE, TRANSACTIONAL_ID, describable),
             allow("alice", WRITE, TOPIC, t))
    # Denied before the coordinator is looked for (which, the first time,
    # makes __transaction_state).
    assert au.find_coordinator(alice, other, 1) == (TIDAF, "Transactional Id authorization failed.", -1)
    assert au.coordinator(alice, writable, 1)[0] == NONE  # WRITE implies DESCRIBE
    assert au.coordinator(alice, describable, 1)[0] == NONE
    err, pid, epoch = au.txn_ready(alice, writable)
    assert err == NONE and pid >= 0 and epoch == 0
    assert au.init_producer_id(alice, describable) == (TIDAF, -1, -1)
    assert au.init_producer_id(alice, other) == (TIDAF, -1, -1)
    # A transactional batch: WRITE on the id is checked first, whatever
    # the topic ACLs say.
    for txn_id in (other, None):
        assert au.produce(alice, t, transactional_id=txn_id, attributes=0x10, producer_id=pid, epoch=epoch,
                          base_sequence=0) == (TIDAF, -1), txn_id
    assert au.produce(alice, t) == (NONE, 0)


def test_idempotent_producer(admin, bob, acls):
    """InitProducerId without a transactional id needs IDEMPOTENT_WRITE on
    the cluster, or WRITE on some topic (authorizeByResourceType: a DENY on
    the wildcard topic, on the same literal or on a covering prefix cancels
    it); otherwise CLUSTER_AUTHORIZATION_FAILED."""
    assert au.init_producer_id(bob) == (CAF, -1, -1)
    acls.add(allow("bob", IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME))
    assert au.txn_ready(bob, None)[0] == NONE
    acls.remove(allow("bob", IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME))
    assert au.init_producer_id(bob) == (CAF, -1, -1)

    literal, prefix = unique("idem-lit"), unique("idem-pfx") + "-"
    acls.add(allow("bob", WRITE, TOPIC, literal))  # the topic need not exist
    assert au.txn_ready(bob, None)[0] == NONE
    acls.add(deny("bob", WRITE, TOPIC, "*"))
    assert au.init_producer_id(bob) == (CAF, -1, -1)
    acls.remove(deny("bob", WRITE, TOPIC, "*"))
    acls.add(deny("bob", WRITE, TOPIC, literal))
    assert au.init_producer_id(bob) == (CAF, -1, -1)
    acls.add(allow("bob", WRITE, TOPIC, prefix, PREFIXED))
    assert au.txn_ready(bob, None)[0] == NONE
    acls.add(deny("bob", WRITE, TOPIC, prefix[:5], PREFIXED))
    assert au.init_producer_id(bob) == (CAF, -1, -1)


# --- the matrix: ACL semantics -------------------------------------------------------------


def test_deny_wins_over_allow(admin, alice, bob, acls):
    """A matching DENY beats any ALLOW; a DENY applies to its own operation
    only (DENY READ leaves the DESCRIBE that ALLOW READ implies) or to all
    (DENY ALL)."""
    t1, t2 = au.make_topics(admin, [unique("deny1"), unique("deny2")], n_records=1)
    g = unique("deny-g")
    acls.add(allow("alice", READ, TOPIC, t1), deny("alice", READ, TOPIC, t1))
    assert au.fetch(alice, t1)[0] == TAF
    assert au.metadata_errors(alice, [t1]) == {t1: NONE}
    assert au.list_offsets(alice, t1)[0] == NONE
    acls.add(deny("alice", DESCRIBE, TOPIC, t1))
    assert au.metadata_errors(alice, [t1]) == {t1: TAF}
    assert au.list_offsets(alice, t1)[0] == TAF

    acls.add(allow("bob", ALL, TOPIC, t2), deny("bob", WRITE, TOPIC, t2))
    assert au.fetch(bob, t2)[:2] == (NONE, 1)
    assert au.produce(bob, t2) == (TAF, -1)
    acls.add(deny("bob", ALL, TOPIC, t2))
    assert au.fetch(bob, t2)[0] == TAF

    acls.add(allow("alice", READ, GROUP, g), deny("alice", READ, GROUP, g))
    assert au.join_group(alice, g)[0] == GAF


def test_prefixed_acls(admin, alice, bob, acls):
    """A PREFIXED ACL covers every name starting with the prefix, the prefix
    itself included, for its own resource type; a literal DENY under it
    still wins; a PREFIXED "*" is no wildcard."""
    pre = unique("pfx") + "-"
    inside, exact, shorter, outside = pre + "a", pre, pre[:-1], "x" + pre + "a"
    au.make_topics(admin, [inside, exact, shorter, outside], n_records=1)
    acls.add(allow("alice", READ, TOPIC, pre, PREFIXED))
    assert [au.fetch(alice, t)[0] for t in (inside, exact, shorter, outside)] == [NONE, NONE, TAF, TAF]
    assert au.join_group(alice, pre + "g")[0] == GAF  # topic ACLs never apply to groups
    acls.add(allow("alice", READ, GROUP, pre, PREFIXED))
    assert au.join_group(alice, pre + "g")[0] == NONE
    assert au.join_group(alice, "g" + pre)[0] == GAF
    acls.add(deny("alice", READ, TOPIC, inside))
    assert au.fetch(alice, inside)[0] == TAF and au.fetch(alice, exact)[0] == NONE
    acls.add(allow("bob", READ, TOPIC, "*", PREFIXED))
    assert au.fetch(bob, exact)[0] == TAF


def test_wildcard_principal(admin, alice, bob, acls):
    """User:* matches every user (but a super user ignores its DENY)."""
    t = au.make_topics(admin, [unique("wp")], n_records=1)[0]
    acls.add(allow("User:*", READ, TOPIC, t))
    assert au.fetch(alice, t)[0] == NONE and au.fetch(bob, t)[0] == NONE
    acls.add(deny("bob", READ, TOPIC, t))
    assert au.fetch(alice, t)[0] == NONE and au.fetch(bob, t)[0] == TAF
    acls.add(allow("alice", WRITE, TOPIC, t), deny("User:*", WRITE, TOPIC, t))
    assert au.produce(alice, t) == (TAF, -1)
    assert au.produce(admin, t)[0] == NONE


def test_wildcard_resource(admin, alice, bob, acls):
    """The LITERAL resource name "*" matches every topic (or group)."""
    t1, t2 = au.make_topics(admin, [unique("wr1"), unique("wr2")], n_records=1)
    missing = unique("wr-missing")
    acls.add(allow("alice", READ, TOPIC, "*"))
    assert au.fetch(alice, t1)[0] == NONE and au.fetch(alice, t2)[0] == NONE
    assert au.metadata_errors(alice, [missing]) == {missing: UNKNOWN}  # READ on * implies DESCRIBE
    assert au.fetch(bob, t1)[0] == TAF
    assert au.produce(alice, t1) == (TAF, -1)
    assert au.join_group(alice, unique("wr-g"))[0] == GAF
    acls.add(allow("alice", READ, GROUP, "*"))
    assert au.join_group(alice, unique("wr-g"))[0] == NONE
    acls.add(deny("alice", READ, TOPIC, t2))
    assert au.fetch(alice, t1)[0] == NONE and au.fetch(alice, t2)[0] == TAF


def test_implied_operations(admin, alice, acls):
    """DESCRIBE is implied by READ, WRITE, DELETE and ALTER (not by CREATE
    or DESCRIBE_CONFIGS); DESCRIBE_CONFIGS by ALTER_CONFIGS; ALL by
    itself means every operation; nothing else implies anything."""
    names = {op: unique(f"imp{op}") for op in (READ, WRITE, DELETE, ALTER, CREATE, DESCRIBE, DESCRIBE_CONFIGS,
                                               ALTER_CONFIGS, ALL)}
    au.make_topics(admin, list(names.values()), n_records=1)
    acls.add(*(allow("alice", op, TOPIC, name) for op, name in names.items()))
    described = au.metadata_errors(alice, list(names.values()))
    assert {op: described[name] for op, name in names.items()} == {
        READ: NONE, WRITE: NONE, DELETE: NONE, ALTER: NONE, CREATE: TAF, DESCRIBE: NONE,
        DESCRIBE_CONFIGS: TAF, ALTER_CONFIGS: TAF, ALL: NONE,
    }
    assert au.fetch(alice, names[DESCRIBE])[0] == TAF
    assert au.produce(alice, names[READ]) == (TAF, -1)
    assert au.fetch(alice, names[WRITE])[0] == TAF
    ops = (DESCRIBE_CONFIGS, ALTER_CONFIGS, DESCRIBE)
    configs = au.describe_configs(alice, [(CONFIG_TOPIC, names[op]) for op in ops])
    assert [configs[(CONFIG_TOPIC, names[op])][0] for op in ops] == [NONE, NONE, TAF]
    every = names[ALL]
    assert au.produce(alice, every)[0] == NONE
    assert au.fetch(alice, every)[:2] == (NONE, 2)
    assert au.describe_configs(alice, [(CONFIG_TOPIC, every)])[(CONFIG_TOPIC, every)][0] == NONE
    assert au.delete_records(alice, every, 0, 1) == (NONE, 1)


def test_host_acls(admin, alice, bob, acls):
    """An ACL's host is compared with the client's address as text
    (127.0.0.1 here) or is "*"; host names are not resolved."""
    t1, t2, t3 = au.make_topics(admin, [unique("host1"), unique("host2"), unique("host3")], n_records=1)
    acls.add(allow("alice", READ, TOPIC, t1, host="127.0.0.1"), allow("alice", READ, TOPIC, t2, host="10.0.0.1"))
    assert au.fetch(alice, t1)[0] == NONE and au.fetch(alice, t2)[0] == TAF
    acls.add(allow("alice", READ, TOPIC, t3), deny("alice", READ, TOPIC, t3, host="127.0.0.1"))
    assert au.fetch(alice, t3)[0] == TAF
    acls.add(deny("alice", READ, TOPIC, t1, host="10.0.0.1"))
    assert au.fetch(alice, t1)[0] == NONE
    acls.add(allow("bob", READ, TOPIC, t1, host="localhost"))
    assert au.fetch(bob, t1)[0] == TAF


def test_super_users(ab, admin, acls):
    """super.users bypass every ACL, DENY included: admin over SASL, and
    User:ANONYMOUS, the principal of the PLAINTEXT listener."""
    t = au.make_topics(admin, [unique("super")], n_records=1)[0]
    bid = str(broker_id(ab.port))
    acls.add(deny("admin", ALL, TOPIC, t), deny("admin", ALL, CLUSTER, CLUSTER_NAME),
             deny("ANONYMOUS", ALL, TOPIC, t), deny("User:*", ALL, TOPIC, t))
    assert au.produce(admin, t)[0] == NONE
    assert au.fetch(admin, t)[:2] == (NONE, 2)
    assert au.describe_configs(admin, [(CONFIG_BROKER, bid)])[(CONFIG_BROKER, bid)][0] == NONE
    assert au.txn_ready(admin, None)[0] == NONE
    with su.RawConn(ab.port) as anonymous:
        assert au.fetch(anonymous, t)[:2] == (NONE, 2)
        assert au.metadata_errors(anonymous)[t] == NONE
    assert au.delete_records(admin, t, 0, 1) == (NONE, 1)


def test_allow_everyone_if_no_acl_found(open_broker):
    """allow.everyone.if.no.acl.found=true: a resource no ACL matches (for
    any principal or operation) is open to everyone; once one matches,
    literal or prefixed, only the ACLs count. For InitProducerId, WRITE on
    topics counts as granted."""
    with au.clients(open_broker.sasl_port, "admin", "alice", "bob") as (admin, alice, bob):
        a = au.Acls(admin)
        try:
            open_t, guarded, pre = unique("open"), unique("guarded"), unique("open-pfx") + "-"
            au.make_topics(admin, [open_t, guarded, pre + "a"], n_records=1)
            bid = str(broker_id(open_broker.port))
            assert au.produce(alice, open_t)[0] == NONE
            assert au.fetch(alice, open_t)[:2] == (NONE, 2)
            assert au.join_group(alice, unique("open-g"))[0] == NONE
            assert au.describe_configs(alice, [(CONFIG_BROKER, bid)])[(CONFIG_BROKER, bid)][0] == NONE

            a.add(allow("bob", READ, TOPIC, guarded), allow("bob", READ, TOPIC, pre, PREFIXED))
            assert au.fetch(alice, guarded)[0] == TAF
            assert au.fetch(alice, pre + "a")[0] == TAF
            assert au.fetch(bob, guarded)[0] == NONE
            assert au.produce(bob, guarded) == (TAF, -1)

            a.add(allow("bob", DESCRIBE, CLUSTER, CLUSTER_NAME))
            assert au.describe_configs(alice, [(CONFIG_BROKER, bid)])[(CONFIG_BROKER, bid)][:2] == (CAF, CLUSTER_MSG)
            assert au.txn_ready(alice, None)[0] == NONE
        finally:
            a.remove_all()


def test_clients_see_authorization_errors(ab, admin, acls):
    """confluent-kafka over SASL/PLAIN: a producer's record for a topic
    without WRITE fails with TOPIC_AUTHORIZATION_FAILED, a consumer in a
    group without READ gets GROUP_AUTHORIZATION_FAILED; with the ACLs both
    work."""
    from confluent_kafka import Consumer, KafkaError, Producer

    ok, denied = au.make_topics(admin, [unique("ck-ok"), unique("ck-denied")], n_records=1)
    g = unique("ck-g")
    acls.add(allow("alice", WRITE, TOPIC, ok), allow("alice", READ, TOPIC, ok))
    conf = {"bootstrap.servers": ab.sasl_bootstrap, "security.protocol": "sasl_plaintext", "sasl.mechanism": "PLAIN",
            "sasl.username": "alice", "sasl.password": au.USERS["alice"]}
    p = Producer({**conf, "message.timeout.ms": 15000})
    reports = {}
    for topic in (ok, denied):
        p.produce(topic, b"v", on_delivery=lambda err, msg: reports.__setitem__(msg.topic(), err and err.code()))
    assert p.flush(30) == 0
    assert reports == {ok: None, denied: KafkaError.TOPIC_AUTHORIZATION_FAILED}

    def first_event(group):
        c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
        try:
            c.subscribe([ok])
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None:
                    return m.error().code() if m.error() else m.value()
            raise AssertionError(f"nothing consumed in group {group}")
        finally:
            c.close()

    assert first_event(g) == KafkaError.GROUP_AUTHORIZATION_FAILED
    acls.add(allow("alice", READ, GROUP, g))
    assert first_event(g) == b"acl-v0"


def test_acls_survive_restart(ab):
    """ACLs of each kind (LITERAL, PREFIXED, wildcard principal and
    resource, DENY, host, cluster) are all there after a restart, and
    enforced. Restarts the module's broker, so it runs last."""
    t = unique("restart")
    g = unique("restart-g")
    bindings = [
        allow("alice", READ, TOPIC, t), deny("bob", READ, TOPIC, t, host="127.0.0.1"),
        allow("User:*", DESCRIBE, TOPIC, t), allow("alice", READ, GROUP, g[:10], PREFIXED),
        allow("bob", DESCRIBE, GROUP, "*"), allow("alice", IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME),
        allow("alice", WRITE, TRANSACTIONAL_ID, unique("restart-tx")),
        deny("bob", CLUSTER_ACTION, CLUSTER, CLUSTER_NAME),
    ]
    with au.clients(ab.sasl_port, "admin") as (admin,):
        au.make_topics(admin, [t], n_records=1)
        au.Acls(admin).add(*bindings)
        before = au.describe_acls(admin)[2]
    assert set(bindings) <= before
    ab.restart()
    with au.clients(ab.sasl_port, "admin", "alice", "bob") as (admin, alice, bob):
        assert au.describe_acls(admin)[2] == before
        assert au.fetch(alice, t)[:2] == (NONE, 1)
        assert au.fetch(bob, t)[0] == TAF
        assert au.metadata_errors(bob, [t]) == {t: NONE}
        assert au.join_group(alice, g)[0] == NONE
        assert au.coordinator(bob, g)[0] == NONE
        assert au.txn_ready(alice, None)[0] == NONE
        a = au.Acls(admin)
        a.track(*bindings)
        a.remove_all()
