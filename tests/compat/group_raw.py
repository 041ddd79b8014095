"""Raw classic-group requests (JoinGroup v5, SyncGroup v3, Heartbeat v3,
DescribeGroups v0, DeleteGroups v0, FindCoordinator v1/v4) for tests where
the exact timing of each request matters."""

import time

import compat_util as cu
from compat_util import Reader, frame, i8, i16, i32, request_header_v1, request_header_v2, string


def nstring(s):
    return i16(-1) if s is None else string(s)


def bytes_(b):
    return i32(len(b)) + b


# A ConsumerProtocolSubscription v0 with no topics.
SUBSCRIPTION = i16(0) + i32(0) + i32(-1)


class Conn:
    def __init__(self, bootstrap, timeout_s=60.0):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = cu.connect(host, int(port), timeout_s=timeout_s)
        self.corr = 0

    def send(self, api_key, version, body, flexible=False):
        self.corr += 1
        header = (request_header_v2 if flexible else request_header_v1)(api_key, version, self.corr)
        self.sock.sendall(frame(header + body))
        return self.corr

    def recv(self, corr, flexible=False):
        r = Reader(cu.recv_frame(self.sock))
        assert r.i32() == corr
        if flexible:
            r.skip_tags()
        return r

    def call(self, api_key, version, body, flexible=False):
        return self.recv(self.send(api_key, version, body, flexible), flexible)

    def close(self):
        self.sock.close()


def join_body(group, member_id, instance=None, session_ms=10000, rebalance_ms=10000, metadata=SUBSCRIPTION):
    return (
        string(group) + i32(session_ms) + i32(rebalance_ms) + string(member_id) + nstring(instance)
        + string("consumer") + i32(1) + string("range") + bytes_(metadata)
    )


def parse_join(r):
    r.i32()
    out = {"error": r.i16(), "generation": r.i32(), "protocol": r.string(), "leader": r.string(), "member_id": r.string()}
    members = []
    for _ in range(r.i32()):
        mid = r.string()
        r.string()
        r.take(r.i32())
        members.append(mid)
    out["members"] = members
    return out


def join(conn, group, member_id="", **kw):
    """JoinGroup v5; a dynamic member's first join gets MEMBER_ID_REQUIRED
    and is repeated with the id it was given."""
    res = parse_join(conn.call(11, 5, join_body(group, member_id, **kw)))
    if res["error"] == 79:  # MEMBER_ID_REQUIRED
        res = parse_join(conn.call(11, 5, join_body(group, res["member_id"], **kw)))
    return res


def send_join(conn, group, member_id, **kw):
    return conn.send(11, 5, join_body(group, member_id, **kw))


def sync(conn, group, generation, member_id, instance=None, assignments=()):
    body = string(group) + i32(generation) + string(member_id) + nstring(instance) + i32(len(assignments))
    for mid, a in assignments:
        body += string(mid) + bytes_(a)
    r = conn.call(14, 3, body)
    r.i32()
    return r.i16()


def heartbeat(conn, group, generation, member_id, instance=None):
    r = conn.call(12, 3, string(group) + i32(generation) + string(member_id) + nstring(instance))
    r.i32()
    return r.i16()


def describe(conn, group):
    """(error, state, member ids)."""
    r = conn.call(15, 0, i32(1) + string(group))
    assert r.i32() == 1
    err = r.i16()
    r.string()
    state = r.string()
    r.string()
    r.string()
    members = []
    for _ in range(r.i32()):
        members.append(r.string())
        r.string()
        r.string()
        r.take(r.i32())
        r.take(r.i32())
    return err, state, members


def delete_group(conn, group):
    r = conn.call(42, 0, i32(1) + string(group))
    r.i32()
    assert r.i32() == 1
    r.string()
    return r.i16()


def wait_state(conn, group, state, timeout_s):
    """Polls DescribeGroups; returns the monotonic time the state was seen."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = describe(conn, group)[1]
        now = time.monotonic()
        if seen == state:
            return now
        assert now < deadline, f"group {group} still {seen} after {timeout_s}s (waiting for {state})"
        time.sleep(0.02)


def find_coordinator(conn, group):
    """FindCoordinator v1: (error, node id)."""
    r = conn.call(10, 1, string(group) + i8(0))
    r.i32()
    err = r.i16()
    r.string()
    return err, r.i32()


def wait_coordinator(bootstrap, group, timeout_s=60.0):
    """Until FindCoordinator names a coordinator and it accepts the group's
    requests (Kafka creates and loads __consumer_offsets lazily)."""
    conn = Conn(bootstrap)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            err, _ = find_coordinator(conn, group)
            if err == 0 and describe(conn, group)[0] == 0:
                return
            assert time.monotonic() < deadline, f"no coordinator for {group}: error {err}"
            time.sleep(0.2)
    finally:
        conn.close()
