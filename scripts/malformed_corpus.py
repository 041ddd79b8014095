#!/usr/bin/env python3
"""Writes tests/malformed/<case>.bin: the malformed requests of issue #13, each
file the bytes a client writes on one connection (size-prefixed frames).
tests/malformed_requests.rs replays them; rerun this after editing a case."""
import gzip
import os
import struct
import zlib

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "malformed")
I32_MAX = 2**31 - 1


def s(text):  # STRING
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def arr(items):  # ARRAY (non-flexible)
    return struct.pack(">i", len(items)) + b"".join(items)


def frame(api_key, version, correlation_id, body):
    header = struct.pack(">hhi", api_key, version, correlation_id) + s("malformed")
    msg = header + body
    return struct.pack(">i", len(msg)) + msg


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def varint(n):
    n = (n << 1) ^ (n >> 63)  # zigzag
    out = b""
    while True:
        if n < 0x80:
            return out + bytes([n])
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7


def record_batch(values, attributes=0, producer_id=-1, producer_epoch=-1, base_sequence=-1):
    records = b""
    for i, v in enumerate(values):
        body = b"\x00" + varint(0) + varint(i) + varint(-1) + varint(len(v)) + v + varint(0)
        records += varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", attributes, len(values) - 1, 1_700_000_000_000,
                            1_700_000_000_000, producer_id, producer_epoch, base_sequence,
                            len(values)) + records
    crc = crc32c(after_crc)
    rest = struct.pack(">ibI", 0, 2, crc) + after_crc  # leader epoch, magic, crc
    return struct.pack(">qi", 0, len(rest)) + rest


def create_topics_v4(name, partitions, validate_only, corr=1):
    topic = s(name) + struct.pack(">ih", partitions, 1) + arr([]) + arr([])
    return frame(19, 4, corr, arr([topic]) + struct.pack(">i?", 30000, validate_only))


def produce_v3(topic, batch, acks=1, corr=2):
    part = struct.pack(">i", 0) + struct.pack(">i", len(batch)) + batch
    body = struct.pack(">h", -1) + struct.pack(">hi", acks, 30000) + arr([s(topic) + arr([part])])
    return frame(0, 3, corr, body)


def cases():
    # Fetch v4, max_bytes 2^31-1, one partition listed many times. The issue's
    # 8 MiB x 4,256 is scaled to 16 KiB x 1,000: the same encoder path.
    fetch_part = struct.pack(">iqi", 0, 0, I32_MAX)
    fetch = frame(1, 4, 3, struct.pack(">iiiib", -1, 0, 1, I32_MAX, 0)
                  + arr([s("fz") + arr([fetch_part] * 1000)]))
    batch = record_batch([bytes([65 + i % 26]) * 1000 for i in range(16)])
    yield "fetch_v4_max_bytes_i32max_partition_listed_1000_times", (
        create_topics_v4("fz", 1, False) + produce_v3("fz", batch) + fetch)
    yield "create_topics_350000_partitions", create_topics_v4("fz", 350_000, False)
    yield "create_topics_count_i32max", create_topics_v4("fz", I32_MAX, False)
    yield "create_topics_count_i32max_validate_only", create_topics_v4("fz", I32_MAX, True)
    create_partitions = frame(37, 1, 2, arr([s("fz") + struct.pack(">ii", I32_MAX, -1)])
                              + struct.pack(">i?", 30000, False))
    yield "create_partitions_count_i32max", create_topics_v4("fz", 1, False) + create_partitions
    yield "size_prefix_100mib", struct.pack(">i", 104_857_500)
    names = [s(f"unknown-{i}") for i in range(20_000)]
    yield "metadata_20000_unknown_topics", frame(3, 4, 1, arr(names) + b"\x01")
    # Found by the handlers fuzz target: a negative partition reached a
    # placement assertion (debug builds) on the fetch path.
    neg_part = struct.pack(">iqi", -1, 0, 1 << 20)
    yield "fetch_negative_partition", create_topics_v4("fz", 1, False) + frame(
        1, 4, 2, struct.pack(">iiiib", -1, 0, 1, 1 << 20, 0) + arr([s("fz") + arr([neg_part])]))
    txn_batch = record_batch([b"v"], attributes=0x10)  # transactional, producer id -1
    yield "produce_transactional_batch_without_producer_id", (
        create_topics_v4("fz", 1, False) + produce_v3("fz", txn_batch))
    # Message formats v0/v1 (Produce v0-v2): a gzip wrapper inflating past
    # the decompression limit, a wrapper of garbage, nested wrappers, a
    # message whose key length passes its end; then Fetch v0 and v3 with a
    # partition listed 1,000 times and no byte limit (v0) / i32::MAX (v3):
    # the down-converted answer stays within fetch.max.bytes.
    yield "old_format_produce_and_fetch", (
        create_topics_v4("fz", 1, False)
        + produce_v3("fz", batch)
        + produce_old(2, legacy_wrapper(1, gzip.compress(bytes(20 << 20), mtime=0)))
        + produce_old(1, legacy_wrapper(0, b"\x1f\x8b garbage"))
        + produce_old(2, legacy_wrapper(1, gzip.compress(
            legacy_wrapper(1, gzip.compress(legacy_message(1, b"k", b"v"), mtime=0)), mtime=0)))
        + produce_old(0, legacy_message(0, b"k", b"v")[:20] + struct.pack(">i", I32_MAX) + b"kv")
        + frame(1, 0, 8, struct.pack(">iii", -1, 0, 1) + arr([s("fz") + arr([fetch_part] * 1000)]))
        + frame(1, 3, 9, struct.pack(">iiii", -1, 0, 1, I32_MAX) + arr([s("fz") + arr([fetch_part] * 1000)])))


def legacy_message(magic, key, value, attributes=0):
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", 1000) if magic else b"")
    for f in (key, value):
        body += struct.pack(">i", -1) if f is None else struct.pack(">i", len(f)) + f
    return struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body) & 0xFFFFFFFF) + body


def legacy_wrapper(magic, compressed):
    return legacy_message(magic, None, compressed, attributes=1)


def produce_old(version, records, corr=5):
    part = struct.pack(">i", 0) + struct.pack(">i", len(records)) + records
    return frame(0, version, corr, struct.pack(">hi", 1, 30000) + arr([s("fz") + arr([part])]))


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in cases():
        with open(os.path.join(OUT, name + ".bin"), "wb") as f:
            f.write(data)
        print(f"{name}.bin: {len(data)} bytes")


if __name__ == "__main__":
    main()
