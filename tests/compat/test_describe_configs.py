"""DescribeConfigs for a broker lists every Kafka 3.9.1 broker key with the
value, source, sensitivity, read-only flag, synonyms, type and documentation
Kafka's ConfigHelper gives, compared field by field over raw DescribeConfigs
v4 requests (single node; tests/cluster/test_describe_configs_zk.py does the
same in ZooKeeper mode).

The expectations come from src/config/kafka_keys.rs, generated from Kafka
3.9.1's jars by scripts/GenKafkaBrokerKeys.java; KSHARD_TEST_TARGET=kafka
proves them against the real broker. Keys whose value depends on how the
fixture starts each broker (its listeners, KRaft keys for Kafka) are
compared only where both fixtures set the same value.
"""

import pytest

from conftest import TARGET
from describe_configs_util import (
    KSHARD_DEFAULTS,
    KSHARD_ONLY,
    SOURCE_DEFAULT,
    SOURCE_STATIC,
    check_defaults,
    check_static,
    describe,
    kafka_keys,
)

KAFKA = TARGET == "kafka"
# Set differently by the two fixtures (Kafka's is a KRaft combined node
# whose broker id is node.id).
FIXTURE_DEPENDENT = KSHARD_DEFAULTS | {
    "advertised.listeners",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "broker.id",
    "node.id",
    "process.roles",
    "controller.quorum.voters",
    "controller.listener.names",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "group.initial.rebalance.delay.ms",
}


STATIC = {
    "log.retention.minutes": "30",
    "log.roll.hours": "24",
    "num.network.threads": "4",
    "message.max.bytes": "2000000",
    "log.cleaner.min.cleanable.ratio": "0.25",
    "ssl.keystore.password": "secret",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
}
UNKNOWN_KEY = "custom.plugin.setting"
# Listener overrides: not Kafka keys, but typed as the key they override.
LISTENER_KEYS = {
    "listener.name.plaintext.ssl.keystore.location": "/nonexistent/ks.jks",
    "listener.name.plaintext.plain.sasl.jaas.config": "secret",
}


@pytest.fixture(scope="module")
def described(broker_module_factory):
    b = broker_module_factory(
        {**STATIC, **LISTENER_KEYS, UNKNOWN_KEY: "hello", "num.partitions": "1"}
    )
    return describe(b.port), b


def test_key_set_is_kafkas(described):
    configs, _ = described
    keys = kafka_keys()
    names = set(configs) - {UNKNOWN_KEY} - set(LISTENER_KEYS)
    if not KAFKA:
        assert KSHARD_ONLY <= names
        names -= KSHARD_ONLY
    assert sorted(set(keys) - names) == []
    assert sorted(names - set(keys)) == []


def test_defaults_field_by_field(described):
    configs, _ = described
    static = {**STATIC, "num.partitions": "1", "auto.create.topics.enable": "true", "log.dirs": ""}
    assert check_defaults(configs, FIXTURE_DEPENDENT | set(static)) > 280


def test_static_values_sources_and_synonyms(described):
    configs, b = described
    check_static(configs, {**STATIC, "log.dirs": b.log_dirs, "num.partitions": "1"})
    # Unset keys of a synonym group: null value, synonyms from the group
    # ranked below them only.
    ms = configs["log.retention.ms"]
    assert (ms["value"], ms["source"], ms["synonyms"]) == (None, SOURCE_DEFAULT, [])
    hours = configs["log.retention.hours"]
    assert (hours["value"], hours["source"]) == ("168", SOURCE_DEFAULT)
    assert hours["synonyms"] == [("log.retention.hours", "168", SOURCE_DEFAULT)]
    roll = configs["log.roll.ms"]
    assert (roll["value"], roll["source"], roll["synonyms"]) == (None, SOURCE_DEFAULT, [])


def test_unknown_key_is_sensitive(described):
    """Kafka cannot type a key it does not define, so it hides its value."""
    got = described[0][UNKNOWN_KEY]
    assert got == dict(
        value=None,
        read_only=True,
        source=SOURCE_STATIC,
        sensitive=True,
        synonyms=[(UNKNOWN_KEY, None, SOURCE_STATIC)],
        type=0,
        doc=None,
    )


def test_key_filter(described):
    _, b = described
    got = describe(b.port, ["log.segment.bytes", "no.such.key", "ssl.protocol"])
    assert sorted(got) == ["log.segment.bytes", "ssl.protocol"]
    assert got["ssl.protocol"]["value"] == "TLSv1.3"


def test_listener_overrides_take_their_base_type(described):
    configs = described[0]
    location = "listener.name.plaintext.ssl.keystore.location"
    assert configs[location] == dict(
        value="/nonexistent/ks.jks",
        read_only=True,
        source=SOURCE_STATIC,
        sensitive=False,
        synonyms=[(location, "/nonexistent/ks.jks", SOURCE_STATIC)],
        type=2,
        doc=None,
    )
    jaas = "listener.name.plaintext.plain.sasl.jaas.config"
    assert configs[jaas] == dict(
        value=None,
        read_only=True,
        source=SOURCE_STATIC,
        sensitive=True,
        synonyms=[(jaas, None, SOURCE_STATIC)],
        type=9,
        doc=None,
    )
