"""Shared helpers for the compatibility suite: the record content formula
(matched by the Java client), a tiny hand-written Kafka wire encoder for the
readiness probe and the malformed-input tests, and record verification."""

import socket
import struct
import time

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


# --- record content, identical in java/.../Client.java ----------------------


def rec_key(tag, i):
    return f"{tag}-k{i:07d}".encode()


def rec_value(tag, i):
    return (f"{tag}-v{i:07d}-" + "abcdefghij" * (i % 13)).encode()


def rec_headers(tag, i):
    return [("hi", str(i).encode()), ("ht", tag.encode())]


def verify_partition_records(got, tag, indexes, ts_base=None, acked=None):
    """got: list of (offset, key, value, headers, ts) read from one partition
    in order. indexes: production indexes expected there, in order. acked:
    optional {index: offset} from producer acknowledgements."""
    assert len(got) == len(indexes), f"{tag}: got {len(got)} records, want {len(indexes)}"
    for n, (i, (off, key, value, headers, ts)) in enumerate(zip(indexes, got)):
        assert off == n, f"{tag}: record #{n} has offset {off}"
        assert key == rec_key(tag, i), f"{tag}@{off}: key {key!r} != {rec_key(tag, i)!r}"
        assert value == rec_value(tag, i), f"{tag}@{off}: value mismatch"
        assert list(headers) == rec_headers(tag, i), f"{tag}@{off}: headers {headers!r}"
        if ts_base is not None:
            assert ts == ts_base + i, f"{tag}@{off}: timestamp {ts} != {ts_base + i}"
        if acked is not None and acked.get(i, -1) >= 0:
            assert acked[i] == off, f"{tag}: record {i} acked at {acked[i]} but read at {off}"


# --- CRC-32C (Castagnoli), as Kafka's record batch v2 uses -------------------

_CRC32C_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC32C_TABLE.append(_c)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# --- primitive encoders -----------------------------------------------------


def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def string(s):
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def uvarint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(v):
    return uvarint((v << 1) ^ (v >> 63))


def compact_string(s):
    b = s.encode()
    return uvarint(len(b) + 1) + b


def request_header_v1(api_key, api_version, correlation_id, client_id="compat-raw"):
    return i16(api_key) + i16(api_version) + i32(correlation_id) + string(client_id)


def request_header_v2(api_key, api_version, correlation_id, client_id="compat-raw"):
    return request_header_v1(api_key, api_version, correlation_id, client_id) + uvarint(0)


def frame(payload):
    return i32(len(payload)) + payload


def record_batch(records, base_ts, corrupt_crc=False):
    """Uncompressed magic-2 batch. records: list of (key, value, headers)."""
    body = bytearray()
    for delta, (key, value, headers) in enumerate(records):
        r = bytearray(i8(0) + varint(0) + varint(delta))
        r += varint(len(key)) + key if key is not None else varint(-1)
        r += varint(len(value)) + value if value is not None else varint(-1)
        r += varint(len(headers))
        for hk, hv in headers:
            r += varint(len(hk)) + hk.encode() + varint(len(hv)) + hv
        body += varint(len(r)) + r
    after_crc = (
        i16(0)  # attributes: no compression, create time
        + i32(len(records) - 1)  # last offset delta
        + i64(base_ts)
        + i64(base_ts)
        + i64(-1)  # producer id
        + i16(-1)  # producer epoch
        + i32(-1)  # base sequence
        + i32(len(records))
        + bytes(body)
    )
    crc = crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0xDEADBEEF
    # batchLength counts from partitionLeaderEpoch to the end.
    tail = i32(-1) + i8(2) + struct.pack(">I", crc) + after_crc
    return i64(0) + i32(len(tail)) + tail


