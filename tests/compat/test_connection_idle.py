"""`connections.max.idle.ms`: the broker closes a connection that has sent
nothing for that long (Kafka's Selector expires idle channels), whether it
sits between requests or stopped in the middle of one, and keeps open a
connection whose bytes keep coming, however long one request takes to
arrive.

The last case guards kshard's plaintext read path, which receives a
request's body straight into its buffer: the idle timer must restart with
every read that brings bytes, not run from the first wait of the request.
"""

import time

import compat_util as cu

IDLE_MS = 1500


def served(broker):
    host, port = broker.bootstrap.split(":")
    sock = cu.connect(host, int(port))
    sock.sendall(cu.api_versions_v3_request(1))
    cu.recv_frame(sock)
    return sock


def produce_request(correlation_id, topic, value_bytes):
    batch = cu.record_batch([(b"k", b"v" * value_bytes, [])], int(time.time() * 1000))
    return cu.produce_v3(correlation_id, topic, 0, batch, acks=1)


def assert_closed_after_idle(sock, started):
    closed, _ = cu.wait_closed(sock, timeout_s=IDLE_MS / 1000 + 15)
    waited_s = time.monotonic() - started
    assert closed, f"still open {waited_s:.1f} s after the last byte"
    assert waited_s >= IDLE_MS / 1000 * 0.9, f"closed after {waited_s:.2f} s, before the idle time"


def test_a_connection_idle_between_requests_is_closed(broker_factory):
    b = broker_factory({"connections.max.idle.ms": str(IDLE_MS)})
    sock = served(b)
    try:
        assert_closed_after_idle(sock, time.monotonic())
    finally:
        sock.close()


def test_a_connection_stopped_inside_a_request_is_closed(broker_factory):
    b = broker_factory({"connections.max.idle.ms": str(IDLE_MS)})
    sock = served(b)
    try:
        request = produce_request(2, "idle-half", 300_000)
        sock.sendall(request[: len(request) // 2])
        assert_closed_after_idle(sock, time.monotonic())
    finally:
        sock.close()


def test_a_request_that_keeps_arriving_is_answered(broker_factory):
    b = broker_factory({"connections.max.idle.ms": str(IDLE_MS)})
    cu.create_group_topic(b.bootstrap, "idle-slow", 1)
    sock = served(b)
    try:
        # The partition's leader may need a moment after creation.
        for attempt in range(50):
            sock.sendall(produce_request(10 + attempt, "idle-slow", 10))
            _, parts = cu.parse_produce_v3_response(cu.recv_frame(sock))
            if parts[("idle-slow", 0)][0] == 0:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"produce to idle-slow never succeeded: {parts}")
        # One request of 900 KB sent in 64 pieces, one every 70 ms: 4.5 s in
        # all, three times the idle time, no gap longer than a twentieth.
        request = produce_request(100, "idle-slow", 900_000)
        piece = len(request) // 64 + 1
        for start in range(0, len(request), piece):
            sock.sendall(request[start:start + piece])
            time.sleep(0.07)
        sock.settimeout(30)
        corr, parts = cu.parse_produce_v3_response(cu.recv_frame(sock))
        assert corr == 100 and parts[("idle-slow", 0)][0] == 0, parts
        # Requests every 500 ms for three idle times: the connection stays.
        deadline = time.monotonic() + 3 * IDLE_MS / 1000
        n = 0
        while True:
            sock.sendall(cu.api_versions_v3_request(200 + n))
            cu.recv_frame(sock)
            last_answer = time.monotonic()
            n += 1
            if last_answer > deadline:
                break
            time.sleep(0.5)
        assert_closed_after_idle(sock, last_answer)
    finally:
        sock.close()
