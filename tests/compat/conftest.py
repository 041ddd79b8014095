"""Broker fixtures for the compatibility suite.

KSHARD_TEST_TARGET=kshard (default) starts target/release/kshard;
KSHARD_TEST_TARGET=kafka starts Apache Kafka 3.9.1 (KRaft, one combined
broker+controller node) from the jars that scripts/kafka-jars.sh caches, so
every test can be proven against the reference broker.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

import compat_util as cu

REPO = Path(__file__).resolve().parents[2]
TARGET = os.environ.get("KSHARD_TEST_TARGET", "kshard")
KAFKA_VERSION = os.environ.get("KSHARD_KAFKA_VERSION", "3.9.1")
CACHE = Path(os.environ.get("KSHARD_CACHE_DIR", Path.home() / ".cache" / "kshard"))
KAFKA_LIBS = CACHE / f"kafka-{KAFKA_VERSION}" / "libs"
KSHARD_BIN = Path(os.environ.get("KSHARD_BIN", REPO / "target" / "release" / "kshard"))
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 60.0

_live_brokers = []


def kafka_classpath():
    if not KAFKA_LIBS.is_dir():
        pytest.fail(f"{KAFKA_LIBS} missing: run scripts/kafka-jars.sh")
    return f"{KAFKA_LIBS}/*"


class Broker:
    """One broker process. Common surface: start, stop (SIGTERM + wait),
    kill9, restart, bootstrap, log_dirs, log_text."""

    def __init__(self, overrides=None):
        self.overrides = dict(overrides or {})
        self.tmp = Path(tempfile.mkdtemp(prefix=f"compat-{TARGET}-"))
        self.log_dirs = str(self.tmp / "data")
        os.makedirs(self.log_dirs)
        self.port = cu.free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc = None
        self.starts = 0
        self.log_path = self.tmp / "broker.log"

    def command(self):
        raise NotImplementedError

    def start(self):
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.starts += 1
        logf = open(self.log_path, "ab")
        logf.write(f"\n==== start #{self.starts} ====\n".encode())
        logf.flush()
        self.proc = subprocess.Popen(
            self.command(),
            stdout=logf,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.tmp,
            start_new_session=True,
        )
        logf.close()
        self.wait_ready()
        return self

    def wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"broker exited with {self.proc.returncode}\n{self.log_text(tail_lines=80)}"
                )
            try:
                if cu.probe_ready("127.0.0.1", self.port):
                    if self.starts > 1:
                        self.wait_partitions_led(deadline)
                    return
            except (OSError, ValueError, AssertionError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"broker not ready in {START_TIMEOUT_S}s\n{self.log_text(tail_lines=80)}")

    def wait_partitions_led(self, deadline):
        """After a restart, ready means every existing partition answers
        ListOffsets again (Kafka re-elects leaders a moment after it
        listens; clients other than Java do not retry NOT_LEADER there)."""
        from confluent_kafka.admin import AdminClient

        md = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=30)
        by_count = {}
        for name, t in md.topics.items():
            if not name.startswith("__"):
                by_count.setdefault(len(t.partitions), []).append(name)
        for count, names in by_count.items():
            cu.wait_topics_ready(self.bootstrap, names, count, max(1.0, deadline - time.monotonic()))

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """SIGTERM and wait: a controlled shutdown."""
        if not self.running():
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"broker ignored SIGTERM for {STOP_TIMEOUT_S}s")
        return rc

    def kill9(self):
        if self.running():
            self.proc.kill()
            self.proc.wait()

    def restart(self):
        self.stop()
        return self.start()

    def log_text(self, tail_lines=None):
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        if tail_lines is not None:
            text = "\n".join(text.splitlines()[-tail_lines:])
        return text

    def partition_dir(self, topic, partition):
        return Path(self.log_dirs) / f"{topic}-{partition}"

    def cleanup(self):
        self.kill9()
        shutil.rmtree(self.tmp, ignore_errors=True)


class KshardBroker(Broker):
    def command(self):
        if not KSHARD_BIN.exists():
            pytest.fail(f"{KSHARD_BIN} missing: cargo build --release --bins")
        base = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": self.log_dirs,
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
        }
        base.update(self.overrides)
        cmd = [str(KSHARD_BIN)]
        for k, v in base.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd


class KafkaBroker(Broker):
    def __init__(self, overrides=None):
        super().__init__(overrides)
        self.controller_port = cu.free_port()
        self.config_path = self.tmp / "server.properties"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": self.log_dirs,
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.overrides)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.tmp / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, stdout\n"
            "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.logger.kafka.request.logger=WARN\n"
            "log4j.logger.state.change.logger=WARN\n"
        )
        subprocess.run(
            self.java_cmd("kafka.tools.StorageTool")
            + ["format", "-t", _cluster_id_b64(), "-c", str(self.config_path)],
            check=True,
            capture_output=True,
        )

    def java_cmd(self, main_class):
        return [
            "java",
            "-Xmx512m",
            "-XX:+UseG1GC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j.configuration=file:{self.tmp / 'log4j.properties'}",
            "-cp",
            kafka_classpath(),
            main_class,
        ]

    def command(self):
        return self.java_cmd("kafka.Kafka") + [str(self.config_path)]


def _cluster_id_b64():
    import base64

    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):  # the tool would read it as an option
            return cid


def make_broker(overrides=None):
    cls = KafkaBroker if TARGET == "kafka" else KshardBroker
    b = cls(overrides)
    _live_brokers.append(b)
    return b.start()


def _release(b):
    b.cleanup()
    if b in _live_brokers:
        _live_brokers.remove(b)


@pytest.fixture(scope="module")
def broker():
    """One broker per test module with the default overrides."""
    b = make_broker()
    yield b
    _release(b)


def _factory():
    made = []

    def make(overrides=None):
        b = make_broker(overrides)
        made.append(b)
        return b

    return make, made


@pytest.fixture
def broker_factory():
    """Start brokers with extra overrides: broker_factory({"k": "v"})."""
    make, made = _factory()
    yield make
    for b in made:
        _release(b)


@pytest.fixture(scope="module")
def broker_module_factory():
    """Like broker_factory, but the brokers live for the whole module."""
    make, made = _factory()
    yield make
    for b in made:
        _release(b)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for b in list(_live_brokers):
            rep.sections.append((f"broker log tail {b.tmp}", b.log_text(tail_lines=150)))


def pytest_report_header(config):
    return f"kshard compat target: {TARGET} (kafka jars {KAFKA_LIBS}, kshard {KSHARD_BIN})"