def produce_v3(correlation_id, topic, partition, batch, acks=-1, timeout_ms=10000):
    body = (
        string(None)
        + i16(acks)
        + i32(timeout_ms)
        + i32(1)
        + string(topic)
        + i32(1)
        + i32(partition)
        + i32(len(batch))
        + batch
    )
    return frame(request_header_v1(0, 3, correlation_id) + body)


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError("short response")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def i8(self):
        return struct.unpack(">b", self.take(1))[0]

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def i64(self):
        return struct.unpack(">q", self.take(8))[0]

    def string(self):
        n = self.i16()
        return None if n < 0 else self.take(n).decode()

    def uvarint(self):
        shift = 0
        v = 0
        while True:
            b = self.take(1)[0]
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7

    def compact_string(self):
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def skip_tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def parse_produce_v3_response(payload):
    r = Reader(payload)
    corr = r.i32()
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            idx = r.i32()
            err = r.i16()
            base = r.i64()
            r.i64()  # log append time
            out[(name, idx)] = (err, base)
    r.i32()  # throttle
    return corr, out


def parse_api_versions_v0(payload):
    """v0 body after a v0 response header: error, [key, min, max]."""
    r = Reader(payload)
    corr = r.i32()
    err = r.i16()
    versions = {}
    for _ in range(r.i32()):
        k = r.i16()
        versions[k] = (r.i16(), r.i16())
    return corr, err, versions


def parse_api_versions_v3(payload):
    r = Reader(payload)
    corr = r.i32()  # response header v0 even for flexible ApiVersions
    err = r.i16()
    versions = {}
    for _ in range(r.uvarint() - 1):
        k = r.i16()
        versions[k] = (r.i16(), r.i16())
        r.skip_tags()
    r.i32()  # throttle
    return corr, err, versions


def api_versions_v3_request(correlation_id, version=3):
    body = compact_string("kshard-compat") + compact_string("1.0") + uvarint(0)
    return frame(request_header_v2(18, version, correlation_id) + body)


def metadata_v1_request(correlation_id):
    # topics = null means all topics for v1+.
    return frame(request_header_v1(3, 1, correlation_id) + i32(-1))


def parse_metadata_v1_brokers(payload):
    r = Reader(payload)
    r.i32()
    brokers = []
    for _ in range(r.i32()):
        node = r.i32()
        host = r.string()
        port = r.i32()
        r.string()  # rack
        brokers.append((node, host, port))
    return brokers


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def recv_frame(sock):
    (n,) = struct.unpack(">i", recv_exact(sock, 4))
    assert 0 <= n < 64 * 1024 * 1024, f"bad response length {n}"
    return recv_exact(sock, n)


def connect(host, port, timeout_s=10.0):
    s = socket.create_connection((host, port), timeout=timeout_s)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def wait_closed(sock, timeout_s=10.0):
    """True when the peer closes (EOF or reset) within timeout_s; any bytes
    received before that are returned too."""
    sock.settimeout(timeout_s)
    got = bytearray()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                return True, bytes(got)
            got += chunk
    except (ConnectionResetError, BrokenPipeError):
        return True, bytes(got)
    except socket.timeout:
        return False, bytes(got)
    return False, bytes(got)


def probe_ready(host, port, timeout_s=2.0):
    """ApiVersions v3 then Metadata v1 with at least one broker."""
    with connect(host, port, timeout_s) as s:
        s.sendall(api_versions_v3_request(1))
        corr, err, versions = parse_api_versions_v3(recv_frame(s))
        if corr != 1 or err != 0 or 3 not in versions:
            return False
        s.sendall(metadata_v1_request(2))
        return len(parse_metadata_v1_brokers(recv_frame(s))) > 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


assert crc32c(b"123456789") == 0xE3069283


def wait_topics_ready(bootstrap, topics, partitions, timeout_s=60.0):
    """Block until every partition answers ListOffsets(latest) without error,
    i.e. the broker really leads it. acks=0 produce before that is silently
    lost (the broker drops the connection instead of answering)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    a = AdminClient({"bootstrap.servers": bootstrap})
    pending = {TopicPartition(t, p) for t in topics for p in range(partitions)}
    deadline = time.monotonic() + timeout_s
    while pending:
        assert time.monotonic() < deadline, f"partitions never became ready: {sorted(map(str, pending))[:5]}"
        futs = a.list_offsets({tp: OffsetSpec.latest() for tp in pending}, request_timeout=10)
        for tp, f in futs.items():
            try:
                f.result(15)
                pending.discard(TopicPartition(tp.topic, tp.partition))
            except Exception:
                pass
        if pending:
            time.sleep(0.2)
