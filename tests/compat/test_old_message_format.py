"""Message formats v0 and v1 (magic 0/1): Produce v0-v2 and Fetch v0-v3.

Every assertion is Apache Kafka 3.9.1's behaviour (proven with
KSHARD_TEST_TARGET=kafka): old message sets are converted to magic 2 on
append (CRC checked per message, compressed wrappers re-batched with their
codec), and Fetch v0-v1 / v2-v3 answers are down-converted to magic 0 / 1
(records field at least as long as what was read, overflow padding after
the last whole message, headers dropped, zstd refused). Real clients
(librdkafka with `broker.version.fallback` 0.9.0 / 0.10.0 and kafka-python
with `api_version` (0, 9) / (0, 10)) and raw requests."""

import gzip
import logging
import re
import struct
import time
import zlib

import lz4.frame
import pytest
import snappy
import zstandard
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

import compat_util as cu
from compat_util import i8, i16, i32, i64, string
from conftest import TARGET
from test_confluent import admin

UNKNOWN_SERVER_ERROR = -1
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TIMESTAMP = 32
UNSUPPORTED_VERSION = 35
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
TS = 1_700_000_000_000


# kshard runs the module in both log.io.modes (direct mode reads through its
# tail and read caches) with several shards.
IO_MODES = ["buffered", "direct"] if TARGET == "kshard" else ["kafka"]


@pytest.fixture(scope="module", params=IO_MODES)
def b(request, broker_module_factory):
    if TARGET == "kshard":
        return broker_module_factory({"num.shards": "4", "log.io.mode": request.param})
    return broker_module_factory()


_topic_seq = [0]


def new_topic(b, config=None, partitions=1):
    _topic_seq[0] += 1
    name = f"oldfmt-{_topic_seq[0]}"
    a = admin(b.bootstrap)
    futs = a.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=30,
    )
    for f in futs.values():
        f.result(60)
    cu.wait_topics_ready(b.bootstrap, [name], partitions)
    return name


def call(b, api_key, version, body, correlation_id=7):
    host, port = b.bootstrap.split(":")
    with cu.connect(host, int(port)) as s:
        s.sendall(cu.frame(cu.request_header_v1(api_key, version, correlation_id) + body))
        payload = cu.recv_frame(s)
    r = cu.Reader(payload)
    assert r.i32() == correlation_id
    return r, payload


# --- message formats v0/v1 in Python --------------------------------------------------


def message(offset, magic, key, value, ts=-1, attributes=0):
    """One entry: offset, size, crc, magic, attributes, [timestamp], key, value."""
    body = i8(magic) + i8(attributes)
    if magic == 1:
        body += i64(ts)
    for f in (key, value):
        body += i32(-1) if f is None else i32(len(f)) + f
    crc = zlib.crc32(body) & 0xFFFFFFFF
    return i64(offset) + i32(len(body) + 4) + struct.pack(">I", crc) + body


def compress(codec, data):
    if codec == "gzip":
        return gzip.compress(data)
    if codec == "snappy":
        return snappy.compress(data)
    if codec == "lz4":
        return lz4.frame.compress(data, block_linked=False, store_size=False)
    raise ValueError(codec)


def wrapper(magic, codec, inner, last_offset, ts=-1):
    return message(last_offset, magic, None, compress(codec, inner), ts=ts, attributes=CODECS[codec])


def message_set(magic, codec, records, ts=TS):
    """records: [(key, value)] as one message set (one wrapper when compressed)."""
    entries = b"".join(message(i, magic, k, v, ts=ts + i) for i, (k, v) in enumerate(records))
    if codec == "none":
        return entries
    return wrapper(magic, codec, entries, len(records) - 1, ts=ts + len(records) - 1)


P1, P2, P3, P4, P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
M32 = 0xFFFFFFFF


