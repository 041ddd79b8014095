#!/usr/bin/env python3
"""Writes fuzz/seeds/<target>/: valid request sequences for the handlers
target ([api_key u8][version u8][body length u16][body] per request) and
valid record batches for record_batch_append, so mutations start deep."""
import gzip
import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.dirname(__file__))
from malformed_corpus import arr, record_batch, s  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "fuzz", "seeds")


def req(api_key, version, body):
    return struct.pack(">BBH", api_key, version, len(body)) + body


def ns(text):  # NULLABLE_STRING, None = null
    return struct.pack(">h", -1) if text is None else s(text)


def b(data):  # BYTES
    return struct.pack(">i", len(data)) + data


BATCH = record_batch([b"hello", b"world"])
TXN_BATCH = record_batch([b"t"], attributes=0x10, producer_id=1000, producer_epoch=0, base_sequence=0)
IDEMPOTENT = record_batch([b"i"], producer_id=1000, producer_epoch=0, base_sequence=0)

CREATE = req(19, 4, arr([s("t1") + struct.pack(">ih", 2, 1) + arr([]) + arr([])]) + struct.pack(">i?", 5000, False))
PRODUCE = req(0, 3, ns(None) + struct.pack(">hi", 1, 5000)
              + arr([s("fz") + arr([struct.pack(">i", 0) + b(BATCH)])]))
FETCH = req(1, 4, struct.pack(">iiiib", -1, 0, 1, 1 << 20, 0)
            + arr([s("fz") + arr([struct.pack(">iqi", 0, 0, 1 << 20)])]))
METADATA = req(3, 4, arr([s("fz"), s("auto")]) + b"\x01")
LIST_OFFSETS = req(2, 1, struct.pack(">i", -1) + arr([s("fz") + arr([struct.pack(">iq", 0, -1)])]))
API_VERSIONS = req(18, 0, b"")
FIND_COORD = req(10, 1, s("g") + b"\x00")
JOIN = req(11, 2, s("g") + struct.pack(">ii", 10000, 10000) + s("") + s("consumer")
           + arr([s("range") + b(b"\x00\x00\x00\x00\x00\x01\x00\x02fz\xff\xff\xff\xff")]))
SYNC = req(14, 1, s("g") + struct.pack(">i", 1) + s("m") + arr([]))
HEARTBEAT = req(12, 1, s("g") + struct.pack(">i", 1) + s("m"))
LEAVE = req(13, 1, s("g") + s("m"))
COMMIT = req(8, 2, s("g") + struct.pack(">i", -1) + s("") + struct.pack(">q", -1)
             + arr([s("fz") + arr([struct.pack(">iq", 0, 1) + ns("meta")])]))
OFFSET_FETCH = req(9, 1, s("g") + arr([s("fz") + arr([struct.pack(">i", 0)])]))
LIST_GROUPS = req(16, 0, b"")
DESCRIBE_GROUPS = req(15, 0, arr([s("g")]))
DELETE_GROUPS = req(42, 0, arr([s("g")]))
OFFSET_DELETE = req(47, 0, s("g") + arr([s("fz") + arr([struct.pack(">i", 0)])]))
DESCRIBE_CONFIGS = req(32, 1, arr([struct.pack(">b", 2) + s("fz") + struct.pack(">i", -1)]) + b"\x01")
DELETE_TOPICS = req(20, 1, arr([s("t1")]) + struct.pack(">i", 5000))
CREATE_PARTS = req(37, 1, arr([s("fz") + struct.pack(">ii", 5, -1)]) + struct.pack(">i?", 5000, False))
DELETE_RECORDS = req(21, 0, arr([s("fz") + arr([struct.pack(">iq", 0, 1)])]) + struct.pack(">i", 5000))
INIT_PID = req(22, 0, ns("tx") + struct.pack(">i", 60000))
INIT_PID_NULL = req(22, 0, ns(None) + struct.pack(">i", 60000))
OFFSET_FOR_EPOCH = req(23, 2, arr([s("fz") + arr([struct.pack(">iii", 0, 0, 0)])]))
DESCRIBE_CLUSTER = req(60, 0, b"\x00\x00")  # flexible: include_cluster_authorized_operations, tags
ELECT = req(43, 0, arr([s("fz") + struct.pack(">ii", 1, 0)]) + struct.pack(">i", 5000))
PRODUCE_TXN = req(0, 3, ns("tx") + struct.pack(">hi", -1, 5000)
                  + arr([s("fz") + arr([struct.pack(">i", 1) + b(TXN_BATCH)])]))
