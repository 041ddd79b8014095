"""TLS and SASL listeners with Kafka's keys (listeners with SSL,
SASL_PLAINTEXT, SASL_SSL and custom names in listener.security.protocol.map;
ssl.keystore.* as a PEM file, inline PEM, PKCS12 and JKS; ssl.truststore.*,
ssl.client.auth, ssl.principal.mapping.rules, ssl.enabled.protocols;
sasl.enabled.mechanisms with PLAIN users from the JAAS line and SCRAM users
made with kafka-configs; connection.failed.authentication.delay.ms;
connections.max.reauth.ms; a keystore reload through kafka-configs), driven
by confluent-kafka, kcat, the Java client (kafka-clients 3.9.1,
tests/compat/java Client.java --client-props) and kafka-python, and by a raw
Kafka-protocol client (security_util.RawConn, Scram) for the SASL state
machine.

Two brokers for the module: `main` (PLAINTEXT first, then SSL, MTLS,
REQUESTED, TLS13, SSL_P12, SSL_JKS, SASL_PLAINTEXT, SASL_SSL;
connection.failed.authentication.delay.ms=0) and `reauth`
(connections.max.reauth.ms=3000, the default failed-authentication delay,
an inline PEM keystore and the keystore the reload test replaces), both made
by security_util.start_broker with the same keys for kshard and Kafka.

What Kafka 3.9.1 (KRaft) was seen to do, beyond the asserts' own comments:
the SaslHandshake mechanism list is [PLAIN, SCRAM-SHA-512, SCRAM-SHA-256]
(HashMap order; compared as a set here); kafka-configs --describe lists a
user's SCRAM mechanisms in an order that changes from one broker JVM to the
next (compared as a set); with a non-zero
connection.failed.authentication.delay.ms the failure response is written
together with the close, up to ~300 ms late (the network thread's poll
interval), 100 ms or 50 ms configured alike.
"""

import json
import logging
import os
import re
import shutil
import ssl
import subprocess
import threading
import time
from pathlib import Path

import pytest

import compat_util as cu
import security_util as su
from describe_configs_util import broker_id
from test_dynamic_config import kafka_configs

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
JAVA_DIR = Path(__file__).resolve().parent / "java"
JAVA_CLIENT_VERSION = "3.9.1"
N = 25  # records per round trip
TS_BASE = int(time.time() * 1000) - 60_000
PLAIN_FAILED = "Authentication failed: Invalid username or password"
SCRAM_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism"

MAIN_LISTENERS = [
    ("SSL", "SSL"),
    ("MTLS", "SSL"),
    ("REQUESTED", "SSL"),
    ("TLS13", "SSL"),
    ("SSL_P12", "SSL"),
    ("SSL_JKS", "SSL"),
    ("SASL_PLAINTEXT", "SASL_PLAINTEXT"),
    ("SASL_SSL", "SASL_SSL"),
]
REAUTH_LISTENERS = [("SSL", "SSL"), ("SSL_INLINE", "SSL"), ("SASL_PLAINTEXT", "SASL_PLAINTEXT")]
REAUTH_MS = 3000
# connection.failed.authentication.delay.ms on `main`: 0 answers a failed
# login at once (the 10,000-login burst); `reauth` keeps Kafka's default 100.
FAILED_AUTH_DELAY_MS = 0
DEFAULT_FAILED_AUTH_DELAY_MS = 100


def main_overrides(certs):
    ov = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.path("broker")),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "ssl.principal.mapping.rules": su.PRINCIPAL_RULES,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.requested.ssl.client.auth": "requested",
        "listener.name.tls13.ssl.enabled.protocols": "TLSv1.3",
        "sasl.enabled.mechanisms": ",".join(su.MECHANISMS),
        "connection.failed.authentication.delay.ms": str(FAILED_AUTH_DELAY_MS),
    }
    for name, kind, path in (("ssl_p12", "PKCS12", certs.p12), ("ssl_jks", "JKS", certs.jks)):
        ov.update({
            f"listener.name.{name}.ssl.keystore.type": kind,
            f"listener.name.{name}.ssl.keystore.location": str(path),
            f"listener.name.{name}.ssl.keystore.password": su.STORE_PASSWORD,
            f"listener.name.{name}.ssl.key.password": su.STORE_PASSWORD,
        })
    ov.update(su.sasl_listener_overrides("SASL_PLAINTEXT"))
    ov.update(su.sasl_listener_overrides("SASL_SSL"))
    return ov


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return su.Certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def main(broker_module_factory, certs):
    b = su.start_broker(broker_module_factory, MAIN_LISTENERS, main_overrides(certs))
    b.certs = certs
    return b


@pytest.fixture(scope="module")
def reauth(broker_module_factory, certs, tmp_path_factory):
    """connections.max.reauth.ms=3000; SSL's keystore (per listener, a copy
    of broker.pem the reload test replaces) and SSL_INLINE's inline PEM."""
    d = tmp_path_factory.mktemp("reload")
    keystore = d / "keystore.pem"
    shutil.copy(certs.path("broker"), keystore)
    ov = {
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": str(keystore),
        "listener.name.ssl_inline.ssl.keystore.type": "PEM",
        "listener.name.ssl_inline.ssl.keystore.key": certs.inline("broker", "key"),
        "listener.name.ssl_inline.ssl.keystore.certificate.chain": certs.inline("broker", "crt"),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": su.PLAIN_JAAS,
        "connections.max.reauth.ms": str(REAUTH_MS),
    }
    b = su.start_broker(broker_module_factory, REAUTH_LISTENERS, ov)
    b.keystore = keystore
    return b