def xxh32_short(data):
    """XXH32 (seed 0) of fewer than 16 bytes: an LZ4 frame descriptor."""
    rotl = lambda x, r: ((x << r) | (x >> (32 - r))) & M32  # noqa: E731
    h = (P5 + len(data)) & M32
    i = 0
    while i + 4 <= len(data):
        h = rotl((h + struct.unpack("<I", data[i : i + 4])[0] * P3) & M32, 17) * P4 & M32
        i += 4
    for c in data[i:]:
        h = rotl((h + c * P5) & M32, 11) * P1 & M32
    h ^= h >> 15
    h = h * P2 & M32
    h ^= h >> 13
    h = h * P3 & M32
    return h ^ (h >> 16)


def lz4_decompress(data, magic):
    if magic == 0:  # KAFKA-3160: the v0 header checksum also covers the frame magic
        hc_at = 6 + (8 if data[4] & 0x08 else 0)
        data = data[:hc_at] + bytes([(xxh32_short(data[4:hc_at]) >> 8) & 0xFF]) + data[hc_at + 1 :]
    return lz4.frame.decompress(data)


def decompress(codec_id, data, magic):
    if codec_id == 1:
        return gzip.decompress(data)
    if codec_id == 2:
        if data[:8] == b"\x82SNAPPY\x00":  # xerial framing (Java)
            out, pos = b"", 16
            while pos < len(data):
                (n,) = struct.unpack(">i", data[pos : pos + 4])
                out += snappy.decompress(data[pos + 4 : pos + 4 + n])
                pos += 4 + n
            return out
        return snappy.decompress(data)
    if codec_id == 3:
        return lz4_decompress(data, magic)
    raise ValueError(codec_id)


def parse_messages(data, outer_offset=None):
    """Whole messages of a v0/v1 message set, compressed ones expanded:
    [(offset, magic, attributes, timestamp, key, value)] and the byte
    position after the last whole message."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        offset, size = struct.unpack(">qi", data[pos : pos + 12])
        if size < 14 or pos + 12 + size > len(data):
            break
        body = data[pos + 12 : pos + 12 + size]
        (crc,) = struct.unpack(">I", body[:4])
        assert crc == zlib.crc32(body[4:]) & 0xFFFFFFFF, "bad crc"
        magic, attrs = body[4], body[5]
        at, ts = 6, -1
        if magic == 1:
            (ts,) = struct.unpack(">q", body[6:14])
            at = 14
        fields = []
        for _ in range(2):
            (n,) = struct.unpack(">i", body[at : at + 4])
            at += 4
            fields.append(None if n < 0 else body[at : at + n])
            at += max(n, 0)
        key, value = fields
        if attrs & 7:
            inner, _ = parse_messages(decompress(attrs & 7, value, magic))
            last_rel = inner[-1][0]
            for o, m, a, t, k, v in inner:
                absolute = offset - last_rel + o if magic == 1 else o
                out.append((absolute, m, a, t, k, v))
        else:
            out.append((offset, magic, attrs, ts, key, value))
        pos += 12 + size
    return out, pos


# --- raw Produce v0-v2 and Fetch v0-v3 -------------------------------------------------


def produce_old(b, version, topic, partition, records, acks=-1):
    body = i16(acks) + i32(10000) + i32(1) + string(topic) + i32(1) + i32(partition) + i32(len(records)) + records
    r, _ = call(b, 0, version, body)
    out = []
    for _ in range(r.i32()):
        assert r.string() == topic
        for _ in range(r.i32()):
            p = (r.i32(), r.i16(), r.i64())
            if version >= 2:
                p += (r.i64(),)
            out.append(p)
    if version >= 1:
        assert r.i32() == 0  # throttle_time_ms
    assert r.pos == len(r.data), "trailing bytes"
    return out


def fetch_old(b, version, topic, partition, offset, partition_max_bytes, max_bytes=None):
    """One partition; returns (error, high watermark, records bytes or None)."""
    body = i32(-1) + i32(0) + i32(1)
    if version >= 3:
        body += i32(max_bytes if max_bytes is not None else 50 << 20)
    body += i32(1) + string(topic) + i32(1) + i32(partition) + i64(offset) + i32(partition_max_bytes)
    r, _ = call(b, 1, version, body)
    if version >= 1:
        assert r.i32() == 0  # throttle_time_ms
    assert r.i32() == 1 and r.string() == topic and r.i32() == 1
    assert r.i32() == partition
    err, hw = r.i16(), r.i64()
    size = r.i32()
    records = None if size < 0 else r.take(size)
    assert r.pos == len(r.data), "trailing bytes"
    return err, hw, records


def produce_v3_batch(b, topic, batch):
    host, port = b.bootstrap.split(":")
    with cu.connect(host, int(port)) as s:
        s.sendall(cu.produce_v3(5, topic, 0, batch))
        _, out = cu.parse_produce_v3_response(cu.recv_frame(s))
    return out[(topic, 0)]


def consume_new(b, topic, count):
    """[(offset, key, value, timestamp)] read by a current librdkafka."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "oldfmt-new", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got, deadline = [], time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for m in c.consume(100, timeout=1.0):
                assert not m.error(), m.error()
                got.append((m.offset(), m.key(), m.value(), m.timestamp()[1]))
        return got
    finally:
        c.close()


