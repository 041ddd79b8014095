"""auto.offset.reset for a group with no committed offset, as Kafka answers
it: OffsetFetch gives -1 and the client resets to earliest or latest, or
fails for none/error. librdkafka (confluent-kafka) and kafka-python."""

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

import compat_util as cu
from test_confluent import create_topics

TOPIC = "reset"
BEFORE = 50


@pytest.fixture(scope="module")
def rbroker(broker_module_factory):
    b = broker_module_factory(cu.GROUP_BROKER_OVERRIDES)
    create_topics(b.bootstrap, [TOPIC], partitions=1)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(BEFORE):
        p.produce(TOPIC, key=b"k%d" % i, value=b"before-%d" % i, partition=0)
    assert p.flush(30) == 0
    return b


def produce_after(bootstrap, n, tag):
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(TOPIC, value=b"%s-%d" % (tag.encode(), i), partition=0)
    assert p.flush(30) == 0


def confluent(bootstrap, group, reset):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": reset,
                  "enable.auto.commit": False, "session.timeout.ms": 6000})
    c.subscribe([TOPIC])
    return c


def wait_assigned(c, timeout_s=30):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        m = c.poll(0.2)
        if c.assignment():
            return m
    raise AssertionError("no assignment")


def test_confluent_earliest_reads_from_start(rbroker):
    c = confluent(rbroker.bootstrap, "reset-earliest", "earliest")
    try:
        got, first = [], wait_assigned(c)
        if first is not None and first.error() is None:
            got.append(first.value())
        deadline = time.time() + 30
        while len(got) < BEFORE and time.time() < deadline:
            m = c.poll(1)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert got[:1] == [b"before-0"] and len(got) >= BEFORE
    finally:
        c.close()


def test_confluent_latest_skips_existing(rbroker):
    c = confluent(rbroker.bootstrap, "reset-latest", "latest")
    try:
        m = wait_assigned(c)
        assert m is None or m.error() is not None, m.value()
        # The position is resolved to the log end before anything new arrives.
        deadline = time.time() + 10
        while time.time() < deadline and not c.position(c.assignment())[0].offset >= 0:
            c.poll(0.2)
        produce_after(rbroker.bootstrap, 5, "latest")
        got = []
        deadline = time.time() + 30
        while len(got) < 5 and time.time() < deadline:
            m = c.poll(1)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert got == [b"latest-%d" % i for i in range(5)], got
    finally:
        c.close()


def test_confluent_error_without_committed_offset(rbroker):
    c = confluent(rbroker.bootstrap, "reset-error", "error")
    try:
        deadline = time.time() + 30
        err = None
        while time.time() < deadline and err is None:
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                err = m.error()
            elif m is not None:
                raise AssertionError(f"consumed {m.value()} with auto.offset.reset=error")
        assert err is not None and err.code() == KafkaError._AUTO_OFFSET_RESET, err
    finally:
        c.close()


def test_kafka_python_none_raises(rbroker):
    from kafka import KafkaConsumer
    from kafka.errors import NoOffsetForPartitionError

    c = KafkaConsumer(TOPIC, bootstrap_servers=rbroker.bootstrap, group_id="reset-none",
                      auto_offset_reset="none", enable_auto_commit=False, consumer_timeout_ms=20000)
    try:
        with pytest.raises(NoOffsetForPartitionError):
            deadline = time.time() + 30
            while time.time() < deadline:
                c.poll(timeout_ms=500)
    finally:
        c.close()


def test_committed_offset_wins_over_reset(rbroker):
    c = confluent(rbroker.bootstrap, "reset-committed", "latest")
    try:
        wait_assigned(c)
        from confluent_kafka import TopicPartition

        c.commit(offsets=[TopicPartition(TOPIC, 0, 10)], asynchronous=False)
    finally:
        c.close()
    c = confluent(rbroker.bootstrap, "reset-committed", "latest")
    try:
        got = None
        deadline = time.time() + 30
        while got is None and time.time() < deadline:
            m = c.poll(1)
            if m is not None and m.error() is None:
                got = (m.offset(), m.value())
        assert got == (10, b"before-10"), got
    finally:
        c.close()