def bootstrap(b, listener):
    return f"127.0.0.1:{b.ports[listener]}"


# --- kafka-configs and SCRAM users ----------------------------------------------


def configs_ok(b, *args):
    r = kafka_configs(b.bootstrap, *args)
    assert r.returncode == 0, f"kafka-configs {args} exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def scram_ok(b, mechanism, user, password, listener="SASL_PLAINTEXT", tls=None):
    with su.RawConn(b.ports[listener], tls) as c:
        c.api_versions()
        return su.scram_login(c, mechanism, user, password)[0] == su.NONE


def wait_for(pred, what, timeout_s=30.0, interval_s=0.2):
    deadline = time.monotonic() + timeout_s
    while True:
        if pred():
            return
        assert time.monotonic() < deadline, f"timed out after {timeout_s}s waiting for {what}"
        time.sleep(interval_s)


ALTERED_TWICE = ("org.apache.kafka.common.errors.DuplicateResourceException: "
                 "A user credential cannot be altered twice in the same request")


def scram_add(b, user, mechanism_config):
    return kafka_configs(b.bootstrap, "--alter", "--add-config", mechanism_config,
                         "--entity-type", "users", "--entity-name", user)


@pytest.fixture(scope="module")
def scram_users(main):
    """alice: SCRAM-SHA-256 (8192 iterations) and SCRAM-SHA-512 (default
    4096), password alice-secret; carol likewise (the delete test's user).
    Both mechanisms of one user in one AlterUserScramCredentials request:
    the KRaft controller (the reference broker here) refuses it; kshard
    answers as Kafka's ZooKeeper-mode ZkAdminManager, which refuses only a
    user-mechanism pair named twice. So the users are made one call per
    mechanism."""
    r = scram_add(main, "alice", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
                                 "SCRAM-SHA-512=[password=alice-secret]")
    if su.TARGET == "kafka":
        assert r.returncode == 1 and ALTERED_TWICE in r.stderr, (r.returncode, r.stdout, r.stderr)
    else:
        assert r.returncode == 0, (r.stdout, r.stderr)
    for user in ("alice", "carol"):
        for config in (f"SCRAM-SHA-256=[iterations=8192,password={user}-secret]",
                       f"SCRAM-SHA-512=[password={user}-secret]"):
            r = scram_add(main, user, config)
            assert r.returncode == 0, (config, r.stdout, r.stderr)
    for user in ("alice", "carol"):
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            wait_for(lambda: scram_ok(main, mech, user, f"{user}-secret"), f"{mech} login of {user}")
    return main


# --- the four clients -------------------------------------------------------------


