"""Shared helpers for the compatibility suite: the record content formula
(matched by the Java client), a tiny hand-written Kafka wire encoder for the
readiness probe and the malformed-input tests, and record verification."""

import os
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


def record_batch(records, base_ts, corrupt_crc=False, attributes=0, producer_id=-1, producer_epoch=-1, base_sequence=-1):
    """Uncompressed magic-2 batch. records: list of (key, value, headers).
    attributes: 0x10 transactional, 0x20 control (compression bits stay 0)."""
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
        i16(attributes)
        + i32(len(records) - 1)  # last offset delta
        + i64(base_ts)
        + i64(base_ts)
        + i64(producer_id)
        + i16(producer_epoch)
        + i32(base_sequence)
        + i32(len(records))
        + bytes(body)
    )
    crc = crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0xDEADBEEF
    # batchLength counts from partitionLeaderEpoch to the end.
    tail = i32(-1) + i8(2) + struct.pack(">I", crc) + after_crc
    return i64(0) + i32(len(tail)) + tail


def produce_v3(correlation_id, topic, partition, batch, acks=-1, timeout_ms=10000, transactional_id=None):
    body = (
        string(transactional_id)
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


def drop_from_page_cache(dirs):
    """Writes back and drops the cached pages of every segment in `dirs`."""
    for d in dirs:
        for f in d.glob("*.log"):
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def wait_for(pred, what, timeout_s=30.0, interval_s=0.05):
    """`pred()`'s first truthy value, polled until `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        v = pred()
        if v:
            return v
        assert time.monotonic() < deadline, f"timed out after {timeout_s}s waiting for {what}"
        time.sleep(interval_s)


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


# --- consumer groups: member hosts, event recording and checks --------------
#
# A member host is a process holding group members, driven on stdin ("add
# NAME", "close NAME", "exit") and reporting JSON lines on stdout: assigned
# (gen, added, owned), revoked, lost, consumed (p, from, to, n), commit
# (offsets acknowledged by the broker), commit_failed, closed, each stamped
# with CLOCK_MONOTONIC nanoseconds so events of several processes order.
# The Java host is `Client group-consume`; member_host_main() below is the
# Python one (confluent-kafka or kafka-python). SIGKILL of a host simulates
# crashed members: their session must time out on the broker.

# Broker overrides every group test uses (both brokers understand them).
GROUP_BROKER_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "offsets.topic.replication.factor": "1",
}
GROUP_SESSION_TIMEOUT_MS = 6000
GROUP_HEARTBEAT_MS = 1000


def _emit(ev):
    import json
    import sys

    ev["ts"] = time.monotonic_ns()
    line = json.dumps(ev)
    with _EMIT_LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _emit_lock():
    import threading

    return threading.Lock()


_EMIT_LOCK = _emit_lock()


class _PyMember:
    """One group member of the Python host, polled on its own thread."""

    def __init__(self, opts, name):
        import threading

        self.opts = opts
        self.name = name
        self.closing = False
        self.owned = set()
        self.thread = threading.Thread(target=self.run, name=name, daemon=True)

    def ev(self, kind, **kw):
        _emit({"ev": kind, "m": self.name, **kw})

    def assigned(self, parts, gen):
        mine = sorted(p for t, p in parts if t == self.opts["topic"])
        self.owned |= set(mine)
        self.ev("assigned", gen=gen, added=mine, owned=sorted(self.owned))

    def revoked(self, parts, kind="revoked"):
        mine = sorted(p for t, p in parts if t == self.opts["topic"])
        self.owned -= set(mine)
        self.ev(kind, parts=mine)

    def run(self):
        try:
            if self.opts["client"] == "confluent":
                self.run_confluent()
            else:
                self.run_kafka_python()
        except Exception as e:  # reported, the test fails on it
            self.ev("error", err=repr(e))
        self.ev("closed")

    def batches_done(self, by_part, commit):
        offsets = {}
        for p, offs in sorted(by_part.items()):
            self.ev("consumed", p=p, **{"from": offs[0]}, to=offs[-1], n=len(offs))
            offsets[str(p)] = offs[-1] + 1
        try:
            commit(offsets)
            self.ev("commit", offsets=offsets)
        except Exception as e:  # at least once: redelivered to the next owner
            self.ev("commit_failed", err=repr(e))

    def run_confluent(self):
        from confluent_kafka import Consumer, TopicPartition as TP

        o = self.opts
        conf = {
            "bootstrap.servers": o["bootstrap"],
            "group.id": o["group"],
            "client.id": self.name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": int(o["session_timeout_ms"]),
            "heartbeat.interval.ms": int(o["heartbeat_ms"]),
        }
        if o["assignor"] != "default":
            conf["partition.assignment.strategy"] = o["assignor"]
        # KSHARD_RDK_DEBUG=cgrp,fetch: librdkafka's own debug contexts, to
        # the host's stderr file.
        if os.environ.get("KSHARD_RDK_DEBUG"):
            conf["debug"] = os.environ["KSHARD_RDK_DEBUG"]
        c = Consumer(conf)
        c.subscribe(
            [o["topic"]],
            on_assign=lambda c_, ps: self.assigned([(p.topic, p.partition) for p in ps], None),
            on_revoke=lambda c_, ps: self.revoked([(p.topic, p.partition) for p in ps]),
            on_lost=lambda c_, ps: self.revoked([(p.topic, p.partition) for p in ps], "lost"),
        )

        def commit(offsets):
            tps = [TP(o["topic"], int(p), off) for p, off in offsets.items()]
            for r in c.commit(offsets=tps, asynchronous=False):
                if r.error is not None:
                    raise RuntimeError(f"commit {r}: {r.error}")

        while not self.closing:
            msgs = c.consume(500, 0.2)
            by_part = {}
            for m in msgs:
                if m.error() is not None:
                    self.ev("poll_error", err=str(m.error()))
                    continue
                by_part.setdefault(m.partition(), []).append(m.offset())
            if by_part:
                self.batches_done(by_part, commit)
        c.close()

    def run_kafka_python(self):
        from kafka import KafkaConsumer, TopicPartition as TP
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
        from kafka.structs import OffsetAndMetadata

        o = self.opts
        assignors = {
            "range": RangePartitionAssignor,
            "roundrobin": RoundRobinPartitionAssignor,
            "sticky": StickyPartitionAssignor,
            "cooperative-sticky": CooperativeStickyAssignor,
        }
        kw = {}
        if o["assignor"] != "default":
            kw["partition_assignment_strategy"] = [assignors[o["assignor"]]]
        c = KafkaConsumer(
            bootstrap_servers=o["bootstrap"],
            group_id=o["group"],
            client_id=self.name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=int(o["session_timeout_ms"]),
            heartbeat_interval_ms=int(o["heartbeat_ms"]),
            max_poll_records=500,
            **kw,
        )
        member = self

        def generation():
            try:
                return c._coordinator._generation.generation_id
            except AttributeError:
                return None

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                member.revoked([(p.topic, p.partition) for p in revoked])

            def on_partitions_assigned(self, assigned):
                member.assigned([(p.topic, p.partition) for p in assigned], generation())

            def on_partitions_lost(self, lost):
                member.revoked([(p.topic, p.partition) for p in lost], "lost")

        c.subscribe(topics=[o["topic"]], listener=Listener())

        def commit(offsets):
            c.commit({TP(o["topic"], int(p)): OffsetAndMetadata(off, "by " + self.name, -1)
                      for p, off in offsets.items()})

        while not self.closing:
            polled = c.poll(timeout_ms=200)
            by_part = {}
            for tp, recs in polled.items():
                if tp.topic == o["topic"] and recs:
                    by_part[tp.partition] = [r.offset for r in recs]
            if by_part:
                self.batches_done(by_part, commit)
        c.close()


def member_host_main():
    """Entry of the Python member host: python3 -c 'import compat_util;
    compat_util.member_host_main()' --client confluent|kafka-python ..."""
    import argparse
    import sys

    ap = argparse.ArgumentParser()
    for a in ("client", "bootstrap", "topic", "group", "assignor"):
        ap.add_argument("--" + a, required=True)
    ap.add_argument("--session-timeout-ms", default=str(GROUP_SESSION_TIMEOUT_MS))
    ap.add_argument("--heartbeat-ms", default=str(GROUP_HEARTBEAT_MS))
    opts = vars(ap.parse_args())
    import logging
    import os

    # KSHARD_MEMBER_LOG=DEBUG: the clients' own logs, to the host's stderr
    # file (/tmp/member-host-<label>-<ns>.err).
    if os.environ.get("KSHARD_MEMBER_LOG"):
        logging.basicConfig(level=os.environ["KSHARD_MEMBER_LOG"], stream=sys.stderr,
                            format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
    members = {}
    _emit({"ev": "host", "m": None})
    for line in sys.stdin:
        w = line.split()
        if len(w) == 2 and w[0] == "add":
            members[w[1]] = _PyMember(opts, w[1])
            members[w[1]].thread.start()
        elif len(w) == 2 and w[0] == "close":
            m = members.pop(w[1], None)
            if m is not None:
                m.closing = True
                m.thread.join()
        elif w == ["exit"]:
            break
    for m in members.values():
        m.closing = True
    for m in members.values():
        m.thread.join()
    _emit({"ev": "exit", "m": None})


class GroupEvents:
    """Every event of every host of one group, with waits and checks."""

    def __init__(self, partitions):
        import threading

        self.partitions = partitions
        self.events = []
        self.cond = threading.Condition()
        self.owned = {}  # member -> set, None before its first assignment
        self.dead = {}  # member -> monotonic ns when it stopped owning
        self.gen = {}
        self.committed = {}  # partition -> highest acknowledged commit

    def add(self, ev):
        with self.cond:
            self.events.append(ev)
            m = ev.get("m")
            kind = ev["ev"]
            if kind == "assigned":
                self.owned[m] = set(ev["owned"])
                self.gen[m] = ev.get("gen")
            elif kind in ("revoked", "lost"):
                self.owned[m] = self.owned.get(m, set()) - set(ev["parts"])
            elif kind == "closed":
                self.dead.setdefault(m, ev["ts"])
            elif kind == "commit":
                for p, off in ev["offsets"].items():
                    self.committed[int(p)] = max(self.committed.get(int(p), 0), off)
            self.cond.notify_all()

    def mark_killed(self, members, ts):
        with self.cond:
            for m in members:
                self.dead.setdefault(m, ts)
            self.cond.notify_all()

    def wait(self, pred, timeout_s, what):
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while not pred():
                left = deadline - time.monotonic()
                assert left > 0, f"timed out after {timeout_s}s waiting for {what}; owned={self.owned_now()} " \
                                 f"committed={self.committed} last events={self.events[-8:]}"
                self.cond.wait(min(left, 0.5))

    def owned_now(self):
        return {m: sorted(s) for m, s in self.owned.items() if m not in self.dead and s is not None}

    def stable(self, members, each=None):
        """The members named (and no other live one) own disjoint sets that
        cover every partition, each of `each` partitions."""
        live = {m for m in self.owned if m not in self.dead}
        if not set(members) <= set(self.owned) or any(m in self.dead for m in members):
            return False
        if any(self.owned[m] for m in live - set(members)):
            return False
        sets = [self.owned[m] for m in members]
        if sum(len(s) for s in sets) != self.partitions or set().union(*sets) != set(range(self.partitions)):
            return False
        # Generations are not compared: an incremental rebalance that adds
        # nothing to a member need not call its listener (kafka-python).
        return each is None or all(len(s) == each for s in sets)

    def wait_stable(self, members, each=None, timeout_s=60):
        self.wait(lambda: self.stable(members, each), timeout_s, f"stable group {members} with {each} each")

    def wait_caught_up(self, end, timeout_s=60):
        self.wait(lambda: all(self.committed.get(p, 0) >= n for p, n in end.items()), timeout_s,
                  f"commits reaching {end}")

    def verify(self, end, allow=(), zombies=False, replaced=None):
        """Every record consumed, commits monotonic, members resume at or
        after the last acknowledged commit, no partition owned twice in one
        generation, nor at one time unless zombies (members the broker
        expired that have not noticed yet, e.g. across a broker restart).
        replaced: {new: old} static members (one group.instance.id) where the
        new one took over the old one's assignment without a rebalance, in
        the old one's generation."""
        replaced = replaced or {}
        with self.cond:
            evs = sorted(self.events, key=lambda e: e["ts"])
            dead = dict(self.dead)
        bad = [e for e in evs if e["ev"] in ("error", "lost", "poll_error") and e["ev"] not in allow]
        assert not bad, f"unexpected events: {bad[:5]}"
        # 1. at least once: the consumed ranges cover every offset.
        seen = {p: set() for p in range(self.partitions)}
        for e in evs:
            if e["ev"] == "consumed":
                assert e["n"] == e["to"] - e["from"] + 1, f"gap inside a fetched batch: {e}"
                seen[e["p"]].update(range(e["from"], e["to"] + 1))
        for p, n in end.items():
            missing = set(range(n)) - seen[p]
            assert not missing, f"partition {p}: offsets never consumed {sorted(missing)[:10]} (of {len(missing)})"
        # 2. committed offsets never go backwards.
        last = {}
        for e in evs:
            if e["ev"] == "commit":
                for p, off in e["offsets"].items():
                    p = int(p)
                    assert off >= last.get(p, 0), f"partition {p}: commit {off} by {e['m']} after {last[p]}"
                    last[p] = off
        # 3. a new owner starts at or after the last acknowledged commit.
        last = {}
        pending = {}  # (member, p) -> commit floor when it got p
        for e in evs:
            m = e.get("m")
            if e["ev"] == "commit":
                for p, off in e["offsets"].items():
                    last[int(p)] = off
            elif e["ev"] == "assigned":
                for p in e["added"]:
                    pending[(m, p)] = last.get(p, 0)
            elif e["ev"] == "consumed" and (m, e["p"]) in pending:
                floor = pending.pop((m, e["p"]))
                assert e["from"] >= floor, f"{m} resumed partition {e['p']} at {e['from']}, commit was {floor}"
        # 4. no partition owned by two members at once, nor in one generation.
        owner = {}  # p -> member owning it now
        owned = {}
        for e in evs:
            m = e.get("m")
            for mm in [x for x, ts in dead.items() if ts <= e["ts"] and owned.get(x)]:
                for p in owned.pop(mm):
                    owner.pop(p, None)
            if e["ev"] == "assigned":
                for p in set(e["owned"]) - owned.get(m, set()):
                    assert zombies or owner.get(p) in (None, m), \
                        f"partition {p} given to {m} while {owner[p]} owns it: {e}"
                    owner[p] = m
                owned[m] = set(e["owned"])
            elif e["ev"] in ("revoked", "lost"):
                for p in e["parts"]:
                    if owner.get(p) == m:
                        del owner[p]
                owned[m] = owned.get(m, set()) - set(e["parts"])
        by_gen = {}
        for e in evs:
            if e["ev"] == "assigned" and e.get("gen") is not None:
                g = by_gen.setdefault(e["gen"], {})
                g[replaced.get(e["m"], e["m"])] = set(e["owned"])
        for gen, sets in by_gen.items():
            ms = sorted(sets)
            for i, a in enumerate(ms):
                for b in ms[i + 1:]:
                    both = sets[a] & sets[b]
                    assert not both, f"generation {gen}: {sorted(both)} owned by both {a} and {b}"


class MemberHost:
    """A member host process feeding one GroupEvents."""

    def __init__(self, cmd, events, label):
        import subprocess
        import threading

        self.events = events
        self.label = label
        self.members = set()
        self.stderr = open(f"/tmp/member-host-{label}-{time.monotonic_ns()}.err", "w+b")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     cwd=str(__import__("pathlib").Path(__file__).resolve().parent))
        self.exited = threading.Event()
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        assert self.ready.wait(60), f"member host {label} did not start: {self.err_text()}"

    def _read(self):
        import json

        for line in self.proc.stdout:
            ev = json.loads(line)
            ev["host"] = self.label
            if ev["ev"] == "host":
                self.ready.set()
            elif ev["ev"] == "exit":
                self.exited.set()
            else:
                self.events.add(ev)
        self.ready.set()

    def err_text(self):
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-3000:]

    def send(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def add(self, *names, instance=None):
        """Starts members; instance: the group.instance.id of a static member
        (Java host only)."""
        for n in names:
            self.members.add(n)
            self.send(f"add {n}" if instance is None else f"add {n} {instance}")

    def close_member(self, name):
        self.members.discard(name)
        self.send(f"close {name}")

    def kill(self):
        """SIGKILL: no LeaveGroup, no commit; the broker must time the
        members' sessions out."""
        ts = time.monotonic_ns()
        self.proc.kill()
        self.proc.wait()
        self.events.mark_killed(self.members, ts)
        self.members = set()

    def exit(self, timeout_s=60):
        if self.proc.poll() is None:
            self.send("exit")
            self.proc.stdin.close()
            assert self.proc.wait(timeout_s) == 0, f"host {self.label} failed: {self.err_text()}"
        self.reader.join(10)

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


def python_host(events, label, client, bootstrap, topic, group, assignor):
    import sys

    cmd = [sys.executable, "-c", "import compat_util; compat_util.member_host_main()",
           "--client", client, "--bootstrap", bootstrap, "--topic", topic, "--group", group,
           "--assignor", assignor]
    return MemberHost(cmd, events, label)


def java_host(events, label, classpath, bootstrap, topic, group, assignor, static=False):
    """static: every member is a static one, its name its group.instance.id."""
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
           "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath, "kshard.compat.Client",
           "group-consume", "--bootstrap", bootstrap, "--topic", topic, "--group", group,
           "--assignor", assignor, "--session-timeout-ms", str(GROUP_SESSION_TIMEOUT_MS),
           "--heartbeat-ms", str(GROUP_HEARTBEAT_MS), "--static", "true" if static else "false"]
    return MemberHost(cmd, events, label)


