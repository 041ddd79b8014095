#!/usr/bin/env python3
"""Side-by-side benchmark of kshard and Apache Kafka 3.9.1 (ZooKeeper mode)
on this machine, in one run, with the same client (kshard-perf) and with
Kafka's own ProducerPerformance / ConsumerPerformance / EndToEndLatency.
kshard runs twice: with page-cache segment logs (`log.io.mode=buffered`,
the default) and with direct I/O (`log.io.mode=direct`).

Usage: perf/compare.sh [--quick] [--duration-s S] [--consume-size-mib M]
                       [--data-dir DIR] [--out FILE.json] [--no-build]
                       [--tls] [--brokers kafka,kshard] [--workloads W,...]

--brokers kshard-unpinned adds kshard with shard.core.pinning=false (the
shards' threads placed by the kernel's scheduler, not pinned).

--tls gives every broker an SSL listener beside PLAINTEXT (a PEM keystore
from a throwaway CA made with the openssl CLI in the work dir) and runs
Kafka's tools (ProducerPerformance, ConsumerPerformance, EndToEndLatency)
over it; kshard-perf has no TLS and stays on PLAINTEXT.

Kafka's jars come from scripts/kafka-jars.sh (cached outside the repo).
Everything runs on 127.0.0.1 only, on free ports; every load is bounded in
records or time.
"""

import argparse
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KAFKA_VERSION = os.environ.get("KSHARD_KAFKA_VERSION", "3.9.1")
CACHE = Path(os.environ.get("KSHARD_CACHE_DIR", Path.home() / ".cache" / "kshard"))
LIBS = CACHE / f"kafka-{KAFKA_VERSION}" / "libs"
# Kafka 4 has no ZooKeeper mode: it runs as one KRaft node (broker and
# controller), formatted at start.
KRAFT = not KAFKA_VERSION.startswith(("2.", "3."))
READY_TIMEOUT_S = 120.0
# Every client command run, in order, for the JSON record (binary paths
# shortened to their names).
COMMANDS = []


# With --tls: the certificates and the Java clients' SSL config file.
TLS = None


def note(cmd):
    line = " ".join(Path(c).name if c.startswith("/") and "/bin/" in c else c for c in cmd)
    if not COMMANDS or COMMANDS[-1] != line:  # retry loops repeat themselves
        COMMANDS.append(line)
STARTUP_PARTITIONS = 1000
# The same retention for every broker, so a full run (about a minute at
# each broker's top produce rate, three brokers) fits the disk.
RETENTION = {
    "log.segment.bytes": str(128 << 20),
    "log.retention.bytes": str(768 << 20),
    "log.retention.check.interval.ms": "10000",
}
# What a run keeps on disk at most with that retention: about 14 GB per
# broker (two 8-partition produce topics at 768 MiB per partition, the
# consume topic, the start-up topic), measured in a --quick run.
DISK_NEEDED_BYTES = 3 * 16 << 30
# Kafka's ZooKeeper session must survive being stopped while the others run.
FROZEN_SESSION_TIMEOUT_MS = 1_800_000


def log(msg):
    print(f"[compare {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port():
    """A port nobody listens on. kshard binds with SO_REUSEPORT, so a port
    already taken by another kshard would be silently shared: check ss too."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True).stdout
        if not out.strip():
            return port
    raise RuntimeError("no free port")


def wait_port(port, proc, timeout_s=READY_TIMEOUT_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"port {port} not open after {timeout_s}s")


def rss_kib(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def cpu_s(pid):
    """User + system CPU seconds of a process, all its threads."""
    user_s, sys_s = cpu_split_s(pid)
    return user_s + sys_s


def cpu_split_s(pid):
    """User and system CPU seconds of a process, all its threads
    (/proc/PID/stat fields 14 and 15; the name in field 2 may hold spaces)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


# A VM guest with free page reporting (virtio-balloon) hands freed memory
# back to the host; the next write into such a page (a new page-cache page)
# waits for the host to back it, several times the cost of the copy itself.
# The counter says how much a step handed back, to read its CPU figures by.
PAGE_REPORTING_KIB = Path("/sys/module/page_reporting/parameters/reported_kib")


def reported_kib():
    try:
        return int(PAGE_REPORTING_KIB.read_text())
    except (OSError, ValueError):
        return None


def make_tls(root):
    """A throwaway CA and a broker certificate for 127.0.0.1/localhost,
    made with the openssl CLI: broker.pem (PKCS#8 key + certificate + CA)
    is the brokers' PEM keystore, ca.pem the clients' PEM truststore."""
    d = root / "tls"
    d.mkdir()

    def openssl(*a):
        subprocess.run(["openssl", *a], cwd=d, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "7",
            "-subj", "/CN=kshard-compare-ca", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out", "broker.csr",
            "-subj", "/CN=localhost")
    (d / "broker.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "101",
            "-days", "7", "-sha256", "-extfile", "broker.ext", "-out", "broker.crt")
    keystore = d / "broker.pem"
    keystore.write_text("".join((d / n).read_text() for n in ("broker.key", "broker.crt", "ca.pem")))
    client = d / "client-ssl.properties"
    client.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={d / 'ca.pem'}\n")
    return {"keystore": keystore, "ca": d / "ca.pem", "client_config": client}


def ssl_broker_props():
    """The same keys for kshard and Kafka."""
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(TLS["keystore"])}


