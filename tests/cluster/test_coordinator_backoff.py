"""A cluster with no group coordinator: what every client sends and what
the broker answers.

A broker that cannot create `__consumer_offsets`
(offsets.topic.replication.factor 3 on one broker) answers FindCoordinator
with COORDINATOR_NOT_AVAILABLE, the group APIs NOT_COORDINATOR and
ListGroups an empty list. Both targets run the same test; each client connects
through a FrameProxy (the broker advertises the proxy's port) that counts
the requests it sends.

Measured on Kafka 3.9.1 and kshard alike, FindCoordinator retries per
second: librdkafka consumer ~1.1, Java consumer ~1.1, kafka-python ~9,
franz-go consumer ~0.5. The Java AdminClient (and so
`kafka-consumer-groups --describe`) retries a lookup with no backoff at
all (AdminApiDriver clears a lookup's in-flight state without backing
off), ~900/s on Kafka, ~2,000/s on kshard, which only answers faster: that
is the client's behaviour, not the broker's answer, and is not asserted.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import cluster_util as cl
import compat_util as cu
from compat_util import i8, i16, i32, string, uvarint, compact_string

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))
from frame_proxy import FrameProxy  # noqa: E402
import group_raw as gr  # noqa: E402

FIND_COORDINATOR = 10
LIST_GROUPS = 16
NONE = 0
NOT_COORDINATOR = 16
CLIENT_SECONDS = 6.0
MESSAGE = b"The coordinator is not available."


@pytest.fixture
def proxied(cluster):
    """One broker that cannot coordinate groups, advertised at a proxy."""
    proxy = FrameProxy()
    b = cluster.new_broker(1, {
        "offsets.topic.replication.factor": "3",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}",
    })
    proxy.start(b.port)
    b.start()
    yield b, proxy
    proxy.close()


def raw_call(port, api_key, version, body, flexible):
    s = cu.connect("127.0.0.1", port)
    try:
        header = (cu.request_header_v2 if flexible else cu.request_header_v1)(api_key, version, 7)
        s.sendall(cu.frame(header + body))
        return cu.recv_frame(s)
    finally:
        s.close()


def test_find_coordinator_answer_is_kafkas(proxied):
    """Byte for byte Kafka 3.9.1's answer, each version shape: v0-v3 carry
    the message, the batched v4+ answer an empty one."""
    b, _ = proxied
    not_available = i16(15) + cu.i16(len(MESSAGE)) + MESSAGE + i32(-1) + string("") + i32(-1)
    v1 = raw_call(b.port, 10, 1, string("g") + i8(0), False)
    assert v1 == i32(7) + i32(0) + not_available
    v3 = raw_call(b.port, 10, 3, compact_string("g") + i8(0) + uvarint(0), True)
    assert v3 == i32(7) + b"\x00" + i32(0) + i16(15) + compact_string(MESSAGE.decode()) + i32(-1) + uvarint(1) + i32(-1) + b"\x00"
    batched = i32(7) + b"\x00" + i32(0) + uvarint(3) + compact_string("g1") + i32(-1) + uvarint(1) + i32(-1) + i16(15) + uvarint(1) + b"\x00"
    batched += compact_string("g2") + i32(-1) + uvarint(1) + i32(-1) + i16(15) + uvarint(1) + b"\x00" + b"\x00"
    for version in (4, 6):
        body = i8(0) + uvarint(3) + compact_string("g1") + compact_string("g2") + uvarint(0)
        assert raw_call(b.port, 10, version, body, True) == batched, f"v{version}"


def test_group_requests_get_not_coordinator(proxied):
    """A broker that coordinates no group: NOT_COORDINATOR for every group's
    request (clients look the coordinator up again, with backoff), and
    ListGroups, which tools send to every broker, an empty list."""
    b, _ = proxied
    conn = gr.Conn(b.bootstrap)
    try:
        r = conn.call(LIST_GROUPS, 3, uvarint(0), flexible=True)
        r.i32()
        assert (r.i16(), r.uvarint() - 1) == (NONE, 0)
        assert gr.describe(conn, "g")[0] == NOT_COORDINATOR
        res = gr.parse_join(conn.call(11, 5, gr.join_body("g", "")))
        assert res["error"] == NOT_COORDINATOR
        assert gr.heartbeat(conn, "g", 1, "m") == NOT_COORDINATOR
        assert gr.sync(conn, "g", 1, "m") == NOT_COORDINATOR
        assert gr.delete_group(conn, "g") == NOT_COORDINATOR
    finally:
        conn.close()


def kafka_tool(main_class, args, timeout_s):
    log4j = Path(tempfile.gettempdir()) / "kshard-coordinator-backoff-log4j.properties"
    if not log4j.exists():
        log4j.write_text("log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                         "log4j.appender.stderr.Target=System.err\n"
                         "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n")
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", f"-Dlog4j.configuration=file:{log4j}",
           "-cp", cl.kafka_classpath(), main_class] + args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)


def test_consumer_groups_list_answers_at_once(proxied):
    """`kafka-consumer-groups --list` gets its (empty) answer at once, as
    from Kafka; COORDINATOR_LOAD_IN_PROGRESS made it retry until --timeout."""
    _, proxy = proxied
    t0 = time.monotonic()
    p = kafka_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                   ["--bootstrap-server", proxy.bootstrap, "--list", "--timeout", "20000"], 90)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Error" not in p.stdout + p.stderr, p.stdout + p.stderr
    assert p.stdout.strip() == ""
    assert proxy.count(LIST_GROUPS) <= 2
    assert time.monotonic() - t0 < 20


def rate(proxy, since, client_id):
    n = proxy.count(FIND_COORDINATOR, since=since, client_id=client_id)
    return n / (time.monotonic() - since)


def test_librdkafka_consumer_backs_off(proxied):
    from confluent_kafka import Consumer

    _, proxy = proxied
    c = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": "g-rdk", "client.id": "rdk"})
    c.subscribe(["backoff"])
    t0 = time.monotonic()
    while time.monotonic() - t0 < CLIENT_SECONDS:
        c.poll(0.2)
    r = rate(proxy, t0, "rdk")
    c.close()
    assert proxy.count(FIND_COORDINATOR, client_id="rdk") >= 2
    # Kafka 3.9.1: ~1.1/s (coordinator query interval).
    assert r <= 5, f"{r:.1f} FindCoordinator/s"


def test_kafka_python_consumer_backs_off(proxied):
    from kafka import KafkaConsumer

    _, proxy = proxied
    c = KafkaConsumer("backoff", bootstrap_servers=proxy.bootstrap, group_id="g-kp", client_id="kp")
    t0 = time.monotonic()
    while time.monotonic() - t0 < CLIENT_SECONDS:
        c.poll(200)
    r = rate(proxy, t0, "kp")
    c.close()
    assert proxy.count(FIND_COORDINATOR, client_id="kp") >= 2
    # Kafka 3.9.1: ~9/s (retry.backoff.ms 100).
    assert r <= 25, f"{r:.1f} FindCoordinator/s"


def test_java_consumer_backs_off(proxied):
    _, proxy = proxied
    t0 = time.monotonic()
    kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer",
               ["--bootstrap-server", proxy.bootstrap, "--topic", "backoff", "--group", "g-java",
                "--consumer-property", "client.id=java", "--timeout-ms", str(int(CLIENT_SECONDS * 1000))], 90)
    n = proxy.count(FIND_COORDINATOR, client_id="java")
    assert n >= 2
    # Kafka 3.9.1: ~1.1/s (exponential retry backoff, 100 ms to 1 s).
    assert n / (time.monotonic() - t0) <= 5, f"{n} FindCoordinator in {time.monotonic() - t0:.1f}s"
