"""A single broker whose only log dir fills up (issue 19): produce is
refused with KAFKA_STORAGE_ERROR (56), every acknowledged record is still
served to consumers, and after a restart with space again the broker
takes writes and still serves every acknowledged record.

Kafka differs here on purpose: a Kafka broker whose last log dir fails
halts ("Shutdown broker because all log dirs ... have failed"), so this
test runs against kshard only. The multi-broker case, where Kafka and
kshard agree, is tests/cluster/test_log_dir_failure.py."""

import os
import subprocess
import tempfile
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

import compat_util as cu
from conftest import TARGET

pytestmark = pytest.mark.skipif(
    TARGET == "kafka", reason="Kafka halts a broker whose only log dir fails; kshard keeps serving reads"
)

TOPIC = "full-disk"
TMPFS_MB = 6
KAFKA_STORAGE_ERROR = 56
VALUE = b"v" * 1000


def produce(port, batch_no, correlation_id):
    """One acks=all batch of 50 records; the partition's error code."""
    records = [(b"%d-%d" % (batch_no, i), VALUE, []) for i in range(50)]
    batch = cu.record_batch(records, int(time.time() * 1000))
    with cu.connect("127.0.0.1", port) as s:
        s.sendall(cu.produce_v3(correlation_id, TOPIC, 0, batch))
        _, parts = cu.parse_produce_v3_response(cu.recv_frame(s))
    return parts[(TOPIC, 0)]


def consume_keys(bootstrap, end_offset):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fd-{time.time()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    keys = []
    deadline = time.monotonic() + 60
    while len(keys) < end_offset and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is None or m.error():
            continue
        assert m.offset() == len(keys), (m.offset(), len(keys))
        keys.append(m.key())
    c.close()
    return keys


@pytest.fixture
def small_dir():
    path = tempfile.mkdtemp(prefix="kshard-full-disk-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MB}m", "tmpfs", path], check=True)
    yield path
    subprocess.run(["umount", "-l", path], check=False)
    os.rmdir(path)


def test_full_disk_refuses_produce_serves_reads_and_recovers(broker_factory, small_dir):
    b = broker_factory({"log.dirs": small_dir, "auto.create.topics.enable": "false"})
    cu.create_group_topic(b.bootstrap, TOPIC, 1)
    acked = []  # (batch number, base offset)
    batch_no = 0
    code = 0
    while batch_no < 1000:
        code, base = produce(b.port, batch_no, batch_no + 1)
        if code != 0:
            break
        acked.append((batch_no, base))
        batch_no += 1
    assert code == KAFKA_STORAGE_ERROR, f"the disk never filled after {batch_no} batches"
    assert acked and [base for _, base in acked] == [50 * i for i in range(len(acked))]
    # The log dir is offline now: no more writes, even small ones.
    assert produce(b.port, 10_000, 9_999)[0] == KAFKA_STORAGE_ERROR
    assert "Stopping serving logs in dir" in b.log_text()
    want = [b"%d-%d" % (n, i) for n, _ in acked for i in range(50)]
    assert consume_keys(b.bootstrap, len(want)) == want, "reads of acknowledged records go on"

    b.stop()
    subprocess.run(["mount", "-o", f"remount,size={TMPFS_MB * 4}m", small_dir], check=True)
    b.start()
    assert consume_keys(b.bootstrap, len(want)) == want, "every acknowledged record after the restart"
    code, base = produce(b.port, 20_000, 20_000)
    assert (code, base) == (0, len(want)), "writes again, right after the last acknowledged record"