# --- Produce v0-v2 ----------------------------------------------------------------------

PRODUCE_CASES = [
    (0, 0, "none"),
    (0, 0, "gzip"),
    (1, 0, "snappy"),
    (1, 0, "gzip"),
    (2, 1, "none"),
    (2, 1, "gzip"),
    (2, 1, "snappy"),
    (2, 1, "lz4"),
    (2, 0, "none"),
]


@pytest.mark.parametrize("version,magic,codec", PRODUCE_CASES)
def test_produce_old_read_new(b, version, magic, codec):
    topic = new_topic(b)
    records = [(b"k%d" % i, b"value-%d" % i) for i in range(3)] + [(None, b"keyless")]
    got = produce_old(b, version, topic, 0, message_set(magic, codec, records))
    want = (0, NONE, 0) + ((-1,) if version >= 2 else ())
    assert got == [want]
    # A second set gets the next offsets.
    got = produce_old(b, version, topic, 0, message_set(magic, codec, records[:1]))
    assert got[0][:3] == (0, NONE, 4)
    read = consume_new(b, topic, 5)
    ts = [TS + i if magic == 1 else -1 for i in range(4)] + [TS if magic == 1 else -1]
    want = [(i, k, v, ts[i]) for i, (k, v) in enumerate(records + records[:1])]
    assert read == want


def test_produce_v0_v2_accept_magic_2(b):
    topic = new_topic(b)
    batch = cu.record_batch([(b"k", b"v", [("h", b"x")])], TS)
    for version in (0, 1, 2):
        got = produce_old(b, version, topic, 0, batch)
        assert got[0][:3] == (0, NONE, version)


def test_produce_v3_refuses_magic_0_and_1(b):
    topic = new_topic(b)
    for magic in (0, 1):
        err, _ = produce_v3_batch(b, topic, message_set(magic, "none", [(b"k", b"v")]))
        assert err == INVALID_RECORD