def rt_confluent(port, sec, topic, n=N):
    from confluent_kafka import Consumer, Producer, TopicPartition

    errors = []
    base = {"bootstrap.servers": f"127.0.0.1:{port}", "error_cb": lambda e: errors.append(str(e)),
            **sec.librdkafka()}
    p = Producer({**base, "acks": "all", "message.timeout.ms": 30000})
    for i in range(n):
        p.produce(topic, key=cu.rec_key(topic, i), value=cu.rec_value(topic, i), partition=0)
    assert p.flush(40) == 0, f"confluent-kafka: records not delivered; errors {errors}"
    c = Consumer({**base, "group.id": f"g-{topic}", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    assert got == [(i, cu.rec_key(topic, i), cu.rec_value(topic, i)) for i in range(n)], errors


def kcat_args(port, sec):
    args = ["-b", f"127.0.0.1:{port}"]
    for k, v in sec.librdkafka().items():
        args += ["-X", f"{k}={v}"]
    return args


def rt_kcat(port, sec, topic, n=N):
    lines = "".join(f"{cu.rec_key(topic, i).decode()}|{cu.rec_value(topic, i).decode()}\n" for i in range(n))
    r = subprocess.run([KCAT, "-P", *kcat_args(port, sec), "-t", topic, "-p", "0", "-K", "|"],
                       input=lines.encode(), capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    r = subprocess.run([KCAT, "-C", *kcat_args(port, sec), "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
                        "-f", "%o|%k|%s\\n"], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    want = "".join(f"{i}|{line}" for i, line in enumerate(lines.splitlines(keepends=True)))
    assert r.stdout.decode() == want


def kcat_refused(port, sec):
    """kcat -L against a listener that refuses the client: its stderr."""
    r = subprocess.run([KCAT, "-L", *kcat_args(port, sec), "-m", "2"], capture_output=True, timeout=60)
    assert r.returncode != 0, f"kcat -L succeeded: {r.stdout.decode()[:500]}"
    lines = (re.sub(r"^%\d\|[\d.]+\|", "", re.sub(r"after \d+ms", "after Nms", line))
             for line in r.stderr.decode().splitlines())
    return "\n".join(dict.fromkeys(lines))


def java_classpath():
    base = JAVA_DIR / "target" / f"kc-{JAVA_CLIENT_VERSION}"
    if not (base / "classes" / "kshard" / "compat" / "Client.class").exists():
        pytest.fail("Java client not built: run scripts/setup.sh")
    return f"{base / 'classes'}:{base / 'libs'}/*"


def java(*args, timeout_s=120):
    cmd = ["nice", "java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
           "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", java_classpath(), "kshard.compat.Client", *args]
    return subprocess.run(cmd, capture_output=True, timeout=timeout_s, text=True)


def java_props(tmp_path, sec, **extra):
    props = {**sec.java(), **extra}
    return su.write_java_props(tmp_path / f"client-{len(list(tmp_path.iterdir()))}.properties", props)


def rt_java(port, sec, topic, tmp_path, n=N):
    props = java_props(tmp_path, sec)
    bs = f"127.0.0.1:{port}"
    r = java("produce", "--bootstrap", bs, "--topic", topic, "--partitions", "1", "--count", str(n),
             "--ts-base", str(TS_BASE), "--client-props", props)
    assert r.returncode == 0, r.stderr[-3000:]
    acked = {row["i"]: row["o"] for row in map(json.loads, r.stdout.splitlines())}
    assert acked == {i: i for i in range(n)}
    r = java("consume", "--bootstrap", bs, "--topic", topic, "--partitions", "1", "--timeout-ms", "30000",
             "--client-props", props)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    got = [(row["o"], row["k"].encode(), row["v"].encode(), [(k, v.encode()) for k, v in row["h"]], row["ts"])
           for row in rows]
    cu.verify_partition_records(got, topic, list(range(n)), ts_base=TS_BASE)


def java_refused(port, sec, tmp_path):
    """A Java producer against a listener that refuses it: its stderr."""
    props = java_props(tmp_path, sec, **{"max.block.ms": "15000", "request.timeout.ms": "10000"})
    r = java("produce", "--bootstrap", f"127.0.0.1:{port}", "--topic", "refused", "--partitions", "1",
             "--count", "1", "--ts-base", "0", "--client-props", props)
    assert r.returncode != 0, f"Java producer succeeded: {r.stdout[:500]}"
    return r.stderr


def rt_kafka_python(port, sec, topic, n=N):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    kw = {"bootstrap_servers": f"127.0.0.1:{port}", **sec.kafka_python()}
    p = KafkaProducer(acks="all", **kw)
    try:
        offsets = [p.send(topic, key=cu.rec_key(topic, i), value=cu.rec_value(topic, i), partition=0)
                   .get(timeout=30).offset for i in range(n)]
    finally:
        p.close(timeout=10)
    assert offsets == list(range(n))
    c = KafkaConsumer(enable_auto_commit=False, consumer_timeout_ms=1000, **kw)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got += [(r.offset, r.key, r.value) for r in recs]
    finally:
        c.close()
    assert got == [(i, cu.rec_key(topic, i), cu.rec_value(topic, i)) for i in range(n)]


def confluent_refused(port, sec):
    """librdkafka's errors (error_cb) while a client fails to connect."""
    from confluent_kafka import KafkaException, Producer

    errors = []
    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "error_cb": lambda e: errors.append(str(e)),
                  **sec.librdkafka()})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        p.poll(0.1)
    with pytest.raises(KafkaException):
        p.list_topics(timeout=1)
    return "\n".join(dict.fromkeys(re.sub(r"after \d+ms", "after Nms", e) for e in errors))


def kafka_python_refused(port, sec, caplog):
    """kafka-python: the exception its producer raises, plus what it logged."""
    from kafka import KafkaProducer

    caplog.clear()
    with caplog.at_level(logging.WARNING):
        with pytest.raises(Exception) as ei:
            p = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=5000, max_block_ms=5000,
                              reconnect_backoff_max_ms=500, bootstrap_timeout_ms=3000,
                              **sec.kafka_python())
            try:
                p.send("refused", b"x").get(timeout=5)
            finally:
                p.close(timeout=1)
    logged = dict.fromkeys(re.sub(r"\d+\.\d+ secs", "N secs", r.getMessage()) for r in caplog.records)
    return f"{ei.type.__name__}: {ei.value}\n" + "\n".join(logged)


CLIENTS = ["confluent", "kcat", "java", "kafka-python"]


def round_trip(client, port, sec, topic, tmp_path):
    if client == "confluent":
        rt_confluent(port, sec, topic)
    elif client == "kcat":
        if KCAT is None:
            pytest.skip("kcat not installed")
        rt_kcat(port, sec, topic)
    elif client == "java":
        rt_java(port, sec, topic, tmp_path)
    else:
        rt_kafka_python(port, sec, topic)


def refused(client, port, sec, tmp_path, caplog):
    if client == "confluent":
        return confluent_refused(port, sec)
    if client == "kcat":
        if KCAT is None:
            pytest.skip("kcat not installed")
        return kcat_refused(port, sec)
    if client == "java":
        return java_refused(port, sec, tmp_path)
    return kafka_python_refused(port, sec, caplog)


def still_serving(b, certs):
    """The broker answers on PLAINTEXT and completes a TLS handshake with
    alice's certificate on MTLS."""
    assert cu.probe_ready("127.0.0.1", b.port)
    with su.RawConn(b.ports["MTLS"], su.tls_context(certs, cert="alice")) as c:
        assert c.api_versions()[0] == su.NONE


# --- 1. TLS listeners ---------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_ssl_round_trip(main, certs, client, tmp_path):
    """Produce and consume over the SSL listener (PEM keystore file, the CA
    trusted by the client, hostname 127.0.0.1 verified)."""
    round_trip(client, main.ports["SSL"], su.ClientSec(certs, "SSL"), f"ssl-{client}", tmp_path)


@pytest.mark.parametrize("listener", ["SSL", "SSL_P12", "SSL_JKS"])
def test_keystore_formats(main, certs, listener, tmp_path):
    """PEM file, PKCS12 and JKS keystores (per-listener keys) serve the
    broker certificate; a client round trip works on each."""
    assert su.served_serial(main.ports[listener], certs) == certs.serials["broker"]
    rt_confluent(main.ports[listener], su.ClientSec(certs, "SSL"), f"store-{listener.lower()}")


def test_inline_pem_keystore(reauth, certs):
    """ssl.keystore.key + ssl.keystore.certificate.chain given inline."""
    port = reauth.ports["SSL_INLINE"]
    assert su.served_serial(port, certs) == certs.serials["broker"]
    rt_confluent(port, su.ClientSec(certs, "SSL"), "store-inline")


def test_untrusted_server_refused_by_client(main, certs):
    """A client that does not trust the test CA refuses the broker: a
    check that the clients above really verify the certificate."""
    errs = confluent_refused(main.ports["SSL"], su.ClientSec(certs, "SSL", trust=False))
    assert "certificate verify failed" in errs, errs


def test_enabled_protocols(main, certs):
    """ssl.enabled.protocols=TLSv1.3 on TLS13 refuses a TLS 1.2 client; the
    default (TLSv1.2,TLSv1.3) listener takes both."""
    for version, want in ((ssl.TLSVersion.TLSv1_2, "TLSv1.2"), (None, "TLSv1.3")):
        with su.RawConn(main.ports["SSL"], su.tls_context(certs, max_version=version)) as c:
            assert c.sock.version() == want
            assert c.api_versions()[0] == su.NONE
    with su.RawConn(main.ports["TLS13"], su.tls_context(certs)) as c:
        assert c.sock.version() == "TLSv1.3"
        assert c.api_versions()[0] == su.NONE
    with pytest.raises(ssl.SSLError):
        su.RawConn(main.ports["TLS13"], su.tls_context(certs, max_version=ssl.TLSVersion.TLSv1_2))
    assert cu.probe_ready("127.0.0.1", main.port)


# --- 2. mTLS ----------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_mtls_client_certificate(main, certs, client, tmp_path):
    """ssl.client.auth=required: alice's CA-signed certificate works."""
    round_trip(client, main.ports["MTLS"], su.ClientSec(certs, "SSL", cert="alice"), f"mtls-{client}", tmp_path)


# What each client reports when the broker refuses its TLS client
# certificate (or its absence), as a regex: the alert number varies with
# the TLS stack (Kafka 3.9.1 on TLS 1.3 sends bad_certificate (42) for no
# certificate and for the self-signed one, which the clients do not even
# send because it is not issued by a CA in the CertificateRequest's
# certificate_authorities, and certificate_unknown (46) for the expired
# one), so only the TLS-alert shape of the failure is asserted.
MTLS_REFUSED = {
    "confluent": r"ssl://127\.0\.0\.1:\d+/bootstrap: Receive failed: .*SSL alert number \d+",
    "kcat": r"ssl://127\.0\.0\.1:\d+/bootstrap: Receive failed: .*SSL alert number \d+",
    "java": r"org\.apache\.kafka\.common\.errors\.SslAuthenticationException: .*\n(.*\n)*"
            r"Caused by: javax\.net\.ssl\.SSLHandshakeException: Received fatal alert: \w+",
    "kafka-python": r"KafkaConnectionError: \[SSL: \w*ALERT\w*\]",
}


@pytest.mark.parametrize("cert", [None, "rogue", "expired"])
@pytest.mark.parametrize("client", CLIENTS)
def test_mtls_refused(main, certs, client, cert, tmp_path, caplog):
    """No certificate, a self-signed one, an expired one: the client fails
    with a TLS error and the broker keeps serving others."""
    out = refused(client, main.ports["MTLS"], su.ClientSec(certs, "SSL", cert=cert), tmp_path, caplog)
    print(f"--- {client} cert={cert}:\n{out}")
    assert re.search(MTLS_REFUSED[client], out), out
    still_serving(main, certs)


def test_mtls_requested(main, certs):
    """ssl.client.auth=requested: with or without a certificate."""
    for cert in (None, "alice"):
        with su.RawConn(main.ports["REQUESTED"], su.tls_context(certs, cert=cert)) as c:
            assert c.api_versions()[0] == su.NONE
            assert c.metadata()


# --- 3. SASL PLAIN ------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_sasl_plain(main, certs, client, tmp_path):
    """PLAIN on SASL_PLAINTEXT with users from the JAAS line."""
    sec = su.ClientSec(certs, "SASL_PLAINTEXT", mechanism="PLAIN", user="bob", password="bob-secret")
    round_trip(client, main.ports["SASL_PLAINTEXT"], sec, f"plain-{client}", tmp_path)


PLAIN_REFUSED = {
    "confluent": f"SASL authentication error: {PLAIN_FAILED}",
    "kcat": f"SASL authentication error: {PLAIN_FAILED}",
    "java": f"org.apache.kafka.common.errors.SaslAuthenticationException: {PLAIN_FAILED}",
    # kafka-python 3.0.12 mostly loses the error response that the broker
    # writes just before it closes, and reports the close instead.
    "kafka-python": rf"Unable to bootstrap(.|\n)*({PLAIN_FAILED}|socket disconnected)",
}


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("mallory", "alice-secret")])
@pytest.mark.parametrize("client", CLIENTS)
def test_sasl_plain_refused(main, certs, client, user, password, tmp_path, caplog):
    sec = su.ClientSec(certs, "SASL_PLAINTEXT", mechanism="PLAIN", user=user, password=password)
    out = refused(client, main.ports["SASL_PLAINTEXT"], sec, tmp_path, caplog)
    print(f"--- {client} {user}:\n{out}")
    if client == "kafka-python":
        assert re.search(PLAIN_REFUSED[client], out), out
    else:
        assert PLAIN_REFUSED[client] in out, out
    assert cu.probe_ready("127.0.0.1", main.port)


