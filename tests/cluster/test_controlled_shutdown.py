"""Controlled shutdown: a SIGTERM'd broker has the controller move its
leadership away (and take it out of every ISR) before it exits; after it
returns and catches up, auto.leader.rebalance.enable gives leadership
back to the preferred replicas."""

import time

SESSION_TIMEOUT_MS = 30000  # long: only controlled shutdown can explain a fast move
TOPIC = "controlled"
PARTITIONS = 3


def test_controlled_shutdown_then_auto_rebalance(cluster):
    cluster.start(3, {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                      "replica.lag.time.max.ms": 3000,
                      "auto.leader.rebalance.enable": "true",
                      "leader.imbalance.check.interval.seconds": 2,
                      "leader.imbalance.per.broker.percentage": 0})
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    cluster.wait_converged(topics=[TOPIC])
    controller = cluster.controller_id()
    assignment = cluster.assignment(TOPIC)
    states = {p: cluster.partition_state(TOPIC, p) for p in range(PARTITIONS)}
    victim_id = next(s["leader"] for s in states.values() if s["leader"] != controller)
    victim = cluster.broker(victim_id)
    led = [p for p, s in states.items() if s["leader"] == victim_id]

    t0 = time.monotonic()
    rc = victim.stop()
    elapsed = time.monotonic() - t0
    # A JVM ends with 128 + SIGTERM after its shutdown hooks; kshard with 0.
    assert rc in (0, 143), f"broker {victim_id} exited with {rc}"
    # Far sooner than the session timeout: the controller acted on the request.
    assert elapsed < SESSION_TIMEOUT_MS / 1000 / 2, f"shutdown took {elapsed:.1f}s"
    for p in range(PARTITIONS):
        s = cluster.partition_state(TOPIC, p)
        assert s["leader"] != victim_id, f"p{p} still led by the stopped broker: {s}"
        assert victim_id not in s["isr"], f"p{p}: stopped broker still in the ISR: {s}"
    survivors = cluster.live()
    view = cluster.wait_converged(brokers=survivors, topics=[TOPIC])
    for p in led:
        assert view["topics"][TOPIC]["partitions"][p][0] != victim_id

    # Back, caught up, in the ISR again: the rebalance timer restores the
    # preferred leaders.
    victim.start()

    def preferred_again():
        now = {p: cluster.partition_state(TOPIC, p) for p in range(PARTITIONS)}
        ok = all(s["leader"] == assignment[p][0] and victim_id in s["isr"] for p, s in now.items())
        return now if ok else None

    cluster.wait_for(preferred_again, 60, "preferred leaders restored by auto rebalance")
    cluster.wait_converged(topics=[TOPIC])
    print(f"controlled shutdown of broker {victim_id} in {elapsed:.2f}s; leadership of {led} restored")
