"""Fetch size limits and min_bytes over raw Fetch v4 requests, and a
librdkafka consumer with a small fetch.max.bytes. Every assertion is Apache
Kafka 3.9's behaviour (the suite is proven against it):

- max_bytes is capped by the broker's fetch.max.bytes; the first partition
  with data may exceed max_bytes and partition_max_bytes only by its first
  batch, later partitions get only what the limit leaves.
- Kafka fills a limit with part of a batch too (a partial batch at the end
  of a partition's records, which clients drop); kshard sends whole batches
  only, so the tests compare whole batches and bound the bytes.
- A partition named twice in one request is answered once, where it first
  appears, from the fetch offset it was given last.
- A fetch waits until min_bytes are readable across all its partitions, or
  max_wait_ms passes; min_bytes 0 answers at once.
"""

import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

import compat_util as cu
from conftest import TARGET
from test_confluent import create_topics

NONE = 0


# kshard runs the module in both log.io.modes: direct mode serves fetches
# from its tail cache (memory) and read cache (DMA reads).
IO_MODES = ["buffered", "direct"] if TARGET == "kshard" else ["kafka"]


@pytest.fixture(scope="module", params=IO_MODES)
def fbroker(request, broker_module_factory):
    # Several shards, so the limits are applied across shards too.
    overrides = {}
    if TARGET == "kshard":
        overrides = {"num.shards": "4", "log.io.mode": request.param}
    b = broker_module_factory(overrides)
    create_topics(b.bootstrap, ["big", "steps", "mixed", "dup", "waits"], partitions=4)
    return b


def conn(b):
    host, port = b.bootstrap.split(":")
    return cu.connect(host, int(port), timeout_s=30.0)


_corr = [1000]


def next_corr():
    _corr[0] += 1
    return _corr[0]


def produce(b, topic, partition, value_sizes):
    """One batch of one record per value size; returns the batch sizes."""
    sizes = []
    with conn(b) as s:
        for n in value_sizes:
            batch = cu.record_batch([(None, b"v" * n, [])], int(time.time() * 1000))
            corr = next_corr()
            s.sendall(cu.produce_v3(corr, topic, partition, batch, acks=1))
            got, res = cu.parse_produce_v3_response(cu.recv_frame(s))
            assert got == corr
            assert res[(topic, partition)][0] == NONE, res
            sizes.append(len(batch))
    return sizes


def fetch(b, partitions, max_bytes, min_bytes=1, max_wait_ms=0, sock=None):
    """Fetch v4; returns ({(topic, partition): (error, hw, records)} in
    response order as a list, elapsed seconds, response frame bytes)."""
    corr = next_corr()
    req = cu.fetch_v4_request(corr, partitions, max_bytes, min_bytes, max_wait_ms)
    own = sock is None
    s = sock or conn(b)
    try:
        start = time.monotonic()
        s.sendall(req)
        payload = cu.recv_frame(s)
        elapsed = time.monotonic() - start
    finally:
        if own:
            s.close()
    got, parts = cu.parse_fetch_v4_response(payload)
    assert got == corr
    return parts, elapsed, len(payload) + 4


def only(parts, topic, partition):
    found = [p for p in parts if p[0] == topic and p[1] == partition]
    assert len(found) == 1, f"{topic}-{partition} answered {len(found)} times"
    return found[0]


MIB = 1024 * 1024
I32_MAX = 2**31 - 1


@pytest.fixture(scope="module")
def big(fbroker):
    """big-0 holds 8 MiB in 8 batches just under message.max.bytes."""
    return produce(fbroker, "big", 0, [MIB - 200] * 8)


def test_partition_listed_4256_times_max_bytes_i32_max(fbroker, big):
    # The request that aborted kshard (i32 overflow assert in the encoder).
    parts, elapsed, _ = fetch(fbroker, [("big", 0, 0, I32_MAX)] * 4256, I32_MAX)
    assert len(parts) == 1, f"{len(parts)} partitions answered"
    _, _, err, hw, records = parts[0]
    assert (err, hw) == (NONE, 8)
    assert [s for _, s in cu.complete_batches(records)] == big
    assert len(records) == sum(big)
    assert elapsed < 10
    # The broker still serves.
    parts, _, _ = fetch(fbroker, [("big", 0, 7, MIB)], MIB)
    assert [o for o, _ in cu.complete_batches(parts[0][4])] == [7]