# --- 4. SCRAM over SASL_SSL -----------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("client", CLIENTS)
def test_scram_sasl_ssl(scram_users, certs, client, mechanism, tmp_path):
    sec = su.ClientSec(certs, "SASL_SSL", mechanism=mechanism, user="alice", password="alice-secret")
    round_trip(client, scram_users.ports["SASL_SSL"], sec, f"scram-{mechanism[-3:]}-{client}", tmp_path)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("client", CLIENTS)
def test_scram_wrong_password(scram_users, certs, client, mechanism, tmp_path, caplog):
    sec = su.ClientSec(certs, "SASL_SSL", mechanism=mechanism, user="alice", password="wrong")
    out = refused(client, scram_users.ports["SASL_SSL"], sec, tmp_path, caplog)
    print(f"--- {client} {mechanism}:\n{out}")
    if client == "kafka-python":
        assert re.search(SCRAM_REFUSED[client], out), out
    else:
        assert SCRAM_REFUSED[client] + " " + mechanism in out, out


SCRAM_REFUSED = {
    "confluent": "SASL authentication error: " + SCRAM_FAILED,
    "kcat": "SASL authentication error: " + SCRAM_FAILED,
    "java": "org.apache.kafka.common.errors.SaslAuthenticationException: " + SCRAM_FAILED,
    "kafka-python": rf"Unable to bootstrap(.|\n)*({SCRAM_FAILED}|socket disconnected)",
}


