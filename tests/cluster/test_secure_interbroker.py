"""Brokers that talk to each other over SASL_SSL, against Apache Kafka 3.9.1
(ZooKeeper mode) with KSHARD_TEST_TARGET=kafka.

Each broker has a PLAINTEXT listener for the test's clients and a SASL_SSL
listener that is the inter-broker listener (inter.broker.listener.name):
replica fetchers, the controller's requests and AlterPartition all go over
TLS and log in with SCRAM-SHA-512 as `admin`, whose credential is made with
`kafka-configs --zookeeper` before any broker starts (as Kafka's
documentation does it: brokers need it to reach each other). The client
side of each broker uses the username and password options of its
listener's JAAS line, and trusts the test CA (host names checked:
ssl.endpoint.identification.algorithm keeps its default, https).

- The acks=all kill loop (idempotent Java and librdkafka producers, random
  kill -9 and restart) loses nothing with SASL_SSL between brokers.
- A broker whose JAAS line has the wrong password cannot follow: it stays
  out of the ISR of a partition led by another broker, while a broker
  with the right password joins it. That shows the followers do log in over
  the SASL_SSL listener.
- With min.insync.replicas=3, acks=all produces succeed (and all three
  brokers stay in the ISR) over an SSL inter-broker listener that requires
  client certificates, and over SASL_PLAINTEXT with PLAIN chosen by the
  older key security.inter.broker.protocol.
"""

import json
import os
import time

import pytest

import cluster_util as cl
import conftest as _cluster_conftest  # tests/cluster/conftest.py
import durability as du

if not hasattr(_cluster_conftest, "TARGET"):
    _cluster_conftest.TARGET = cl.TARGET  # security_util does `from conftest import TARGET`
import security_util as su  # noqa: E402  (tests/compat)

KILLS = int(os.environ.get("KSHARD_SECURE_KILLS", "8"))
PER_KILL_S = 60 if cl.TARGET == "kafka" else 20
ADMIN_PASSWORD = "admin-secret"


def scram_jaas(password):
    return ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="admin" password="{password}";')


def add_admin_credential(cluster):
    """SCRAM-SHA-512 for admin, written to ZooKeeper before the brokers start."""
    cluster.zk.ensure_path(cluster.chroot)
    out = cl.kafka_tool("kafka.admin.ConfigCommand", "--zookeeper", cluster.zk_connect, "--alter",
                        "--add-config", f"SCRAM-SHA-512=[iterations=4096,password={ADMIN_PASSWORD}]",
                        "--entity-type", "users", "--entity-name", "admin").stdout
    assert "Completed updating config for entity: user-principal 'admin'." in out, out


def secure_overrides(certs, password=ADMIN_PASSWORD):
    return {
        **du.CLUSTER_OVERRIDES,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_jaas(password),
        "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        "listener.name.sasl_ssl.ssl.keystore.location": str(certs.path("broker")),
        "listener.name.sasl_ssl.ssl.truststore.type": "PEM",
        "listener.name.sasl_ssl.ssl.truststore.location": str(certs.ca),
    }


def two_listeners(b):
    """PLAINTEXT first: the fixture's readiness probe and the clients use it."""
    b.sasl_ssl_port = cl.cu.free_port()
    return {"listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_SSL://127.0.0.1:{b.sasl_ssl_port}"}


@pytest.fixture
def certs(tmp_path_factory):
    return su.Certs(tmp_path_factory.mktemp("certs"))


@pytest.mark.needs_replication
@pytest.mark.timeout(300 + KILLS * PER_KILL_S)
def test_kill_loop_with_sasl_ssl_between_brokers(cluster, certs, tmp_path):
    add_admin_credential(cluster)
    cluster.start(3, secure_overrides(certs), per_broker=two_listeners)
    summary, problems, _ = du.run_kill_loop(cluster, "secure-kill-loop", 3, KILLS, log_dir=tmp_path)
    print("secure kill loop summary: " + json.dumps(summary, sort_keys=True))
    assert not problems, "\n".join(problems[:50]) + f"\nsummary: {json.dumps(summary, sort_keys=True)}"
    assert summary["kills"] == KILLS
    for tag, p in summary["producers"].items():
        assert p["acked"] > 0, f"{tag} had nothing acknowledged"
    assert summary["records_verified"] == summary["records_acked"]


