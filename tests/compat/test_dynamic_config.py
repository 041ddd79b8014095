"""Dynamic configuration on one broker (issue 18): Kafka's own kafka-configs
tool (kafka.admin.ConfigCommand from the 3.9.1 jars) for topics, one broker
and the cluster default; the Java AdminClient's incrementalAlterConfigs with
each operation; raw AlterConfigs / IncrementalAlterConfigs for what clients
cannot send (duplicate resources, another broker's id, a burst); and the
effects that must be live: retention deleting old segments, a raised
max.message.bytes admitting a refused record, a restart keeping the values.

KSHARD_TEST_TARGET=kafka proves every assertion against Apache Kafka 3.9.1
(a KRaft node there; its error messages for topic configs lack the ZooKeeper
mode's "Invalid config value for resource ..." prefix and its
UNKNOWN_TOPIC_OR_PARTITION has no message, so those are compared by the part
both modes share; tests/cluster/test_dynamic_config_cluster.py checks the
ZooKeeper mode's exact texts).

The helpers here are shared with the cluster suite, so this module reads the
target from the environment instead of importing conftest.
"""

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import compat_util as cu
from describe_configs_util import broker_id

TARGET = os.environ.get("KSHARD_TEST_TARGET", "kshard")
KAFKA = TARGET == "kafka"
KAFKA_VERSION = os.environ.get("KSHARD_KAFKA_VERSION", "3.9.1")
CACHE = Path(os.environ.get("KSHARD_CACHE_DIR", Path.home() / ".cache" / "kshard"))
KAFKA_LIBS = CACHE / f"kafka-{KAFKA_VERSION}" / "libs"
JAVA_DIR = Path(__file__).resolve().parent / "java"
JAVA_CLIENT_VERSION = "3.9.1"

# Wire constants.
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44
LIST_OFFSETS = 2
TOPIC = 2
BROKER = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
RECORD_TOO_LARGE = 10  # MESSAGE_TOO_LARGE
NOT_ENOUGH_REPLICAS = 19
INVALID_CONFIG = 40
INVALID_REQUEST = 42
SOURCE_TOPIC = 1
SOURCE_BROKER = 2
SOURCE_DEFAULT_BROKER = 3
SOURCE_DEFAULT = 5


# --- Kafka's kafka-configs tool ----------------------------------------------

_TOOL_LOG4J = []


def _tool_log4j():
    if not _TOOL_LOG4J:
        d = Path(tempfile.mkdtemp(prefix="dynconf-tool-"))
        (d / "log4j.properties").write_text(
            "log4j.rootLogger=WARN, stderr\n"
            "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stderr.Target=System.err\n"
            "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        )
        _TOOL_LOG4J.append(d / "log4j.properties")
    return _TOOL_LOG4J[0]


def kafka_configs(bootstrap, *args, timeout_s=90):
    """kafka-configs.sh --bootstrap-server `bootstrap` `args`: the
    CompletedProcess (text), whatever its exit status."""
    if not KAFKA_LIBS.is_dir():
        pytest.fail(f"{KAFKA_LIBS} missing: run scripts/kafka-jars.sh")
    cmd = [
        "java",
        "-Xmx256m",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-Xshare:auto",
        f"-Dlog4j.configuration=file:{_tool_log4j()}",
        "-cp",
        f"{KAFKA_LIBS}/*",
        "kafka.admin.ConfigCommand",
        "--bootstrap-server",
        bootstrap,
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)


def configs_ok(bootstrap, *args):
    r = kafka_configs(bootstrap, *args)
    assert r.returncode == 0, f"kafka-configs {' '.join(args)} exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def configs_fail(bootstrap, *args):
    """Runs a command that must fail (exit status 1); returns stderr."""
    r = kafka_configs(bootstrap, *args)
    assert r.returncode == 1, f"kafka-configs {' '.join(args)} exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stderr


def topic_args(topic):
    return ["--entity-type", "topics", "--entity-name", topic]


def broker_args(broker_id):
    if broker_id is None:
        return ["--entity-type", "brokers", "--entity-default"]
    return ["--entity-type", "brokers", "--entity-name", str(broker_id)]


def describe_out(bootstrap, entity_args, all_configs=False):
    """(header, {config line}) of kafka-configs --describe."""
    out = configs_ok(bootstrap, *entity_args, "--describe", *(["--all"] if all_configs else []))
    lines = out.splitlines()
    assert lines, out
    body = lines[1:]
    assert body == sorted(body), f"describe output not sorted by name:\n{out}"
    assert len(set(body)) == len(body), out
    return lines[0], set(body)


def line(name, value, *synonyms):
    """One kafka-configs describe line; synonyms as (source name, key,
    value)."""
    syn = ", ".join(f"{s}:{k}={v}" for s, k, v in synonyms)
    return f"  {name}={value} sensitive=false synonyms={{{syn}}}"


def topic_line(name, value, *lower):
    return line(name, value, ("DYNAMIC_TOPIC_CONFIG", name, value), *lower)


def wait_until(pred, timeout_s, what, interval_s=0.2):
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        last = pred()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; last {last!r}")
        time.sleep(interval_s)


def wait_describe(bootstrap, entity_args, want_header, want_lines, timeout_s=15):
    """Broker configs are applied asynchronously (a ZooKeeper notification,
    or the KRaft metadata log): polls kafka-configs --describe until it
    shows exactly `want_lines`."""
    want = (want_header, set(want_lines))
    deadline = time.monotonic() + timeout_s
    while True:
        have = describe_out(bootstrap, entity_args)
        if have == want:
            return
        assert time.monotonic() < deadline, f"kafka-configs {entity_args} --describe: {have}, want {want}"
        time.sleep(0.1)


# --- the Java AdminClient (tests/compat/java Client incremental-alter-configs)


def java_incremental(bootstrap, resource, *ops, validate_only=False):
    """Admin.incrementalAlterConfigs of one resource ("topic:T", "broker:0",
    "broker:" the default) with ops "SET:k=v", "DELETE:k", "APPEND:k=v",
    "SUBTRACT:k=v"; returns {"error": None or {"class", "message"},
    "dynamic": the resource's own dynamic configs afterwards}."""
    base = JAVA_DIR / "target" / f"kc-{JAVA_CLIENT_VERSION}"
    if not (base / "classes" / "kshard" / "compat" / "Client.class").exists():
        pytest.fail(f"Java client for {JAVA_CLIENT_VERSION} not built: run scripts/setup.sh")
    cmd = [
        "java",
        "-Xmx256m",
        "-XX:TieredStopAtLevel=1",
        "-Xshare:auto",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        f"{base / 'classes'}:{base / 'libs'}/*",
        "kshard.compat.Client",
        "incremental-alter-configs",
        "--bootstrap",
        bootstrap,
        "--resource",
        resource,
        "--validate-only",
        "true" if validate_only else "false",
        *ops,
    ]
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    assert r.returncode == 0, f"incremental-alter-configs failed rc={r.returncode}:\n{r.stderr.decode()[-3000:]}"
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


# --- raw requests --------------------------------------------------------------


class Conn:
    """One connection to one broker (raw requests reach exactly it)."""

    def __init__(self, port, timeout_s=30.0):
        self.sock = cu.connect("127.0.0.1", port, timeout_s)
        self.corr = 0

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, api_key, version, body, flexible=False):
        self.corr += 1
        header = (cu.request_header_v2 if flexible else cu.request_header_v1)(api_key, version, self.corr)
        self.sock.sendall(cu.frame(header + body))
        return self.corr

    def recv(self, corr, flexible=False):
        r = cu.Reader(cu.recv_frame(self.sock))
        assert r.i32() == corr
        if flexible:
            r.skip_tags()
        return r

    def call(self, api_key, version, body, flexible=False):
        return self.recv(self.send(api_key, version, body, flexible), flexible)