def test_duplicate_partition_answered_once_with_last_offset(fbroker, big):
    # big-0 at 0, big-1 (empty) at 0, big-0 again at 5: one answer for
    # big-0, first in the response, read from offset 5.
    req = [("big", 0, 0, 10 * MIB), ("big", 1, 0, 10 * MIB), ("big", 0, 5, 10 * MIB)]
    parts, _, _ = fetch(fbroker, req, 50 * MIB)
    assert [(t, p) for t, p, *_ in parts] == [("big", 0), ("big", 1)]
    assert [o for o, _ in cu.complete_batches(parts[0][4])] == [5, 6, 7]
    assert parts[1][4] == b""


def test_fetch_max_bytes_caps_max_bytes_and_min_bytes(broker_factory):
    b = broker_factory({"fetch.max.bytes": "300000"})
    create_topics(b.bootstrap, ["capped"], partitions=1)
    produce(b, "capped", 0, [100_000] * 10)
    # max_bytes and the partition limit at i32::MAX: 300,000 bytes (Kafka:
    # 2 whole batches and part of a third); min_bytes over the cap is
    # capped too, so 1 MB readable answers at once.
    parts, elapsed, size = fetch(b, [("capped", 0, 0, I32_MAX)], I32_MAX, I32_MAX, 5000)
    assert elapsed < 1.5, elapsed
    assert len(cu.complete_batches(parts[0][4])) == 2
    assert size <= 300_000 + 512


def test_first_partition_exceeds_max_bytes_by_first_batch_only(fbroker):
    # The librdkafka case: max_bytes 1,000,000, partition limit 20,000,000.
    sizes = produce(fbroker, "steps", 0, [100_000] * 30)
    parts, _, size = fetch(fbroker, [("steps", 0, 0, 20_000_000)], 1_000_000)
    err, records = parts[0][2], parts[0][4]
    whole = cu.complete_batches(records)
    assert err == NONE
    assert len(whole) == 1_000_000 // sizes[0] == 9
    assert len(records) <= 1_000_000 and size <= 1_000_000 + 512
    # A first batch larger than max_bytes comes whole, and alone.
    big_first = produce(fbroker, "steps", 1, [900_000, 1_000, 1_000])
    parts, _, _ = fetch(fbroker, [("steps", 1, 0, 20_000_000)], 100_000)
    assert [s for _, s in cu.complete_batches(parts[0][4])] == big_first[:1]
    assert len(parts[0][4]) == big_first[0]


def test_later_partitions_get_only_what_is_left(fbroker):
    big_first = produce(fbroker, "mixed", 0, [900_000])
    small = produce(fbroker, "mixed", 1, [1_000] * 50)
    produce(fbroker, "mixed", 2, [100_000] * 5)
    # mixed-0's first batch passes max_bytes: nothing is left for mixed-1.
    parts, _, _ = fetch(fbroker, [("mixed", 0, 0, MIB), ("mixed", 1, 0, MIB)], 100_000)
    assert [s for _, s in cu.complete_batches(only(parts, "mixed", 0)[4])] == big_first
    assert only(parts, "mixed", 1)[4] == b""
    # mixed-1 first: it takes what fits; mixed-0's batch is then over the
    # rest and only the first partition with data may exceed it.
    parts, _, _ = fetch(fbroker, [("mixed", 1, 0, MIB), ("mixed", 0, 0, MIB)], 100_000)
    assert len(cu.complete_batches(only(parts, "mixed", 1)[4])) == 50
    assert cu.complete_batches(only(parts, "mixed", 0)[4]) == []
    assert len(only(parts, "mixed", 0)[4]) <= 100_000 - sum(small)
    # mixed-2 fills 250,000 bytes (Kafka: 2 whole batches and part of a
    # third): nothing is left for mixed-1's 1 KB batches.
    parts, _, _ = fetch(fbroker, [("mixed", 2, 0, MIB), ("mixed", 1, 0, MIB)], 250_000)
    assert len(cu.complete_batches(only(parts, "mixed", 2)[4])) == 2
    assert only(parts, "mixed", 1)[4] == b""


