"""SASL_SSL client listeners on a 3-broker ZooKeeper-mode cluster, against
Apache Kafka 3.9.1 with KSHARD_TEST_TARGET=kafka: brokers talk to each other
over PLAINTEXT (inter.broker.listener.name=PLAINTEXT) and serve clients on a
SASL_SSL listener of their own (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN; one
PEM keystore with SANs 127.0.0.1/localhost shared by all three).

- A SCRAM credential made with kafka-configs --bootstrap-server (an
  AlterUserScramCredentials the controller handles) lands in ZooKeeper as
  Kafka's ZooKeeper mode writes it: /config/users/<user> holds
  {"version":1,"config":{"SCRAM-SHA-256":"salt=..,stored_key=..,server_key=..,iterations=.."}}
  and a /config/changes/config_change_<10 digits> notification
  {"version":2,"entity_path":"users/<user>"} tells every broker.
- Every broker then accepts the user's SCRAM login on its SASL_SSL
  listener; an idempotent acks=all producer and a group consumer move
  records through a replication-factor-3 topic over SASL_SSL alone; Metadata
  over SASL_SSL lists each broker at its SASL_SSL port.
- Deleting the credential with kafka-configs makes the login fail on every
  broker (SASL_AUTHENTICATION_FAILED with Kafka's message).
- A credential written with kafka-configs --zookeeper (ConfigCommand's
  ZooKeeper path, still there in 3.9 for SCRAM users only) is picked up by
  every broker as well.

security_util (tests/compat, on sys.path through cluster_util) makes the
certificates and speaks SaslHandshake/SaslAuthenticate. It reads TARGET
from `conftest`, which under tests/cluster is this directory's conftest, so
the cluster target is lent to it before the import.
"""

import base64
import hashlib
import hmac
import json
import re
import time

import pytest

import cluster_util as cl
import conftest as _cluster_conftest  # tests/cluster/conftest.py

if not hasattr(_cluster_conftest, "TARGET"):
    _cluster_conftest.TARGET = cl.TARGET  # security_util does `from conftest import TARGET`
import security_util as su  # noqa: E402  (tests/compat)

TOPIC = "sec-cluster"
N = 30  # records per partition
NOTIFICATION = re.compile(r"^config_change_\d{10}$")
# Kafka's ScramCredentialUtils.credentialToString, field order included.
CREDENTIAL = re.compile(r"^salt=([A-Za-z0-9+/=]+),stored_key=([A-Za-z0-9+/=]+),"
                        r"server_key=([A-Za-z0-9+/=]+),iterations=(\d+)$")
SCRAM_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism"
PROPAGATE_S = 30.0


def config_command(*args, check=True):
    """kafka-configs (kafka.admin.ConfigCommand) from Kafka's jars."""
    return cl.kafka_tool("kafka.admin.ConfigCommand", *args, timeout_s=120, check=check)


def sasl_ssl_overrides(certs):
    ov = {
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        "listener.name.sasl_ssl.ssl.keystore.location": str(certs.path("broker")),
        "connection.failed.authentication.delay.ms": "0",
        "offsets.topic.replication.factor": "3",
        "offsets.topic.num.partitions": "3",
    }
    ov.update(su.sasl_listener_overrides("SASL_SSL"))
    return ov


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return su.Certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def scluster(module_cluster, certs):
    """Three brokers, PLAINTEXT (inter-broker, listed first so the fixture's
    readiness probe works) and SASL_SSL on a port of each one's own."""

    def listeners(b):
        b.sasl_ssl_port = cl.cu.free_port()
        return {"listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_SSL://127.0.0.1:{b.sasl_ssl_port}"}

    module_cluster.start(3, sasl_ssl_overrides(certs), per_broker=listeners)
    module_cluster.certs = certs
    return module_cluster


def tls(c):
    return su.tls_context(c.certs)


def login(c, b, mechanism, user, password):
    """(error, message) of a fresh SCRAM login on b's SASL_SSL listener."""
    with su.RawConn(b.sasl_ssl_port, tls(c)) as conn:
        err, _ = conn.api_versions()
        assert err == su.NONE
        err, msg, _, _ = su.scram_login(conn, mechanism, user, password)
        return err, msg