class BrokerCpu:
    """The broker process's CPU seconds over a `with` block, per GiB of
    payload moved in it. Client and broker share the machine, so CPU per
    byte is the figure that carries over to hosts with separate clients.
    The kernel's share and the memory the guest handed back to its host
    in the block say where the time went."""

    def __init__(self, broker):
        self.pid = broker.proc.pid

    def __enter__(self):
        self.start_split_s = cpu_split_s(self.pid)
        self.start_reported_kib = reported_kib()
        return self

    def __exit__(self, *exc):
        user_s, sys_s = cpu_split_s(self.pid)
        self.user_s = user_s - self.start_split_s[0]
        self.sys_s = sys_s - self.start_split_s[1]
        self.seconds = self.user_s + self.sys_s
        end_kib = reported_kib()
        self.reported_mib = None
        if end_kib is not None and self.start_reported_kib is not None:
            self.reported_mib = (end_kib - self.start_reported_kib) / 1024
        return False

    def per_gib(self, payload_bytes):
        return self.seconds / (payload_bytes / 2**30) if payload_bytes > 0 else None

    def figures(self, step, payload_bytes):
        """`{step}_cpu_s_per_gib` and the figures beside it."""
        out = {f"{step}_cpu_s_per_gib": self.per_gib(payload_bytes),
               f"{step}_cpu_sys_share": self.sys_s / self.seconds if self.seconds > 0 else None}
        if self.reported_mib is not None:
            out[f"{step}_host_reported_mib"] = self.reported_mib
        return out


class RssSampler:
    """Max VmRSS of a process while the workloads run."""

    def __init__(self):
        self.max_kib = 0
        self.pid = None
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.wait(0.5):
            if self.pid:
                v = rss_kib(self.pid)
                if v:
                    self.max_kib = max(self.max_kib, v)

    def stop(self):
        self._stop.set()


class Proc:
    def __init__(self, name, cmd, workdir, env=None):
        self.name = name
        self.cmd = cmd
        self.workdir = workdir
        self.env = env
        self.proc = None
        self.log_path = workdir / f"{name}.log"

    def start(self):
        logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=self.workdir, env=self.env, start_new_session=True)
        logf.close()
        return self

    @property
    def pid(self):
        return self.proc.pid

    def stop(self, timeout_s=60):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def java(cp, main, args, heap=("-Xmx512M",)):
    return ["java", *heap, "-XX:+UseG1GC", f"-Dlog4j.configuration=file:{cp['log4j']}",
            "-cp", f"{LIBS}/*", main] + args


# Broker name -> kshard's log.io.mode (None: Apache Kafka).
BROKERS = {"kafka": None, "kshard": "buffered", "kshard-direct": "direct", "kshard-unpinned": "buffered"}
# Run unless --brokers names others.
DEFAULT_BROKERS = ("kafka", "kshard", "kshard-direct")
# kshard's settings besides its defaults, per broker name.
KSHARD_OVERRIDES = {"kshard-unpinned": {"shard.core.pinning": "false"}}


