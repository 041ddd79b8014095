"""Fixtures for the multi-broker suite: one real ZooKeeper per test module,
a fresh chroot per cluster, brokers of KSHARD_TEST_TARGET (kshard, the
default, or kafka for Apache Kafka 3.9.1 in ZooKeeper mode)."""

import re
import shutil
from pathlib import Path

import pytest

import cluster_util as cl

LOG_KEEP_DIR = Path("/tmp/kshard-cluster-logs")

_live_clusters = []
_live_zk = []


@pytest.fixture(scope="module")
def zookeeper():
    """(ZooKeeperServer, kazoo client at its root), shared by one module."""
    server = cl.ZooKeeperServer()
    _live_zk.append(server)
    server.start()
    zk = server.client()
    yield server, zk
    zk.stop()
    zk.close()
    _live_zk.remove(server)
    server.cleanup()


def _new_cluster(zookeeper):
    """A cluster in its own chroot, listed for the failure report while it lives."""
    server, zk = zookeeper
    c = cl.Cluster(server, zk)
    _live_clusters.append(c)
    yield c
    _live_clusters.remove(c)
    c.cleanup()


@pytest.fixture
def cluster(zookeeper):
    """An empty cluster in its own chroot: call cluster.start(n, overrides)."""
    yield from _new_cluster(zookeeper)


@pytest.fixture(scope="module")
def module_cluster(zookeeper):
    """An empty cluster shared by every test of a module (JVM brokers take
    seconds to start): a module fixture calls start(n, overrides) once."""
    yield from _new_cluster(zookeeper)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed:
        return
    # Full logs are copied out before the fixtures delete them; the report
    # carries the tails.
    keep = LOG_KEEP_DIR / re.sub(r"[^A-Za-z0-9_.-]", "_", item.nodeid)
    keep.mkdir(parents=True, exist_ok=True)
    for c in _live_clusters:
        for i, b in enumerate(c.all_brokers):
            if b.log_path.exists():
                shutil.copy(b.log_path, keep / f"{i}-{b.name}.log")
            state = "running" if b.running() else f"exited {b.returncode()}"
            rep.sections.append((f"{b.name} ({state}, port {b.port}) log tail", b.log_text(tail_lines=120)))
    for z in _live_zk:
        if z.log_path.exists():
            shutil.copy(z.log_path, keep / "zookeeper.log")
        rep.sections.append(("zookeeper log tail", z.log_text(tail_lines=30)))
    rep.sections.append(("full logs", str(keep)))


def pytest_report_header(config):
    return f"kshard cluster target: {cl.TARGET} (kafka jars {cl.KAFKA_LIBS}, kshard {cl.KSHARD_BIN})"
