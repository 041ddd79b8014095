"""DescribeConfigs helpers shared by tests/compat/test_describe_configs.py
(single node) and tests/cluster/test_describe_configs_zk.py (ZooKeeper
mode): raw DescribeConfigs v4 for a broker, and the expectations read from
src/config/kafka_keys.rs (generated from Kafka 3.9.1's jars by
scripts/GenKafkaBrokerKeys.java)."""

import re
from pathlib import Path

import compat_util as cu

REPO = Path(__file__).resolve().parents[2]
DESCRIBE_CONFIGS = 32
RESOURCE_BROKER = 4
SOURCE_STATIC = 4
SOURCE_DEFAULT = 5
TYPE_CODES = {
    "Boolean": 1,
    "String": 2,
    "Int": 3,
    "Short": 4,
    "Long": 5,
    "Double": 6,
    "List": 7,
    "Class": 8,
    "Password": 9,
}
# kshard's own keys (documented in the README), listed besides Kafka's.
KSHARD_ONLY = {"num.shards", "log.io.mode", "log.io.offload.writes", "shard.core.offset", "shard.core.pinning", "shard.stall.threshold.ms"}
# Defaulted differently by kshard on purpose (listeners on 127.0.0.1,
# log.dir ./data; see src/config/mod.rs).
KSHARD_DEFAULTS = {"listeners", "log.dir"}
# DynamicBrokerConfig.brokerConfigSynonyms.
SYNONYMS = {
    "log.roll.ms": ["log.roll.ms", "log.roll.hours"],
    "log.roll.hours": ["log.roll.ms", "log.roll.hours"],
    "log.roll.jitter.ms": ["log.roll.jitter.ms", "log.roll.jitter.hours"],
    "log.roll.jitter.hours": ["log.roll.jitter.ms", "log.roll.jitter.hours"],
    "log.flush.interval.ms": ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
    "log.retention.ms": ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
    "log.retention.minutes": ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
    "log.retention.hours": ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
}

_LIT = r'"((?:[^"\\]|\\.)*)"'
_DEF = re.compile(
    r'^\s*def\(' + _LIT + r', T::(\w+), (None|Some\(' + _LIT + r'\)), V::.*?, (true|false), '
    + _LIT + r'\),$'
)


def _unescape(s):
    return re.sub(r'\\(.)', lambda m: {"n": "\n", "r": "\r", "t": "\t"}.get(m.group(1), m.group(1)), s)


def kafka_keys():
    """name -> (type, default or None, dynamic, documentation)."""
    keys = {}
    for line in (REPO / "src/config/kafka_keys.rs").read_text().splitlines():
        m = _DEF.match(line)
        if m:
            name, typ, _, default, dynamic, doc = m.groups()
            keys[_unescape(name)] = (
                typ,
                None if default is None else _unescape(default),
                dynamic == "true",
                _unescape(doc),
            )
    assert len(keys) > 300, "could not read src/config/kafka_keys.rs"
    return keys


def describe_broker_request(correlation_id, broker_id, keys=None):
    body = cu.uvarint(2) + cu.i8(RESOURCE_BROKER) + cu.compact_string(str(broker_id))
    if keys is None:
        body += cu.uvarint(0)
    else:
        body += cu.uvarint(len(keys) + 1) + b"".join(cu.compact_string(k) for k in keys)
    body += cu.uvarint(0)  # resource tags
    body += cu.i8(1) + cu.i8(1) + cu.uvarint(0)  # synonyms, documentation, tags
    return cu.frame(cu.request_header_v2(DESCRIBE_CONFIGS, 4, correlation_id) + body)


def parse_describe_response(payload):
    r = cu.Reader(payload)
    r.i32()
    r.skip_tags()
    r.i32()  # throttle
    results = []
    for _ in range(r.uvarint() - 1):
        error, message = r.i16(), r.compact_string()
        r.i8()
        r.compact_string()
        configs = {}
        for _ in range(r.uvarint() - 1):
            name, value = r.compact_string(), r.compact_string()
            read_only, source, sensitive = r.i8() == 1, r.i8(), r.i8() == 1
            synonyms = []
            for _ in range(r.uvarint() - 1):
                synonyms.append((r.compact_string(), r.compact_string(), r.i8()))
                r.skip_tags()
            config_type, doc = r.i8(), r.compact_string()
            r.skip_tags()
            configs[name] = dict(
                value=value,
                read_only=read_only,
                source=source,
                sensitive=sensitive,
                synonyms=synonyms,
                type=config_type,
                doc=doc,
            )
        r.skip_tags()
        results.append((error, message, configs))
    return results


def broker_id(port):
    s = cu.connect("127.0.0.1", port)
    try:
        s.sendall(cu.metadata_v1_request(1))
        brokers = cu.parse_metadata_v1_brokers(cu.recv_frame(s))
    finally:
        s.close()
    return [n for n, _, p in brokers if p == port][0]


def describe(port, keys=None):
    """{name: fields} of DescribeConfigs v4 for the broker on `port`."""
    s = cu.connect("127.0.0.1", port)
    try:
        s.sendall(describe_broker_request(7, broker_id(port), keys))
        results = parse_describe_response(cu.recv_frame(s))
    finally:
        s.close()
    assert len(results) == 1
    error, message, configs = results[0]
    # Kafka leaves ErrorMessage at its schema default, "", on success.
    assert (error, message) == (0, "")
    return configs


def expected_synonyms(name, keys, static):
    """ConfigHelper.configSynonyms for a broker with only static configs."""
    names = SYNONYMS.get(name, [name])
    out = [(n, static[n], SOURCE_STATIC) for n in names if n in static]
    out += [(n, keys[n][1], SOURCE_DEFAULT) for n in names if keys[n][1] is not None]
    while out and out[0][0] != name:
        out.pop(0)
    if keys[name][0] == "Password":
        out = [(n, None, s) for n, _, s in out]
    return out




def check_defaults(configs, skip):
    """Every Kafka key not in `skip` (nor in a synonym group with a key in
    `skip`) has Kafka's default, source, flags, synonyms, type and doc.
    Returns how many keys were compared."""
    keys = kafka_keys()
    checked = 0
    for name, (typ, default, dynamic, doc) in sorted(keys.items()):
        if name in skip or any(s in skip for s in SYNONYMS.get(name, [])):
            continue
        sensitive = typ == "Password"
        expected = dict(
            value=None if sensitive else default,
            read_only=not dynamic,
            source=SOURCE_DEFAULT,
            sensitive=sensitive,
            synonyms=expected_synonyms(name, keys, {}),
            type=TYPE_CODES[typ],
            doc=doc,
        )
        assert configs[name] == expected, (name, configs[name], expected)
        checked += 1
    return checked


def check_static(configs, static):
    """Keys set in the file or by --override: the value as set (null for
    passwords), source STATIC_BROKER_CONFIG and Kafka's synonym list (whose
    DEFAULT_CONFIG entry is kshard's own default for KSHARD_DEFAULTS)."""
    keys = kafka_keys()
    for name, value in static.items():
        got = configs[name]
        sensitive = keys[name][0] == "Password"
        assert got["value"] == (None if sensitive else value), name
        assert got["source"] == SOURCE_STATIC, name
        assert got["sensitive"] == sensitive, name
        synonyms = got["synonyms"]
        if name in KSHARD_DEFAULTS and synonyms[-1][2] == SOURCE_DEFAULT:
            synonyms = synonyms[:-1] + [(name, keys[name][1], SOURCE_DEFAULT)]
        assert synonyms == expected_synonyms(name, keys, static), (name, got["synonyms"])
