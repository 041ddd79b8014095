"""A TCP proxy that counts and timestamps the request frames clients send.

The broker advertises the proxy's port (advertised.listeners), so every
connection a client opens after bootstrap goes through it too. Each request
frame is recorded as (monotonic time, api_key, api_version, client_id);
responses are copied through untouched.
"""

import socket
import struct
import threading
import time


class FrameProxy:
    def __init__(self, port=None):
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port or 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.target = None
        self.requests = []
        self.lock = threading.Lock()
        self.closed = False
        self.socks = []

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def start(self, target_port):
        self.target = target_port
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.socks += [client, upstream]
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._copy, args=(upstream, client), daemon=True).start()

    def _requests(self, src, dst):
        buf = b""
        try:
            while True:
                chunk = src.recv(65536)
                if not chunk:
                    break
                dst.sendall(chunk)
                buf += chunk
                while len(buf) >= 4:
                    (n,) = struct.unpack(">i", buf[:4])
                    if len(buf) < 4 + n:
                        break
                    self._record(buf[4 : 4 + n])
                    buf = buf[4 + n :]
        except OSError:
            pass
        self._close(src, dst)

    def _record(self, frame):
        if len(frame) < 10:
            return
        api_key, api_version = struct.unpack(">hh", frame[:4])
        (n,) = struct.unpack(">h", frame[8:10])
        client_id = frame[10 : 10 + n].decode(errors="replace") if n > 0 else None
        with self.lock:
            self.requests.append((time.monotonic(), api_key, api_version, client_id))

    def _copy(self, src, dst):
        try:
            while True:
                chunk = src.recv(65536)
                if not chunk:
                    break
                dst.sendall(chunk)
        except OSError:
            pass
        self._close(src, dst)

    @staticmethod
    def _close(*socks):
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def snapshot(self):
        with self.lock:
            return list(self.requests)

    def count(self, api_key=None, since=None, client_id=None):
        return sum(
            1
            for t, k, _, c in self.snapshot()
            if (api_key is None or k == api_key)
            and (since is None or t >= since)
            and (client_id is None or c == client_id)
        )

    def close(self):
        self.closed = True
        try:
            # Wakes the accept thread so the port is free at once.
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            socks = list(self.socks)
        self._close(*socks)
        for s in socks:
            s.close()
