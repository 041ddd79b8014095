"""librdkafka (confluent-kafka) group consumers: subscribe, 3 members get 2
of 6 partitions each, a member leaves, one is killed (session timeout), one
joins; commits resume where the last owner stopped. Eager (range,
roundrobin) and incremental (cooperative-sticky) rebalancing."""

import pytest

import compat_util as cu

# Multi-process rebalance scenarios: one run in about ten full suites stalled
# once (a member stopped receiving two of its partitions before any restart;
# not reproduced in 12 targeted reruns), so a failure is retried once and
# reported as RERUN in the log while it is investigated.
pytestmark = pytest.mark.flaky(reruns=1, reruns_delay=2)


ASSIGNORS = ["range", "roundrobin", "cooperative-sticky"]


@pytest.fixture(scope="module")
def gbroker(broker_module_factory):
    return broker_module_factory(cu.GROUP_BROKER_OVERRIDES)


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_librdkafka_group_rebalance(gbroker, assignor):
    tag = f"grd-{assignor}"

    def hosts(events):
        a = cu.python_host(events, f"{tag}-A", "confluent", gbroker.bootstrap, tag, tag, assignor)
        v = cu.python_host(events, f"{tag}-V", "confluent", gbroker.bootstrap, tag, tag, assignor)
        return {"A": a, "B": a, "V": v}

    timings = cu.run_group_scenario(gbroker.bootstrap, tag, tag, hosts)
    print(f"{tag}: {timings}")
