"""ZooKeeper itself goes away under acks=all load and comes back: stopped
(SIGTERM) or killed (kill -9) and started again on the same data, or frozen
(SIGSTOP) and thawed, for less and for more than the brokers' session
timeout. Afterwards every broker is registered by a live session, a
controller holds /controller, CreateTopics and DeleteTopics work (the
controller's watches came back), and no acknowledged record is lost.

A restarted ZooKeeper restores its sessions from its data and gives each a
fresh timeout, so clients that reconnect with their session id and password
keep their session (and its ephemeral nodes) however long the server was
down; Kafka's ZooKeeper client does. A frozen server expires the sessions
whose timeout passed once it runs again, unless a client's ping is read
first: the brokers whose sessions expired register under new sessions."""

import re
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

import durability as dur

SESSION_TIMEOUT_MS = 4000
OVERRIDES = {
    "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
    "replica.lag.time.max.ms": 10000,
    "unclean.leader.election.enable": "false",
}
TOPIC = "zk-outage"
PARTITIONS = 3
RATE = 200
SHORT_S = 2.0  # under the session timeout
LONG_S = 10.0  # over 1.4 session timeouts (when a client may give up on its own)
RECOVERY_S = SESSION_TIMEOUT_MS / 1000 * 3 + 20

# (how, seconds down, whether each broker must keep its session)
CASES = [
    ("stop", SHORT_S, True),
    ("stop", LONG_S, True),
    ("kill9", LONG_S, True),
    ("pause", SHORT_S, True),
    # Paused past the session timeout, ZooKeeper expires each session, or
    # keeps it when the client's ping is read before the expirer runs once
    # the process resumes (its SessionTracker race, Kafka's brokers meet it
    # too): either way every broker must end up registered.
    ("pause", LONG_S, None),
]


def _live_sessions(cluster):
    """Session ids of the connections ZooKeeper serves right now."""
    cons = cluster.zk_server.four_letter("cons")
    return {int(s, 16) for s in re.findall(r"\bsid=(0x[0-9a-f]+)", cons)}


def _outage(server, how, down_s):
    if how == "pause":
        server.sigstop()
        try:
            time.sleep(down_s)
        finally:
            server.sigcont()
        return
    if how == "stop":
        server.stop()
    else:
        server.kill9()
    try:
        time.sleep(down_s)
    finally:
        server.start()


def _registrations(cluster, ids):
    """{id: owner session} when every broker and the controller hold their
    nodes through sessions ZooKeeper is serving, else None."""
    live = _live_sessions(cluster)
    owners = {}
    for i in ids:
        st = cluster.zk_exists(f"/brokers/ids/{i}")
        if st is None or st.ephemeralOwner not in live:
            return None
        owners[i] = st.ephemeralOwner
    st = cluster.zk_exists("/controller")
    if st is None or st.ephemeralOwner not in live or cluster.controller_id() not in ids:
        return None
    return owners


def _create_topic(cluster, topic):
    """CreateTopics, retried while the controller is moving (NOT_CONTROLLER
    is retriable; librdkafka's admin client hands it back)."""
    deadline = time.monotonic() + RECOVERY_S
    while True:
        try:
            return cluster.create_topic(topic, 2, 3)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.NOT_CONTROLLER or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _create_and_delete(cluster, topic):
    """CreateTopics through the controller's /brokers/topics watch, then
    DeleteTopics through its /admin/delete_topics watch."""
    cluster.wait_converged(timeout_s=RECOVERY_S, topics=[TOPIC])
    _create_topic(cluster, topic)
    cluster.wait_converged(timeout_s=RECOVERY_S, topics=[topic])
    admin = cluster.admin()
    admin.delete_topics([topic], operation_timeout=30, request_timeout=60)[topic].result(90)
    cluster.wait_for(lambda: cluster.zk_exists(f"/brokers/topics/{topic}") is None
                     and not cluster.zk_children("/admin/delete_topics"),
                     RECOVERY_S, f"{topic} deleted")


@pytest.mark.parametrize("how,down_s,keeps_session", CASES,
                         ids=[f"{h}-{'short' if d < SESSION_TIMEOUT_MS / 1000 else 'long'}" for h, d, _ in CASES])
def test_zk_outage(cluster, how, down_s, keeps_session):
    cluster.start(3, OVERRIDES)
    ids = sorted(b.broker_id for b in cluster.live())
    dur.create_durability_topic(cluster, TOPIC, PARTITIONS)
    before = cluster.wait_for(lambda: _registrations(cluster, ids), 10, "registrations before the outage")
    producer = dur.RdkafkaProducer(cluster.bootstrap(), TOPIC, PARTITIONS, tag="rdk", rate=RATE)
    stopped = False
    try:
        dur.wait_acked_more([producer], 100, 30)
        t0 = time.monotonic()
        _outage(cluster.zk_server, how, down_s)
        back_s = time.monotonic() - t0
        after = cluster.wait_for(lambda: _registrations(cluster, ids), RECOVERY_S,
                                 f"brokers {ids} and a controller registered by live sessions")
        registered_s = time.monotonic() - t0
        _create_and_delete(cluster, "zk-outage-after")
        dur.wait_acked_more([producer], 100, 60)
        sent, acked, failed = producer.stop()
        stopped = True
    finally:
        if not stopped:
            producer.kill()
    summary, check = dur.check_topic(cluster.bootstrap(), TOPIC, PARTITIONS, [producer.log])
    print(f"{how} {down_s}s: ZooKeeper back after {back_s:.1f}s, all registered after {registered_s:.1f}s; "
          f"sessions {before} -> {after}; sent {sent} acked {acked} failed {failed}; {summary}")
    assert summary["lost"] == 0 and summary["misplaced"] == 0, check.problems()
    assert summary["records_acked"] >= 200
    kept = {i for i in ids if before[i] == after[i]}
    if keeps_session:
        assert kept == set(ids), f"sessions {before} -> {after}: a short or restart outage keeps each session"
