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


def test_a_cold_closed_segment_is_read_in_off_the_shard(broker_factory):
    """A consumer catching up on segments that have left the page cache: the
    shard has them read in by a blocking-pool thread before it sendfiles
    them (cachestat(2)), rather than waiting for the disk in sendfile."""
    b = broker_factory({"log.segment.bytes": str(64 << 10)})
    topic = "zc-cold"
    create_topics(b.bootstrap, [topic], partitions=1)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "compression.type": "none"})
    for i in range(RECORDS):
        p.produce(topic, key=cu.rec_key(topic, i), value=b"%08d" % i + b"v" * VALUE_BYTES, partition=0)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    cu.drop_from_page_cache([b.partition_dir(topic, 0)])
    got = consume_all(b.bootstrap, topic, 1, RECORDS)
    assert sorted(int(v[:8]) for v in got.values()) == list(range(RECORDS))
    b.stop()
    m = re.search(r"(\d+) bytes read into the page cache off the shards", b.log_text())
    assert m, b.log_text(tail_lines=20)
    # All but the active segment's bytes were cold.
    assert int(m.group(1)) >= RECORDS * VALUE_BYTES // 2, m.group(0)


def consume_all(bootstrap, topic, partitions, expected):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compat-unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = {}
    while len(got) < expected:
        m = c.poll(10)
        assert m is not None, f"stalled after {len(got)} records"
        assert m.error() is None, m.error()
        got[(m.partition(), m.offset())] = m.value()
    c.close()
    return got


def test_direct_io_mode_reads_through_shard_cache(broker_factory):
    """log.io.mode=direct: O_DIRECT writes; an active segment's bytes are
    served from memory (the logs' tail caches of what was just written, then
    the shards' DMA read cache), a closed segment's by sendfile once read
    into the page cache off the shard (its O_DIRECT writes left it out);
    everything intact across a restart, after which only the read cache can
    serve the active segments."""
    b = broker_factory({"log.io.mode": "direct", "log.segment.bytes": str(64 << 10)})
    topic = "direct"
    create_topics(b.bootstrap, [topic], partitions=2)
    values = {}
    for codec in ["none", "lz4", "zstd"]:
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2, "compression.type": codec, "acks": "all"})
        for i in range(3000):
            v = f"{codec}-{i}-".encode() + b"x" * (i % 300)
            values[v] = True
            p.produce(topic, key=cu.rec_key(topic, i), value=v, partition=i % 2)
            if i % 500 == 0:
                p.poll(0)
        assert p.flush(60) == 0
    got = consume_all(b.bootstrap, topic, 2, len(values))
    assert set(got.values()) == set(values)
    b.restart()
    got = consume_all(b.bootstrap, topic, 2, len(values))
    assert set(got.values()) == set(values)
    b.stop()
    runs = re.findall(
        r"zero-copy: (\d+) bytes by sendfile, (\d+) bytes copied, (\d+) bytes from the direct-I/O read cache, "
        r"(\d+) bytes from direct-mode tail caches, (\d+) bytes read into the page cache off the shards",
        b.log_text(),
    )
    assert len(runs) == 2, b.log_text(tail_lines=20)
    (_, _, _, tail1, _), (sent2, _, cached2, tail2, filled2) = [[int(x) for x in r] for r in runs]
    # Freshly produced records come from the tail caches.
    assert tail1 > 0, runs
    # After the restart they are only on disk: the active segments' through
    # the read cache; the closed ones, never in the page cache (O_DIRECT
    # writes), read in off the shard and sent by sendfile.
    assert cached2 > 0 and tail2 == 0, runs
    assert sent2 > 0 and filled2 > 0, runs
