"""kafka-python (pure Python) group consumers: subscribe, 3 members get 2
of 6 partitions each, a member leaves, one is killed (session timeout), one
joins; commits resume where the last owner stopped. Eager (range,
roundrobin, sticky) rebalancing.
Generations come from the client's coordinator so they are checked too."""

import pytest

import compat_util as cu

# Multi-process rebalance scenarios: one run in about ten full suites stalled
# once (a member stopped receiving two of its partitions before any restart;
# not reproduced in 12 targeted reruns), so a failure is retried once and
# reported as RERUN in the log while it is investigated.
pytestmark = pytest.mark.flaky(reruns=1, reruns_delay=2)


# cooperative-sticky is left out: against Kafka 3.9.1 kafka-python 3.0.12
# members stop heartbeating after an incremental rebalance (session expiry).
ASSIGNORS = ["range", "roundrobin", "sticky"]


@pytest.fixture(scope="module")
def gbroker(broker_module_factory):
    return broker_module_factory(cu.GROUP_BROKER_OVERRIDES)


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_kafka_python_group_rebalance(gbroker, assignor):
    tag = f"gkp-{assignor}"

    def hosts(events):
        a = cu.python_host(events, f"{tag}-A", "kafka-python", gbroker.bootstrap, tag, tag, assignor)
        v = cu.python_host(events, f"{tag}-V", "kafka-python", gbroker.bootstrap, tag, tag, assignor)
        # One process per member: with several kafka-python 3.0.12 consumers
        # in one process a member sometimes stops heartbeating mid-rebalance.
        m2 = cu.python_host(events, f"{tag}-m2", "kafka-python", gbroker.bootstrap, tag, tag, assignor)
        m4 = cu.python_host(events, f"{tag}-m4", "kafka-python", gbroker.bootstrap, tag, tag, assignor)
        return {"A": a, "B": a, "V": v, "m2": m2, "m4": m4}

    timings = cu.run_group_scenario(gbroker.bootstrap, tag, tag, hosts)
    print(f"{tag}: {timings}")
