"""The classic group coordinator's timers, with raw requests whose send and
answer times the test knows: member session expiry (DelayedHeartbeat),
rebalance timeout (DelayedJoin), the pending-sync timeout and
group.initial.rebalance.delay.ms (InitialDelayedJoin).

Kafka 3.9.1 runs each of them on a timing wheel with 1 ms ticks, so its
outcome is visible within milliseconds of the deadline. The assertions
allow 0.6 s after a deadline (and nothing before it), which Kafka meets
on a loaded two-core machine; kshard must too.
"""

import time

import pytest

import group_raw as gr
from conftest import make_broker, _release

NONE = 0
REBALANCE_IN_PROGRESS = 27
NON_EMPTY_GROUP = 68
SESSION_MS = 6000
REBALANCE_MS = 3000
LATE_S = 0.6
INITIAL_DELAY_MS = 1500


@pytest.fixture(scope="module")
def no_delay():
    b = make_broker({"group.initial.rebalance.delay.ms": "0"})
    yield b
    _release(b)


@pytest.fixture(scope="module")
def with_delay():
    b = make_broker({"group.initial.rebalance.delay.ms": str(INITIAL_DELAY_MS)})
    yield b
    _release(b)


def uniq(prefix, broker):
    group = f"{prefix}-{time.time_ns()}"
    gr.wait_coordinator(broker.bootstrap, group)
    return group


def stable_member(conn, group, instance=None, rebalance_ms=REBALANCE_MS):
    j = gr.join(conn, group, instance=instance, session_ms=SESSION_MS, rebalance_ms=rebalance_ms)
    assert j["error"] == NONE, j
    assert gr.sync(conn, group, j["generation"], j["member_id"], instance, [(j["member_id"], b"")]) == NONE
    return j


def sleep_until(t):
    time.sleep(max(0.0, t - time.monotonic()))


def test_static_member_session_expiry_then_delete_groups(no_delay):
    """A static member that stops heartbeating (a closed consumer sends no
    LeaveGroup) is removed session.timeout.ms after its last heartbeat:
    the group is not empty a second before that, and DeleteGroups succeeds
    just after."""
    group = uniq("static", no_delay)
    conn, admin = gr.Conn(no_delay.bootstrap), gr.Conn(no_delay.bootstrap)
    try:
        j = stable_member(conn, group, instance="inst-1")
        sent = time.monotonic()
        assert gr.heartbeat(conn, group, j["generation"], j["member_id"], "inst-1") == NONE
        answered = time.monotonic()
        sleep_until(sent + SESSION_MS / 1000 - 1.0)
        err, state, members = gr.describe(admin, group)
        assert (err, state, members) == (NONE, "Stable", [j["member_id"]])
        assert gr.delete_group(admin, group) == NON_EMPTY_GROUP
        sleep_until(answered + SESSION_MS / 1000 + LATE_S)
        assert gr.delete_group(admin, group) == NONE
    finally:
        conn.close()
        admin.close()


def test_rebalance_timeout_completes_the_join(no_delay):
    """DelayedJoin: a member that keeps heartbeating but does not rejoin is
    dropped when the rebalance timeout after the rebalance began expires,
    and the waiting JoinGroup is answered then."""
    group = uniq("delayed-join", no_delay)
    a, b = gr.Conn(no_delay.bootstrap), gr.Conn(no_delay.bootstrap)
    try:
        ja = stable_member(a, group)
        first = gr.parse_join(b.call(11, 5, gr.join_body(group, "", session_ms=SESSION_MS, rebalance_ms=REBALANCE_MS)))
        sent = time.monotonic()
        corr = gr.send_join(b, group, first["member_id"], session_ms=SESSION_MS, rebalance_ms=REBALANCE_MS)
        time.sleep(0.5)
        assert gr.heartbeat(a, group, ja["generation"], ja["member_id"]) == REBALANCE_IN_PROGRESS
        jb = gr.parse_join(b.recv(corr))
        answered = time.monotonic()
        assert jb["error"] == NONE and jb["members"] == [jb["member_id"]], jb
        waited = answered - sent
        assert REBALANCE_MS / 1000 - 0.05 <= waited <= REBALANCE_MS / 1000 + LATE_S, waited
    finally:
        a.close()
        b.close()