def test_produce_old_errors(b):
    topic = new_topic(b)
    bad_crc = bytearray(message(0, 1, b"k", b"v", ts=TS))
    bad_crc[-1] ^= 1
    assert produce_old(b, 2, topic, 0, bytes(bad_crc))[0][1] == CORRUPT_MESSAGE
    mixed = message(0, 0, b"k", b"v") + message(1, 1, b"k", b"v", ts=TS)
    assert produce_old(b, 2, topic, 0, mixed)[0][1] == INVALID_RECORD
    inner = message(0, 1, b"k", b"v", ts=TS)
    two = wrapper(1, "gzip", inner, 0, ts=TS) + wrapper(1, "gzip", inner, 0, ts=TS)
    assert produce_old(b, 2, topic, 0, two)[0][1] == INVALID_RECORD
    bad_inner = bytearray(inner)
    bad_inner[-1] ^= 1
    assert produce_old(b, 2, topic, 0, wrapper(1, "gzip", bytes(bad_inner), 0, ts=TS))[0][1] == CORRUPT_MESSAGE
    nested = wrapper(1, "gzip", wrapper(1, "gzip", inner, 0, ts=TS), 0, ts=TS)
    assert produce_old(b, 2, topic, 0, nested)[0][1] == INVALID_RECORD
    lat = message(0, 1, b"k", b"v", ts=-1, attributes=0x08)
    assert produce_old(b, 2, topic, 0, lat)[0][1] == INVALID_TIMESTAMP
    # zstd needs magic 2; a codec id Kafka does not know fails unknown.
    zstd_wrapper = message(0, 1, None, zstandard.ZstdCompressor().compress(inner), ts=TS, attributes=4)
    assert produce_old(b, 2, topic, 0, zstd_wrapper)[0][1] == INVALID_RECORD
    assert produce_old(b, 2, topic, 0, message(0, 1, None, b"xx", ts=TS, attributes=5))[0][1] == UNKNOWN_SERVER_ERROR
    # No whole message (empty, or cut short): nothing appended, no error.
    assert produce_old(b, 2, topic, 0, b"") == [(0, NONE, -1, -1)]
    assert produce_old(b, 2, topic, 0, inner[:-3]) == [(0, NONE, -1, -1)]
    # Nothing above was stored.
    assert produce_old(b, 2, topic, 0, inner)[0][:3] == (0, NONE, 0)


