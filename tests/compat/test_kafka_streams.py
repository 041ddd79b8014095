"""Kafka Streams (the kafka-streams jar, 3.9 and 4.x, from Maven Central)
with processing.guarantee=exactly_once_v2 through a broker kill: a count
per key over a numbered input topic (tests/compat/java StreamsCount: state
store with its compacted changelog, consumer group, a transaction per
commit), the broker killed with SIGKILL in the middle and restarted. Every
input record yields one output record, so under exactly-once the counts of
each key read back with read_committed are exactly 1, 2, ..., n: a count
repeated or skipped would be a duplicate or a lost update."""

import json
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import compat_util as cu
from test_java_client import VERSIONS, classpath

KEYS = 10
PARTITIONS = 3
RECORDS = 3000
RATE = 250  # records per second: the input flows for 12 s
KILL_AFTER_S = 4
DONE_TIMEOUT_S = 240


def produce_steadily(bs, topic, errors):
    """RECORDS numbered records at RATE per second (idempotent: the broker
    kill neither loses nor repeats one)."""
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5,
                  "delivery.timeout.ms": 120000})
    t0 = time.monotonic()
    for i in range(RECORDS):
        ahead = t0 + i / RATE - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        p.produce(topic, key=f"k{i % KEYS}", value=str(i),
                  on_delivery=lambda err, _msg: err is not None and errors.append(err))
        p.poll(0)
    if p.flush(150) != 0:
        errors.append("records left unsent")


def counts(bs, topic):
    """The output under read_committed: the list of counts per key."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "v-" + uuid.uuid4().hex,
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
                for p in range(PARTITIONS)}
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = all(c.position([TopicPartition(topic, p)])[0].offset >= ends[p] for p in range(PARTITIONS))
            if done:
                break
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.setdefault(m.key().decode(), []).append(int(m.value()))
        return out
    finally:
        c.close()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("version", VERSIONS)
def test_streams_exactly_once_count_through_a_broker_kill(broker_factory, version, tmp_path):
    b = broker_factory()
    bs = b.bootstrap
    src, dst = "streams-in-" + uuid.uuid4().hex[:8], "streams-out-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(src, PARTITIONS, 1), NewTopic(dst, PARTITIONS, 1)]).values():
        f.result(30)
    cu.wait_topics_ready(bs, [src, dst], PARTITIONS, 30)
    log = open(tmp_path / "streams.log", "wb")
    app = subprocess.Popen(
        ["java", "-Xmx384m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath(version),
         "kshard.compat.Client", "streams-count", "--bootstrap", bs, "--app-id", "count-" + src,
         "--in", src, "--out", dst],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
    try:
        assert json.loads(app.stdout.readline()) == {"started": True}
        errors = []
        producer = threading.Thread(target=produce_steadily, args=(bs, src, errors))
        producer.start()
        # Kill the broker while input flows and the application counts.
        time.sleep(KILL_AFTER_S)
        assert sum(len(v) for v in counts(bs, dst).values()) > 0, "no output before the kill"
        b.kill9()
        time.sleep(1)
        b.start()
        producer.join(200)
        assert not producer.is_alive() and not errors, errors
        want = RECORDS // KEYS
        deadline = time.monotonic() + DONE_TIMEOUT_S
        while True:
            got = counts(bs, dst)
            if all(got.get(f"k{k}", [0])[-1] == want for k in range(KEYS)):
                break
            assert app.poll() is None, "the application exited"
            assert time.monotonic() < deadline, {k: v[-1] for k, v in got.items()}
            time.sleep(1)
    finally:
        app.stdin.close()
        try:
            app.wait(60)
        except subprocess.TimeoutExpired:
            app.kill()
        log.close()
    for k in range(KEYS):
        assert got[f"k{k}"] == list(range(1, want + 1)), f"k{k}: counts are not exactly once"
