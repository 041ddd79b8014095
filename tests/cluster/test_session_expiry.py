"""A broker frozen (SIGSTOP) past zookeeper.session.timeout.ms loses its
session: its registration goes, the controller moves its leaderships away;
thawed (SIGCONT), it registers again under a new session."""

import json
import re
import threading
import time

from kazoo.recipe.watchers import ChildrenWatch

SESSION_TIMEOUT_MS = 4000
STOPPED_S = 8.0
MARGIN_S = 10.0
TOPIC = "session-expiry"
PARTITIONS = 3


def _session_timeout_seen_by_zookeeper(cluster, session_id):
    """The timeout ZooKeeper negotiated for a session, from `cons`."""
    cons = cluster.zk_server.four_letter("cons")
    for line in cons.splitlines():
        if f"sid={hex(session_id)}," in line:
            m = re.search(r"\bto=(\d+)", line)
            return int(m.group(1)) if m else None
    return None


def test_session_expiry(cluster):
    cluster.start(3, {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS})
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    cluster.wait_converged(topics=[TOPIC])
    controller = cluster.controller_id()
    led = {p: cluster.partition_state(TOPIC, p)["leader"] for p in range(PARTITIONS)}
    victim_id = next(leader for leader in led.values() if leader != controller)
    victim = cluster.broker(victim_id)
    reg_path = f"/brokers/ids/{victim_id}"
    reg_before, stat_before = cluster.zk_get(reg_path)
    assert _session_timeout_seen_by_zookeeper(cluster, stat_before.ephemeralOwner) == SESSION_TIMEOUT_MS, \
        cluster.zk_server.four_letter("cons")

    history = []  # (monotonic time, registered ids) as the watch saw them
    changed = threading.Condition()

    def on_children(children):
        with changed:
            history.append((time.monotonic(), sorted(int(c) for c in children)))
            changed.notify_all()

    ChildrenWatch(cluster.zk, cluster.path("/brokers/ids"), on_children)
    t0 = time.monotonic()
    victim.sigstop()
    try:
        with changed:
            assert changed.wait_for(lambda: any(victim_id not in ids for _, ids in history),
                                    SESSION_TIMEOUT_MS / 1000 + MARGIN_S), \
                f"{reg_path} still there {time.monotonic() - t0:.1f}s after SIGSTOP: {history}"
            gone_at = next(t for t, ids in history if victim_id not in ids) - t0
        survivors = [b for b in cluster.live() if b is not victim]

        def moved():
            states = {p: cluster.partition_state(TOPIC, p) for p in range(PARTITIONS)}
            if any(s["leader"] == victim_id or victim_id in s["isr"] for s in states.values()):
                return None
            view = cluster.agreed_metadata(survivors)
            if view is None or victim_id in view["brokers"]:
                return None
            parts = view["topics"][TOPIC]["partitions"]
            ok = all(parts[p][0] == s["leader"] and parts[p][3] == [victim_id] for p, s in states.items())
            return states if ok else None

        states = cluster.wait_for(moved, MARGIN_S, f"the controller moving leadership off broker {victim_id}")
        assert cluster.controller_id() == controller, "the controller's own session must survive"
        for p, s in states.items():
            if led[p] == victim_id:
                assert s["leader"] != victim_id and s["leader"] in s["isr"], f"p{p}: {s}"
        time.sleep(max(0.0, STOPPED_S - (time.monotonic() - t0)))
    finally:
        victim.sigcont()

    def reregistered():
        st = cluster.zk_exists(reg_path)
        return st if st is not None and st.czxid != stat_before.czxid else None

    stat_after = cluster.wait_for(reregistered, 30, f"{reg_path} registered again after SIGCONT")
    assert stat_after.ephemeralOwner != stat_before.ephemeralOwner, "re-registration must use a new session"
    assert stat_after.ephemeralOwner != 0
    assert _session_timeout_seen_by_zookeeper(cluster, stat_after.ephemeralOwner) == SESSION_TIMEOUT_MS
    reg_after = json.loads(cluster.zk_get(reg_path)[0])
    reg_before = json.loads(reg_before)
    assert {k: v for k, v in reg_after.items() if k != "timestamp"} == \
        {k: v for k, v in reg_before.items() if k != "timestamp"}, f"{reg_before} -> {reg_after}"

    view = cluster.wait_converged(timeout_s=30, topics=[TOPIC])
    assert victim_id in view["brokers"] and view["controller_id"] == controller
    with changed:
        seen = [ids for _, ids in history]
    first_gone = next(i for i, ids in enumerate(seen) if victim_id not in ids)
    assert any(victim_id in ids for ids in seen[first_gone:]), f"watch never saw the return: {seen}"
    print(f"broker {victim_id}: registration gone {gone_at:.2f}s after SIGSTOP; watch history {seen}")