def test_scram_describe_and_delete(scram_users, certs):
    """kafka-configs --describe prints Kafka's exact line; after
    --delete-config SCRAM-SHA-512 that mechanism's login fails and
    SCRAM-SHA-256 still works."""
    b = scram_users
    assert describe_scram(b, "alice") == {"SCRAM-SHA-256=iterations=8192", "SCRAM-SHA-512=iterations=4096"}
    configs_ok(b, "--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users", "--entity-name", "carol")
    wait_for(lambda: not scram_ok(b, "SCRAM-SHA-512", "carol", "carol-secret"), "carol's SCRAM-SHA-512 removal")
    assert scram_ok(b, "SCRAM-SHA-256", "carol", "carol-secret")
    assert describe_scram(b, "carol") == {"SCRAM-SHA-256=iterations=8192"}


def describe_scram(b, user):
    """kafka-configs --describe of a user: the one line Kafka prints,
    "SCRAM credential configs for user-principal '<user>' are M=iterations=N,
    ...", as the set of its items (Kafka 3.9.1 lists the mechanisms in the
    iteration order of a HashMap keyed by the ScramMechanism enum, which
    changes from one broker JVM to the next)."""
    out = configs_ok(b, "--describe", "--entity-type", "users", "--entity-name", user)
    lines = out.splitlines()
    prefix = f"SCRAM credential configs for user-principal '{user}' are "
    assert len(lines) == 1 and lines[0].startswith(prefix), out
    return set(lines[0][len(prefix):].split(", "))


# --- 6. re-authentication -------------------------------------------------------------


def test_java_reauthentication(reauth, certs, tmp_path):
    """connections.max.reauth.ms=3000: a Java producer keeps producing for
    8 s with no error, re-authenticating on its connections."""
    sec = su.ClientSec(certs, "SASL_PLAINTEXT", mechanism="PLAIN", user="alice", password="alice-secret")
    props = java_props(tmp_path, sec)
    r = java("produce-paced", "--bootstrap", bootstrap(reauth, "SASL_PLAINTEXT"), "--topic", "reauth-java",
             "--seconds", "8", "--interval-ms", "100", "--client-props", props)
    assert r.returncode == 0, r.stderr[-3000:]
    [out] = [json.loads(line) for line in r.stdout.splitlines()]
    print(out)
    assert out["errors"] == []
    assert out["acked"] >= 40
    assert out["offsets_in_order"]
    assert out["metrics"]["successful-reauthentication-total"] >= 2
    assert out["metrics"]["failed-reauthentication-total"] == 0


# --- 7. keystore reload ---------------------------------------------------------------


def test_keystore_reload(reauth, certs):
    """The SSL listener's keystore file replaced in place (a new key and
    serial, the same subject and SAN), then kafka-configs --alter
    listener.name.ssl.ssl.keystore.location=<same path> on the broker: a new
    connection gets the new certificate."""
    b = reauth
    port = b.ports["SSL"]
    assert su.served_serial(port, certs) == certs.serials["broker"]
    tmp = b.keystore.with_suffix(".new")
    shutil.copy(certs.path("broker2"), tmp)
    os.replace(tmp, b.keystore)
    # Unchanged until asked.
    assert su.served_serial(port, certs) == certs.serials["broker"]
    configs_ok(b, "--alter", "--entity-type", "brokers", "--entity-name", str(broker_id(b.port)),
               "--add-config", f"listener.name.ssl.ssl.keystore.location={b.keystore}")
    wait_for(lambda: su.served_serial(port, certs) == certs.serials["broker2"], "the new certificate")
    rt_confluent(port, su.ClientSec(certs, "SSL"), "after-reload")