def login_ok(c, mechanism, user, password):
    """A predicate of a broker: its (error, message) of a successful login, else None."""

    def pred(b):
        r = login(c, b, mechanism, user, password)
        return r if r[0] == su.NONE else None

    return pred


def login_failed(c, mechanism, user, password):
    def pred(b):
        r = login(c, b, mechanism, user, password)
        return r if r[0] != su.NONE else None

    return pred


def each_broker_until(c, pred, what):
    """Polls pred(broker) for every broker (each until true); returns
    {broker id: last value}."""
    return {b.broker_id: cl.wait_for(lambda: pred(b), PROPAGATE_S, f"{what} on broker {b.broker_id}", 0.2)
            for b in c.live()}


def notifications(c):
    """{znode name: JSON} of /config/changes (absent until the first change)."""
    if not c.zk_exists("/config/changes"):
        return {}
    out = {}
    for name in c.zk_children("/config/changes"):
        assert NOTIFICATION.match(name), name
        out[name] = c.zk_json(f"/config/changes/{name}")
    return out


def new_notifications(c, before):
    now = notifications(c)
    return [now[n] for n in sorted(now) if n not in before]


def check_credential(text, mechanism, password, iterations):
    """One SCRAM credential string as Kafka stores it: base64 fields that
    are the RFC 5802 keys of `password`; returns the decoded salt."""
    m = CREDENTIAL.match(text)
    assert m, f"credential not in Kafka's salt=,stored_key=,server_key=,iterations= form: {text!r}"
    salt, stored_key, server_key = (base64.b64decode(m.group(i), validate=True) for i in (1, 2, 3))
    assert int(m.group(4)) == iterations
    digest = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}[mechanism]
    salted = hashlib.pbkdf2_hmac(digest().name, password.encode(), salt, iterations)
    assert stored_key == digest(hmac.new(salted, b"Client Key", digest).digest()).digest(), "stored_key"
    assert server_key == hmac.new(salted, b"Server Key", digest).digest(), "server_key"
    return salt


@pytest.fixture(scope="module")
def alice(scluster):
    """alice's SCRAM-SHA-256 credential (8192 iterations) made through
    broker 2's PLAINTEXT listener; returns the /config/changes names that
    existed before. Before it, alice cannot log in anywhere."""
    c = scluster
    # Polled: the fixture's readiness probe only uses the PLAINTEXT listener.
    failed = each_broker_until(c, login_failed(c, "SCRAM-SHA-256", "alice", "alice-secret"), "a failed login")
    assert set(failed.values()) == {(su.SASL_AUTHENTICATION_FAILED, f"{SCRAM_FAILED} SCRAM-SHA-256")}, failed
    before = notifications(c)
    out = config_command("--bootstrap-server", c.broker(2).bootstrap, "--alter", "--add-config",
                         "SCRAM-SHA-256=[iterations=8192,password=alice-secret]",
                         "--entity-type", "users", "--entity-name", "alice").stdout
    assert out == "Completed updating config for user alice.\n", out
    return before


def test_scram_credential_lands_in_zookeeper_in_kafkas_shape(scluster, alice):
    c = scluster
    data, _ = c.zk_get("/config/users/alice")
    node = json.loads(data)
    assert sorted(node) == ["config", "version"] and node["version"] == 1, node
    assert list(node["config"]) == ["SCRAM-SHA-256"], node
    salt = check_credential(node["config"]["SCRAM-SHA-256"], "SCRAM-SHA-256", "alice-secret", 8192)
    assert len(salt) >= 16, salt
    assert new_notifications(c, alice) == [{"version": 2, "entity_path": "users/alice"}]
    # Kafka's Json.encodeAsString: compact, "version" first.
    assert data == json.dumps(node, separators=(",", ":")).encode() and data.startswith(b'{"version":1,"config":{')
    # DescribeUserScramCredentials through another broker reads it back.
    out = config_command("--bootstrap-server", c.broker(1).bootstrap, "--describe",
                         "--entity-type", "users", "--entity-name", "alice").stdout
    assert out == "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n", out


