"""Helpers for the TLS and SASL compatibility tests (test_security.py):
certificates made with the openssl CLI and keytool, the override dict that
gives a broker extra listeners (the same keys for kshard and Kafka), client
configurations for librdkafka, kafka-python and the Java client, and a raw
Kafka-protocol client for SaslHandshake/SaslAuthenticate with PLAIN and
SCRAM-SHA-256/512 (RFC 5802) over plain TCP or TLS."""

import base64
import contextlib
import hashlib
import hmac
import secrets
import socket
import ssl
import struct
import subprocess
from pathlib import Path

import compat_util as cu
from conftest import TARGET

STORE_PASSWORD = "store-secret"
PRINCIPAL_RULES = "RULE:^CN=(.*?),OU=.*$/$1/,DEFAULT"
PLAIN_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
    + ";"
)
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

# Kafka error codes.
NONE = 0
SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34

API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36


# --- certificates ------------------------------------------------------------


def _openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, f"openssl {' '.join(args)}: {r.stderr}"
    return r.stdout


_CA_CONF = """[ca]
default_ca = ca_default
[ca_default]
database = index.txt
new_certs_dir = .
serial = serial.txt
default_md = sha256
policy = policy_any
unique_subject = no
copy_extensions = copy
[policy_any]
commonName = supplied
organizationalUnitName = optional
organizationName = optional
"""


class Certs:
    """Every certificate the tests use, made once in `d`:

    ca.pem                       the test CA (trusted by brokers and clients)
    broker.pem                   broker key (unencrypted PKCS#8) + certificate
                                 (SAN DNS:localhost, IP:127.0.0.1) + CA: a
                                 PEM keystore; broker.key, broker.crt apart
    broker2.pem                  the same subject and SAN, a new key and serial
                                 (the certificate reload test)
    broker.p12, broker.jks       broker.pem as PKCS12 and JKS stores
                                 (store and key password STORE_PASSWORD)
    alice.{key,crt,pem}          client CN=alice,OU=eng,O=kshard (CA-signed)
    bob.{key,crt,pem}            client CN=bob,OU=eng,O=kshard (CA-signed)
    rogue.{key,crt,pem}          CN=alice,OU=eng,O=kshard, self-signed
    expired.{key,crt,pem}        CN=alice,OU=eng,O=kshard, CA-signed, valid
                                 2020-01-01..2020-02-01
    (*.pem of a client: key + certificate, the Java client's PEM keystore.)
    """

    def __init__(self, d):
        self.dir = d = Path(d)
        d.mkdir(parents=True, exist_ok=True)
        (d / "ca.cnf").write_text(_CA_CONF)
        (d / "index.txt").write_text("")
        (d / "serial.txt").write_text("1000\n")
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "3650", "-subj", "/CN=kshard-test-ca",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            cwd=d,
        )
        self.ca = d / "ca.pem"
        server_ext = "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n"
        client_ext = "extendedKeyUsage=clientAuth\n"
        self.serials = {}
        self._leaf("broker", "/O=kshard/CN=broker", server_ext, 101)
        self._leaf("broker2", "/O=kshard/CN=broker", server_ext, 102)
        self._leaf("alice", "/O=kshard/OU=eng/CN=alice", client_ext, 201)
        self._leaf("bob", "/O=kshard/OU=eng/CN=bob", client_ext, 202)
        # Untrusted: the same subject as alice, signed by itself.
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "rogue.key", "-out", "rogue.crt",
            "-days", "365", "-subj", "/O=kshard/OU=eng/CN=alice", cwd=d,
        )
        self._bundle("rogue", with_ca=False)
        # Expired: CA-signed, validity entirely in the past (openssl ca can
        # set both dates; openssl x509 -req cannot set notBefore).
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "expired.key", "-out", "expired.csr",
                 "-subj", "/O=kshard/OU=eng/CN=alice", cwd=d)
        _openssl(
            "ca", "-batch", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key", "-in", "expired.csr",
            "-out", "expired.crt", "-startdate", "20200101000000Z", "-enddate", "20200201000000Z",
            "-notext", "-preserveDN", cwd=d,
        )
        self._bundle("expired")
        _openssl(
            "pkcs12", "-export", "-inkey", "broker.key", "-in", "broker.crt", "-certfile", "ca.pem",
            "-name", "broker", "-passout", f"pass:{STORE_PASSWORD}", "-out", "broker.p12", cwd=d,
        )
        r = subprocess.run(
            ["keytool", "-importkeystore", "-noprompt", "-srckeystore", "broker.p12", "-srcstoretype", "PKCS12",
             "-srcstorepass", STORE_PASSWORD, "-destkeystore", "broker.jks", "-deststoretype", "JKS",
             "-deststorepass", STORE_PASSWORD, "-destkeypass", STORE_PASSWORD],
            cwd=d, capture_output=True, text=True,
        )
        assert r.returncode == 0, r.stderr
        self.p12 = d / "broker.p12"
        self.jks = d / "broker.jks"

    def _leaf(self, name, subj, ext, serial):
        d = self.dir
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", subj, cwd=d)
        (d / f"{name}.ext").write_text(ext)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial",
                 str(serial), "-days", "365", "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)
        self.serials[name] = serial
        self._bundle(name)

    def _bundle(self, name, with_ca=True):
        d = self.dir
        text = (d / f"{name}.key").read_text() + (d / f"{name}.crt").read_text()
        if with_ca:
            text += self.ca.read_text()
        (d / f"{name}.pem").write_text(text)

    def path(self, name, ext="pem"):
        return self.dir / f"{name}.{ext}"

    def inline(self, name, ext):
        """A PEM file's content as one line (newlines become spaces), for
        ssl.keystore.key / ssl.keystore.certificate.chain in a properties
        file: Kafka's PEM parser ignores the whitespace inside the base64."""
        return " ".join((self.dir / f"{name}.{ext}").read_text().split())