class Broker:
    """One broker under test: kafka (with its ZooKeeper) or a kshard."""

    def __init__(self, kind, root, bins, cp):
        self.kind = kind
        self.io_mode = BROKERS[kind]
        self.root = root / kind
        self.root.mkdir(parents=True)
        self.data = self.root / "data"
        self.data.mkdir()
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        # Kafka's tools connect here: the SSL listener with --tls.
        self.ssl_port = free_port() if TLS else None
        self.tool_bootstrap = f"127.0.0.1:{self.ssl_port}" if TLS else self.bootstrap
        self.listeners = f"PLAINTEXT://{self.bootstrap}" + (f",SSL://{self.tool_bootstrap}" if TLS else "")
        self.bins = bins
        self.cp = cp
        self.zk = None
        self.formatted = False
        self.proc = None

    def kafka_common_props(self):
        """Kafka's settings in either mode: one replica of everything."""
        return {
            "log.dirs": str(self.data),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **RETENTION,
            **(ssl_broker_props() if TLS else {}),
        }

    def write_kafka_props(self, props):
        config = self.root / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return config

    def format_kraft(self):
        controller_port = free_port()
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
            "listeners": f"{self.listeners},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": self.listeners,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
                                              + (",SSL:SSL" if TLS else ""),
            **self.kafka_common_props(),
        }
        config = self.write_kafka_props(props)
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        subprocess.run(java(self.cp, "kafka.tools.StorageTool", ["format", "-t", cluster_id, "-c", str(config)]),
                       check=True, capture_output=True, timeout=120)
        self.formatted = True

    def start_zk(self):
        zk_port = free_port()
        zk_dir = self.root / "zk"
        zk_dir.mkdir(exist_ok=True)
        cfg = self.root / "zoo.cfg"
        # Sessions outlive the other brokers' workloads, during which this
        # broker is stopped (SIGSTOP) so it does not compete for the cores.
        cfg.write_text(f"tickTime=2000\ndataDir={zk_dir}\nclientPort={zk_port}\n"
                       "clientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxClientCnxns=0\n"
                       f"maxSessionTimeout={FROZEN_SESSION_TIMEOUT_MS}\n")
        self.zk = Proc("zookeeper", java(self.cp, "org.apache.zookeeper.server.ZooKeeperServerMain",
                                         [str(cfg)]), self.root).start()
        wait_port(zk_port, self.zk.proc)
        props = {
            "broker.id": "0",
            "listeners": self.listeners,
            "advertised.listeners": self.listeners,
            "zookeeper.connect": f"127.0.0.1:{zk_port}",
            "zookeeper.session.timeout.ms": str(FROZEN_SESSION_TIMEOUT_MS),
            **self.kafka_common_props(),
        }
        self.write_kafka_props(props)

    def command(self):
        if self.kind == "kafka":
            # Kafka's own start script default heap (kafka-server-start.sh).
            return java(self.cp, "kafka.Kafka", [str(self.root / "server.properties")],
                        heap=("-Xmx1G", "-Xms1G"))
        return [str(self.bins["kshard"]),
                "--override", f"listeners={self.listeners}",
                "--override", f"log.dirs={self.data}",
                "--override", f"log.io.mode={self.io_mode}",
                "--override", "num.partitions=1",
                "--override", "auto.create.topics.enable=true",
                # As Kafka's test config above: ConsumerPerformance joins a group.
                "--override", "group.initial.rebalance.delay.ms=0"] + [
                    a for k, v in {**RETENTION, **(ssl_broker_props() if TLS else {}),
                                   **KSHARD_OVERRIDES.get(self.kind, {})}.items()
                    for a in ("--override", f"{k}={v}")]

    def start(self):
        if self.kind == "kafka" and self.zk is None and not self.formatted:
            if KRAFT:
                self.format_kraft()
            else:
                self.start_zk()
        t0 = time.monotonic()
        self.proc = Proc(self.kind, self.command(), self.root).start()
        wait_port(self.port, self.proc.proc)
        if self.ssl_port:
            wait_port(self.ssl_port, self.proc.proc)
        return t0

    def stop(self):
        if self.proc:
            self.proc.stop()

    def freeze(self):
        if self.proc and self.proc.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGSTOP)

    def thaw(self):
        if self.proc and self.proc.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGCONT)

    def stop_all(self):
        self.stop()
        if self.zk:
            self.zk.stop()


# kshard's stall detector (shard.stall.threshold.ms, default 10): one line
# per stall; task_ms leaves out the time the shard's thread waited for a CPU.
STALL_RE = re.compile(r"shard stall: shard=\d+ stall_ms=[\d.]+ runq_ms=[\d.]+ task_ms=([\d.]+)")


def log_size(b):
    return b.proc.log_path.stat().st_size if b.io_mode else 0


def worst_stall(b, since, name):
    """The worst shard stall and the stall count in kshard's log after
    byte `since` (nothing for Kafka)."""
    if not b.io_mode:
        return {}
    with open(b.proc.log_path, "rb") as f:
        f.seek(since)
        stalls = [float(m.group(1)) for m in STALL_RE.finditer(f.read().decode(errors="replace"))]
    threshold_ms = 10.0
    counted = [s for s in stalls if s > threshold_ms]
    return {f"{name}_stall_worst_ms": max(counted, default=0.0), f"{name}_stalls": len(counted)}


def perf(bins, args, timeout_s):
    """Runs kshard-perf with --json; returns the parsed summary."""
    cmd = [str(bins["kshard-perf"])] + args + ["--json"]
    note(cmd)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def wait_ready(bins, b, timeout_s=READY_TIMEOUT_S):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            r = perf(bins, ["produce", "--bootstrap-server", b.bootstrap, "--topic", "probe",
                            "--num-records", "1", "--record-size", "10", "--partitions", "1"], 60)
            if r["records"] == 1:
                return
        except Exception as e:  # not up yet
            last = e
        time.sleep(0.2)
    raise RuntimeError(f"{b.kind} not ready: {last}")


PP_RE = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                   r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


def producer_performance(cp, b, topic, num_records, record_size, acks, timeout_s):
    cmd = java(cp, "org.apache.kafka.tools.ProducerPerformance", [
        "--topic", topic, "--num-records", str(num_records), "--record-size", str(record_size),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={b.tool_bootstrap}", f"acks={acks}",
        "batch.size=65536", "linger.ms=5"] + (["--producer.config", str(TLS["client_config"])] if TLS else []))
    note(cmd[cmd.index("org.apache.kafka.tools.ProducerPerformance"):])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    m = None
    for line in out.stdout.splitlines():
        m = PP_RE.search(line) or m
    if not m:
        raise RuntimeError(f"ProducerPerformance output not understood: {out.stdout[-400:]} {out.stderr[-400:]}")
    return {"records": int(m.group(1)), "records_per_s": float(m.group(2)), "mb_per_s": float(m.group(3)),
            "p50_ms": float(m.group(6)), "p99_ms": float(m.group(8))}