def test_scram_login_produce_consume_and_metadata_over_sasl_ssl(scluster, alice):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import NewTopic

    c = scluster
    ok = each_broker_until(c, login_ok(c, "SCRAM-SHA-256", "alice", "alice-secret"), "alice's SCRAM-SHA-256 login")
    # A successful SaslAuthenticate v1 carries an empty (not null) error message.
    assert ok == {b.broker_id: (su.NONE, "") for b in c.live()}
    for b in c.live():
        # The right user with a wrong password, and the mechanism alice has no credential for.
        err, msg = login(c, b, "SCRAM-SHA-256", "alice", "not-alice-secret")
        assert (err, msg) == (su.SASL_AUTHENTICATION_FAILED, f"{SCRAM_FAILED} SCRAM-SHA-256"), (err, msg)
        err, msg = login(c, b, "SCRAM-SHA-512", "alice", "alice-secret")
        assert (err, msg) == (su.SASL_AUTHENTICATION_FAILED, f"{SCRAM_FAILED} SCRAM-SHA-512"), (err, msg)

    # Metadata: over SASL_SSL every broker is at its SASL_SSL port, over
    # PLAINTEXT at its PLAINTEXT port.
    want_ssl = sorted((b.broker_id, "127.0.0.1", b.sasl_ssl_port) for b in c.live())
    want_plain = {b.broker_id: ("127.0.0.1", b.port) for b in c.live()}
    for b in c.live():
        with su.RawConn(b.sasl_ssl_port, tls(c)) as conn:
            conn.api_versions()
            assert su.scram_login(conn, "SCRAM-SHA-256", "alice", "alice-secret")[0] == su.NONE
            assert sorted(conn.metadata()) == want_ssl
        assert {k: v[:2] for k, v in cl.raw_metadata(b.port)["brokers"].items()} == want_plain

    # Replication factor 3, one partition led by each broker.
    admin = c.admin()
    futs = admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=-1,
                                         replica_assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]],
                                         config={"min.insync.replicas": "2"})], operation_timeout=30)
    futs[TOPIC].result(60)
    c.wait_converged(topics=[TOPIC])
    for p in range(3):
        assert sorted(c.partition_state(TOPIC, p)["isr"]) == [1, 2, 3]

    sec = su.ClientSec(c.certs, "SASL_SSL", mechanism="SCRAM-SHA-256", user="alice", password="alice-secret")
    bootstrap = ",".join(f"127.0.0.1:{b.sasl_ssl_port}" for b in c.live())
    failures = []
    delivered = []

    def on_delivery(err, msg):
        (failures if err else delivered).append(err or (msg.partition(), msg.offset()))

    prod = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                     "linger.ms": 5, **sec.librdkafka()})
    sent = {(p, f"k{p}-{i}", f"v{p}-{i}") for p in range(3) for i in range(N)}
    for p, k, v in sorted(sent):
        prod.produce(TOPIC, key=k, value=v, partition=p, on_delivery=on_delivery)
    assert prod.flush(60) == 0
    assert failures == [] and len(delivered) == 3 * N, (failures, len(delivered))
    assert sorted(delivered) == [(p, o) for p in range(3) for o in range(N)]

    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "sec-cluster-group",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **sec.librdkafka()})
    got = set()
    try:
        cons.subscribe([TOPIC])
        deadline = time.monotonic() + 90
        while len(got) < len(sent) and time.monotonic() < deadline:
            m = cons.poll(1.0)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.add((m.partition(), m.key().decode(), m.value().decode()))
        assert got == sent
        # The group's coordinator, found and reached over SASL_SSL, takes the offsets.
        committed = cons.commit(asynchronous=False)
        assert sorted((tp.partition, tp.offset, tp.error) for tp in committed) == [(p, N, None) for p in range(3)]
    finally:
        cons.close()


def test_deleted_scram_credential_fails_login_on_every_broker(scluster, alice):
    c = scluster
    each_broker_until(c, login_ok(c, "SCRAM-SHA-256", "alice", "alice-secret"),
                      "alice's SCRAM-SHA-256 login")
    before = notifications(c)
    out = config_command("--bootstrap-server", c.broker(3).bootstrap, "--alter", "--delete-config",
                         "SCRAM-SHA-256", "--entity-type", "users", "--entity-name", "alice").stdout
    assert out == "Completed updating config for user alice.\n", out
    failed = each_broker_until(c, login_failed(c, "SCRAM-SHA-256", "alice", "alice-secret"), "alice's login to fail")
    for bid, (err, msg) in failed.items():
        assert (err, msg) == (su.SASL_AUTHENTICATION_FAILED, f"{SCRAM_FAILED} SCRAM-SHA-256"), (bid, err, msg)
    # The user's last config gone, ZooKeeper mode deletes the entity znode
    # (and still writes a notification).
    assert not c.zk_exists("/config/users/alice")
    assert new_notifications(c, before) == [{"version": 2, "entity_path": "users/alice"}]