def alter_configs_body(resources, validate_only=False):
    """AlterConfigs v0: resources = [(type, name, {key: value or None})]."""
    body = cu.i32(len(resources))
    for rtype, name, configs in resources:
        body += cu.i8(rtype) + cu.string(name) + cu.i32(len(configs))
        for k, v in configs.items():
            body += cu.string(k) + cu.string(v)
    return body + cu.i8(1 if validate_only else 0)


def incremental_body(resources, validate_only=False):
    """IncrementalAlterConfigs v0: resources = [(type, name, [(key, op,
    value or None)])]."""
    body = cu.i32(len(resources))
    for rtype, name, ops in resources:
        body += cu.i8(rtype) + cu.string(name) + cu.i32(len(ops))
        for k, op, v in ops:
            body += cu.string(k) + cu.i8(op) + cu.string(v)
    return body + cu.i8(1 if validate_only else 0)


def parse_alter_response(r):
    """[(error, message, type, name)] of AlterConfigs v0/v1 and
    IncrementalAlterConfigs v0 (the same layout)."""
    r.i32()  # throttle
    out = []
    for _ in range(r.i32()):
        out.append((r.i16(), r.string(), r.i8(), r.string()))
    return out


def alter_configs(port, resources, validate_only=False):
    with Conn(port) as c:
        return parse_alter_response(c.call(ALTER_CONFIGS, 0, alter_configs_body(resources, validate_only)))


def incremental_alter(port, resources, validate_only=False):
    with Conn(port) as c:
        return parse_alter_response(
            c.call(INCREMENTAL_ALTER_CONFIGS, 0, incremental_body(resources, validate_only)))


def describe_configs(port, rtype, name, keys=None):
    """DescribeConfigs v1 (with synonyms) of one resource: (error, message,
    {name: (value, source, [(syn name, syn value, syn source)])})."""
    body = cu.i32(1) + cu.i8(rtype) + cu.string(name)
    body += cu.i32(-1) if keys is None else cu.i32(len(keys)) + b"".join(cu.string(k) for k in keys)
    body += cu.i8(1)  # include synonyms
    with Conn(port) as c:
        r = c.call(DESCRIBE_CONFIGS, 1, body)
    r.i32()  # throttle
    assert r.i32() == 1
    error, message = r.i16(), r.string()
    r.i8()
    r.string()
    configs = {}
    for _ in range(r.i32()):
        cname, value = r.string(), r.string()
        r.i8()  # read only
        source = r.i8()
        r.i8()  # sensitive
        synonyms = [(r.string(), r.string(), r.i8()) for _ in range(r.i32())]
        configs[cname] = (value, source, synonyms)
    return error, message, configs


def topic_overrides(port, topic):
    """{name: value} of the topic's own (DYNAMIC_TOPIC_CONFIG) configs."""
    error, message, configs = describe_configs(port, TOPIC, topic)
    assert error == 0, (error, message)
    return {k: v for k, (v, source, _) in configs.items() if source == SOURCE_TOPIC}