# --- brokers with extra listeners --------------------------------------------


@contextlib.contextmanager
def _pinned_free_ports(ports):
    """cu.free_port() returns `ports` first, in order (Broker.__init__ takes
    the PLAINTEXT port, then KafkaBroker its controller port, from it), so
    the listener overrides can name them before the broker object exists."""
    queue = list(ports)
    orig = cu.free_port
    cu.free_port = lambda: queue.pop(0) if queue else orig()
    try:
        yield queue
    finally:
        cu.free_port = orig


def listener_overrides(plaintext_port, controller_port, extra):
    """listeners / advertised.listeners / listener.security.protocol.map for
    PLAINTEXT on plaintext_port (first, so the readiness probe works) and
    `extra` [(NAME, protocol, port)]; for Kafka the CONTROLLER listener is
    kept in listeners and in the map. Same keys for both targets."""
    named = [("PLAINTEXT", "PLAINTEXT", plaintext_port)] + list(extra)
    advertised = ",".join(f"{n}://127.0.0.1:{p}" for n, _, p in named)
    proto_map = ",".join(f"{n}:{proto}" for n, proto, _ in named)
    listeners = advertised
    if TARGET == "kafka":
        listeners += f",CONTROLLER://127.0.0.1:{controller_port}"
        proto_map += ",CONTROLLER:PLAINTEXT"
    return {
        "listeners": listeners,
        "advertised.listeners": advertised,
        "listener.security.protocol.map": proto_map,
    }


def start_broker(factory, listeners, overrides):
    """factory: conftest's broker_factory or broker_module_factory.
    listeners: [(NAME, protocol)] after PLAINTEXT. Returns the broker with
    `.ports` = {NAME: port} (PLAINTEXT included)."""
    p0, pc = cu.free_port(), cu.free_port()
    extra = [(name, proto, cu.free_port()) for name, proto in listeners]
    ov = dict(overrides)
    ov.update(listener_overrides(p0, pc, extra))
    with _pinned_free_ports([p0, pc] if TARGET == "kafka" else [p0]):
        b = factory(ov)
    assert b.port == p0, "the broker fixture did not take the pinned PLAINTEXT port"
    b.ports = {"PLAINTEXT": p0, **{name: port for name, _, port in extra}}
    return b


def sasl_listener_overrides(listener):
    """JAAS for every enabled mechanism on one SASL listener (Kafka needs a
    JAAS entry per mechanism on each SASL listener)."""
    ln = listener.lower()
    return {
        f"listener.name.{ln}.plain.sasl.jaas.config": PLAIN_JAAS,
        f"listener.name.{ln}.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        f"listener.name.{ln}.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    }


