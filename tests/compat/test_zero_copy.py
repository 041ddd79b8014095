"""Fetch sends record bytes from segment files to the socket with sendfile(2):
after a consumer reads a topic, the broker's shutdown report counts at least
that many bytes sent by sendfile. kshard-specific (Kafka has no such report)."""

import re

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import compat_util as cu
from conftest import TARGET
from test_confluent import create_topics

pytestmark = pytest.mark.skipif(TARGET != "kshard", reason="kshard's own zero-copy report")

RECORDS = 20000
VALUE_BYTES = 200


def test_fetch_goes_through_sendfile(broker_factory):
    b = broker_factory({})
    topic = "zc"
    create_topics(b.bootstrap, [topic], partitions=1)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "compression.type": "none"})
    for i in range(RECORDS):
        p.produce(topic, key=cu.rec_key(topic, i), value=b"v" * VALUE_BYTES, partition=0)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "compat-unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    n = 0
    while n < RECORDS:
        m = c.poll(10)
        assert m is not None, f"stalled after {n} records"
        assert m.error() is None, m.error()
        n += 1
    c.close()
    b.stop()
    m = re.search(r"zero-copy: (\d+) bytes by sendfile, (\d+) bytes copied", b.log_text())
    assert m, b.log_text(tail_lines=20)
    sent, copied = int(m.group(1)), int(m.group(2))
    assert sent + copied >= RECORDS * VALUE_BYTES, (sent, copied)
    # Copies happen only under socket back-pressure; most bytes go zero-copy.
    assert sent > copied, (sent, copied)