def wait_overrides(port, topic, want, timeout_s=10):
    """The topic's own configs become `want`. Immediate in ZooKeeper mode
    (DescribeConfigs reads the znode); a KRaft broker sees the change once
    its metadata catches up, a moment after the response."""
    deadline = time.monotonic() + timeout_s
    while True:
        have = topic_overrides(port, topic)
        if have == want:
            return
        assert time.monotonic() < deadline, f"{topic}: overrides {have}, want {want}"
        time.sleep(0.05)


def wait_produce(port, topic, values, want, timeout_s=10):
    """Produces until the error code is `want` (a changed topic config
    reaches a KRaft broker's log a moment after the alter returns)."""
    wait_until(lambda: produce(port, topic, values) == want, timeout_s, f"produce to {topic} answering {want}", 0.1)


def produce(port, topic, values, acks=-1, partition=0):
    """One raw Produce v3 batch of `values` to one broker; the error code."""
    batch = cu.record_batch([(None, v, []) for v in values], int(time.time() * 1000))
    with Conn(port) as c:
        c.sock.sendall(cu.produce_v3(1, topic, partition, batch, acks=acks))
        _, res = cu.parse_produce_v3_response(cu.recv_frame(c.sock))
    return res[(topic, partition)][0]


def earliest_offset(port, topic, partition=0):
    """ListOffsets v1 EARLIEST (-2) from the broker on `port`."""
    body = cu.i32(-1) + cu.i32(1) + cu.string(topic) + cu.i32(1) + cu.i32(partition) + cu.i64(-2)
    with Conn(port) as c:
        r = c.call(LIST_OFFSETS, 1, body)
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    err = r.i16()
    r.i64()  # timestamp
    off = r.i64()
    assert err == 0, f"ListOffsets error {err}"
    return off


def create_topic(bootstrap, topic, partitions=1, config=None, replication_factor=1):
    cu.create_group_topic(bootstrap, topic, partitions, config=config, replication_factor=replication_factor)


def fill_segments(port, topic, batches=12, value_size=400):
    """Raw produce of `batches` one-record batches, so a topic with
    segment.bytes=1024 rolls a segment every two of them; returns the log
    end offset."""
    for i in range(batches):
        assert produce(port, topic, [bytes([65 + i % 26]) * value_size]) == NONE
    return batches


# --- single broker ---------------------------------------------------------------

# Retention is checked every second so retention changes show within seconds
# (log.initial.task.delay.ms: Kafka's first check otherwise waits 30 s;
# kshard has no such delay and ignores the key).
OVERRIDES = {
    "log.retention.check.interval.ms": "1000",
    "log.initial.task.delay.ms": "1000",
    # The cleaner looks for work every half second (Kafka's default: 15 s).
    "log.cleaner.backoff.ms": "500",
}


@pytest.fixture(scope="module")
def dbroker(broker_module_factory):
    b = broker_module_factory(OVERRIDES)
    b.broker_id = broker_id(b.port)
    return b


def test_topic_add_describe_delete(dbroker):
    bs, t = dbroker.bootstrap, "dc-topic"
    create_topic(bs, t)
    out = configs_ok(bs, *topic_args(t), "--alter", "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]")
    assert out.strip() == f"Completed updating config for topic {t}."
    policy = topic_line("cleanup.policy", "compact,delete", ("DEFAULT_CONFIG", "log.cleanup.policy", "delete"))
    wait_overrides(dbroker.port, t, {"retention.ms": "1000", "cleanup.policy": "compact,delete"})
    assert describe_out(bs, topic_args(t)) == (
        f"Dynamic configs for topic {t} are:",
        {topic_line("retention.ms", "1000"), policy},
    )

    out = configs_ok(bs, *topic_args(t), "--alter", "--delete-config", "retention.ms")
    assert out.strip() == f"Completed updating config for topic {t}."
    wait_overrides(dbroker.port, t, {"cleanup.policy": "compact,delete"})
    assert describe_out(bs, topic_args(t)) == (f"Dynamic configs for topic {t} are:", {policy})
    # The tool checks deletes against the topic's dynamic configs itself.
    err = configs_fail(bs, *topic_args(t), "--alter", "--delete-config", "retention.ms")
    assert err.strip() == "Invalid config(s): retention.ms"
    # Added and deleted in one command: one IncrementalAlterConfigs.
    configs_ok(bs, *topic_args(t), "--alter", "--add-config", "segment.ms=3600000", "--delete-config", "cleanup.policy")
    wait_overrides(dbroker.port, t, {"segment.ms": "3600000"})
    assert describe_out(bs, topic_args(t)) == (
        f"Dynamic configs for topic {t} are:",
        {topic_line("segment.ms", "3600000")},
    )
    # --all lists every topic config; the default retention.ms has no synonyms.
    header, lines = describe_out(bs, topic_args(t), all_configs=True)
    assert header == f"All configs for topic {t} are:"
    assert topic_line("segment.ms", "3600000") in lines
    assert line("retention.ms", "604800000") in lines
    assert line("cleanup.policy", "delete", ("DEFAULT_CONFIG", "log.cleanup.policy", "delete")) in lines
    assert len(lines) > 30