def java_classpath(version):
    from pathlib import Path

    base = Path(__file__).resolve().parent / "java" / "target" / f"kc-{version}"
    assert (base / "classes" / "kshard" / "compat" / "Client.class").exists(), \
        f"Java client for {version} not built: run scripts/setup.sh"
    return f"{base / 'classes'}:{base / 'libs'}/*"


def create_group_topic(bootstrap, topic, partitions, config=None, replication_factor=1):
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient({"bootstrap.servers": bootstrap})
    futs = a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                                     config=dict(config or {}))], operation_timeout=30)
    for f in futs.values():
        f.result(60)
    wait_topics_ready(bootstrap, [topic], partitions)


class RoundProducer:
    """Produces rounds of records spread evenly over the partitions and
    keeps each partition's end offset."""

    def __init__(self, bootstrap, topic, partitions):
        from confluent_kafka import Producer

        self.topic = topic
        self.partitions = partitions
        self.end = {p: 0 for p in range(partitions)}
        self.next_i = 0
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})

    def produce(self, count):
        errors = []
        for _ in range(count):
            i = self.next_i
            self.next_i += 1
            self.p.produce(self.topic, key=rec_key(self.topic, i), value=rec_value(self.topic, i),
                           partition=i % self.partitions,
                           on_delivery=lambda err, msg: errors.append(err) if err is not None else None)
            self.end[i % self.partitions] += 1
            if i % 500 == 0:
                self.p.poll(0)
        assert self.p.flush(60) == 0 and not errors, f"produce failed: {errors[:3]}"
        return dict(self.end)


