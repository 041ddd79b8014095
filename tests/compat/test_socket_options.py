"""The listener socket settings a Kafka operator sets in server.properties
take effect: `socket.receive.buffer.bytes` (SO_RCVBUF of the listening
socket, inherited by each connection), `socket.send.buffer.bytes`
(SO_SNDBUF of each accepted connection), `socket.listen.backlog.size`
(the listen backlog), and the keep-alive Kafka turns on for every
connection. -1 leaves the kernel's buffers and their autotuning.

Observed from outside with `ss` (iproute2, installed by scripts/setup.sh),
on the broker's end of a connection that has just answered an ApiVersions
request: Linux reports twice the size asked for (its bookkeeping share) as
`rb`/`tb`, the keep-alive as a `keepalive` timer, and a listening socket's
backlog in the Send-Q column. kshard binds the port once per shard, so every listening
socket on the port is checked.
"""

import re
import subprocess

import compat_util as cu


def ss(*args):
    out = subprocess.run(["ss", *args], capture_output=True, text=True, timeout=30, check=True)
    return out.stdout


def served_connection(broker):
    """A raw connection the broker has answered an ApiVersions request on."""
    host, port = broker.bootstrap.split(":")
    sock = cu.connect(host, int(port))
    sock.sendall(cu.api_versions_v3_request(1))
    cu.recv_frame(sock)
    return sock, int(port)


def broker_side(port, client_port):
    """(rb, tb, keep-alive on) of the broker's end of the connection from
    `client_port`."""
    out = ss("-tmnoH", "state", "established", f"( sport = :{port} and dport = :{client_port} )")
    rb = re.search(r"\brb(\d+)", out)
    tb = re.search(r"\btb(\d+)", out)
    assert rb and tb, f"ss shows no such connection: {out!r}"
    return int(rb.group(1)), int(tb.group(1)), "keepalive" in out


def listen_backlogs(port):
    lines = [line.split() for line in ss("-ltnH", f"( sport = :{port} )").splitlines() if line.strip()]
    assert lines, f"nothing listens on {port}"
    # State, Recv-Q, Send-Q (the backlog), local address, peer address.
    return {int(fields[2]) for fields in lines}


def check_broker(broker, want_backlog):
    """(rb, tb) of a served connection; its keep-alive and the backlog checked."""
    sock, port = served_connection(broker)
    try:
        rb, tb, keepalive = broker_side(port, sock.getsockname()[1])
    finally:
        sock.close()
    assert keepalive, "the broker's end of the connection has no keep-alive"
    assert listen_backlogs(port) == {want_backlog}
    return rb, tb


def test_kafkas_defaults_apply(broker):
    # socket.receive.buffer.bytes and socket.send.buffer.bytes default to
    # 102400, socket.listen.backlog.size to 50.
    rb, tb = check_broker(broker, 50)
    assert (rb, tb) == (204800, 204800)


def test_configured_sizes_apply(broker_factory):
    b = broker_factory({
        "socket.receive.buffer.bytes": "65536",
        "socket.send.buffer.bytes": "98304",
        "socket.listen.backlog.size": "77",
    })
    rb, tb = check_broker(b, 77)
    assert (rb, tb) == (131072, 196608)


def test_minus_one_leaves_the_kernels_buffers(broker_factory):
    b = broker_factory({
        "socket.receive.buffer.bytes": "-1",
        "socket.send.buffer.bytes": "-1",
    })
    rb, tb = check_broker(b, 50)
    # The kernel's own starting sizes (tcp_rmem and tcp_wmem's defaults,
    # grown by autotuning), not the 204800 a configured 102400 gives.
    default_rb = int(open("/proc/sys/net/ipv4/tcp_rmem").read().split()[1])
    assert rb == default_rb
    assert tb != 204800