def test_pending_sync_timeout(no_delay):
    """A member that got its JoinGroup answer but never sends SyncGroup is
    removed a rebalance timeout after the join completed."""
    group = uniq("pending-sync", no_delay)
    a, c, admin = gr.Conn(no_delay.bootstrap), gr.Conn(no_delay.bootstrap), gr.Conn(no_delay.bootstrap)
    try:
        ja = stable_member(a, group)
        first = gr.parse_join(c.call(11, 5, gr.join_body(group, "", session_ms=SESSION_MS, rebalance_ms=REBALANCE_MS)))
        corr = gr.send_join(c, group, first["member_id"], session_ms=SESSION_MS, rebalance_ms=REBALANCE_MS)
        time.sleep(0.2)
        before_join = time.monotonic()
        ja2 = gr.join(a, group, ja["member_id"], session_ms=SESSION_MS, rebalance_ms=REBALANCE_MS)
        completed = time.monotonic()
        jc = gr.parse_join(c.recv(corr))
        assert ja2["generation"] == jc["generation"] == ja["generation"] + 1
        assignments = [(ja2["member_id"], b""), (jc["member_id"], b"")]
        assert gr.sync(a, group, ja2["generation"], ja2["member_id"], assignments=assignments) == NONE
        sleep_until(before_join + REBALANCE_MS / 1000 - 0.3)
        assert gr.describe(admin, group)[1] == "Stable"
        seen = gr.wait_state(admin, group, "PreparingRebalance", REBALANCE_MS / 1000 + 5)
        assert seen - completed <= REBALANCE_MS / 1000 + LATE_S, seen - completed
        assert jc["member_id"] not in gr.describe(admin, group)[2]
    finally:
        for s in (a, c, admin):
            s.close()


def test_initial_rebalance_delay(with_delay):
    """InitialDelayedJoin: the first rebalance of an empty group waits
    group.initial.rebalance.delay.ms, once more for each member that joined
    meanwhile (bounded by the rebalance timeout)."""
    group = uniq("initial", with_delay)
    a, b = gr.Conn(with_delay.bootstrap), gr.Conn(with_delay.bootstrap)
    delay_s = INITIAL_DELAY_MS / 1000
    try:
        fa = gr.parse_join(a.call(11, 5, gr.join_body(group, "", rebalance_ms=10000)))
        sent = time.monotonic()
        ca = gr.send_join(a, group, fa["member_id"], rebalance_ms=10000)
        time.sleep(delay_s / 2)
        fb = gr.parse_join(b.call(11, 5, gr.join_body(group, "", rebalance_ms=10000)))
        cb = gr.send_join(b, group, fb["member_id"], rebalance_ms=10000)
        ja = gr.parse_join(a.recv(ca))
        answered = time.monotonic()
        jb = gr.parse_join(b.recv(cb))
        assert ja["error"] == jb["error"] == NONE
        assert sorted(ja["members"] or jb["members"]) == sorted([ja["member_id"], jb["member_id"]])
        # Two delays: B joined during the first.
        waited = answered - sent
        assert 2 * delay_s - 0.05 <= waited <= 2 * delay_s + LATE_S, waited
        group2 = uniq("initial-alone", with_delay)
        f = gr.parse_join(a.call(11, 5, gr.join_body(group2, "", rebalance_ms=10000)))
        sent = time.monotonic()
        j = gr.parse_join(a.call(11, 5, gr.join_body(group2, f["member_id"], rebalance_ms=10000)))
        waited = time.monotonic() - sent
        assert j["error"] == NONE
        assert delay_s - 0.05 <= waited <= delay_s + LATE_S, waited
    finally:
        a.close()
        b.close()