# --- 5. raw protocol ------------------------------------------------------------------------


def closed_without_reply(conn, timeout_s=5.0):
    closed, data = cu.wait_closed(conn.sock, timeout_s)
    assert closed, "connection still open"
    assert data == b"", f"unexpected bytes before the close: {data!r}"


def assert_mechanisms(mechs):
    # Kafka 3.9.1 lists them in the iteration order of a HashMap keyed by
    # name: PLAIN, SCRAM-SHA-512, SCRAM-SHA-256.
    assert sorted(mechs) == sorted(su.MECHANISMS), mechs


def test_api_versions_before_handshake(main):
    """On a SASL listener ApiVersions (v0 or v3) is answered before
    SaslHandshake and lists SaslHandshake v0-1 and SaslAuthenticate v0-2;
    the login goes on on the same connection. A second ApiVersions before
    the handshake is not answered: the broker closes the connection."""
    port = main.ports["SASL_PLAINTEXT"]
    with su.RawConn(port) as c:
        err, versions = c.api_versions()
        assert err == su.NONE
        assert versions[su.SASL_HANDSHAKE] == (0, 1)
        assert versions[su.SASL_AUTHENTICATE] == (0, 2)
        err, mechs = c.handshake("PLAIN")
        assert err == su.NONE
        assert_mechanisms(mechs)
        assert c.authenticate(su.plain_token("alice", "alice-secret")) == (su.NONE, "", b"", 0)
        assert c.metadata()[0][2] == port
    with su.RawConn(port) as c:
        c.sock.sendall(cu.api_versions_v3_request(7))
        corr, err, v3 = cu.parse_api_versions_v3(cu.recv_frame(c.sock))
        assert (corr, err) == (7, su.NONE) and v3[su.SASL_AUTHENTICATE] == (0, 2)
        c.corr = 7
        assert c.handshake("PLAIN")[0] == su.NONE
        assert c.authenticate(su.plain_token("alice", "alice-secret"))[0] == su.NONE
    with su.RawConn(port) as c:
        assert c.api_versions()[0] == su.NONE
        c.send(su.API_VERSIONS, 0, b"")
        closed_without_reply(c)


@pytest.mark.parametrize("version", [0, 1])
def test_handshake_unknown_mechanism(main, version):
    """UNSUPPORTED_SASL_MECHANISM with the enabled mechanisms, then the
    broker closes the connection."""
    with su.RawConn(main.ports["SASL_PLAINTEXT"]) as c:
        err, mechs = c.handshake("GSSAPI", version)
        assert err == su.UNSUPPORTED_SASL_MECHANISM
        assert_mechanisms(mechs)
        closed_without_reply(c)
    assert plain_ok(main.ports["SASL_PLAINTEXT"])


def plain_ok(port, user="alice", password="alice-secret", tls=None):
    c, res = su.plain_login(port, user, password, tls)
    with c:
        return res == (su.NONE, "", b"", 0) and len(c.metadata()) == 1


def test_requests_before_authentication_close(main):
    """A Metadata request before SaslHandshake and a SaslAuthenticate with
    no SaslHandshake are not answered: the broker closes the connection.
    A Metadata request between SaslHandshake and SaslAuthenticate, and a
    second SaslHandshake, are answered ILLEGAL_SASL_STATE, then closed."""
    port = main.ports["SASL_PLAINTEXT"]
    with su.RawConn(port) as c:
        c.send(su.METADATA, 1, cu.i32(-1))
        closed_without_reply(c)
    with su.RawConn(port) as c:
        # Between SaslHandshake v1 and SaslAuthenticate Kafka answers the
        # request with its error response (ILLEGAL_SASL_STATE for each
        # topic asked for, no brokers, controller -1), then closes.
        assert c.handshake("PLAIN")[0] == su.NONE
        r = c.call(su.METADATA, 1, cu.i32(1) + cu.string("sasl-state"))
        assert r.i32() == 0  # brokers
        assert r.i32() == -1  # controller id
        assert r.i32() == 1
        assert (r.i16(), r.string()) == (su.ILLEGAL_SASL_STATE, "sasl-state")
        closed_without_reply(c)
    with su.RawConn(port) as c:
        c.api_versions()
        token = su.plain_token("alice", "alice-secret")
        c.send(su.SASL_AUTHENTICATE, 1, cu.i32(len(token)) + token)
        closed_without_reply(c)
    with su.RawConn(port) as c:
        assert c.handshake("PLAIN")[0] == su.NONE
        assert c.handshake("PLAIN") == (su.ILLEGAL_SASL_STATE, [])
        closed_without_reply(c)
    assert plain_ok(port)


