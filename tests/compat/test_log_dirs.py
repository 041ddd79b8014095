"""Several log directories (JBOD) on one broker, as Apache Kafka 3.9.1 keeps
them (proven with KSHARD_TEST_TARGET=kafka, whose node runs in KRaft mode;
a partition's directory is then still the broker's choice, since the
controller leaves it unassigned for a broker with two directories):

- a new partition goes to the directory holding the fewest, so the
  partitions spread evenly over both;
- `kafka-log-dirs --describe` (org.apache.kafka.tools.LogDirsCommand,
  DescribeLogDirs) lists each partition under the directory that holds it,
  with the size of its segment files, and no error and no lag;
- a restart keeps every partition in its directory and every record
  readable;
- each directory has its own meta.properties (one identity) and its own
  four checkpoint files, listing only its own partitions."""

import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from conftest import KAFKA_LIBS
from test_confluent import consume_all, create_topics

BROKER_ID = 1
TOPICS = {"ld-one": 1, "ld-five": 5, "ld-two": 2}
RECORDS_PER_PARTITION = 40
CHECKPOINT_FILES = [
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
    "replication-offset-checkpoint",
]
PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


def partitions_on_disk(dir_path):
    """{(topic, partition)} of the partition logs in one log dir (not the
    KRaft metadata log, nor deleted, future or stray ones)."""
    found = set()
    for entry in Path(dir_path).iterdir():
        m = PARTITION_DIR.match(entry.name)
        if entry.is_dir() and m and m.group(1) != "__cluster_metadata":
            found.add((m.group(1), int(m.group(2))))
    return found


def segment_bytes(partition_dir):
    return sum(f.stat().st_size for f in Path(partition_dir).glob("*.log"))