PRODUCE_IDEM = req(0, 3, ns(None) + struct.pack(">hi", -1, 5000)
                   + arr([s("fzc") + arr([struct.pack(">i", 0) + b(IDEMPOTENT)])]))


def legacy_message(offset, magic, key, value, attributes=0, ts=1000):
    """A message format v0/v1 entry (magic 0/1), CRC-32 over magic onwards."""
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", ts) if magic else b"")
    for f in (key, value):
        body += struct.pack(">i", -1) if f is None else struct.pack(">i", len(f)) + f
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body) & 0xFFFFFFFF) + body


def old_produce(version, records):
    return req(0, version, struct.pack(">hi", 1, 5000) + arr([s("fz") + arr([struct.pack(">i", 0) + b(records)])]))


def old_fetch(version):
    limits = struct.pack(">iii", -1, 0, 1) + (struct.pack(">i", 1 << 20) if version >= 3 else b"")
    return req(1, version, limits + arr([s("fz") + arr([struct.pack(">iqi", 0, 0, 1 << 20)])]))

# Dynamic configs and client quotas (all v0; DescribeUserScramCredentials
# v0 is flexible: a null compact array, then no tagged fields).
ALTER_CONFIGS = req(33, 0, arr([struct.pack(">b", 2) + s("fz") + arr([s("retention.ms") + ns("1000")])])
                    + b"\x00")
ALTER_BROKER = req(33, 0, arr([struct.pack(">b", 4) + s("") + arr([s("log.retention.ms") + ns("60000")])])
                   + b"\x00")
INCREMENTAL = req(44, 0, arr([struct.pack(">b", 2) + s("fzc") + arr([
    s("cleanup.policy") + struct.pack(">b", 2) + ns("delete"),
    s("segment.ms") + struct.pack(">b", 0) + ns("3600000"),
    s("retention.ms") + struct.pack(">b", 1) + ns(None)])]) + b"\x00")
ALTER_QUOTAS = req(49, 0, arr([arr([s("client-id") + ns("fzclient")])
                               + arr([s("producer_byte_rate") + struct.pack(">d?", 1048576.0, False)])])
                   + b"\x00")
DESCRIBE_QUOTAS = req(48, 0, arr([s("client-id") + struct.pack(">b", 2) + ns(None)]) + b"\x00")
DESCRIBE_SCRAM = req(50, 0, b"\x00\x00")
# AlterUserScramCredentials v0 (flexible): delete bob's SHA-512, upsert
# alice's SHA-256 (4096 iterations, salt "salt", 32-byte salted password).
ALTER_SCRAM = req(51, 0, b"\x02" + b"\x04bob" + struct.pack(">b", 2) + b"\x00"
                  + b"\x02" + b"\x06alice" + struct.pack(">bi", 1, 4096) + b"\x05salt"
                  + b"\x21" + bytes(range(32)) + b"\x00" + b"\x00")
