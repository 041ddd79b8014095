"""Restart durability: a clean SIGTERM restart keeps every record; with
log.flush.interval.messages=1 (acked means on disk) kill -9 during a running
producer loses no acknowledged record, over several kill/restart cycles."""

import threading
import time

from confluent_kafka import Producer

import compat_util as cu
from test_confluent import consume_all, create_topics

CYCLES = 5


def test_sigterm_restart_keeps_everything(broker_factory):
    b = broker_factory()
    t = "dur-clean"
    create_topics(b.bootstrap, [t], partitions=2)
    n = 5000
    acked = {}
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "compression.type": "lz4", "linger.ms": 2})
    for i in range(n):
        p.produce(t, key=cu.rec_key(t, i), value=cu.rec_value(t, i), headers=cu.rec_headers(t, i),
                  partition=i % 2, on_delivery=lambda e, m, i=i: acked.__setitem__(i, (e, m.offset())))
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert all(e is None for e, _ in acked.values()) and len(acked) == n
    b.stop()
    b.start()
    got = consume_all(b.bootstrap, t, partitions=2)
    for part in range(2):
        cu.verify_partition_records(got[part], t, list(range(part, n, 2)), acked={i: o for i, (_, o) in acked.items()})


class BackgroundProducer:
    """Produces unique records until stopped; remembers what was acked."""

    def __init__(self, bootstrap, topic, cycle):
        self.topic = topic
        self.cycle = cycle
        self.acked = {}  # key -> (partition, offset, value)
        self.failed = 0
        self.sent = 0
        self.stop_flag = threading.Event()
        self.p = Producer({
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 1,
            "message.timeout.ms": 20000,
            "enable.idempotence": False,
        })
        self.thread = threading.Thread(target=self.run, daemon=True)

    def on_delivery(self, err, msg):
        if err is None:
            self.acked[msg.key()] = (msg.partition(), msg.offset(), msg.value())
        else:
            self.failed += 1

    def run(self):
        tag = f"{self.topic}-c{self.cycle}"
        while not self.stop_flag.is_set():
            i = self.sent
            try:
                self.p.produce(self.topic, key=cu.rec_key(tag, i), value=cu.rec_value(tag, i),
                               partition=i % 2, on_delivery=self.on_delivery)
                self.sent += 1
            except BufferError:
                pass
            # Bounded rate (about 10k/s) and count, so cycles stay short.
            self.p.poll(0.001 if i % 10 == 0 else 0)
            if self.sent >= 20_000:
                break

    def finish(self):
        self.stop_flag.set()
        self.thread.join(30)
        self.p.flush(40)


def test_kill9_loses_no_acknowledged_record(broker_factory):
    b = broker_factory({"log.flush.interval.messages": "1"})
    t = "dur-kill"
    create_topics(b.bootstrap, [t], partitions=2)
    all_acked = {}
    for cycle in range(CYCLES):
        bp = BackgroundProducer(b.bootstrap, t, cycle)
        bp.thread.start()
        time.sleep(1.5)
        b.kill9()
        # The producer keeps queueing while the broker is down.
        time.sleep(0.5)
        b.start()
        time.sleep(1.0)
        bp.finish()
        assert bp.acked, f"cycle {cycle}: nothing acked"
        all_acked.update(bp.acked)
        got = consume_all(b.bootstrap, t, partitions=2, timeout_s=120)
        at = {}
        for part, rows in got.items():
            for off, key, value, _h, _ts in rows:
                at[(part, off)] = (key, value)
        missing = [k for k, (part, off, v) in all_acked.items() if at.get((part, off)) != (k, v)]
        assert not missing, f"cycle {cycle}: {len(missing)} acked records missing, e.g. {missing[:3]}"
        for part, rows in got.items():
            assert [r[0] for r in rows] == list(range(len(rows))), "offsets must stay dense"