def log_dirs_describe(bootstrap, *args):
    """kafka-log-dirs --describe: the JSON line of its output, parsed."""
    if not KAFKA_LIBS.is_dir():
        pytest.fail(f"{KAFKA_LIBS} missing: run scripts/kafka-jars.sh")
    cmd = [
        "java",
        "-Xmx256m",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-cp",
        f"{KAFKA_LIBS}/*",
        "org.apache.kafka.tools.LogDirsCommand",
        "--bootstrap-server",
        bootstrap,
        "--describe",
        *args,
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"kafka-log-dirs exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, r.stdout
    return json.loads(lines[0])


class Jbod:
    def __init__(self, broker, dirs):
        self.broker = broker
        self.dirs = dirs

    def locations(self):
        """{(topic, partition): dir} over both dirs; a partition in two
        dirs fails."""
        where = {}
        for d in self.dirs:
            for tp in partitions_on_disk(d):
                assert tp not in where, f"{tp} in both {where[tp]} and {d}"
                where[tp] = d
        return where

    def test_partitions(self):
        return {tp: d for tp, d in self.locations().items() if tp[0] in TOPICS}


@pytest.fixture(scope="module")
def jbod(broker_module_factory):
    root = Path(tempfile.mkdtemp(prefix="compat-jbod-"))
    dirs = [str(root / "disk-a"), str(root / "disk-b")]
    b = broker_module_factory({"log.dirs": ",".join(dirs), "broker.id": str(BROKER_ID)})
    for name, partitions in TOPICS.items():
        create_topics(b.bootstrap, [name], partitions)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for name, partitions in TOPICS.items():
        for part in range(partitions):
            for i in range(RECORDS_PER_PARTITION):
                p.produce(name, key=f"k{i}".encode(), value=f"{name}/{part}/{i}".encode() * 8, partition=part)
    assert p.flush(60) == 0
    del p  # its reconnects across the restarts below are only noise
    yield Jbod(b, dirs)
    shutil.rmtree(root, ignore_errors=True)


def test_partitions_spread_evenly_over_the_dirs(jbod):
    where = jbod.locations()
    assert set(jbod.test_partitions()) == {(t, p) for t, n in TOPICS.items() for p in range(n)}
    counts = [sum(1 for d in where.values() if d == dir_path) for dir_path in jbod.dirs]
    assert abs(counts[0] - counts[1]) <= 1, f"partitions per dir {counts}: {sorted(where.items())}"
    print(f"partitions per dir: {dict(zip(jbod.dirs, counts))}")


def describe_matches_disk(jbod):
    """Every test partition listed under the dir holding it, with the bytes
    of its .log files (retried until the writes settle)."""
    deadline = time.monotonic() + 20
    while True:
        out = log_dirs_describe(jbod.broker.bootstrap, "--broker-list", str(BROKER_ID))
        (broker,) = out["brokers"]
        assert broker["broker"] == BROKER_ID
        by_dir = {d["logDir"]: d for d in broker["logDirs"]}
        assert sorted(by_dir) == sorted(jbod.dirs), by_dir.keys()
        listed = {}
        for d, info in by_dir.items():
            assert info["error"] is None, info
            for p in info["partitions"]:
                topic, part = p["partition"].rsplit("-", 1)
                assert (topic, int(part)) not in listed, f"{p['partition']} listed twice"
                listed[(topic, int(part))] = (d, p["size"])
                assert p["offsetLag"] == 0 and p["isFuture"] is False, p
        where = jbod.test_partitions()
        want = {tp: (d, segment_bytes(Path(d) / f"{tp[0]}-{tp[1]}")) for tp, d in where.items()}
        got = {tp: v for tp, v in listed.items() if tp[0] in TOPICS}
        if got == want or time.monotonic() > deadline:
            assert got == want
            assert all(size > 0 for _, size in got.values())
            return out
        time.sleep(0.5)


def test_kafka_log_dirs_describe_matches_the_files(jbod):
    out = describe_matches_disk(jbod)
    print(json.dumps(out)[:2000])


def test_restart_keeps_partitions_in_their_dirs_and_records_readable(jbod):
    before = jbod.test_partitions()
    jbod.broker.restart()
    assert jbod.test_partitions() == before
    for name, partitions in TOPICS.items():
        got = consume_all(jbod.broker.bootstrap, name, partitions)
        for part in range(partitions):
            values = [v for _, _, v, _, _ in got[part]]
            assert values == [f"{name}/{part}/{i}".encode() * 8 for i in range(RECORDS_PER_PARTITION)]
    describe_matches_disk(jbod)
    assert jbod.test_partitions() == before


def read_properties(path):
    props = {}
    for line in Path(path).read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            props[k] = v
    return props


def checkpoint_partitions(path):
    """The (topic, partition) entries of an offset checkpoint file."""
    lines = Path(path).read_text().splitlines()
    assert lines[0] == "0", lines
    entries = {(t, int(p)) for t, p, _ in (line.split(" ") for line in lines[2:])}
    assert len(entries) == int(lines[1])
    return entries


def test_each_dir_has_its_meta_properties_and_checkpoints(jbod):
    # A clean stop writes every dir's checkpoint files with its logs.
    jbod.broker.stop()
    try:
        where = jbod.test_partitions()
        metas = [read_properties(Path(d) / "meta.properties") for d in jbod.dirs]
        ids = {(m["cluster.id"], m.get("broker.id", m.get("node.id"))) for m in metas}
        assert len(ids) == 1, metas
        assert ids.pop()[1] == str(BROKER_ID)
        for d in jbod.dirs:
            for name in CHECKPOINT_FILES:
                assert (Path(d) / name).is_file(), f"{d}/{name} missing: {sorted(p.name for p in Path(d).iterdir())}"
            mine = {tp for tp, at in where.items() if at == d}
            listed = {tp for tp in checkpoint_partitions(Path(d) / "recovery-point-offset-checkpoint") if tp[0] in TOPICS}
            assert listed == mine, d
    finally:
        jbod.broker.start()