def test_topic_unknown_config_name(dbroker):
    bs, t = dbroker.bootstrap, "dc-unknown-key"
    create_topic(bs, t)
    err = configs_fail(bs, *topic_args(t), "--alter", "--add-config", "retention.ms=5000,foo.bar=1")
    assert "InvalidConfigurationException: Unknown topic config name: foo.bar" in err, err
    # Nothing of a refused request is applied.
    assert topic_overrides(dbroker.port, t) == {}
    [res] = incremental_alter(dbroker.port, [(TOPIC, t, [("foo.bar", SET, "1")])])
    assert res == (INVALID_CONFIG, "Unknown topic config name: foo.bar", TOPIC, t)


# (value, the ConfigException text both modes end the message with)
BAD_VALUES = [
    ("retention.ms=abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ("retention.ms=-5", "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
    ("cleanup.policy=bogus", "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete"),
    ("min.cleanable.dirty.ratio=2", "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
]


def test_topic_bad_values(dbroker):
    bs, t = dbroker.bootstrap, "dc-bad-value"
    create_topic(bs, t)
    configs_ok(bs, *topic_args(t), "--alter", "--add-config", "retention.ms=7000")
    wait_overrides(dbroker.port, t, {"retention.ms": "7000"})
    for kv, text in BAD_VALUES:
        err = configs_fail(bs, *topic_args(t), "--alter", "--add-config", kv)
        assert "org.apache.kafka.common.errors.InvalidConfigurationException: " in err, err
        assert text in err, err
        k, v = kv.split("=")
        [(code, message, _, _)] = incremental_alter(dbroker.port, [(TOPIC, t, [(k, SET, v)])])
        assert code == INVALID_CONFIG and message.endswith(text), (code, message)
    assert topic_overrides(dbroker.port, t) == {"retention.ms": "7000"}


def test_unknown_topic(dbroker):
    bs = dbroker.bootstrap
    err = configs_fail(bs, *topic_args("dc-no-such-topic"), "--alter", "--add-config", "retention.ms=1000")
    assert "UnknownTopicOrPartitionException" in err, err
    [(code, _, rtype, name)] = incremental_alter(dbroker.port, [(TOPIC, "dc-no-such-topic", [("retention.ms", SET, "1")])])
    assert (code, rtype, name) == (UNKNOWN_TOPIC_OR_PARTITION, TOPIC, "dc-no-such-topic")
    [(code, _, _, _)] = alter_configs(dbroker.port, [(TOPIC, "dc-no-such-topic", {"retention.ms": "1"})])
    assert code == UNKNOWN_TOPIC_OR_PARTITION
    assert describe_configs(dbroker.port, TOPIC, "dc-no-such-topic")[0] == UNKNOWN_TOPIC_OR_PARTITION


def test_broker_config_per_broker(dbroker):
    bs, bid = dbroker.bootstrap, dbroker.broker_id
    header = f"Dynamic configs for broker {bid} are:"
    out = configs_ok(bs, *broker_args(bid), "--alter", "--add-config", "log.cleaner.threads=2")
    assert out.strip() == f"Completed updating config for broker {bid}."
    threads = line("log.cleaner.threads", "2", ("DYNAMIC_BROKER_CONFIG", "log.cleaner.threads", "2"),
                   ("DEFAULT_CONFIG", "log.cleaner.threads", "1"))
    wait_describe(bs, broker_args(bid), header, [threads])
    # Per-broker only: the cluster default stays empty.
    assert describe_out(bs, broker_args(None)) == ("Default configs for brokers in the cluster are:", set())
    _, _, configs = describe_configs(dbroker.port, BROKER, str(bid), ["log.cleaner.threads"])
    assert configs["log.cleaner.threads"] == (
        "2", SOURCE_BROKER, [("log.cleaner.threads", "2", SOURCE_BROKER), ("log.cleaner.threads", "1", SOURCE_DEFAULT)])
    # The cleaner may at most double its thread count in one change
    # (LogCleaner.validateReconfiguration), and the check runs on the broker.
    [(code, message, _, _)] = incremental_alter(dbroker.port, [(BROKER, str(bid), [("log.cleaner.threads", SET, "5")])])
    assert code == INVALID_REQUEST, (code, message)
    assert "Log cleaner threads cannot be increased to more than double the current value 2" in message, message
    configs_ok(bs, *broker_args(bid), "--alter", "--delete-config", "log.cleaner.threads")
    wait_describe(bs, broker_args(bid), header, [])
    err = configs_fail(bs, *broker_args(bid), "--alter", "--delete-config", "log.cleaner.threads")
    assert err.strip() == "Invalid config(s): log.cleaner.threads"


def test_broker_config_cluster_default(dbroker):
    bs, bid, t = dbroker.bootstrap, dbroker.broker_id, "dc-default-synonyms"
    create_topic(bs, t)
    out = configs_ok(bs, *broker_args(None), "--alter", "--add-config", "log.retention.ms=3600000")
    assert out.strip() == "Completed updating default config for brokers in the cluster."
    try:
        wait_describe(bs, broker_args(None), "Default configs for brokers in the cluster are:", [
            line("log.retention.ms", "3600000", ("DYNAMIC_DEFAULT_BROKER_CONFIG", "log.retention.ms", "3600000"))])
        # The broker's own describe lists only DYNAMIC_BROKER_CONFIG entries:
        # a default alone leaves it empty...
        assert describe_out(bs, broker_args(bid)) == (f"Dynamic configs for broker {bid} are:", set())
        # ...though the broker uses it, ranked above the static/default hours.
        _, _, configs = describe_configs(dbroker.port, BROKER, str(bid), ["log.retention.ms", "log.retention.hours"])
        assert configs["log.retention.ms"] == ("3600000", SOURCE_DEFAULT_BROKER, [
            ("log.retention.ms", "3600000", SOURCE_DEFAULT_BROKER), ("log.retention.hours", "168", SOURCE_DEFAULT)])
        assert configs["log.retention.hours"] == ("168", SOURCE_DEFAULT, [("log.retention.hours", "168", SOURCE_DEFAULT)])
        # A topic without its own retention.ms takes the new default.
        _, _, configs = describe_configs(dbroker.port, TOPIC, t, ["retention.ms"])
        assert configs["retention.ms"] == ("3600000", SOURCE_DEFAULT_BROKER, [
            ("log.retention.ms", "3600000", SOURCE_DEFAULT_BROKER), ("log.retention.hours", "168", SOURCE_DEFAULT)])
        _, lines = describe_out(bs, topic_args(t), all_configs=True)
        assert line("retention.ms", "3600000", ("DYNAMIC_DEFAULT_BROKER_CONFIG", "log.retention.ms", "3600000"),
                    ("DEFAULT_CONFIG", "log.retention.hours", "168")) in lines
        # A per-broker value outranks the default.
        configs_ok(bs, *broker_args(bid), "--alter", "--add-config", "log.retention.ms=7200000")
        per_broker = line("log.retention.ms", "7200000", ("DYNAMIC_BROKER_CONFIG", "log.retention.ms", "7200000"),
                          ("DYNAMIC_DEFAULT_BROKER_CONFIG", "log.retention.ms", "3600000"),
                          ("DEFAULT_CONFIG", "log.retention.hours", "168"))
        wait_describe(bs, broker_args(bid), f"Dynamic configs for broker {bid} are:", [per_broker])
        _, _, configs = describe_configs(dbroker.port, TOPIC, t, ["retention.ms"])
        assert configs["retention.ms"][:2] == ("7200000", SOURCE_BROKER)
        configs_ok(bs, *broker_args(bid), "--alter", "--delete-config", "log.retention.ms")
        wait_describe(bs, broker_args(bid), f"Dynamic configs for broker {bid} are:", [])
    finally:
        configs_ok(bs, *broker_args(None), "--alter", "--delete-config", "log.retention.ms")
    wait_describe(bs, broker_args(None), "Default configs for brokers in the cluster are:", [])
    wait_until(lambda: describe_configs(dbroker.port, TOPIC, t, ["retention.ms"])[2]["retention.ms"]
               == ("604800000", SOURCE_DEFAULT, []), 15, "topic retention.ms back to the default")


@pytest.mark.parametrize("level", ["broker", "default"])
def test_broker_read_only_key(dbroker, level):
    bid = dbroker.broker_id if level == "broker" else None
    err = configs_fail(dbroker.bootstrap, *broker_args(bid), "--alter", "--add-config", "log.dirs=/x")
    assert "InvalidRequestException: Cannot update these configs dynamically: Set(log.dirs)" in err, err
    [res] = incremental_alter(dbroker.port, [(BROKER, "" if bid is None else str(bid), [("log.dirs", SET, "/x")])])
    assert res[:2] == (INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.dirs)")
    # A bad value of a dynamic broker key is INVALID_REQUEST too (KAFKA-13609).
    err = configs_fail(dbroker.bootstrap, *broker_args(bid), "--alter", "--add-config", "log.cleaner.threads=abc")
    assert ("InvalidRequestException: Invalid value abc for configuration log.cleaner.threads: "
            "Not a number of type INT") in err, err


def java_ok(bootstrap, resource, *ops, validate_only=False):
    r = java_incremental(bootstrap, resource, *ops, validate_only=validate_only)
    assert r["error"] is None, r
    return r


def test_java_incremental_ops(dbroker):
    bs, port, t = dbroker.bootstrap, dbroker.port, "dc-java-ops"
    create_topic(bs, t)
    res = f"topic:{t}"
    java_ok(bs, res, "SET:cleanup.policy=compact", "SET:retention.ms=1000")
    wait_overrides(port, t, {"cleanup.policy": "compact", "retention.ms": "1000"})
    java_ok(bs, res, "APPEND:cleanup.policy=delete")
    wait_overrides(port, t, {"cleanup.policy": "compact,delete", "retention.ms": "1000"})
    # A value already in the list is not appended again; SET beside it.
    java_ok(bs, res, "APPEND:cleanup.policy=delete", "SET:segment.ms=3600000")
    wait_overrides(port, t, {"cleanup.policy": "compact,delete", "retention.ms": "1000", "segment.ms": "3600000"})
    java_ok(bs, res, "SUBTRACT:cleanup.policy=compact")
    wait_overrides(port, t, {"cleanup.policy": "delete", "retention.ms": "1000", "segment.ms": "3600000"})
    java_ok(bs, res, "DELETE:retention.ms")
    wait_overrides(port, t, {"cleanup.policy": "delete", "segment.ms": "3600000"})
    # Deleting an absent key is not an error.
    java_ok(bs, res, "DELETE:retention.ms", "DELETE:segment.ms")
    wait_overrides(port, t, {"cleanup.policy": "delete"})
    # Subtracting every element leaves an empty list, still an override.
    java_ok(bs, res, "SUBTRACT:cleanup.policy=delete")
    wait_overrides(port, t, {"cleanup.policy": ""})
    # APPEND without an override starts from the default (delete).
    t2 = "dc-java-append"
    create_topic(bs, t2)
    java_ok(bs, f"topic:{t2}", "APPEND:cleanup.policy=compact")
    wait_overrides(port, t2, {"cleanup.policy": "delete,compact"})


def test_java_validate_only_changes_nothing(dbroker):
    bs, port, t = dbroker.bootstrap, dbroker.port, "dc-java-validate"
    create_topic(bs, t)
    java_ok(bs, f"topic:{t}", "SET:retention.ms=1000")
    wait_overrides(port, t, {"retention.ms": "1000"})
    java_ok(bs, f"topic:{t}", "SET:retention.ms=5", "SET:cleanup.policy=compact", validate_only=True)
    r = java_incremental(bs, f"topic:{t}", "SET:retention.ms=abc", validate_only=True)
    assert r["error"]["class"] == "InvalidConfigurationException"
    assert r["error"]["message"].endswith("Invalid value abc for configuration retention.ms: Not a number of type LONG")
    [res] = alter_configs(port, [(TOPIC, t, {"segment.ms": "1000"})], validate_only=True)
    assert res == (NONE, None, TOPIC, t)
    # A real change after them: once it shows, the validations would have too.
    java_ok(bs, f"topic:{t}", "SET:segment.bytes=1048576")
    wait_overrides(port, t, {"retention.ms": "1000", "segment.bytes": "1048576"})


def test_java_append_to_non_list_key(dbroker):
    bs, t = dbroker.bootstrap, "dc-java-append-bad"
    create_topic(bs, t)
    for op in ("APPEND", "SUBTRACT"):
        r = java_incremental(bs, f"topic:{t}", f"{op}:retention.ms=5")
        # ZooKeeper mode: "Config value append is not allowed for config
        # key: retention.ms" (the cluster suite checks that text); KRaft
        # words it differently.
        assert r["error"]["class"] == "InvalidConfigurationException", r
        assert "retention.ms" in r["error"]["message"], r
        assert topic_overrides(dbroker.port, t) == {}
    # Broker keys are checked on the broker in both modes, with one text.
    r = java_incremental(bs, f"broker:{dbroker.broker_id}", "APPEND:log.cleaner.threads=2")
    assert r["error"] == {"class": "InvalidConfigurationException",
                          "message": "Config value append is not allowed for config key: log.cleaner.threads"}


def test_legacy_alter_configs_replaces_the_set(dbroker):
    port, t = dbroker.port, "dc-legacy"
    create_topic(dbroker.bootstrap, t)
    assert alter_configs(port, [(TOPIC, t, {"retention.ms": "1000", "cleanup.policy": "compact"})]) == [
        (NONE, None, TOPIC, t)]
    wait_overrides(port, t, {"retention.ms": "1000", "cleanup.policy": "compact"})
    # Everything not in the request is removed.
    assert alter_configs(port, [(TOPIC, t, {"segment.bytes": "1048576"})]) == [(NONE, None, TOPIC, t)]
    wait_overrides(port, t, {"segment.bytes": "1048576"})
    assert alter_configs(port, [(TOPIC, t, {})]) == [(NONE, None, TOPIC, t)]
    wait_overrides(port, t, {})


def test_bad_requests(dbroker):
    port, bid, t = dbroker.port, dbroker.broker_id, "dc-bad-requests"
    create_topic(dbroker.bootstrap, t)
    # The same resource twice: both refused, the others applied.
    res = incremental_alter(port, [
        (TOPIC, t, [("retention.ms", SET, "100")]),
        (TOPIC, "dc-bad-requests-other", [("retention.ms", SET, "100")]),
        (TOPIC, t, [("retention.ms", SET, "200")]),
    ])
    assert res[0] == res[2] == (INVALID_REQUEST, "Each resource must appear at most once.", TOPIC, t)
    assert res[1][0] == UNKNOWN_TOPIC_OR_PARTITION
    assert topic_overrides(port, t) == {}
    res = incremental_alter(port, [(TOPIC, t, [("retention.ms", SET, "100"), ("retention.ms", SET, "200")])])
    assert res == [(INVALID_REQUEST, "Error due to duplicate config keys", TOPIC, t)]
    assert alter_configs(port, [(TOPIC, "", {"retention.ms": "2"})]) == [
        (INVALID_REQUEST, "Default topic resources are not allowed.", TOPIC, "")]
    # Another broker's id, sent to this broker.
    want = (INVALID_REQUEST, f"Unexpected broker id, expected {bid}, but received 5", BROKER, "5")
    assert incremental_alter(port, [(BROKER, "5", [("log.cleaner.threads", SET, "2")])]) == [want]
    assert alter_configs(port, [(BROKER, "5", {"log.cleaner.threads": "2"})]) == [want]
    assert alter_configs(port, [(BROKER, "x", {"log.cleaner.threads": "2"})]) == [
        (INVALID_REQUEST, "Node id must be an integer, but it is: x", BROKER, "x")]
    assert topic_overrides(port, t) == {}


def test_burst_of_changes(dbroker):
    """1,000 IncrementalAlterConfigs pipelined on one connection, each
    setting retention.ms to a new value: all succeed, the last one wins, and
    the broker keeps serving (Kafka 3.9.1 as a KRaft node needs ~30 s)."""
    port, t = dbroker.port, "dc-burst"
    create_topic(dbroker.bootstrap, t)
    n = 1000
    start = time.monotonic()
    with Conn(port, timeout_s=120) as c:
        corrs = [c.send(INCREMENTAL_ALTER_CONFIGS, 0, incremental_body([(TOPIC, t, [("retention.ms", SET, str(100000 + i))])]))
                 for i in range(n)]
        results = [parse_alter_response(c.recv(corr)) for corr in corrs]
    took = time.monotonic() - start
    assert all(r == [(NONE, None, TOPIC, t)] for r in results), [r for r in results if r[0][0] != NONE][:3]
    assert took < 90, f"{n} changes took {took:.1f}s"
    wait_overrides(port, t, {"retention.ms": str(100000 + n - 1)})
    assert describe_out(dbroker.bootstrap, topic_args(t)) == (
        f"Dynamic configs for topic {t} are:", {topic_line("retention.ms", str(100000 + n - 1))})
    assert produce(port, t, [b"after the burst"]) == NONE


def test_lower_retention_deletes_old_segments(dbroker):
    port, t = dbroker.port, "dc-retention"
    create_topic(dbroker.bootstrap, t, config={"segment.bytes": "1024"})
    end = fill_segments(port, t)
    # Two retention checks pass with the default retention: nothing goes.
    time.sleep(2.5)
    assert earliest_offset(port, t) == 0
    configs_ok(dbroker.bootstrap, *topic_args(t), "--alter", "--add-config", "retention.ms=1")
    wait_until(lambda: earliest_offset(port, t) > 0, 20, "old segments deleted after retention.ms=1")
    assert earliest_offset(port, t) <= end
    assert produce(port, t, [b"after retention"]) == NONE


def test_cluster_default_retention_applies_live(dbroker):
    """A topic without its own retention.ms follows the cluster default."""
    bs, port, t = dbroker.bootstrap, dbroker.port, "dc-default-retention"
    create_topic(bs, t, config={"segment.bytes": "1024"})
    keep = "dc-default-retention-kept"
    create_topic(bs, keep, config={"segment.bytes": "1024", "retention.ms": "3600000"})
    fill_segments(port, t)
    fill_segments(port, keep)
    time.sleep(1.5)
    configs_ok(bs, *broker_args(None), "--alter", "--add-config", "log.retention.ms=1000")
    try:
        wait_until(lambda: earliest_offset(port, t) > 0, 20, "old segments deleted after log.retention.ms=1000")
        # The topic's own retention.ms outranks the default.
        assert earliest_offset(port, keep) == 0
    finally:
        configs_ok(bs, *broker_args(None), "--alter", "--delete-config", "log.retention.ms")
    wait_describe(bs, broker_args(None), "Default configs for brokers in the cluster are:", [])


def test_max_message_bytes_live(dbroker):
    port, t = dbroker.port, "dc-max-message"
    create_topic(dbroker.bootstrap, t)
    big = b"x" * 200_000
    assert produce(port, t, [big]) == NONE
    configs_ok(dbroker.bootstrap, *topic_args(t), "--alter", "--add-config", "max.message.bytes=100000")
    wait_produce(port, t, [big], RECORD_TOO_LARGE)
    assert produce(port, t, [b"y" * 1000]) == NONE
    configs_ok(dbroker.bootstrap, *topic_args(t), "--alter", "--add-config", "max.message.bytes=1000000")
    wait_produce(port, t, [big], NONE)
    # Lowered again: refused again.
    configs_ok(dbroker.bootstrap, *topic_args(t), "--alter", "--add-config", "max.message.bytes=150000")
    wait_produce(port, t, [big], RECORD_TOO_LARGE)


def segment_files(broker, topic):
    return sorted(p.name for p in broker.partition_dir(topic, 0).glob("*.log"))


def test_segment_bytes_live(dbroker):
    """segment.bytes lowered on a topic with one segment: the next appends
    roll new segments (read at each append, as Kafka's maybeRoll)."""
    port, t = dbroker.port, "dc-segment-bytes"
    create_topic(dbroker.bootstrap, t)
    fill_segments(port, t, batches=6)
    assert len(segment_files(dbroker, t)) == 1
    configs_ok(dbroker.bootstrap, *topic_args(t), "--alter", "--add-config", "segment.bytes=1024")

    def rolled():
        assert produce(port, t, [b"r" * 400]) == NONE
        return len(segment_files(dbroker, t)) >= 3 or None

    wait_until(rolled, 15, "new segments after segment.bytes=1024", 0.1)


def consume_all(bootstrap, topic, expect_at_least=1, timeout_s=15):
    """Every record of partition 0 from the start, as confluent-kafka
    messages (key, value, timestamp)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"dc-read-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if len(out) >= expect_at_least:
                    break
                continue
            out.append((m.key(), m.value(), m.timestamp()))
    finally:
        c.close()
    return out


def test_cleanup_policy_delete_to_compact_live(dbroker):
    """A delete-policy topic turned compact: the cleaner picks it at its
    next pass and drops the superseded values of each key."""
    from confluent_kafka import Producer

    bs, t = dbroker.bootstrap, "dc-to-compact"
    create_topic(bs, t, config={"segment.bytes": "1024"})
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for i in range(40):
        p.produce(t, key=b"k%d" % (i % 4), value=b"%03d" % i + b"v" * 200, partition=0)
        p.flush(10)
    assert len(consume_all(bs, t, expect_at_least=40)) == 40
    configs_ok(bs, *topic_args(t), "--alter", "--add-config",
               "cleanup.policy=compact,min.cleanable.dirty.ratio=0.01")
    wait_until(lambda: len(consume_all(bs, t, timeout_s=5)) < 20 or None, 60,
               "duplicates compacted away after cleanup.policy=compact", 1.0)
    got = consume_all(bs, t, timeout_s=5)
    last = {}
    for key, value, _ in got:
        last[key] = value
    # Every key keeps its latest value.
    assert {k: v[:3] for k, v in last.items()} == {b"k0": b"036", b"k1": b"037", b"k2": b"038", b"k3": b"039"}


def test_message_timestamp_type_live(dbroker):
    """message.timestamp.type=LogAppendTime set live: batches appended
    after it carry the broker's time; earlier ones keep the producer's."""
    from confluent_kafka import Producer, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME

    bs, t = dbroker.bootstrap, "dc-timestamp-type"
    create_topic(bs, t)
    # An hour ago: well inside retention, far from the broker's clock.
    create_time = int(time.time() * 1000) - 3_600_000
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    p.produce(t, value=b"create-time", timestamp=create_time, partition=0)
    p.flush(10)
    configs_ok(bs, *topic_args(t), "--alter", "--add-config", "message.timestamp.type=LogAppendTime")

    def stamped_by_broker():
        p.produce(t, value=b"append-time", timestamp=create_time, partition=0)
        p.flush(10)
        got = consume_all(bs, t, expect_at_least=2, timeout_s=5)
        return len(got) >= 2 and got[-1][2][0] == TIMESTAMP_LOG_APPEND_TIME or None

    wait_until(stamped_by_broker, 20, "LogAppendTime on new batches", 0.2)
    got = consume_all(bs, t, expect_at_least=2, timeout_s=5)
    assert got[0][2] == (TIMESTAMP_CREATE_TIME, create_time), got[0]
    assert abs(got[-1][2][1] - time.time() * 1000) < 60_000, got[-1]


def test_broker_logger_root_level(dbroker):
    """kafka-configs for broker-loggers: the root logger's level set and
    described (in memory only, as in Kafka)."""
    bs, bid = dbroker.bootstrap, dbroker.broker_id
    args = ["--entity-type", "broker-loggers", "--entity-name", str(bid)]
    out = configs_ok(bs, *args, "--alter", "--add-config", "root=DEBUG")
    assert out.strip() == f"Completed updating config for broker-logger {bid}."
    try:
        # Kafka lists every log4j logger, in no particular order.
        lines = configs_ok(bs, *args, "--describe").splitlines()
        assert lines[0] == f"Dynamic configs for broker-logger {bid} are:", lines[:3]
        assert "  root=DEBUG sensitive=false synonyms={}" in lines[1:], lines
    finally:
        configs_ok(bs, *args, "--alter", "--add-config", "root=INFO")
    # A logger the broker does not have.
    err = configs_fail(bs, *args, "--alter", "--add-config", "no.such.logger=INFO")
    assert "no.such.logger" in err, err


def test_restart_keeps_dynamic_configs(dbroker):
    """Last: it restarts the module's broker."""
    bs, bid, t, plain = dbroker.bootstrap, dbroker.broker_id, "dc-restart", "dc-restart-plain"
    create_topic(bs, t)
    create_topic(bs, plain)
    configs_ok(bs, *topic_args(t), "--alter", "--add-config", "retention.ms=123456,cleanup.policy=[compact,delete]")
    configs_ok(bs, *broker_args(bid), "--alter", "--add-config", "log.cleaner.threads=2")
    configs_ok(bs, *broker_args(None), "--alter", "--add-config", "log.retention.ms=86400000")
    topic_want = (f"Dynamic configs for topic {t} are:", {
        # The default log.retention.ms now heads the broker synonyms.
        topic_line("retention.ms", "123456", ("DYNAMIC_DEFAULT_BROKER_CONFIG", "log.retention.ms", "86400000"),
                   ("DEFAULT_CONFIG", "log.retention.hours", "168")),
        topic_line("cleanup.policy", "compact,delete", ("DEFAULT_CONFIG", "log.cleanup.policy", "delete")),
    })
    broker_want = [line("log.cleaner.threads", "2", ("DYNAMIC_BROKER_CONFIG", "log.cleaner.threads", "2"),
                        ("DEFAULT_CONFIG", "log.cleaner.threads", "1"))]
    default_want = [line("log.retention.ms", "86400000", ("DYNAMIC_DEFAULT_BROKER_CONFIG", "log.retention.ms", "86400000"))]
    wait_describe(bs, broker_args(bid), f"Dynamic configs for broker {bid} are:", broker_want)
    wait_describe(bs, topic_args(t), *topic_want)
    dbroker.restart()
    assert describe_out(bs, topic_args(t)) == topic_want
    assert describe_out(bs, broker_args(bid)) == (f"Dynamic configs for broker {bid} are:", set(broker_want))
    assert describe_out(bs, broker_args(None)) == ("Default configs for brokers in the cluster are:", set(default_want))
    _, _, configs = describe_configs(dbroker.port, TOPIC, plain, ["retention.ms"])
    assert configs["retention.ms"][:2] == ("86400000", SOURCE_DEFAULT_BROKER)