# --- client configurations -----------------------------------------------------


class ClientSec:
    """How one client connects: protocol SSL / SASL_PLAINTEXT / SASL_SSL,
    optional client certificate name (Certs), optional SASL mechanism with
    user and password. Renders the config of each client library."""

    def __init__(self, certs, protocol, cert=None, mechanism=None, user=None, password=None, trust=True):
        self.certs = certs
        self.protocol = protocol
        self.cert = cert
        self.mechanism = mechanism
        self.user = user
        self.password = password
        self.trust = trust

    @property
    def tls(self):
        return self.protocol in ("SSL", "SASL_SSL")

    def librdkafka(self):
        c = {"security.protocol": self.protocol.lower()}
        if self.tls:
            if self.trust:
                c["ssl.ca.location"] = str(self.certs.ca)
            if self.cert:
                c["ssl.certificate.location"] = str(self.certs.path(self.cert, "crt"))
                c["ssl.key.location"] = str(self.certs.path(self.cert, "key"))
        if self.mechanism:
            c.update({"sasl.mechanism": self.mechanism, "sasl.username": self.user,
                      "sasl.password": self.password})
        return c

    def java(self):
        c = {"security.protocol": self.protocol}
        if self.tls:
            if self.trust:
                c.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.certs.ca)})
            if self.cert:
                c.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.certs.path(self.cert))})
        if self.mechanism:
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if self.mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")
            c["sasl.mechanism"] = self.mechanism
            c["sasl.jaas.config"] = f'{module} required username="{self.user}" password="{self.password}";'
        return c

    def kafka_python(self):
        c = {"security_protocol": self.protocol}
        if self.tls:
            if self.trust:
                c["ssl_cafile"] = str(self.certs.ca)
            if self.cert:
                c["ssl_certfile"] = str(self.certs.path(self.cert, "crt"))
                c["ssl_keyfile"] = str(self.certs.path(self.cert, "key"))
        if self.mechanism:
            c.update({"sasl_mechanism": self.mechanism, "sasl_plain_username": self.user,
                      "sasl_plain_password": self.password})
        return c


def write_java_props(path, props):
    """A java.util.Properties file (values escaped) for Client.java --client-props."""

    def esc(s):
        return "".join("\\" + ch if ch in "\\:=#! " else ch for ch in str(s))

    Path(path).write_text("".join(f"{esc(k)}={esc(v)}\n" for k, v in props.items()))
    return str(path)


