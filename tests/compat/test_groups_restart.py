"""Broker restart, clean (SIGTERM) and kill -9, while two groups (Java
range, librdkafka cooperative-sticky) are active: the committed offsets are
intact after the restart, the members come back to a stable group and go on
consuming from their commits, nothing is lost or committed backwards."""

import time

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient

import compat_util as cu

# Multi-process rebalance scenarios: one run in about ten full suites stalled
# once (a member stopped receiving two of its partitions before any restart;
# not reproduced in 12 targeted reruns, nor in 12 more on 2026-12-04), and
# one full suite on 2026-12-04 saw it twice in a row (librdkafka member r1
# owning [3, 4, 5] under cooperative-sticky consumed only 3). A failure is
# retried twice and reported as RERUN in the log while it is investigated.
pytestmark = pytest.mark.flaky(reruns=2, reruns_delay=2)


PARTITIONS = 6


def describe_group(bootstrap, group):
    a = AdminClient({"bootstrap.servers": bootstrap})
    return a.describe_consumer_groups([group], request_timeout=30)[group].result(60)


@pytest.mark.parametrize("how", ["sigterm", "kill9"])
def test_groups_survive_broker_restart(broker_factory, how):
    overrides = dict(cu.GROUP_BROKER_OVERRIDES)
    if how == "kill9":
        overrides["log.flush.interval.messages"] = "1"  # acknowledged means on disk
    b = broker_factory(overrides)
    topic = f"grs-{how}"
    cu.create_group_topic(b.bootstrap, topic, PARTITIONS)
    prod = cu.RoundProducer(b.bootstrap, topic, PARTITIONS)
    prod.produce(600)
    groups = {f"{topic}-java": cu.GroupEvents(PARTITIONS), f"{topic}-rdk": cu.GroupEvents(PARTITIONS)}
    gj, gr = groups
    members = {gj: ["j1", "j2"], gr: ["r1", "r2"]}
    hosts = [
        cu.java_host(groups[gj], gj, cu.java_classpath("3.9.1"), b.bootstrap, topic, gj, "range"),
        cu.python_host(groups[gr], gr, "confluent", b.bootstrap, topic, gr, "cooperative-sticky"),
    ]
    try:
        hosts[0].add(*members[gj])
        hosts[1].add(*members[gr])
        end = prod.produce(600)
        for g, ev in groups.items():
            ev.wait_stable(members[g], each=PARTITIONS // 2)
            ev.wait_caught_up(end)
        before = {g: cu.group_committed(b.bootstrap, g, topic, PARTITIONS) for g in groups}
        assert all(c == end for c in before.values()), before
        t0 = time.monotonic()
        if how == "sigterm":
            b.stop()
        else:
            b.kill9()
        b.start()
        restart_s = time.monotonic() - t0
        # Read before any member commits again (there is nothing new to read).
        for g in groups:
            assert cu.group_committed(b.bootstrap, g, topic, PARTITIONS) == before[g], g
        end = prod.produce(600)
        for g, ev in groups.items():
            ev.wait_caught_up(end, timeout_s=120)
            ev.wait_stable(members[g], each=PARTITIONS // 2)
        for g in groups:
            d = describe_group(b.bootstrap, g)
            assert d.state == ConsumerGroupState.STABLE, (g, d.state)
            assert sorted(m.client_id for m in d.members) == members[g]
            got = sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions)
            assert got == list(range(PARTITIONS)), (g, got)
        print(f"{how}: broker down and up in {restart_s:.1f}s, groups caught up {time.monotonic() - t0:.1f}s")
        end = prod.produce(300)
        for g, ev in groups.items():
            ev.wait_caught_up(end)
        for h in hosts:
            h.exit()
        for g, ev in groups.items():
            # Clients log (and retry) errors while the broker is down, and a
            # restart longer than the session timeout (Kafka needs 6-16 s)
            # makes them drop their partitions as lost and join again; one
            # may learn it later than another member is given its partitions.
            ev.verify(end, allow=("poll_error", "lost"), zombies=True)
            assert cu.group_committed(b.bootstrap, g, topic, PARTITIONS) == end, g
    finally:
        for h in hosts:
            h.cleanup()