def test_scram_credential_written_through_zookeeper_is_picked_up(scluster):
    """kafka-configs --zookeeper: ConfigCommand writes the entity znode and
    the change notification itself, no broker involved."""
    c = scluster
    for b in c.live():
        err, msg = login(c, b, "SCRAM-SHA-512", "bob", "bob-secret")
        assert (err, msg) == (su.SASL_AUTHENTICATION_FAILED, f"{SCRAM_FAILED} SCRAM-SHA-512"), (b.broker_id, err, msg)
    before = notifications(c)
    out = config_command("--zookeeper", c.zk_connect, "--alter", "--add-config",
                         "SCRAM-SHA-512=[password=bob-secret]", "--entity-type", "users", "--entity-name", "bob").stdout
    assert "Completed updating config for entity: user-principal 'bob'." in out, out
    node = json.loads(c.zk_get("/config/users/bob")[0])
    assert node["version"] == 1 and list(node["config"]) == ["SCRAM-SHA-512"], node
    check_credential(node["config"]["SCRAM-SHA-512"], "SCRAM-SHA-512", "bob-secret", 4096)
    assert new_notifications(c, before) == [{"version": 2, "entity_path": "users/bob"}]
    each_broker_until(c, login_ok(c, "SCRAM-SHA-512", "bob", "bob-secret"),
                      "bob's SCRAM-SHA-512 login")
    for b in c.live():
        err, msg = login(c, b, "SCRAM-SHA-512", "bob", "wrong")
        assert (err, msg) == (su.SASL_AUTHENTICATION_FAILED, f"{SCRAM_FAILED} SCRAM-SHA-512"), (err, msg)


def scram_credential(mechanism, password, salt, iterations):
    """Kafka's ZooKeeper form of a SCRAM credential (ScramCredentialUtils)."""
    digest = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}[mechanism]
    salted = hashlib.pbkdf2_hmac(digest().name, password.encode(), salt, iterations)
    stored_key = digest(hmac.new(salted, b"Client Key", digest).digest()).digest()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    b64 = lambda raw: base64.b64encode(raw).decode()  # noqa: E731
    return f"salt={b64(salt)},stored_key={b64(stored_key)},server_key={b64(server_key)},iterations={iterations}"


def test_scram_credential_written_with_kazoo_is_picked_up(scluster):
    """The entity znode and a sequential change notification written
    straight into ZooKeeper (what AdminZkClient does), with a salt of
    arbitrary bytes (Kafka's own salts are base-36 ASCII) and a
    non-default iteration count."""
    c = scluster
    for b in c.live():
        err, msg = login(c, b, "SCRAM-SHA-256", "carol", "carol-secret")
        assert (err, msg) == (su.SASL_AUTHENTICATION_FAILED, f"{SCRAM_FAILED} SCRAM-SHA-256"), (b.broker_id, err, msg)
    salt = bytes(range(250, 256)) + bytes(range(0, 14))
    node = {"version": 1, "config": {"SCRAM-SHA-256": scram_credential("SCRAM-SHA-256", "carol-secret", salt, 5000)}}
    c.zk.create(c.path("/config/users/carol"), json.dumps(node, separators=(",", ":")).encode(), makepath=True)
    c.zk.create(c.path("/config/changes/config_change_"), b'{"version":2,"entity_path":"users/carol"}',
                sequence=True)
    each_broker_until(c, login_ok(c, "SCRAM-SHA-256", "carol", "carol-secret"), "carol's SCRAM-SHA-256 login")
    for b in c.live():
        err, msg = login(c, b, "SCRAM-SHA-256", "carol", "wrong")
        assert (err, msg) == (su.SASL_AUTHENTICATION_FAILED, f"{SCRAM_FAILED} SCRAM-SHA-256"), (err, msg)
