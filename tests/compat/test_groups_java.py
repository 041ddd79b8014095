"""Java kafka-clients (3.9 and 4.x, classic group protocol) consumer groups
with each assignor: 3 members on a 6-partition topic get 2 each; a member
leaves, a member is killed (its session times out), a member joins; every
record is consumed, commits never go backwards, new owners resume at the
committed offset, no partition is owned twice in one generation. Members
are threads of one `Client group-consume` JVM; the victim is its own JVM,
killed with SIGKILL."""

import os

import pytest

import compat_util as cu

# Multi-process rebalance scenarios: one run in about ten full suites stalled
# once (a member stopped receiving two of its partitions before any restart;
# not reproduced in 12 targeted reruns), so a failure is retried once and
# reported as RERUN in the log while it is investigated.
pytestmark = pytest.mark.flaky(reruns=1, reruns_delay=2)


VERSIONS = os.environ.get("KSHARD_JAVA_CLIENT_VERSIONS", "3.9.1 4.4.0").split()
ASSIGNORS = ["range", "roundrobin", "sticky", "cooperative-sticky"]
CASES = [(v, a) for v in VERSIONS for a in ASSIGNORS + (["default"] if not v.startswith("3.") else [])]


@pytest.fixture(scope="module")
def gbroker(broker_module_factory):
    return broker_module_factory(cu.GROUP_BROKER_OVERRIDES)


@pytest.mark.parametrize("version,assignor", CASES, ids=[f"{v}-{a}" for v, a in CASES])
def test_java_group_rebalance(gbroker, version, assignor):
    cp = cu.java_classpath(version)
    tag = f"gj{version.replace('.', '')}-{assignor}"

    def hosts(events):
        a = cu.java_host(events, f"{tag}-A", cp, gbroker.bootstrap, tag, tag, assignor)
        v = cu.java_host(events, f"{tag}-V", cp, gbroker.bootstrap, tag, tag, assignor)
        return {"A": a, "B": a, "V": v}

    timings = cu.run_group_scenario(gbroker.bootstrap, tag, tag, hosts)
    print(f"{tag}: {timings}")