def tls_context(certs, cert=None, trust=True, max_version=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if trust:
        ctx.load_verify_locations(str(certs.ca))
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(str(certs.path(cert, "crt")), str(certs.path(cert, "key")))
    if max_version is not None:
        ctx.maximum_version = max_version
    return ctx


def served_serial(port, certs, timeout_s=10.0):
    """Serial number of the certificate the TLS listener on `port` serves to
    a new connection (verified against the test CA and 127.0.0.1)."""
    ctx = tls_context(certs)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return int(s.getpeercert()["serialNumber"], 16)


# --- raw Kafka protocol over TCP or TLS --------------------------------------


class RawConn:
    """One connection speaking Kafka frames; `tls` an ssl.SSLContext or None."""

    def __init__(self, port, tls=None, timeout_s=10.0):
        sock = cu.connect("127.0.0.1", port, timeout_s)
        if tls is not None:
            sock = tls.wrap_socket(sock, server_hostname="127.0.0.1")
        self.sock = sock
        self.corr = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        with contextlib.suppress(OSError):
            self.sock.close()

    def send(self, api_key, version, body, flexible=False):
        self.corr += 1
        header = (cu.request_header_v2 if flexible else cu.request_header_v1)(api_key, version, self.corr)
        self.sock.sendall(cu.frame(header + body))
        return self.corr

    def call(self, api_key, version, body, flexible=False):
        """Send one request, read its response: a Reader after the header."""
        corr = self.send(api_key, version, body, flexible)
        r = cu.Reader(cu.recv_frame(self.sock))
        assert r.i32() == corr
        if flexible:
            r.skip_tags()
        return r

    def api_versions(self):
        """ApiVersions v0: (error, {api_key: (min, max)})."""
        r = self.call(API_VERSIONS, 0, b"")
        err = r.i16()
        versions = {}
        for _ in range(r.i32()):
            k = r.i16()
            versions[k] = (r.i16(), r.i16())
        return err, versions

    def metadata(self):
        """Metadata v1 (all topics): [(node, host, port)]."""
        corr = self.send(METADATA, 1, cu.i32(-1))
        payload = cu.recv_frame(self.sock)
        assert struct.unpack(">i", payload[:4])[0] == corr
        return cu.parse_metadata_v1_brokers(payload)

    def handshake(self, mechanism, version=1):
        """SaslHandshake: (error, [enabled mechanisms])."""
        r = self.call(SASL_HANDSHAKE, version, cu.string(mechanism))
        err = r.i16()
        return err, [r.string() for _ in range(r.i32())]

    def authenticate(self, token, version=1):
        """SaslAuthenticate v0-v2: (error, message, auth bytes, session
        lifetime ms or None for v0)."""
        flex = version >= 2
        if flex:
            body = cu.uvarint(len(token) + 1) + token + cu.uvarint(0)
        else:
            body = cu.i32(len(token)) + token
        r = self.call(SASL_AUTHENTICATE, version, body, flexible=flex)
        err = r.i16()
        if flex:
            msg = r.compact_string()
            data = r.take(r.uvarint() - 1)
        else:
            msg = r.string()
            n = r.i32()
            data = r.take(n) if n >= 0 else None
        lifetime = r.i64() if version >= 1 else None
        return err, msg, data, lifetime

    def raw_token(self, token):
        """SaslHandshake v0 framing: a 4-byte length and the token each way."""
        self.sock.sendall(struct.pack(">i", len(token)) + token)
        return cu.recv_frame(self.sock)


def plain_token(user, password):
    return b"\0" + user.encode() + b"\0" + password.encode()


class Scram:
    """The client side of SCRAM-SHA-256/512 (RFC 5802, no channel binding)."""

    def __init__(self, mechanism, user, password):
        self.hash = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}[mechanism]
        self.hash_name = self.hash().name
        self.user = user
        self.password = password
        self.cnonce = base64.b64encode(secrets.token_bytes(18)).decode()
        self.first_bare = f"n={user},r={self.cnonce}"

    def client_first(self):
        return ("n,," + self.first_bare).encode()

    def client_final(self, server_first, tamper_nonce=False, wrong_proof=False):
        fields = dict(kv.split("=", 1) for kv in server_first.decode().split(","))
        nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
        assert nonce.startswith(self.cnonce), f"server nonce {nonce} does not extend {self.cnonce}"
        if tamper_nonce:
            nonce = nonce[:-1] + ("A" if nonce[-1] != "A" else "B")
        without_proof = f"c=biws,r={nonce}"
        salted = hashlib.pbkdf2_hmac(self.hash_name, self.password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored_key = self.hash(client_key).digest()
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        if wrong_proof:
            proof = bytes([proof[0] ^ 1]) + proof[1:]
        server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        self.server_signature = base64.b64encode(hmac.new(server_key, auth_message, self.hash).digest()).decode()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final):
        assert server_final.decode() == f"v={self.server_signature}", server_final


def scram_login(conn, mechanism, user, password, version=1):
    """Handshake + the two SaslAuthenticate rounds; returns the last
    (error, message, bytes, lifetime)."""
    err, mechs = conn.handshake(mechanism)
    assert err == NONE, (err, mechs)
    s = Scram(mechanism, user, password)
    err, msg, server_first, _ = conn.authenticate(s.client_first(), version)
    if err != NONE:
        return err, msg, server_first, None
    res = conn.authenticate(s.client_final(server_first), version)
    if res[0] == NONE:
        s.verify_server_final(res[2])
    return res


def plain_login(port, user, password, tls=None, version=1):
    """A new connection, ApiVersions, SaslHandshake v1 PLAIN, SaslAuthenticate.
    Returns (conn, (error, message, bytes, lifetime))."""
    c = RawConn(port, tls)
    c.api_versions()
    err, mechs = c.handshake("PLAIN")
    assert err == NONE, (err, mechs)
    return c, c.authenticate(plain_token(user, password), version)