def test_produce_old_topic_rules(b):
    compacted = new_topic(b, {"cleanup.policy": "compact"})
    assert produce_old(b, 1, compacted, 0, message(0, 0, None, b"v"))[0][1] == INVALID_RECORD
    assert produce_old(b, 1, compacted, 0, message(0, 0, b"k", b"v"))[0][1] == NONE
    strict = new_topic(b, {"message.timestamp.before.max.ms": "60000"})
    assert produce_old(b, 2, strict, 0, message(0, 1, b"k", b"v", ts=1000))[0][1] == INVALID_TIMESTAMP
    # Magic 0 has no timestamp to check.
    assert produce_old(b, 2, strict, 0, message(0, 0, b"k", b"v"))[0][1] == NONE
    small = new_topic(b, {"max.message.bytes": "200"})
    assert produce_old(b, 2, small, 0, message(0, 1, b"k", b"x" * 300, ts=TS))[0][1] == MESSAGE_TOO_LARGE
    lat = new_topic(b, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    got = produce_old(b, 2, lat, 0, message(0, 1, b"k", b"v", ts=TS))
    assert got[0][1] == NONE and got[0][3] >= before - 1000


# --- Fetch v0-v3 ------------------------------------------------------------------------


def expected_down_conversion(records, base_offset, from_offset, magic, size):
    """Uncompressed v2 records [(key, value, ts)] from base_offset as Kafka
    down-converts them from `from_offset`, padded to `size` bytes."""
    out = b"".join(
        message(base_offset + i, magic, k, v, ts=ts)
        for i, (k, v, ts) in enumerate(records)
        if base_offset + i >= from_offset
    )
    out = out[:size]
    while len(out) < size:  # LazyDownConversionRecordsSend.buildOverflowBatch
        remaining = size - len(out)
        block = max(12, min(remaining + 1, 128 * 1024))
        out += (i64(-1) + i32(max(remaining + 1, 61)) + bytes(block - 12))[:remaining]
    return out


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_down_conversion_exact(b, version):
    topic = new_topic(b)
    first = [(b"k0", b"a", [("h", b"x")]), (None, b"b", []), (b"k2", b"c", [])]
    second = [(b"k3", b"d", [])]
    batch1, batch2 = cu.record_batch(first, TS), cu.record_batch(second, TS + 5)
    assert produce_v3_batch(b, topic, batch1) == (NONE, 0)
    assert produce_v3_batch(b, topic, batch2) == (NONE, 3)
    magic = 0 if version <= 1 else 1
    err, hw, records = fetch_old(b, version, topic, 0, 1, 1 << 20)
    assert (err, hw) == (NONE, 4)
    recs = [(k, v, TS) for k, v, _ in first] + [(k, v, TS + 5) for k, v, _ in second]
    # What was read: both batches (the first holds offset 1).
    want = expected_down_conversion(recs, 0, 1, magic, len(batch1) + len(batch2))
    assert records == want
    # Read from the end: nothing.
    assert fetch_old(b, version, topic, 0, 4, 1 << 20) == (NONE, 4, b"")


@pytest.mark.parametrize("version", [0, 2, 3])
def test_fetch_old_partition_limit(b, version):
    topic = new_topic(b)
    batch = cu.record_batch([(b"k", b"x" * 200, [])] * 3, TS)
    for _ in range(2):
        produce_v3_batch(b, topic, batch)
    magic = 0 if version <= 1 else 1
    recs = [(b"k", b"x" * 200, TS)] * 3
    # v0-v2 never pass the partition limit: a first batch larger than it
    # gives nothing; v3 sends it whole (one batch beyond the limit).
    err, hw, records = fetch_old(b, version, topic, 0, 0, len(batch) - 1)
    assert (err, hw) == (NONE, 6)
    if version <= 2:
        assert records == b""
    else:
        converted = expected_down_conversion(recs, 0, 0, magic, 0)
        size = max(len(batch), len(b"".join(message(i, 1, b"k", b"x" * 200, ts=TS) for i in range(3))))
        assert len(converted) == 0 and len(records) == size
        assert [m[0] for m in parse_messages(records)[0]] == [0, 1, 2]
    # A limit that ends inside the second batch: what was read, partial
    # batch included, is the records size; overflow padding after the first.
    limit = len(batch) + 100
    err, hw, records = fetch_old(b, version, topic, 0, 0, limit)
    assert len(records) == limit
    assert [m[0] for m in parse_messages(records)[0]] == [0, 1, 2]


def test_fetch_v3_response_limit(b):
    topic = new_topic(b)
    batch = cu.record_batch([(b"k", b"y" * 100, [])], TS)
    for _ in range(3):
        produce_v3_batch(b, topic, batch)
    # max_bytes 1: the first batch whole all the same.
    _, _, records = fetch_old(b, 3, topic, 0, 0, 1 << 20, max_bytes=1)
    assert [m[0] for m in parse_messages(records)[0]] == [0]
    _, _, records = fetch_old(b, 3, topic, 0, 0, 1 << 20, max_bytes=2 * len(batch))
    assert [m[0] for m in parse_messages(records)[0]] == [0, 1]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_fetch_old_of_new_compressed(b, codec):
    topic = new_topic(b)
    p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": codec, "linger.ms": 500})
    # The five records must make one batch: with the partition's leader
    # known before the first, librdkafka's linger counts from there (a
    # record queued while metadata was slow would go out alone). Values
    # compress: librdkafka sends a batch uncompressed when compression does
    # not make it smaller.
    p.list_topics(topic, timeout=30)
    value = lambda i: b"value-%d-" % i * 50  # noqa: E731
    for i in range(5):
        p.produce(topic, key=b"k%d" % i, value=value(i), headers=[("h", b"x")], timestamp=TS + i, partition=0)
    assert p.flush(30) == 0
    for version, magic in ((1, 0), (3, 1)):
        err, hw, records = fetch_old(b, version, topic, 0, 2, 1 << 20)
        assert (err, hw) == (NONE, 5)
        msgs, end = parse_messages(records)
        # The compressed batch comes whole: offsets before 2 included.
        assert [(o, m, k, v) for o, m, _, _, k, v in msgs] == [(i, magic, b"k%d" % i, value(i)) for i in range(5)]
        assert [t for *_, t, _, _ in msgs] == [TS + i if magic else -1 for i in range(5)]
        # One wrapper of the batch's codec.
        assert struct.unpack(">q", records[:8])[0] == 4
        assert records[12 + 5] & 7 == CODECS[codec]


def test_fetch_old_zstd(b):
    topic = new_topic(b)
    p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": "zstd"})
    p.produce(topic, value=b"z" * 1000, partition=0)
    assert p.flush(30) == 0
    # Kafka's answer for a partition it cannot convert: no offsets, null records.
    assert fetch_old(b, 3, topic, 0, 0, 1 << 20) == (UNSUPPORTED_COMPRESSION_TYPE, -1, None)
    assert fetch_old(b, 0, topic, 0, 0, 1 << 20) == (UNSUPPORTED_COMPRESSION_TYPE, -1, None)
    assert fetch_old(b, 3, topic, 0, 1, 1 << 20) == (NONE, 1, b"")
    zstd_topic = new_topic(b, {"compression.type": "zstd"})
    assert fetch_old(b, 2, zstd_topic, 0, 0, 1 << 20) == (UNSUPPORTED_COMPRESSION_TYPE, -1, None)


def test_fetch_old_errors(b):
    topic = new_topic(b)
    assert fetch_old(b, 1, "oldfmt-missing", 0, 0, 1 << 20) == (UNKNOWN_TOPIC_OR_PARTITION, -1, b"")
    assert fetch_old(b, 3, topic, 5, 0, 1 << 20) == (UNKNOWN_TOPIC_OR_PARTITION, -1, b"")
    assert fetch_old(b, 2, topic, 0, 10, 1 << 20) == (OFFSET_OUT_OF_RANGE, -1, b"")


def test_fetch_old_log_append_time(b):
    topic = new_topic(b, {"message.timestamp.type": "LogAppendTime"})
    got = produce_old(b, 2, topic, 0, message_set(1, "gzip", [(b"a", b"1"), (b"b", b"2")]))
    log_append_time = got[0][3]
    assert got[0][1] == NONE and log_append_time > TS
    # Magic 1 keeps the type (attribute bit 3) and the broker's time.
    msgs, _ = parse_messages(fetch_old(b, 2, topic, 0, 0, 1 << 20)[2])
    assert [(o, a & 0x08, t, v) for o, _, a, t, _, v in msgs] == [
        (0, 0x08, log_append_time, b"1"),
        (1, 0x08, log_append_time, b"2"),
    ]
    msgs, _ = parse_messages(fetch_old(b, 0, topic, 0, 0, 1 << 20)[2])
    assert [(o, a & 0x08, t) for o, _, a, t, _, _ in msgs] == [(0, 0, -1), (1, 0, -1)]


def test_fetch_old_downconversion_disabled(b):
    topic = new_topic(b, {"message.downconversion.enable": "false"})
    assert produce_old(b, 2, topic, 0, message(0, 1, b"k", b"v", ts=TS))[0][1] == NONE
    assert fetch_old(b, 3, topic, 0, 0, 1 << 20) == (UNSUPPORTED_VERSION, -1, None)
    assert consume_new(b, topic, 1) == [(0, b"k", b"v", TS)]


# --- real clients -------------------------------------------------------------------------


class _Requests(logging.Handler):
    """Collects the request names and versions librdkafka's protocol debug
    log shows ("ProduceRequest (v1, ...")."""

    def __init__(self):
        super().__init__()
        self.seen = set()

    def emit(self, record):
        self.seen.update(re.findall(r"(\w+Request) \(v(\d+)", record.getMessage()))


def old_librdkafka(b, fallback, requests):
    logger = logging.getLogger(f"rdkafka-{id(requests)}")
    logger.addHandler(requests)
    logger.setLevel(logging.DEBUG)
    return {
        "bootstrap.servers": b.bootstrap,
        "api.version.request": False,
        "broker.version.fallback": fallback,
        "debug": "protocol",
        "logger": logger,
    }


def consume_librdkafka(conf, topic, count):
    c = Consumer({**conf, "group.id": "oldfmt-old", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got, deadline = [], time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for m in c.consume(100, timeout=1.0):
                assert not m.error(), m.error()
                got.append((m.offset(), m.key(), m.value(), m.timestamp()[1]))
        return got
    finally:
        c.close()


# With broker.version.fallback 0.9.0 librdkafka sends Produce v1 and Fetch v1
# with message format v0 (magic 0). From 0.10.0 on it asks the broker for
# ApiVersions even with api.version.request=false (the fallback is then
# "queryable") and uses current versions: only 0.9.0 exercises old formats;
# kafka-python's api_version (0, 10) covers magic 1 below.
@pytest.mark.parametrize("fallback", ["0.9.0", "0.10.0"])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_librdkafka_old_broker_version(b, fallback, codec):
    old_to_new, new_to_old = new_topic(b), new_topic(b)
    requests = _Requests()
    conf = old_librdkafka(b, fallback, requests)
    p = Producer({**conf, "compression.type": codec, "linger.ms": 20})
    for i in range(20):
        p.produce(old_to_new, key=b"k%d" % i, value=b"v%d" % i, timestamp=TS + i, partition=0)
    assert p.flush(30) == 0
    # 0.9.0 sends magic 0 (no timestamps).
    ts = (lambda i: TS + i) if fallback == "0.10.0" else (lambda i: -1)
    want = [(i, b"k%d" % i, b"v%d" % i, ts(i)) for i in range(20)]
    assert consume_new(b, old_to_new, 20) == want
    # librdkafka reports a magic-0 message's missing timestamp as 0.
    old_ts = (lambda i: TS + i) if fallback == "0.10.0" else (lambda i: 0)
    want_old = [(i, b"k%d" % i, b"v%d" % i, old_ts(i)) for i in range(20)]
    assert consume_librdkafka(conf, old_to_new, 20) == want_old
    p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": codec, "linger.ms": 20})
    for i in range(20):
        p.produce(new_to_old, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")], timestamp=TS + i, partition=0)
    assert p.flush(30) == 0
    got = consume_librdkafka(conf, new_to_old, 20)
    assert [g[:3] for g in got] == [w[:3] for w in want]
    versions = {name: int(v) for name, v in requests.seen if name in ("ProduceRequest", "FetchRequest")}
    if fallback == "0.9.0":
        assert versions == {"ProduceRequest": 1, "FetchRequest": 1}
    else:
        assert versions["ProduceRequest"] >= 3 and versions["FetchRequest"] >= 4


@pytest.mark.parametrize("api_version", [(0, 9), (0, 10)])
@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4"])
def test_kafka_python_old_api_version(b, api_version, codec):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KTP

    if codec == "lz4" and api_version == (0, 9):
        pytest.skip("times out against Apache Kafka 3.9.1 too (kafka-python's magic-0 lz4)")
    topic = new_topic(b)
    p = KafkaProducer(bootstrap_servers=b.bootstrap, api_version=api_version, compression_type=codec, linger_ms=20)
    for i in range(20):
        p.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0, timestamp_ms=TS + i)
    p.flush(30)
    p.close()
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, api_version=api_version, consumer_timeout_ms=10000)
    c.assign([KTP(topic, 0)])
    c.seek(KTP(topic, 0), 0)
    got = []
    for m in c:
        got.append((m.offset, m.key, m.value, m.timestamp))
        if len(got) == 20:
            break
    c.close()
    # kafka-python reports a magic-0 message's missing timestamp as None.
    ts = (lambda i: TS + i) if api_version == (0, 10) else (lambda i: None)
    assert got == [(i, b"k%d" % i, b"v%d" % i, ts(i)) for i in range(20)]