def group_committed(bootstrap, group, topic, partitions):
    """The broker's committed offsets (OffsetFetch) for one group: {p: offset}."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    a = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    res = a.list_consumer_group_offsets([req], request_timeout=30)[group].result(60)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


def run_group_scenario(bootstrap, topic, group, hosts_for, partitions=6, round_records=600, replication_factor=1):
    """The issue's scenario: 3 members join (partitions / 3 each), one leaves
    (close), one is killed (its session times out), one joins; records are
    produced at every step and must all be consumed and committed.
    hosts_for(events) returns {"A": host for m1 and m2, "B": host for the
    joiner m4, "V": host for the victim m3} (A and B may be the same); a
    key named after a member ("m2") gives that member its own host."""
    create_group_topic(bootstrap, topic, partitions, replication_factor=replication_factor)
    events = GroupEvents(partitions)
    prod = RoundProducer(bootstrap, topic, partitions)
    prod.produce(round_records)
    hosts = hosts_for(events)
    timings = {}
    t0 = time.monotonic()
    try:
        def host(member, default):
            return hosts.get(member, hosts[default])

        host("m1", "A").add("m1")
        host("m2", "A").add("m2")
        hosts["V"].add("m3")
        events.wait_stable(["m1", "m2", "m3"], each=partitions // 3)
        events.wait_caught_up(prod.produce(round_records))
        timings["join3"] = time.monotonic() - t0
        host("m1", "A").close_member("m1")
        events.wait_stable(["m2", "m3"], each=partitions // 2)
        events.wait_caught_up(prod.produce(round_records))
        timings["leave"] = time.monotonic() - t0
        prod.produce(round_records)  # the victim may be mid-batch when killed
        hosts["V"].kill()
        events.wait_stable(["m2"], each=partitions, timeout_s=90)
        events.wait_caught_up(prod.produce(round_records))
        timings["kill"] = time.monotonic() - t0
        host("m4", "B").add("m4")
        events.wait_stable(["m2", "m4"], each=partitions // 2)
        end = prod.produce(round_records)
        events.wait_caught_up(end)
        timings["join"] = time.monotonic() - t0
        for h in {id(h): h for h in hosts.values()}.values():
            h.exit()
        events.verify(end)
        assert group_committed(bootstrap, group, topic, partitions) == end
        return timings
    finally:
        for h in hosts.values():
            h.cleanup()


def fetch_v4_request(correlation_id, partitions, max_bytes, min_bytes=1, max_wait_ms=0):
    """Fetch v4 (isolation read_uncommitted). partitions: list of (topic,
    partition, fetch_offset, partition_max_bytes) in request order; a
    topic's partitions are grouped where consecutive entries share it."""
    topics = []
    for topic, partition, offset, part_max in partitions:
        if not topics or topics[-1][0] != topic:
            topics.append((topic, []))
        topics[-1][1].append(i32(partition) + i64(offset) + i32(part_max))
    body = i32(-1) + i32(max_wait_ms) + i32(min_bytes) + i32(max_bytes) + i8(0)
    body += i32(len(topics))
    for topic, parts in topics:
        body += string(topic) + i32(len(parts)) + b"".join(parts)
    return frame(request_header_v1(1, 4, correlation_id) + body)


def parse_fetch_v4_response(payload):
    """Returns (correlation id, [(topic, partition, error, high watermark,
    records bytes)]) in response order."""
    r = Reader(payload)
    corr = r.i32()
    r.i32()  # throttle
    out = []
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            idx = r.i32()
            err = r.i16()
            hw = r.i64()
            r.i64()  # last stable offset
            n_aborted = r.i32()
            r.take(16 * max(n_aborted, 0))
            n = r.i32()
            records = r.take(n) if n > 0 else b""
            out.append((name, idx, err, hw, records))
    assert r.pos == len(payload), "trailing bytes in fetch response"
    return corr, out


def complete_batches(records):
    """(base offset, size) of every whole batch in a Fetch records field;
    a partial batch at the end (Kafka sends one when a limit cuts it) is
    left out, as clients leave it."""
    out = []
    pos = 0
    while pos + 12 <= len(records):
        base, length = struct.unpack(">qi", records[pos : pos + 12])
        if pos + 12 + length > len(records):
            break
        out.append((base, 12 + length))
        pos += 12 + length
    return out