# Outside a SASL listener both are answered ILLEGAL_SASL_STATE.
SASL_HANDSHAKE = req(17, 1, s("PLAIN"))
SASL_AUTHENTICATE = req(36, 1, b(b"\x00alice\x00alice-secret"))
DESCRIBE_LOG_DIRS_ALL = req(35, 1, struct.pack(">i", -1))  # topics null: every log
DESCRIBE_LOG_DIRS = req(35, 0, arr([s("fz") + arr([struct.pack(">i", 0)])]))
# Flexible v0 bodies (compact arrays and strings, empty tag sections).
ALTER_REASSIGN = req(45, 0, struct.pack(">i", 5000) + b"\x02" + b"\x03fz" + b"\x03"
                     + struct.pack(">i", 0) + b"\x03" + struct.pack(">ii", 1, 2) + b"\x00"
                     + struct.pack(">i", 1) + b"\x00" + b"\x00" + b"\x00" + b"\x00")
LIST_REASSIGN = req(46, 0, struct.pack(">i", 5000) + b"\x00" + b"\x00")
ALTER_REPLICA_LOG_DIRS = req(34, 1, arr([s("/nonexistent/dir") + arr([s("fz") + arr([struct.pack(">i", 0)])]),
                                         s("fuzz") + arr([s("fz") + arr([struct.pack(">ii", 0, 1)])])]))

V0_SET = legacy_message(0, 0, b"k", b"v") + legacy_message(1, 0, None, b"w")
V1_INNER = legacy_message(0, 1, b"k", b"v") + legacy_message(1, 1, b"k2", b"w")
V1_GZIP = legacy_message(1, 1, None, gzip.compress(V1_INNER, mtime=0), attributes=1)
OLD_FORMAT = [old_produce(0, V0_SET), old_produce(2, V1_GZIP), old_produce(1, BATCH),
              old_fetch(0), old_fetch(2), old_fetch(3)]

HANDLER_SEEDS = {
    "old_format": OLD_FORMAT,
    "produce_fetch": [PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FOR_EPOCH, DELETE_RECORDS, FETCH],
    "admin": [CREATE, METADATA, CREATE_PARTS, DESCRIBE_CONFIGS, DELETE_TOPICS, METADATA],
    "group": [FIND_COORD, JOIN, SYNC, HEARTBEAT, COMMIT, OFFSET_FETCH, LEAVE],
    "group_admin": [COMMIT, LIST_GROUPS, DESCRIBE_GROUPS, OFFSET_DELETE, DELETE_GROUPS],
    "producers": [INIT_PID, INIT_PID_NULL, PRODUCE_TXN, PRODUCE_IDEM, FETCH],
    "cluster": [API_VERSIONS, DESCRIBE_CLUSTER, ELECT, METADATA, DESCRIBE_LOG_DIRS_ALL, DESCRIBE_LOG_DIRS,
                ALTER_REASSIGN, LIST_REASSIGN, ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS],
    "configs": [ALTER_CONFIGS, INCREMENTAL, DESCRIBE_CONFIGS, ALTER_BROKER, PRODUCE, FETCH],
    "quotas": [ALTER_QUOTAS, DESCRIBE_QUOTAS, DESCRIBE_SCRAM, PRODUCE, FETCH],
    "scram": [ALTER_SCRAM, DESCRIBE_SCRAM, SASL_HANDSHAKE, SASL_AUTHENTICATE, ALTER_SCRAM],
}


def main():
    for target in ("handlers", "record_batch_append"):
        os.makedirs(os.path.join(ROOT, target), exist_ok=True)
    for name, reqs in HANDLER_SEEDS.items():
        with open(os.path.join(ROOT, "handlers", name), "wb") as f:
            f.write(b"".join(reqs))
    batches = {
        "plain": b"\x00" + BATCH,
        "compacted": b"\x01" + record_batch([b"k1", b"k2"]),
        "idempotent_acks_all": b"\x02" + IDEMPOTENT,
        "transactional": b"\x00" + TXN_BATCH,
        "gzip_attr": b"\x00" + record_batch([b"z"], attributes=1),
    }
    for name, data in batches.items():
        with open(os.path.join(ROOT, "record_batch_append", name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