def test_sasl_on_plaintext_listener(main):
    """On PLAINTEXT SaslHandshake answers ILLEGAL_SASL_STATE (no mechanisms)
    and SaslAuthenticate ILLEGAL_SASL_STATE with Kafka's message; the
    connection stays usable. Likewise after a successful SASL login."""
    with su.RawConn(main.port) as c:
        assert c.handshake("PLAIN") == (su.ILLEGAL_SASL_STATE, [])
        assert c.authenticate(su.plain_token("alice", "alice-secret")) == (
            su.ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication", b"", 0)
        assert c.metadata()[0][2] == main.port
    c, res = su.plain_login(main.ports["SASL_PLAINTEXT"], "alice", "alice-secret")
    with c:
        assert res[0] == su.NONE
        assert c.handshake("SCRAM-SHA-256", version=0) == (su.ILLEGAL_SASL_STATE, [])
        assert len(c.metadata()) == 1


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("mallory", "alice-secret")])
def test_plain_bad_credentials(main, version, user, password):
    """SaslAuthenticate v0-v2 with a wrong password or an unknown user:
    SASL_AUTHENTICATION_FAILED with Kafka's message (session lifetime 0 on
    v1+), then the connection is closed."""
    c, res = su.plain_login(main.ports["SASL_PLAINTEXT"], user, password, version=version)
    with c:
        assert res == (su.SASL_AUTHENTICATION_FAILED, PLAIN_FAILED, b"", None if version == 0 else 0)
        closed_without_reply(c)


def test_failed_authentication_delay(reauth):
    """connection.failed.authentication.delay.ms (Kafka's default 100): the
    failure answer comes no sooner than the delay, and the connection is
    closed right after it."""
    with su.RawConn(reauth.ports["SASL_PLAINTEXT"]) as c:
        assert c.handshake("PLAIN")[0] == su.NONE
        token = su.plain_token("alice", "wrong")
        t0 = time.monotonic()
        c.send(su.SASL_AUTHENTICATE, 1, cu.i32(len(token)) + token)
        payload = cu.recv_frame(c.sock)
        waited = time.monotonic() - t0
        r = cu.Reader(payload)
        assert r.i32() == c.corr
        assert (r.i16(), r.string()) == (su.SASL_AUTHENTICATION_FAILED, PLAIN_FAILED)
        assert waited >= DEFAULT_FAILED_AUTH_DELAY_MS / 1000, waited
        closed_without_reply(c, timeout_s=2.0)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_raw(scram_users, mechanism):
    """A SCRAM exchange by hand: the server nonce extends the client's, the
    salt/iterations are the user's (8192 for SHA-256, 4096 for SHA-512), the
    server signature verifies. A tampered nonce or a wrong proof in the
    client-final message, or an unknown user in the client-first message,
    get SASL_AUTHENTICATION_FAILED with Kafka's message and a close."""
    port = scram_users.ports["SASL_PLAINTEXT"]
    failed = f"{SCRAM_FAILED} {mechanism}"
    with su.RawConn(port) as c:
        assert c.handshake(mechanism)[0] == su.NONE
        s = su.Scram(mechanism, "alice", "alice-secret")
        err, msg, server_first, lifetime = c.authenticate(s.client_first())
        assert (err, lifetime) == (su.NONE, 0)
        fields = dict(kv.split("=", 1) for kv in server_first.decode().split(","))
        assert int(fields["i"]) == (8192 if mechanism == "SCRAM-SHA-256" else 4096)
        err, msg, server_final, lifetime = c.authenticate(s.client_final(server_first))
        assert (err, lifetime) == (su.NONE, 0), msg
        s.verify_server_final(server_final)
        assert len(c.metadata()) == 1
    for tamper in ("nonce", "proof"):
        with su.RawConn(port) as c:
            assert c.handshake(mechanism)[0] == su.NONE
            s = su.Scram(mechanism, "alice", "alice-secret")
            server_first = c.authenticate(s.client_first())[2]
            final = s.client_final(server_first, tamper_nonce=tamper == "nonce", wrong_proof=tamper == "proof")
            assert c.authenticate(final) == (su.SASL_AUTHENTICATION_FAILED, failed, b"", 0), tamper
            closed_without_reply(c)
    with su.RawConn(port) as c:
        assert c.handshake(mechanism)[0] == su.NONE
        res = c.authenticate(su.Scram(mechanism, "nobody", "x").client_first())
        assert res == (su.SASL_AUTHENTICATION_FAILED, failed, b"", 0)
        closed_without_reply(c)


def test_half_done_exchanges(main):
    """Connections closed after SaslHandshake, after a SCRAM client-first
    message, and a TLS connection closed mid-login: the broker serves the
    next logins."""
    port = main.ports["SASL_PLAINTEXT"]
    for _ in range(20):
        c = su.RawConn(port)
        c.handshake("PLAIN")
        c.close()
        c = su.RawConn(port)
        c.handshake("SCRAM-SHA-256")
        c.send(su.SASL_AUTHENTICATE, 1, cu.i32(5) + b"n,,n=")  # half a message, then gone
        c.close()
    c = su.RawConn(main.ports["SASL_SSL"], su.tls_context(main.certs))
    c.handshake("PLAIN")
    c.close()
    assert plain_ok(port)
    assert plain_ok(main.ports["SASL_SSL"], tls=su.tls_context(main.certs))


def test_garbage_on_tls_port(main, certs):
    """Bytes that are not TLS on the SSL listener (garbage, HTTP, a plain
    Kafka request) close that connection (Kafka 3.9.1 sends a fatal TLS
    alert first); the broker keeps serving TLS and PLAINTEXT."""
    for junk in (b"\x00\x00\x00\x10garbage-garbage!", b"GET / HTTP/1.1\r\n\r\n", cu.api_versions_v3_request(1)):
        with cu.connect("127.0.0.1", main.ports["SSL"]) as s:
            s.sendall(junk)
            closed, _ = cu.wait_closed(s, 10)
            assert closed, junk
    assert su.served_serial(main.ports["SSL"], certs) == certs.serials["broker"]
    assert cu.probe_ready("127.0.0.1", main.port)


