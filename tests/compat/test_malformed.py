"""Malformed input over raw sockets. Every assertion is Apache Kafka 3.9's
behaviour (the suite is proven against it): oversized, truncated, unknown and
garbage frames close the connection; ApiVersions above the supported range
gets a v0 UNSUPPORTED_VERSION answer with the version table; a bad batch CRC
gets CORRUPT_MESSAGE; and the broker keeps serving normal clients."""

import os
import struct

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

import compat_util as cu
from test_confluent import create_topics

MAX_REQUEST_BYTES = 1024 * 1024
UNSUPPORTED_VERSION = 35
CORRUPT_MESSAGE = 2
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
TOPIC = "malformed"
TXN_TOPIC = "malformed-txn"


@pytest.fixture(scope="module")
def mbroker(broker_module_factory):
    b = broker_module_factory({"socket.request.max.bytes": str(MAX_REQUEST_BYTES)})
    create_topics(b.bootstrap, [TOPIC], partitions=1)
    return b


def conn(b):
    host, port = b.bootstrap.split(":")
    return cu.connect(host, int(port))


def assert_closed(s, what):
    closed, got = cu.wait_closed(s, timeout_s=15)
    assert closed, f"{what}: connection still open (got {got[:64]!r})"
    return got


def test_oversized_frame_closes_connection(mbroker):
    with conn(mbroker) as s:
        s.sendall(struct.pack(">i", 2 * MAX_REQUEST_BYTES) + b"\x00" * 64)
        assert assert_closed(s, "2 MiB length") == b""


def test_negative_length_closes_connection(mbroker):
    with conn(mbroker) as s:
        s.sendall(struct.pack(">i", -5) + b"\x00" * 16)
        assert_closed(s, "negative length")


def test_garbage_bytes_close_connection(mbroker):
    with conn(mbroker) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert_closed(s, "HTTP request")
    with conn(mbroker) as s:
        s.sendall(struct.pack(">i", 64) + os.urandom(64))
        assert_closed(s, "random payload")


def test_unknown_api_key_closes_connection(mbroker):
    with conn(mbroker) as s:
        s.sendall(cu.frame(cu.request_header_v1(1000, 0, 7) + b"\x00" * 8))
        assert_closed(s, "api key 1000")


