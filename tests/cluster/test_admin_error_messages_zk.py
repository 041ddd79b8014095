"""Error messages of topic admin answers read as Kafka 3.9.1's in ZooKeeper
mode (the mode kshard's ApiVersions and admin answers follow), through
librdkafka's AdminClient, which hands the broker's message to the caller:
topic names (Kafka's Topic.validate), partition and replication counts,
and topic configs (ConfigException's "Invalid value V for configuration
K: reason", an unknown key's InvalidConfigurationException text alone)."""

import time

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

LONG_NAME = "x" * 250

# (case, (error name, message)); a message None is the client's own text for
# an answer that carries no message.
EXPECTED = {
    "exists": ("TOPIC_ALREADY_EXISTS", "Topic 'em-a' already exists."),
    "zero_partitions": ("INVALID_PARTITIONS", "Number of partitions must be larger than 0."),
    "rf_above_brokers": ("INVALID_REPLICATION_FACTOR", "Replication factor: 3 larger than available brokers: 1."),
    "rf_zero": ("INVALID_REPLICATION_FACTOR", "Replication factor must be larger than 0."),
    "bad_name": (
        "TOPIC_EXCEPTION",
        "Topic name is invalid: 'bad name!' contains one or more characters other than "
        "ASCII alphanumerics, '.', '_' and '-'",
    ),
    "dots": ("TOPIC_EXCEPTION", "Topic name is invalid: '..' is not allowed"),
    "long_name": (
        "TOPIC_EXCEPTION",
        f"Topic name is invalid: the length of '{LONG_NAME}' is longer than the max allowed length 249",
    ),
    "bad_list_item": (
        "INVALID_CONFIG",
        "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete",
    ),
    "bad_long": ("INVALID_CONFIG", "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    "unknown_key": ("INVALID_CONFIG", "Unknown topic config name: foo.bar"),
    "fewer_partitions": (
        "INVALID_PARTITIONS",
        "Topic currently has 3 partitions, which is higher than the requested 2.",
    ),
    "same_partitions": ("INVALID_PARTITIONS", "Topic already has 3 partitions."),
    "partitions_unknown_topic": ("UNKNOWN_TOPIC_OR_PART", "The topic 'em-zz' does not exist."),
    "delete_unknown_topic": ("UNKNOWN_TOPIC_OR_PART", None),
    "describe_unknown_topic": ("UNKNOWN_TOPIC_OR_PART", None),
}


def outcome(future):
    try:
        future.result(30)
    except Exception as e:  # KafkaException carrying a KafkaError
        k = e.args[0]
        return k.name(), k.str()
    return "OK", None


def create(admin, name, partitions=1, rf=1, config=None):
    return admin.create_topics([NewTopic(name, partitions, rf, config=config or {})])[name]


def test_admin_error_messages_match_kafka(cluster):
    cluster.start(1)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    create(admin, "em-a", partitions=3).result(30)
    time.sleep(2)  # the topic's leader is elected
    cases = {
        "exists": lambda: create(admin, "em-a"),
        "zero_partitions": lambda: create(admin, "em-b", partitions=0),
        "rf_above_brokers": lambda: create(admin, "em-c", rf=3),
        "rf_zero": lambda: create(admin, "em-c", rf=0),
        "bad_name": lambda: create(admin, "bad name!"),
        "dots": lambda: create(admin, ".."),
        "long_name": lambda: create(admin, LONG_NAME),
        "bad_list_item": lambda: create(admin, "em-d", config={"cleanup.policy": "delete,bogus"}),
        "bad_long": lambda: create(admin, "em-d", config={"retention.ms": "abc"}),
        "unknown_key": lambda: create(admin, "em-d", config={"foo.bar": "1"}),
        "fewer_partitions": lambda: admin.create_partitions([NewPartitions("em-a", 2)])["em-a"],
        "same_partitions": lambda: admin.create_partitions([NewPartitions("em-a", 3)])["em-a"],
        "partitions_unknown_topic": lambda: admin.create_partitions([NewPartitions("em-zz", 4)])["em-zz"],
        "delete_unknown_topic": lambda: admin.delete_topics(["em-zz"])["em-zz"],
        "describe_unknown_topic": lambda: list(admin.describe_configs([ConfigResource("topic", "em-zz")]).values())[0],
    }
    got = {name: outcome(run()) for name, run in cases.items()}
    mismatches = {}
    for name, (code, message) in EXPECTED.items():
        got_code, got_message = got[name]
        # librdkafka fills in its own text when the answer has no message.
        if got_code != code or (message is not None and got_message != message) or (
            message is None and not got_message.startswith("Broker: ")
        ):
            mismatches[name] = (got_code, got_message)
    if mismatches:
        pytest.fail("\n".join(f"{n}: got {g!r}, Kafka: {EXPECTED[n]!r}" for n, g in mismatches.items()))