def test_partition_max_bytes(fbroker):
    produce(fbroker, "mixed", 3, [100_000] * 5)
    req = [("mixed", 2, 0, 250_000), ("mixed", 3, 0, 250_000)]
    parts, _, _ = fetch(fbroker, req, 10 * MIB)
    for p in (2, 3):
        assert len(cu.complete_batches(only(parts, "mixed", p)[4])) == 2
    # Below one batch: the first partition still gets its first batch,
    # the next none.
    req = [("mixed", 2, 0, 50_000), ("mixed", 3, 0, 50_000)]
    parts, _, _ = fetch(fbroker, req, 10 * MIB)
    assert len(cu.complete_batches(only(parts, "mixed", 2)[4])) == 1
    assert cu.complete_batches(only(parts, "mixed", 3)[4]) == []


def test_min_bytes_waits_for_max_wait(fbroker):
    produce(fbroker, "waits", 0, [80])
    parts, elapsed, _ = fetch(fbroker, [("waits", 0, 0, MIB)], 50 * MIB, 10 * MIB, 3000)
    assert 2.8 <= elapsed < 6, elapsed
    assert len(cu.complete_batches(parts[0][4])) == 1


def test_min_bytes_zero_answers_at_once(fbroker):
    produce(fbroker, "waits", 1, [80])
    parts, elapsed, _ = fetch(fbroker, [("waits", 1, 1, MIB)], MIB, 0, 5000)
    assert elapsed < 1.5, elapsed
    assert parts[0][2:4] == (NONE, 1)


def test_min_bytes_summed_over_partitions(fbroker):
    # Readable at once on three partitions together, not on any alone.
    sizes = [produce(fbroker, "waits", p, [400])[0] for p in (2, 3)]
    req = [("waits", 1, 1, MIB), ("waits", 2, 0, MIB), ("waits", 3, 0, MIB)]
    parts, elapsed, _ = fetch(fbroker, req, MIB, sum(sizes), 5000)
    assert elapsed < 1.5, elapsed
    # Nothing readable: the answer comes once three 400-byte batches
    # arrived on different partitions (0.5 s apart), long before max wait.
    req = [("waits", 0, 1, MIB), ("waits", 2, 1, MIB), ("waits", 3, 1, MIB)]
    arrivals = []

    def producer():
        for p in (0, 2, 3):
            time.sleep(0.5)
            arrivals.append(time.monotonic())
            produce(fbroker, "waits", p, [400])

    t = threading.Thread(target=producer)
    start = time.monotonic()
    t.start()
    parts, _, _ = fetch(fbroker, req, MIB, 2 * sizes[0] + 1, 10_000)
    done = time.monotonic()
    t.join()
    assert len(arrivals) == 3 and done >= arrivals[2], (start, arrivals, done)
    assert done - start < 5, done - start
    assert sum(len(cu.complete_batches(p[4])) for p in parts) == 3


def test_librdkafka_small_fetch_max_bytes_does_not_reconnect(fbroker):
    # The consumer: librdkafka rejects a response over
    # receive.message.max.bytes and reconnects forever.
    produce(fbroker, "steps", 2, [100_000] * 30)
    errors = []
    c = Consumer(
        {
            "bootstrap.servers": fbroker.bootstrap,
            "group.id": "fetch-limits",
            "fetch.max.bytes": 1_000_000,
            "receive.message.max.bytes": 1_000_512,
            "max.partition.fetch.bytes": 20_000_000,
            "enable.auto.commit": False,
            "error_cb": lambda e: errors.append(str(e)),
        }
    )
    try:
        c.assign([TopicPartition("steps", 2, 0)])
        got = 0
        deadline = time.monotonic() + 30
        while got < 30 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        assert got == 30 and not errors, (got, errors)
    finally:
        c.close()