def test_truncated_frames(mbroker):
    # Header cut short inside a correctly framed request.
    with conn(mbroker) as s:
        s.sendall(cu.frame(cu.i16(18) + cu.i16(0)))
        assert_closed(s, "4-byte header")
    # Declared length longer than what arrives, then EOF from the client.
    with conn(mbroker) as s:
        full = cu.api_versions_v3_request(3)
        s.sendall(full[: len(full) // 2])
        s.shutdown(1)  # SHUT_WR
        assert_closed(s, "half a frame then EOF")
    # Metadata v1 whose topic array claims more entries than present.
    with conn(mbroker) as s:
        s.sendall(cu.frame(cu.request_header_v1(3, 1, 9) + cu.i32(5) + cu.string("a")))
        assert_closed(s, "short topic array")


def test_api_versions_too_high_gets_v0_unsupported(mbroker):
    with conn(mbroker) as s:
        s.sendall(cu.api_versions_v3_request(41, version=32000))
        corr, err, versions = cu.parse_api_versions_v0(cu.recv_frame(s))
        assert corr == 41
        assert err == UNSUPPORTED_VERSION
        # Kafka lists only ApiVersions itself here (3.9: {18: (0, 4)}), so
        # the client can retry with a version it knows.
        assert set(versions) == {18}, versions
        assert versions[18][0] == 0 and versions[18][1] >= 3, versions
        # The connection stays usable for a supported version.
        s.sendall(cu.api_versions_v3_request(42))
        corr, err, versions3 = cu.parse_api_versions_v3(cu.recv_frame(s))
        assert (corr, err) == (42, 0)
        assert versions3[18] == versions[18]


def test_api_versions_v0_and_v3(mbroker):
    with conn(mbroker) as s:
        s.sendall(cu.frame(cu.request_header_v1(18, 0, 5)))
        corr, err, v0 = cu.parse_api_versions_v0(cu.recv_frame(s))
        assert (corr, err) == (5, 0)
        s.sendall(cu.api_versions_v3_request(6))
        corr, err, v3 = cu.parse_api_versions_v3(cu.recv_frame(s))
        assert (corr, err) == (6, 0)
        assert v0 == v3
        # Facts librdkafka relies on (see design.md): Produce reaches down to
        # v2 or lower, Fetch to v4 or lower, zstd needs Produce 7 / Fetch 10.
        assert v3[0][0] <= 2 and v3[0][1] >= 7
        assert v3[1][0] <= 4 and v3[1][1] >= 10


def test_produce_bad_crc_is_corrupt_message(mbroker):
    recs = [(b"raw-k%d" % i, b"raw-v%d" % i, [("h", b"x")]) for i in range(3)]
    with conn(mbroker) as s:
        # A valid hand-built batch first proves the encoder itself.
        s.sendall(cu.produce_v3(11, TOPIC, 0, cu.record_batch(recs, 1_700_000_000_000)))
        corr, res = cu.parse_produce_v3_response(cu.recv_frame(s))
        assert corr == 11 and res[(TOPIC, 0)] == (0, 0), res
        s.sendall(cu.produce_v3(12, TOPIC, 0, cu.record_batch(recs, 1_700_000_000_000, corrupt_crc=True)))
        corr, res = cu.parse_produce_v3_response(cu.recv_frame(s))
        assert corr == 12
        err, base = res[(TOPIC, 0)]
        assert (err, base) == (CORRUPT_MESSAGE, -1), res
        # Same connection still answers.
        s.sendall(cu.api_versions_v3_request(13))
        assert cu.parse_api_versions_v3(cu.recv_frame(s))[:2] == (13, 0)


def test_transactional_batch_without_transactional_id_is_refused(mbroker):
    """Kafka's KafkaApis refuses transactional records from a request with
    no transactional id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
    partition, nothing stored (with or without a producer id), and with
    acks=0 the connection is closed."""
    create_topics(mbroker.bootstrap, [TXN_TOPIC], partitions=1)
    recs = [(b"txn-k", b"txn-v", [])]
    with conn(mbroker) as s:
        s.sendall(cu.produce_v3(30, TXN_TOPIC, 0, cu.record_batch(recs, 1_700_000_000_000)))
        _, res = cu.parse_produce_v3_response(cu.recv_frame(s))
        end_before = res[(TXN_TOPIC, 0)][1] + 1
        for corr, pid in ((31, -1), (32, 4242)):
            batch = cu.record_batch(recs, 1_700_000_000_000, attributes=0x10, producer_id=pid,
                                    producer_epoch=0 if pid >= 0 else -1, base_sequence=0 if pid >= 0 else -1)
            s.sendall(cu.produce_v3(corr, TXN_TOPIC, 0, batch))
            got_corr, res = cu.parse_produce_v3_response(cu.recv_frame(s))
            assert got_corr == corr
            assert res[(TXN_TOPIC, 0)] == (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1), res
        # Nothing was stored: the next plain batch lands right after the first.
        s.sendall(cu.produce_v3(33, TXN_TOPIC, 0, cu.record_batch(recs, 1_700_000_000_000)))
        _, res = cu.parse_produce_v3_response(cu.recv_frame(s))
        assert res[(TXN_TOPIC, 0)] == (0, end_before), res
    with conn(mbroker) as s:
        batch = cu.record_batch(recs, 1_700_000_000_000, attributes=0x10)
        s.sendall(cu.produce_v3(34, TXN_TOPIC, 0, batch, acks=0))
        assert_closed(s, "acks=0 transactional produce without transactional id")


def test_normal_clients_still_work(mbroker):
    # Runs last in this module: after all of the abuse above.
    p = Producer({"bootstrap.servers": mbroker.bootstrap, "acks": "all"})
    done = []
    for i in range(10):
        p.produce(TOPIC, key=b"ok-%d" % i, value=b"v", partition=0, on_delivery=lambda e, m: done.append(e))
    assert p.flush(30) == 0 and done == [None] * 10
    c = Consumer({"bootstrap.servers": mbroker.bootstrap, "group.id": "compat-unused", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        got = []
        while len(got) < 13:
            msgs = c.consume(100, timeout=10)
            assert msgs, f"stalled at {len(got)}"
            got += [m for m in msgs if not m.error()]
        keys = [m.key() for m in got]
        assert keys[:3] == [b"raw-k0", b"raw-k1", b"raw-k2"]
        assert keys[3:] == [b"ok-%d" % i for i in range(10)]
        assert [m.offset() for m in got] == list(range(13))
        assert got[0].headers() == [("h", b"x")]
        assert got[0].timestamp() == (1, 1_700_000_000_000)
    finally:
        c.close()
