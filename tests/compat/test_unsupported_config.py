"""server.properties keys that ask for something kshard does not do stop
start-up, naming the key (src/config/support.rs holds the table).

Apache Kafka does these things, so against KSHARD_TEST_TARGET=kafka the
refusal cases are skipped. The first test runs on both: started with
`authorizer.class.name` set to a real authorizer class (StandardAuthorizer,
the KRaft fixture's; kshard takes it, or AclAuthorizer, as Kafka's ACL
semantics) the broker enforces ACLs, which the test proves with a DENY ACL
that makes a produce fail with TOPIC_AUTHORIZATION_FAILED; kshard refuses a
class it is not (it cannot load Java classes) instead of starting a
wide-open broker. Keys whose values ask for nothing kshard lacks
(super.users, ssl.*/sasl.* without an SSL or SASL listener, an unused SSL
entry in listener.security.protocol.map) start on both targets.
"""

import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

import compat_util as cu
from conftest import KSHARD_BIN, TARGET

KAFKA = TARGET == "kafka"
EXIT_TIMEOUT_S = 30.0

only_kshard = pytest.mark.skipif(
    KAFKA, reason="Apache Kafka supports this; the refusal is kshard's"
)


def start_kshard_expecting_refusal(overrides):
    """Runs kshard with `overrides`; returns (exit code, output)."""
    if not KSHARD_BIN.exists():
        pytest.fail(f"{KSHARD_BIN} missing: cargo build --release --bins")
    with tempfile.TemporaryDirectory(prefix="compat-refuse-") as tmp:
        base = {
            "listeners": f"PLAINTEXT://127.0.0.1:{cu.free_port()}",
            "log.dirs": str(Path(tmp) / "data"),
        }
        base.update(overrides)
        cmd = [str(KSHARD_BIN)]
        for k, v in base.items():
            cmd += ["--override", f"{k}={v}"]
        try:
            p = subprocess.run(
                cmd, capture_output=True, text=True, timeout=EXIT_TIMEOUT_S, cwd=tmp
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"kshard started with {overrides} instead of refusing")
        return p.returncode, p.stdout + p.stderr


def assert_refused(overrides, key):
    code, output = start_kshard_expecting_refusal(overrides)
    assert code != 0, output
    assert f"configuration {key}:" in output, output
    assert "kshard does not support this" in output, output
    return output


def test_authorizer_class_name(broker_factory):
    if not KAFKA:
        out = assert_refused(
            {"authorizer.class.name": "com.example.CustomAuthorizer"},
            "authorizer.class.name",
        )
        assert "AclAuthorizer" in out
    # The broker starts with ACLs on. No ACL exists yet, so
    # allow.everyone.if.no.acl.found lets ANONYMOUS create a DENY ACL,
    # which then stops its own produce to that topic.
    b = broker_factory(
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        }
    )
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    deny = AclBinding(
        ResourceType.TOPIC,
        "secret",
        ResourcePatternType.LITERAL,
        "User:ANONYMOUS",
        "*",
        AclOperation.ALL,
        AclPermissionType.DENY,
    )
    for f in admin.create_acls([deny]).values():
        f.result(30)
    errors = []
    p = Producer({"bootstrap.servers": b.bootstrap, "message.timeout.ms": 10000})
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        p.produce("secret", b"v", on_delivery=lambda err, msg: errors.append(err))
        p.flush(15)
    assert errors and errors[0] is not None, "produce to a denied topic succeeded"
    assert "AUTHORIZATION" in errors[0].name(), errors[0]


REFUSED = [
    (
        {
            "listeners": "PLAINTEXT://127.0.0.1:{port},SECURE://127.0.0.1:{port2}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,GSSAPI",
        },
        "sasl.enabled.mechanisms",
    ),
    ({"principal.builder.class": "com.example.PrincipalBuilder"}, "principal.builder.class"),
    ({"create.topic.policy.class.name": "com.example.Policy"}, "create.topic.policy.class.name"),
    ({"max.connections.per.ip": "10"}, "max.connections.per.ip"),
    ({"zookeeper.set.acl": "true"}, "zookeeper.set.acl"),
    ({"zookeeper.ssl.client.enable": "true"}, "zookeeper.ssl.client.enable"),
    ({"process.roles": "broker,controller"}, "process.roles"),
    ({"remote.log.storage.system.enable": "true"}, "remote.log.storage.system.enable"),
    ({"compression.type": "zstd"}, "compression.type"),
]


@only_kshard
@pytest.mark.parametrize(
    "overrides,key", REFUSED, ids=[f"{k}" + ("-map" if "map" in str(o) else "") for o, k in REFUSED]
)
def test_refused_at_start_up(overrides, key, tmp_path):
    filled = {
        k: v.format(port=cu.free_port(), port2=cu.free_port(), tmp=tmp_path)
        for k, v in overrides.items()
    }
    assert_refused(filled, key)


@only_kshard
def test_refusal_from_properties_file(tmp_path):
    """The same check applies to the file, not only to --override."""
    props = tmp_path / "server.properties"
    props.write_text(
        f"listeners=PLAINTEXT://127.0.0.1:{cu.free_port()}\n"
        f"log.dirs={tmp_path / 'data'}\n"
        "authorizer.class.name=com.example.CustomAuthorizer\n"
        "super.users=User:admin\n"
    )
    p = subprocess.run(
        [str(KSHARD_BIN), str(props)], capture_output=True, text=True, timeout=EXIT_TIMEOUT_S
    )
    assert p.returncode != 0
    assert "configuration authorizer.class.name:" in p.stderr, p.stderr


def test_harmless_security_keys_start(broker_factory):
    """Keys that configure nothing without TLS, SASL or an authorizer are
    accepted by both brokers."""
    protocol_map = (
        "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL"
        if KAFKA
        else "PLAINTEXT:PLAINTEXT,SSL:SSL"
    )
    b = broker_factory(
        {
            "listener.security.protocol.map": protocol_map,
            "super.users": "User:admin",
            "ssl.keystore.location": "/nonexistent/keystore.jks",
            "ssl.client.auth": "required",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "authorizer.class.name": "",
        }
    )
    p = Producer({"bootstrap.servers": b.bootstrap})
    delivered = []
    p.produce("harmless", b"v", on_delivery=lambda err, msg: delivered.append(err))
    p.flush(30)
    assert delivered == [None]
    if not KAFKA:
        assert "accepted without effect" in b.log_text()
    md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10)
    assert "harmless" in md.topics
