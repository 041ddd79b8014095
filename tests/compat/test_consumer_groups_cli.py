"""Kafka's own consumer-groups tool (ConsumerGroupCommand from the cached
Kafka 3.9.1 jars) against the broker: --list, --describe (offsets, log end,
lag, members, --state), --reset-offsets --to-earliest --execute (a consumer
then reads from 0 again) and --delete."""

import subprocess

import pytest
from confluent_kafka import Consumer, TopicPartition

import compat_util as cu
from conftest import kafka_classpath

TOPIC = "gcli"
GROUP = "gcli-group"
PER_PARTITION = {0: 10, 1: 20, 2: 30}
COMMIT = {0: 10, 1: 15, 2: 5}


@pytest.fixture(scope="module")
def gbroker(broker_module_factory):
    return broker_module_factory(cu.GROUP_BROKER_OVERRIDES)


def cli(b, *args, stderr=False):
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", kafka_classpath(),
           "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", b.bootstrap, *args]
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    out = r.stdout.decode()
    assert r.returncode == 0, f"{args} rc={r.returncode}\n{out}\n{r.stderr.decode()[-3000:]}"
    return (out, r.stderr.decode()) if stderr else out


def table(out, flat=False):
    """Rows of the tool's whitespace-aligned table as dicts by header. flat:
    the rows are not newline-separated (3.9.1 --reset-offsets prints them on
    the header's line), so the values are cut into header-sized rows."""
    lines = [ln.split() for ln in out.splitlines() if ln.strip()]
    hdr = next(i for i, ln in enumerate(lines) if ln[0] == "GROUP")
    if flat:
        cols = lines[hdr][:lines[hdr].index("NEW-OFFSET") + 1]
        vals = lines[hdr][len(cols):] + [v for ln in lines[hdr + 1:] for v in ln]
        assert len(vals) % len(cols) == 0, out
        return [dict(zip(cols, vals[i:i + len(cols)])) for i in range(0, len(vals), len(cols))]
    cols = lines[hdr]
    return [dict(zip(cols, ln)) for ln in lines[hdr + 1:] if len(ln) == len(cols)]


def state_row(out):
    """The --state table: GROUP, COORDINATOR (ID) as "host:port (id)", an
    ASSIGNMENT-STRATEGY that is blank for an empty group, STATE, #MEMBERS."""
    lines = [ln.split() for ln in out.splitlines() if ln.strip()]
    hdr = next(i for i, ln in enumerate(lines) if ln[:2] == ["GROUP", "COORDINATOR"])
    [row] = [ln for ln in lines[hdr + 1:] if ln[0] == GROUP]
    assert row[2].startswith("(") and len(row) in (5, 6), row
    return {"STATE": row[-2], "#MEMBERS": row[-1], "ASSIGNMENT-STRATEGY": row[3] if len(row) == 6 else ""}


def by_partition(rows):
    return {int(r["PARTITION"]): r for r in rows if r["TOPIC"] == TOPIC}


def group_consumer(b):
    return Consumer({"bootstrap.servers": b.bootstrap, "group.id": GROUP, "client.id": "cli-member",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": cu.GROUP_SESSION_TIMEOUT_MS,
                     "heartbeat.interval.ms": cu.GROUP_HEARTBEAT_MS})


def consume_all(c, total, timeout_s=60):
    """{partition: [offsets]} until total records were read."""
    import time

    got = {}
    n = 0
    deadline = time.monotonic() + timeout_s
    while n < total:
        assert time.monotonic() < deadline, f"read {n} of {total}: {got}"
        for m in c.consume(500, 0.5):
            assert m.error() is None, m.error()
            got.setdefault(m.partition(), []).append(m.offset())
            n += 1
    return got


def test_consumer_groups_cli(gbroker):
    b = gbroker
    cu.create_group_topic(b.bootstrap, TOPIC, len(PER_PARTITION))
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for part, n in PER_PARTITION.items():
        for i in range(n):
            p.produce(TOPIC, key=cu.rec_key(TOPIC, i), value=cu.rec_value(TOPIC, i), partition=part)
    assert p.flush(30) == 0
    total = sum(PER_PARTITION.values())

    c = group_consumer(b)
    c.subscribe([TOPIC])
    consume_all(c, total)
    c.commit(offsets=[TopicPartition(TOPIC, part, off) for part, off in COMMIT.items()], asynchronous=False)

    # While the member is active: offsets, log end, lag and the member.
    rows = by_partition(table(cli(b, "--describe", "--group", GROUP)))
    assert sorted(rows) == sorted(PER_PARTITION)
    for part, r in rows.items():
        assert r["GROUP"] == GROUP
        assert int(r["CURRENT-OFFSET"]) == COMMIT[part]
        assert int(r["LOG-END-OFFSET"]) == PER_PARTITION[part]
        assert int(r["LAG"]) == PER_PARTITION[part] - COMMIT[part]
        assert r["CLIENT-ID"] == "cli-member"
        assert r["CONSUMER-ID"].startswith("cli-member-")
        assert r["HOST"].lstrip("/") == "127.0.0.1"
    st = state_row(cli(b, "--describe", "--group", GROUP, "--state"))
    assert (st["STATE"], st["#MEMBERS"]) == ("Stable", "1")
    assert st["ASSIGNMENT-STRATEGY"] == "range"
    c.close()

    assert GROUP in cli(b, "--list").split()
    st = state_row(cli(b, "--describe", "--group", GROUP, "--state"))
    assert (st["STATE"], st["#MEMBERS"]) == ("Empty", "0")

    out = cli(b, "--reset-offsets", "--to-earliest", "--execute", "--group", GROUP, "--topic", TOPIC)
    reset = by_partition(table(out, flat=True))
    assert {part: int(r["NEW-OFFSET"]) for part, r in reset.items()} == {part: 0 for part in PER_PARTITION}, out
    out, err = cli(b, "--describe", "--group", GROUP, stderr=True)
    assert f"Consumer group '{GROUP}' has no active members." in err
    rows = by_partition(table(out))
    for part, r in rows.items():
        assert (int(r["CURRENT-OFFSET"]), int(r["LAG"])) == (0, PER_PARTITION[part])
        assert r["CONSUMER-ID"] == "-"

    # A member of the group reads everything again from offset 0.
    c = group_consumer(b)
    c.subscribe([TOPIC])
    got = consume_all(c, total)
    assert {part: offs for part, offs in got.items()} == {part: list(range(n)) for part, n in PER_PARTITION.items()}
    c.close()

    out = cli(b, "--delete", "--group", GROUP)
    assert f"Deletion of requested consumer groups ('{GROUP}') was successful." in out
    assert GROUP not in cli(b, "--list").split()