def test_failed_login_burst(main):
    """10,000 failed PLAIN logins from 8 threads (each on its own
    connection, closed by the broker), then a good login works."""
    port = main.ports["SASL_PLAINTEXT"]
    results = []

    def worker():
        got = []
        for _ in range(1250):
            c = su.RawConn(port)
            with c:
                assert c.handshake("PLAIN")[0] == su.NONE
                got.append(c.authenticate(su.plain_token("alice", "wrong"))[:2])
        results.extend(got)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results == [(su.SASL_AUTHENTICATION_FAILED, PLAIN_FAILED)] * 10000
    assert plain_ok(port)
    assert cu.probe_ready("127.0.0.1", main.port)


def test_handshake_v0_raw_tokens(main):
    """SaslHandshake v0: the PLAIN token goes as a bare length-prefixed
    blob (no SaslAuthenticate); the broker answers an empty token and the
    connection serves Kafka requests. A bad token gets no answer: the
    broker closes the connection."""
    port = main.ports["SASL_PLAINTEXT"]
    with su.RawConn(port) as c:
        err, mechs = c.handshake("PLAIN", version=0)
        assert err == su.NONE
        assert_mechanisms(mechs)
        assert c.raw_token(su.plain_token("alice", "alice-secret")) == b""
        assert len(c.metadata()) == 1
    with su.RawConn(port) as c:
        assert c.handshake("PLAIN", version=0)[0] == su.NONE
        c.sock.sendall(cu.frame(su.plain_token("alice", "wrong")))
        closed_without_reply(c)


# --- 6. session lifetime and re-authentication, raw ---------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_session_lifetime(main, reauth, version):
    """SaslAuthenticate v1+: session_lifetime_ms is 0 without
    connections.max.reauth.ms, and in (0, 3000] with 3000 (Kafka: 3000)."""
    c, res = su.plain_login(reauth.ports["SASL_PLAINTEXT"], "alice", "alice-secret", version=version)
    with c:
        assert res[0] == su.NONE
        assert 0 < res[3] <= REAUTH_MS, res
    c, res = su.plain_login(main.ports["SASL_PLAINTEXT"], "alice", "alice-secret", version=version)
    with c:
        assert res == (su.NONE, "", b"", 0)


def test_reauthentication_raw(reauth):
    """Re-authentication on the same connection (SaslHandshake +
    SaslAuthenticate again) before the session expires works and the
    connection goes on; as another user it fails with Kafka's message and a
    close; a connection used after its session expired is closed."""
    port = reauth.ports["SASL_PLAINTEXT"]
    c, res = su.plain_login(port, "alice", "alice-secret")
    with c:
        assert c.handshake("PLAIN") == (su.NONE, ["PLAIN"])
        res = c.authenticate(su.plain_token("alice", "alice-secret"))
        t0 = time.monotonic()
        assert res[:3] == (su.NONE, "", b"") and 0 < res[3] <= REAUTH_MS
        assert len(c.metadata()) == 1
        lifetime = res[3] / 1000
        # The session's end is a point in time; nothing to poll for.
        time.sleep(max(0.0, t0 + lifetime + 0.3 - time.monotonic()))
        c.send(su.METADATA, 1, cu.i32(-1))
        closed_without_reply(c)
    c, res = su.plain_login(port, "alice", "alice-secret")
    with c:
        assert c.handshake("PLAIN")[0] == su.NONE
        changed = "Cannot change principals during re-authentication from User.alice: User.bob"
        assert c.authenticate(su.plain_token("bob", "bob-secret")) == (su.SASL_AUTHENTICATION_FAILED, changed, b"", 0)
        closed_without_reply(c)


# --- 2b. principal mapping, observed through a user quota (last: it throttles alice) ------


def test_principal_mapping_quota(main, certs):
    """ssl.principal.mapping.rules maps CN=alice,OU=eng,O=kshard to "alice":
    a producer_byte_rate quota for user alice throttles the client with
    alice's certificate and not the one with bob's."""
    from confluent_kafka import Producer

    def throttled(cert, topic):
        events = []
        p = Producer({"bootstrap.servers": bootstrap(main, "MTLS"), "throttle_cb": events.append,
                      "linger.ms": 0, **su.ClientSec(certs, "SSL", cert=cert).librdkafka()})
        for i in range(8):
            p.produce(topic, value=b"x" * 4096, partition=0)
        assert p.flush(30) == 0
        p.poll(0.2)
        return max((e.throttle_time for e in events), default=0)

    quota = ["--entity-type", "users", "--entity-name", "alice"]
    configs_ok(main, "--alter", "--add-config", "producer_byte_rate=1024", *quota)
    try:
        wait_for(lambda: throttled("alice", "quota-alice") > 0, "alice's produce to be throttled", interval_s=0.5)
        assert throttled("bob", "quota-bob") == 0
    finally:
        configs_ok(main, "--alter", "--delete-config", "producer_byte_rate", *quota)


# --- 7b. credentials across a restart (last: it restarts the main broker) ---------------


def test_scram_users_survive_restart(scram_users):
    """SCRAM credentials are stored, not only cached: after a restart alice
    logs in with both mechanisms again and a wrong password still fails."""
    scram_users.restart()
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        wait_for(lambda: scram_ok(scram_users, mech, "alice", "alice-secret"), f"{mech} login after restart")
        assert not scram_ok(scram_users, mech, "alice", "wrong")