# The Java consumer's own view of each Fetch (client-wide fetch-manager
# metrics, --print-metrics): what a broker sends per response and how long
# a response takes, the figures issue 16's consumer-gap analysis compares.
FETCH_METRICS = ("fetch-size-avg", "fetch-rate", "fetch-latency-avg", "fetch-latency-max",
                 "records-per-request-avg")
FETCH_METRIC_RE = re.compile(r"^consumer-fetch-manager-metrics:([\w-]+):\{client-id=[^,}]*\}\s*:\s*(\S+)")


def fetch_metrics(stdout):
    """Client-wide fetch-manager metrics from ConsumerPerformance --print-metrics."""
    out = {}
    for line in stdout.splitlines():
        m = FETCH_METRIC_RE.match(line.strip())
        if m and m.group(1) in FETCH_METRICS:
            out[m.group(1).replace("-", "_")] = float(m.group(2))
    return out


def consumer_performance(cp, b, topic, messages, timeout_s):
    cmd = java(cp, "org.apache.kafka.tools.ConsumerPerformance", [
        "--bootstrap-server", b.tool_bootstrap, "--topic", topic, "--messages", str(messages),
        "--timeout", "20000", "--group", f"cperf-{int(time.time() * 1000)}", "--print-metrics"]
        + (["--consumer.config", str(TLS["client_config"])] if TLS else []))
    note(cmd[cmd.index("org.apache.kafka.tools.ConsumerPerformance"):])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    lines = [l for l in out.stdout.splitlines() if l.count(",") >= 9 and not l.startswith("start.time")]
    if not lines:
        raise RuntimeError(f"ConsumerPerformance output not understood: {out.stdout[-400:]} {out.stderr[-400:]}")
    f = [x.strip() for x in lines[-1].split(",")]
    return {"mb": float(f[2]), "mb_per_s": float(f[3]), "records": int(f[4]), "records_per_s": float(f[5]),
            "fetch_mb_per_s": float(f[8]), "fetch_records_per_s": float(f[9]), "fetch": fetch_metrics(out.stdout)}


ETE_AVG_RE = re.compile(r"Avg latency: ([\d.]+) ms")
ETE_PCT_RE = re.compile(r"Percentiles: 50th = ([\d.]+), 99th = ([\d.]+), 99.9th = ([\d.]+)")


def end_to_end_latency(cp, b, topic, messages, size, acks, timeout_s):
    """Kafka's EndToEndLatency: one record at a time, produce then consume
    it, closed loop (so no fixed rate); milliseconds."""
    cmd = java(cp, "org.apache.kafka.tools.EndToEndLatency", [b.tool_bootstrap, topic, str(messages), acks, str(size)]
               + ([str(TLS["client_config"])] if TLS else []))
    note(cmd[cmd.index("org.apache.kafka.tools.EndToEndLatency"):])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    avg, pct = ETE_AVG_RE.search(out.stdout), ETE_PCT_RE.search(out.stdout)
    if not (avg and pct):
        raise RuntimeError(f"EndToEndLatency output not understood: {out.stdout[-400:]} {out.stderr[-400:]}")
    return {"avg_ms": float(avg.group(1)), "p50_ms": float(pct.group(1)), "p99_ms": float(pct.group(2)),
            "p999_ms": float(pct.group(3))}


def machine_ceiling(root, quick):
    res = {}
    if shutil.which("iperf3"):
        port = free_port()
        srv = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "3" if quick else "10", "-J"],
                             capture_output=True, text=True, timeout=60)
        srv.wait(10)
        try:
            bps = json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"]
            res["loopback_tcp_mb_per_s"] = bps / 8 / 1024 / 1024
        except (KeyError, ValueError):
            log(f"iperf3 output not understood: {out.stdout[-300:]}")
    else:
        log("iperf3 missing (apt-get install iperf3): loopback ceiling skipped")
    if shutil.which("fio"):
        f = root / "fio.dat"
        out = subprocess.run(["fio", "--name=seqwrite", f"--filename={f}", "--rw=write", "--bs=1M",
                              "--size=" + ("512M" if quick else "4G"), "--direct=1", "--ioengine=libaio",
                              "--iodepth=8", "--end_fsync=1", "--output-format=json"],
                             capture_output=True, text=True, timeout=600)
        f.unlink(missing_ok=True)
        try:
            bw_kib = json.loads(out.stdout)["jobs"][0]["write"]["bw"]
            res["disk_odirect_write_mb_per_s"] = bw_kib / 1024
        except (KeyError, ValueError, IndexError):
            log(f"fio output not understood: {out.stdout[-300:]} {out.stderr[-300:]}")
    else:
        log("fio missing (apt-get install fio): disk ceiling skipped")
    # Writing a new file through the page cache (no fsync): what buffered
    # logs pay per byte for fresh page-cache pages on this host.
    f = root / "pagecache.dat"
    size_mib = 512 if quick else 2048
    t0 = time.monotonic()
    with open(f, "wb") as out:
        block = b"\0" * (1 << 20)
        for _ in range(size_mib):
            out.write(block)
    res["page_cache_new_file_write_mb_per_s"] = size_mib * 1.048576 / (time.monotonic() - t0)
    f.unlink(missing_ok=True)
    return res