@pytest.mark.needs_replication
@pytest.mark.timeout(360)
def test_follower_with_a_wrong_inter_broker_password_stays_out_of_the_isr(cluster, certs):
    add_admin_credential(cluster)
    cluster.start(2, secure_overrides(certs), per_broker=two_listeners)
    # Broker 3 joins later (so it is not the controller) with a wrong password.
    cluster.start(1, secure_overrides(certs, password="not-the-password"), first_id=3, per_broker=two_listeners)
    topic = "secure-isr"
    controller = cluster.controller_id()
    leader = 1 if controller != 1 else 2
    other = 3 - leader
    admin = cluster.admin(leader)
    from confluent_kafka.admin import NewTopic

    futs = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=-1, replica_assignment=[[leader, other, 3]])], operation_timeout=30)
    futs[topic].result(90)
    cluster.wait_converged(topics=[topic])
    cluster.wait_for(lambda: other in cluster.partition_state(topic, 0)["isr"], 60,
                     f"broker {other} (right password) in the ISR")
    # Broker 3's fetcher cannot log in: it must not show up in the ISR.
    # replica.lag.time.max.ms is LAG_MS; the leader dropped it from the
    # initial ISR by then if it ever could have been in it.
    cluster.wait_for(lambda: 3 not in cluster.partition_state(topic, 0)["isr"], 60,
                     "broker 3 (wrong password) out of the ISR")
    for _ in range(3):
        time.sleep(5)
        isr = cluster.partition_state(topic, 0)["isr"]
        assert 3 not in isr, f"broker 3 joined the ISR {isr} with a wrong inter-broker password"


def ssl_mutual_overrides(certs):
    """An SSL inter-broker listener that requires client certificates."""
    return {
        **du.CLUSTER_OVERRIDES,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "inter.broker.listener.name": "SSL",
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": str(certs.path("broker")),
        "listener.name.ssl.ssl.truststore.type": "PEM",
        "listener.name.ssl.ssl.truststore.location": str(certs.ca),
    }


def sasl_plain_overrides(_certs):
    """SASL_PLAINTEXT with PLAIN, chosen by the older key
    security.inter.broker.protocol (the listener is named after it)."""
    return {
        **du.CLUSTER_OVERRIDES,
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="admin" password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}";',
    }


def second_listener(name):
    def listeners(b):
        b.secure_port = cl.cu.free_port()
        return {"listeners": f"PLAINTEXT://127.0.0.1:{b.port},{name}://127.0.0.1:{b.secure_port}"}

    return listeners


@pytest.mark.needs_replication
@pytest.mark.timeout(300)
@pytest.mark.parametrize("protocol,overrides", [("SSL", ssl_mutual_overrides),
                                                ("SASL_PLAINTEXT", sasl_plain_overrides)],
                         ids=["ssl-client-auth-required", "sasl-plaintext-plain"])
def test_acks_all_with_every_replica_over_a_secured_inter_broker_listener(cluster, certs, protocol, overrides):
    """min.insync.replicas=3: every acknowledgement needs both followers to
    have fetched over the secured listener."""
    from confluent_kafka import Consumer, Producer

    cluster.start(3, overrides(certs), per_broker=second_listener(protocol))
    topic = f"secure-{protocol.lower()}"
    du.create_durability_topic(cluster, topic, 2, min_isr=3)
    delivered, failed = [], []
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 60000})
    for i in range(200):
        p.produce(topic, value=f"r{i}".encode(), partition=i % 2,
                  on_delivery=lambda err, m: (failed if err else delivered).append(err or m.value()))
    assert p.flush(90) == 0
    assert not failed, failed[:3]
    assert len(delivered) == 200
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": f"g-{protocol}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    seen = set()
    deadline = time.monotonic() + 60
    while len(seen) < 200 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            seen.add(m.value())
    c.close()
    assert seen == set(delivered)
    for part in range(2):
        assert sorted(cluster.partition_state(topic, part)["isr"]) == [1, 2, 3]
