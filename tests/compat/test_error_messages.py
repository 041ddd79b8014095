"""Error messages sent with a Produce error code read as Kafka 3.9.1's, over
raw Produce v8 (the first version with per-partition error messages).

Kafka sends a message only for record validation failures (its
RecordValidationException: invalid records and timestamps, with the
offending record in record_errors); RECORD_TOO_LARGE and CORRUPT_MESSAGE
carry the error code alone (ReplicaManager's LogAppendResult has no custom
message for them).
"""

import time

import pytest

import compat_util as cu
from compat_util import Reader, frame, i16, i32, request_header_v1, string


def produce_v8(correlation_id, topic, partition, batch):
    body = (
        string(None)
        + i16(-1)
        + i32(10000)
        + i32(1)
        + string(topic)
        + i32(1)
        + i32(partition)
        + i32(len(batch))
        + batch
    )
    return frame(request_header_v1(0, 8, correlation_id) + body)


def parse_produce_v8(payload):
    r = Reader(payload)
    r.i32()
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            index, error = r.i32(), r.i16()
            r.i64(), r.i64(), r.i64()  # base offset, log append time, log start offset
            record_errors = [(r.i32(), r.string()) for _ in range(r.i32())]
            out[(name, index)] = (error, record_errors, r.string())
    return out


def produce(b, topic, batch):
    s = cu.connect("127.0.0.1", b.port)
    try:
        s.sendall(produce_v8(1, topic, 0, batch))
        return parse_produce_v8(cu.recv_frame(s))[(topic, 0)]
    finally:
        s.close()


def create_topic(b, name, config):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(30)
    cu.wait_topics_ready(b.bootstrap, [name], 1)


def now_ms():
    return int(time.time() * 1000)


@pytest.fixture(scope="module")
def topics(broker):
    create_topic(broker, "small", {"max.message.bytes": "200"})
    create_topic(broker, "compacted", {"cleanup.policy": "compact"})
    create_topic(broker, "recent", {"message.timestamp.before.max.ms": "60000"})
    return broker


def test_record_too_large_has_no_message(topics):
    batch = cu.record_batch([(b"k", b"v" * 400, [])], now_ms())
    assert produce(topics, "small", batch) == (10, [], None)


def test_corrupt_crc_has_no_message(topics):
    batch = cu.record_batch([(b"k", b"v", [])], now_ms(), corrupt_crc=True)
    assert produce(topics, "small", batch) == (2, [], None)


def test_compacted_topic_record_without_key(topics):
    batch = cu.record_batch([(b"k", b"v", []), (None, b"v", [])], now_ms())
    record = "Compacted topic cannot accept message without key in topic partition compacted-0"
    message = (
        "One or more records have been rejected due to 1 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{record}')]"
    )
    assert produce(topics, "compacted", batch) == (87, [(1, record)], message)


def test_timestamp_out_of_range(topics):
    ts = now_ms() - 3_600_000
    error, record_errors, message = produce(
        topics, "recent", cu.record_batch([(b"k", b"v", [])], ts)
    )
    assert (error, message) == (32, "One or more records have been rejected due to invalid timestamp")
    [(index, text)] = record_errors
    prefix = f"Timestamp {ts} of message with offset 0 is out of range. The timestamp should be within ["
    assert index == 0 and text.startswith(prefix) and text.endswith("]"), text
    lo, hi = (int(x) for x in text[len(prefix) : -1].split(", "))
    # [now - before.max.ms, now + after.max.ms], the sum wrapping as a Java long.
    assert abs(lo - (now_ms() - 60_000)) < 60_000
    assert (hi - lo) % 2**64 == (60_000 + 2**63 - 1) % 2**64