def run(args):
    root = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="kshard-compare-"))
    root.mkdir(parents=True, exist_ok=True)
    log(f"work dir {root}")
    free = shutil.disk_usage(root).free
    if free < DISK_NEEDED_BYTES:
        # A full disk stalls the brokers mid-step: the figures are garbage.
        if not args.data_dir:
            shutil.rmtree(root, ignore_errors=True)
        sys.exit(f"compare: {free >> 30} GiB free under {root}, the run needs about "
                 f"{DISK_NEEDED_BYTES >> 30} GiB; free some or pass --data-dir elsewhere")
    subprocess.run([str(REPO / "scripts" / "kafka-jars.sh"), KAFKA_VERSION], check=True)
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "kshard", "-p", "kshard-perf"], cwd=REPO, check=True)
    # Private copies: a rebuild during the run must not swap binaries.
    bins = {}
    (root / "bin").mkdir(exist_ok=True)
    for name in ("kshard", "kshard-perf"):
        dst = root / "bin" / name
        shutil.copy2(REPO / "target" / "release" / name, dst)
        bins[name] = dst
    log4j = root / "log4j.properties"
    log4j.write_text("log4j.rootLogger=WARN, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
                     "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
                     "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
    cp = {"log4j": log4j}
    global TLS
    if args.tls:
        TLS = make_tls(root)
    D = args.duration_s
    results = {"machine": {"cpus": os.cpu_count(), "uname": " ".join(os.uname()),
                           "load_avg_at_start": os.getloadavg()},
               "params": {"duration_s": D, "consume_size_mib": args.consume_size_mib,
                          "security": "SSL (Kafka tools only)" if TLS else "PLAINTEXT",
                          "brokers": args.brokers, "workloads": args.workloads}}
    log("machine ceiling (iperf3, fio)")
    results["ceiling"] = machine_ceiling(root, args.quick)

    brokers = {k: Broker(k, root, bins, cp) for k in BROKERS if k in args.brokers}
    samplers = {}
    fig = {k: {} for k in brokers}
    try:
        for k, b in brokers.items():
            log(f"starting {k} on {b.bootstrap}")
            b.start()
            wait_ready(bins, b)
        time.sleep(5)
        for k, b in brokers.items():
            fig[k]["rss_idle_mib"] = rss_kib(b.proc.pid) / 1024
            if b.zk:
                fig[k]["zookeeper_rss_mib"] = rss_kib(b.zk.pid) / 1024
            samplers[k] = RssSampler()
            samplers[k].pid = b.proc.pid

        order = list(brokers)
        for w, (name, fn) in enumerate([(n, f) for n, f in WORKLOADS.items() if n in args.workloads]):
            # Rotate which broker goes first.
            for k in order[w % len(order):] + order[:w % len(order)]:
                log(f"{name} on {k}")
                # The brokers not under test are stopped, so idle JVM or
                # shard threads do not take cycles from the one measured.
                others = [b for n, b in brokers.items() if n != k]
                for b in others:
                    b.freeze()
                since = log_size(brokers[k])
                try:
                    fig[k].update(fn(bins, cp, brokers[k], D, args))
                except Exception as e:
                    log(f"  {name} on {k} failed: {e}")
                    fig[k][f"{name}_error"] = str(e)[:300]
                finally:
                    fig[k].update(worst_stall(brokers[k], since, name))
                    for b in others:
                        b.thaw()
        for k in brokers:
            samplers[k].stop()
            fig[k]["rss_loaded_mib"] = samplers[k].max_kib / 1024
        for k in (order[::-1] if "startup" in args.workloads else []):
            log(f"startup with {STARTUP_PARTITIONS} partitions on {k}")
            try:
                fig[k]["startup_s"] = w_startup(bins, brokers[k])
            except Exception as e:
                log(f"  startup on {k} failed: {e}")
                fig[k]["startup_error"] = str(e)[:300]
    finally:
        for b in brokers.values():
            b.stop_all()
    results["figures"] = fig
    results["commands"] = COMMANDS
    results["machine"]["load_avg_at_end"] = os.getloadavg()
    report(results, args)
    if not args.keep and not args.data_dir:
        shutil.rmtree(root, ignore_errors=True)


def w_produce_1k(bins, cp, b, D, args):
    topic = "w1"
    with BrokerCpu(b) as cpu:
        r = perf(bins, ["produce", "--bootstrap-server", b.bootstrap, "--topic", topic, "--partitions", "8",
                        "--record-size", "1024", "--acks", "1", "--duration-s", str(D)], D * 4 + 120)
    out = {"w1_perf_records_per_s": r["records_per_s"], "w1_perf_mb_per_s": r["mb_per_s"],
           "w1_perf_p99_ms": r["latency_ms"]["p99"], **cpu.figures("w1_perf", r["payload_bytes"])}
    n = int(min(max(r["records_per_s"] * D, 10_000), 50_000_000))
    with BrokerCpu(b) as cpu:
        pp = producer_performance(cp, b, topic, n, 1024, "1", D * 10 + 180)
    out.update({"w1_pp_records_per_s": pp["records_per_s"], "w1_pp_mb_per_s": pp["mb_per_s"],
                **cpu.figures("w1_pp", pp["records"] * 1024)})
    return out


def w_produce_100b(bins, cp, b, D, args):
    topic = "w2"
    with BrokerCpu(b) as cpu:
        r = perf(bins, ["produce", "--bootstrap-server", b.bootstrap, "--topic", topic, "--partitions", "8",
                        "--record-size", "100", "--acks", "all", "--duration-s", str(D)], D * 4 + 120)
    out = {"w2_perf_records_per_s": r["records_per_s"], "w2_perf_mb_per_s": r["mb_per_s"],
           "w2_perf_p99_ms": r["latency_ms"]["p99"], **cpu.figures("w2_perf", r["payload_bytes"])}
    n = int(min(max(r["records_per_s"] * D, 10_000), 100_000_000))
    with BrokerCpu(b) as cpu:
        pp = producer_performance(cp, b, topic, n, 100, "all", D * 10 + 180)
    out.update({"w2_pp_records_per_s": pp["records_per_s"], "w2_pp_mb_per_s": pp["mb_per_s"],
                **cpu.figures("w2_pp", pp["records"] * 100)})
    return out


def w_consume(bins, cp, b, D, args):
    topic = "w3"
    n = args.consume_size_mib * 1024
    perf(bins, ["produce", "--bootstrap-server", b.bootstrap, "--topic", topic, "--partitions", "8",
                "--record-size", "1024", "--acks", "1", "--num-records", str(n)], 1800)
    # Warm the page cache once, then measure. A one-record ConsumerPerformance
    # first has Kafka create __consumer_offsets (kshard does at start-up), so
    # the measured step's broker CPU is the fetches'.
    perf(bins, ["consume", "--bootstrap-server", b.bootstrap, "--topic", topic, "--from-start"], 1800)
    consumer_performance(cp, b, topic, 1, 300)
    with BrokerCpu(b) as cpu:
        r = perf(bins, ["consume", "--bootstrap-server", b.bootstrap, "--topic", topic, "--from-start"], 1800)
    out = {"w3_perf_mb_per_s": r["mb_per_s"], "w3_perf_records_per_s": r["records_per_s"],
           "w3_perf_records": r["records"], **cpu.figures("w3_perf", r["payload_bytes"])}
    with BrokerCpu(b) as cpu:
        cperf = consumer_performance(cp, b, topic, n, 1800)
    out.update({"w3_cp_mb_per_s": cperf["fetch_mb_per_s"], "w3_cp_records": cperf["records"],
                **cpu.figures("w3_cp", cperf["records"] * 1024)})
    out.update({f"w3_cp_{k}": v for k, v in cperf["fetch"].items()})
    return out


def w_e2e(bins, cp, b, D, args):
    # linger 0: each record goes out as soon as the connection has room,
    # so the figure is the brokers' (the same client runs against both).
    with BrokerCpu(b) as cpu:
        r = perf(bins, ["e2e", "--bootstrap-server", b.bootstrap, "--topic", "w4", "--partitions", "1",
                        "--throughput", "20000", "--record-size", "1024", "--acks", "all", "--linger-ms", "0",
                        "--duration-s", str(D)], D * 4 + 120)
    lat = r["e2e_latency_ms"]
    out = {"w4_e2e_p50_ms": lat["p50"], "w4_e2e_p99_ms": lat["p99"], "w4_e2e_p999_ms": lat["p999"],
           "w4_e2e_max_ms": lat["max"], "w4_records_per_s": r["records_per_s"],
           **cpu.figures("w4_e2e", r["payload_bytes"])}
    e = end_to_end_latency(cp, b, "w4e", 2_000 if args.quick else 10_000, 1024, "all", 600)
    out.update({"w4_ete_avg_ms": e["avg_ms"], "w4_ete_p50_ms": e["p50_ms"], "w4_ete_p99_ms": e["p99_ms"],
                "w4_ete_p999_ms": e["p999_ms"]})
    return out


def w_startup(bins, b):
    topic = "startup1000"
    args = ["produce", "--bootstrap-server", b.bootstrap, "--topic", topic, "--partitions",
            str(STARTUP_PARTITIONS), "--num-records", str(STARTUP_PARTITIONS), "--record-size", "100"]
    perf(bins, args, 300)
    b.stop()
    t0 = time.monotonic()
    b.proc = Proc(b.kind, b.command(), b.root).start()
    deadline = t0 + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            # Round robin: one record to each of the 1,000 partitions.
            r = perf(bins, args, 120)
            if r["records"] == STARTUP_PARTITIONS and r["errors"] == 0:
                return time.monotonic() - t0
        except Exception:
            pass
        time.sleep(0.05)
    raise RuntimeError("no successful produce after restart")


WORKLOADS = {"produce_1k_acks1": w_produce_1k, "produce_100b_acksall": w_produce_100b,
             "consume": w_consume, "e2e": w_e2e}


ROWS = [
    # key, label, higher_is_better
    ("w1_perf_mb_per_s", "1) produce 1KiB acks=1 8p, kshard-perf MB/s", True),
    ("w1_perf_records_per_s", "1) produce 1KiB acks=1 8p, kshard-perf rec/s", True),
    ("w1_pp_mb_per_s", "1) produce 1KiB acks=1 8p, ProducerPerformance MB/s", True),
    ("w2_perf_records_per_s", "2) produce 100B acks=all, kshard-perf rec/s", True),
    ("w2_pp_records_per_s", "2) produce 100B acks=all, ProducerPerformance rec/s", True),
    ("w3_perf_mb_per_s", "3) consume from start, kshard-perf MB/s", True),
    ("w3_cp_mb_per_s", "3) consume from start, ConsumerPerformance fetch MB/s", True),
    ("w4_e2e_p50_ms", "4) e2e 20k/s 1KiB acks=all, kshard-perf p50 ms", False),
    ("w4_e2e_p99_ms", "4) e2e 20k/s 1KiB acks=all, kshard-perf p99 ms", False),
    ("w4_e2e_p999_ms", "4) e2e 20k/s 1KiB acks=all, kshard-perf p99.9 ms", False),
    ("w4_ete_p50_ms", "4) e2e 1KiB acks=all one at a time, EndToEndLatency p50 ms", False),
    ("w4_ete_p99_ms", "4) e2e 1KiB acks=all one at a time, EndToEndLatency p99 ms", False),
    # Broker CPU (utime + stime of its process) per GiB of payload in each step.
    ("w1_perf_cpu_s_per_gib", "7) broker CPU s/GiB: produce 1KiB acks=1, kshard-perf", False),
    ("w1_pp_cpu_s_per_gib", "7) broker CPU s/GiB: produce 1KiB acks=1, ProducerPerformance", False),
    ("w2_perf_cpu_s_per_gib", "7) broker CPU s/GiB: produce 100B acks=all, kshard-perf", False),
    ("w2_pp_cpu_s_per_gib", "7) broker CPU s/GiB: produce 100B acks=all, ProducerPerformance", False),
    ("w3_perf_cpu_s_per_gib", "7) broker CPU s/GiB: consume from start, kshard-perf", False),
    ("w3_cp_cpu_s_per_gib", "7) broker CPU s/GiB: consume from start, ConsumerPerformance", False),
    ("w4_e2e_cpu_s_per_gib", "7) broker CPU s/GiB: e2e 20k/s 1KiB acks=all, kshard-perf", False),
    # The kernel's share of that CPU (page-cache copies, sockets), and what
    # the guest handed back to its host meanwhile (see PAGE_REPORTING_KIB).
    ("w1_pp_cpu_sys_share", "7) broker kernel share of CPU: produce 1KiB, ProducerPerformance", False),
    ("w2_pp_cpu_sys_share", "7) broker kernel share of CPU: produce 100B, ProducerPerformance", False),
    ("w3_cp_cpu_sys_share", "7) broker kernel share of CPU: consume, ConsumerPerformance", False),
    ("w2_pp_host_reported_mib", "7) memory handed to the host, MiB: produce 100B, ProducerPerformance", False),
    # What the Java consumer saw per Fetch in ConsumerPerformance's step.
    ("w3_cp_fetch_size_avg", "8) ConsumerPerformance Fetch: bytes per response (avg)", True),
    ("w3_cp_records_per_request_avg", "8) ConsumerPerformance Fetch: records per response (avg)", True),
    ("w3_cp_fetch_latency_avg", "8) ConsumerPerformance Fetch: request to response ms (avg)", False),
    ("w3_cp_fetch_latency_max", "8) ConsumerPerformance Fetch: request to response ms (max)", False),
    ("rss_idle_mib", "5) RSS idle MiB", False),
    ("rss_loaded_mib", "5) RSS loaded (max) MiB", False),
    ("startup_s", f"6) restart to first produce, {STARTUP_PARTITIONS} partitions, s", False),
]


def report(results, args):
    fig = results["figures"]
    fig.setdefault("kafka", {})
    others = [k for k in fig if k != "kafka"]
    table = []
    for key, label, higher in ROWS:
        row = {"figure": label, "key": key, "higher_is_better": higher, "kafka": fig["kafka"].get(key)}
        for k in others:
            v = fig[k].get(key)
            row[k] = v
            row[f"ratio_{k}_over_kafka"] = (v / row["kafka"]) if (row["kafka"] and v is not None) else None
        table.append(row)
    results["table"] = table
    ceil = results["ceiling"]
    fractions = {}
    for k in fig:
        f = {}
        if "disk_odirect_write_mb_per_s" in ceil and "w1_perf_mb_per_s" in fig[k]:
            f["w1_of_disk_write"] = fig[k]["w1_perf_mb_per_s"] / ceil["disk_odirect_write_mb_per_s"]
        if "page_cache_new_file_write_mb_per_s" in ceil and "w1_perf_mb_per_s" in fig[k]:
            f["w1_of_page_cache_write"] = fig[k]["w1_perf_mb_per_s"] / ceil["page_cache_new_file_write_mb_per_s"]
        if "loopback_tcp_mb_per_s" in ceil:
            for key in ("w1_perf_mb_per_s", "w3_perf_mb_per_s"):
                if key in fig[k]:
                    f[f"{key[:2]}_of_loopback"] = fig[k][key] / ceil["loopback_tcp_mb_per_s"]
        fractions[k] = f
    results["ceiling_fractions"] = fractions

    def fmt(v):
        if v is None:
            return "-"
        return f"{v:,.2f}" if abs(v) < 1000 else f"{v:,.0f}"

    w = max(len(r["figure"]) for r in table)
    head = f"{'figure':<{w}}  {'Kafka':>10}"
    for k in others:
        head += f"  {k:>13}  {'/Kafka':>7}"
    print("\n" + head)
    print("-" * len(head))
    for r in table:
        line = f"{r['figure']:<{w}}  {fmt(r['kafka']):>10}"
        for k in others:
            line += f"  {fmt(r[k]):>13}  {fmt(r[f'ratio_{k}_over_kafka']):>7}"
        print(line + ("  (higher better)" if r["higher_is_better"] else "  (lower better)"))
    print(f"\nsecurity: {results['params']['security']}")
    print("machine ceiling (same run):")
    for k, v in ceil.items():
        print(f"  {k}: {v:,.1f}")
    for k, f in fractions.items():
        print(f"  {k}: " + ", ".join(f"{n} {v:.1%}" for n, v in f.items()))
    if "zookeeper_rss_mib" in fig["kafka"]:
        print(f"  (Kafka's ZooKeeper RSS, not counted above: {fig['kafka']['zookeeper_rss_mib']:.0f} MiB)")
    errors = {k: {n: v for n, v in f.items() if n.endswith("_error")} for k, f in fig.items()}
    for k, e in errors.items():
        for n, v in e.items():
            print(f"  {k} {n}: {v}")
    for k in others:
        stalls = {n[:-len("_stall_worst_ms")]: v for n, v in fig[k].items() if n.endswith("_stall_worst_ms")}
        if stalls:
            print(f"  {k} worst shard stall (ms, over 10 ms): " + ", ".join(
                f"{n} {v:.1f} ({fig[k][n + '_stalls']} stalls)" for n, v in stalls.items()))
    print(f"  load average at start {results['machine']['load_avg_at_start']}, "
          f"at end {results['machine']['load_avg_at_end']} on {results['machine']['cpus']} cpus")
    out = Path(args.out)
    out.write_text(json.dumps(results, indent=2))
    print(f"\nJSON written to {out}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="15 s per workload, 256 MiB consume topic")
    p.add_argument("--duration-s", type=int, default=None, help="seconds per timed workload (default 60)")
    p.add_argument("--consume-size-mib", type=int, default=None, help="size of the consume topic (default 4096)")
    p.add_argument("--data-dir", default=None, help="where brokers keep data (default: a new temp dir)")
    p.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "kshard-compare-results.json"),
                   help="JSON output file (default: in the temp dir, not the repo)")
    p.add_argument("--no-build", action="store_true", help="use the existing target/release binaries")
    p.add_argument("--keep", action="store_true", help="keep the temp dir")
    p.add_argument("--tls", action="store_true",
                   help="an SSL listener on every broker (PEM keystore, throwaway CA); Kafka's tools use it")
    p.add_argument("--brokers", default=",".join(DEFAULT_BROKERS),
                   help=f"comma-separated subset of {','.join(BROKERS)} (default {','.join(DEFAULT_BROKERS)}; "
                        "kshard-unpinned is kshard with shard.core.pinning=false)")
    p.add_argument("--workloads", default=",".join([*WORKLOADS, "startup"]),
                   help=f"comma-separated subset of {','.join([*WORKLOADS, 'startup'])} (default all)")
    args = p.parse_args()
    args.brokers = args.brokers.split(",")
    args.workloads = args.workloads.split(",")
    for n in args.brokers:
        if n not in BROKERS:
            p.error(f"unknown broker {n}")
    for n in args.workloads:
        if n not in WORKLOADS and n != "startup":
            p.error(f"unknown workload {n}")
    if args.duration_s is None:
        args.duration_s = 15 if args.quick else 60
    if args.consume_size_mib is None:
        args.consume_size_mib = 256 if args.quick else 4096
    run(args)


if __name__ == "__main__":
    main()
