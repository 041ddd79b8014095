"""DescribeConfigs for a broker in ZooKeeper mode lists every Kafka 3.9.1
broker key with Kafka's value, source, sensitivity, read-only flag,
synonyms, type and documentation, field by field over raw DescribeConfigs v4
(the expectations are read from src/config/kafka_keys.rs, generated from
Kafka 3.9.1's jars; KSHARD_TEST_TARGET=kafka proves them against Kafka 3.9.1
in ZooKeeper mode). tests/compat/test_describe_configs.py does the same on a
single node."""

from describe_configs_util import (
    KSHARD_DEFAULTS,
    KSHARD_ONLY,
    check_defaults,
    check_static,
    describe,
    kafka_keys,
)

import cluster_util as cl

OVERRIDES = {
    "log.retention.ms": "3600000",
    "log.flush.scheduler.interval.ms": "5000",
    "unclean.leader.election.enable": "false",
    "min.insync.replicas": "1",
    "ssl.truststore.password": "secret",
}


def test_broker_configs_match_kafka(cluster):
    (b,) = cluster.start(1, OVERRIDES)
    configs = describe(b.port)
    names = set(configs)
    if cl.TARGET != "kafka":
        assert KSHARD_ONLY <= names
        names -= KSHARD_ONLY
    assert names == set(kafka_keys())
    # Kafka copies broker.id to node.id when only one is set
    # (KafkaConfig.populateSynonyms), so node.id reads as configured too.
    static = {**b.props, "node.id": b.props["broker.id"]}
    check_static(configs, static)
    assert check_defaults(configs, KSHARD_DEFAULTS | set(static)) > 280
    # Unset, with its lower-ranked synonym set: still null and DEFAULT.
    flush = configs["log.flush.interval.ms"]
    assert (flush["value"], flush["source"], flush["synonyms"]) == (None, 5, [])
