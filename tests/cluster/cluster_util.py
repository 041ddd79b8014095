"""Multi-broker cluster helpers over a real ZooKeeper.

KSHARD_TEST_TARGET=kshard (default) starts target/release/kshard brokers;
KSHARD_TEST_TARGET=kafka starts Apache Kafka 3.9.1 brokers in ZooKeeper mode
from the jars scripts/kafka-jars.sh caches. Both get the same Kafka broker
config keys (server.properties for Kafka, --override k=v for kshard).
"""

import atexit
import base64
import json
import os
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

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "compat"))
import compat_util as cu  # noqa: E402  (wire encoders, free ports)

TARGET = os.environ.get("KSHARD_TEST_TARGET", "kshard")
KAFKA_VERSION = os.environ.get("KSHARD_KAFKA_VERSION", "3.9.1")
CACHE = Path(os.environ.get("KSHARD_CACHE_DIR", Path.home() / ".cache" / "kshard"))
KAFKA_HOME = CACHE / f"kafka-{KAFKA_VERSION}"
KAFKA_LIBS = KAFKA_HOME / "libs"
KSHARD_BIN = Path(os.environ.get("KSHARD_BIN", REPO / "target" / "release" / "kshard"))

# kshard starts in well under a second; a JVM broker on 2 shared cores
# takes 5-20 s.
START_TIMEOUT_S = {"kshard": 30.0, "kafka": 90.0}
STOP_TIMEOUT_S = 60.0
JARS_WAIT_S = 600.0
# tickTime 500 ms: ZooKeeper negotiates session timeouts into
# [2 * tick, 20 * tick] = [1000, 10000] ms.
ZK_TICK_MS = 500
DEFAULT_SESSION_TIMEOUT_MS = 6000


def java_string_hash(s):
    """Java's String.hashCode over UTF-16 code units, as a signed int."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group, partitions):
    """Kafka's partitionFor: Utils.abs(groupId.hashCode) % partitions (abs of
    Integer.MIN_VALUE is 0)."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class ClusterError(AssertionError):
    pass


def start_timeout_s():
    return START_TIMEOUT_S.get(TARGET, 90.0)


def kafka_classpath():
    """Waits for the jar download to finish (scripts/kafka-jars.sh marks it
    with .complete)."""
    deadline = time.monotonic() + JARS_WAIT_S
    while not (KAFKA_HOME / ".complete").exists():
        if time.monotonic() > deadline:
            raise ClusterError(f"{KAFKA_HOME}/.complete missing: run scripts/kafka-jars.sh")
        time.sleep(2)
    return f"{KAFKA_LIBS}/*"


def wait_for(pred, timeout_s, what, interval_s=0.1):
    """Polls pred() until it returns something truthy and returns that; on
    timeout fails naming `what` and the last value or error seen."""
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        try:
            v = pred()
            if v:
                return v
            last = v
        except Exception as e:  # a broker that is down answers with errors
            last = f"{type(e).__name__}: {e}"
        if time.monotonic() >= deadline:
            raise ClusterError(f"timed out after {timeout_s:.1f}s waiting for {what}; last: {last!r}")
        time.sleep(interval_s)


def uuid_to_kafka(raw16):
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(raw16).decode().rstrip("=")


# --- raw Metadata (v10..v12), sent to one broker and only that one ----------


def _metadata_request(correlation_id, version):
    body = cu.uvarint(0)  # topics: null (compact array length 0) = all topics
    body += cu.i8(0)  # allow_auto_topic_creation
    if version <= 10:
        body += cu.i8(0)  # include_cluster_authorized_operations
    body += cu.i8(0)  # include_topic_authorized_operations
    body += cu.uvarint(0)  # tagged fields
    return cu.frame(cu.request_header_v2(3, version, correlation_id, "kshard-cluster") + body)


def _compact_i32_array(r):
    n = r.uvarint() - 1
    return None if n < 0 else [r.i32() for _ in range(n)]


def _parse_metadata(payload, version):
    r = cu.Reader(payload)
    r.i32()  # correlation id
    r.skip_tags()  # response header v1
    r.i32()  # throttle
    brokers = {}
    for _ in range(r.uvarint() - 1):
        node = r.i32()
        host = r.compact_string()
        port = r.i32()
        rack = r.compact_string()
        r.skip_tags()
        brokers[node] = (host, port, rack)
    cluster_id = r.compact_string()
    controller_id = r.i32()
    topics = {}
    for _ in range(r.uvarint() - 1):
        err = r.i16()
        name = r.compact_string()
        topic_id = uuid_to_kafka(r.take(16))
        internal = r.i8() != 0
        parts = {}
        for _ in range(r.uvarint() - 1):
            perr = r.i16()
            idx = r.i32()
            leader = r.i32()
            leader_epoch = r.i32()
            replicas = _compact_i32_array(r)
            isr = _compact_i32_array(r)
            offline = _compact_i32_array(r)
            r.skip_tags()
            parts[idx] = {
                "error": perr,
                "leader": leader,
                "leader_epoch": leader_epoch,
                "replicas": replicas,
                "isr": isr,
                "offline": offline,
            }
        r.i32()  # topic authorized operations
        r.skip_tags()
        topics[name] = {"error": err, "topic_id": topic_id, "internal": internal, "partitions": parts}
    if version <= 10:
        r.i32()  # cluster authorized operations
    r.skip_tags()
    return {"brokers": brokers, "cluster_id": cluster_id, "controller_id": controller_id, "topics": topics}


def raw_metadata(port, timeout_s=5.0):
    """Metadata for all topics from the broker on `port` alone (a client
    library would route the request to any broker it knows)."""
    with cu.connect("127.0.0.1", port, timeout_s) as s:
        s.sendall(cu.api_versions_v3_request(1))
        corr, err, versions = cu.parse_api_versions_v3(cu.recv_frame(s))
        if err != 0 or 3 not in versions:
            raise ClusterError(f"ApiVersions error {err} or no Metadata in {sorted(versions)}")
        version = min(12, versions[3][1])
        if version < 10:
            raise ClusterError(f"broker serves Metadata up to v{version}; topic ids need v10+")
        s.sendall(_metadata_request(2, version))
        return _parse_metadata(cu.recv_frame(s), version)


def init_producer_id(port, timeout_s=30.0):
    """InitProducerId v0 for an idempotent (non-transactional) producer,
    sent to the broker on `port` alone; retries while the broker answers
    COORDINATOR_LOAD_IN_PROGRESS (it is fetching a producer id block).
    Returns (producer_id, producer_epoch)."""
    deadline = time.monotonic() + timeout_s
    corr = 0
    with cu.connect("127.0.0.1", port, timeout_s) as s:
        while True:
            corr += 1
            body = cu.string(None) + cu.i32(60000)
            s.sendall(cu.frame(cu.request_header_v1(22, 0, corr, "kshard-cluster") + body))
            r = cu.Reader(cu.recv_frame(s))
            assert r.i32() == corr
            r.i32()  # throttle
            err = r.i16()
            pid = r.i64()
            epoch = r.i16()
            if err == 0:
                return pid, epoch
            if err != 14 or time.monotonic() > deadline:
                raise ClusterError(f"InitProducerId error {err}")
            time.sleep(0.2)


def comparable_metadata(md, include_internal=False):
    """The parts of a Metadata response every broker must agree on."""
    return {
        "brokers": dict(sorted(md["brokers"].items())),
        "cluster_id": md["cluster_id"],
        "controller_id": md["controller_id"],
        "topics": {
            name: {
                "error": t["error"],
                "topic_id": t["topic_id"],
                "partitions": {
                    p: (v["leader"], v["replicas"], sorted(v["isr"]), sorted(v["offline"]))
                    for p, v in sorted(t["partitions"].items())
                },
            }
            for name, t in sorted(md["topics"].items())
            if include_internal or not name.startswith("__")
        },
    }


# --- processes ----------------------------------------------------------------


def _log4j_file(path, root_level="INFO"):
    path.write_text(
        f"log4j.rootLogger={root_level}, stdout\n"
        "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        "log4j.logger.kafka.request.logger=WARN\n"
        "log4j.logger.org.apache.zookeeper=WARN\n"
        "log4j.logger.kafka.zookeeper=INFO\n"
    )
    return path


class Process:
    """A child process in its own session with its output in one log file."""

    def __init__(self, name, tmp):
        self.name = name
        self.tmp = Path(tmp)
        self.log_path = self.tmp / f"{name}.log"
        self.proc = None
        self.starts = 0

    def command(self):
        raise NotImplementedError

    def spawn(self):
        assert not self.running(), f"{self.name} already running"
        self.starts += 1
        with open(self.log_path, "ab") as logf:
            logf.write(f"\n==== {self.name} start #{self.starts} ====\n".encode())
            logf.flush()
            self.proc = subprocess.Popen(
                self.command(),
                stdout=logf,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.tmp,
                start_new_session=True,
            )
        return self

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def returncode(self):
        return None if self.proc is None else self.proc.poll()

    def stop(self):
        """SIGTERM and wait (a controlled shutdown); returns the exit code."""
        if not self.running():
            return self.returncode()
        self.sigcont()  # a stopped process cannot handle SIGTERM
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise ClusterError(f"{self.name} ignored SIGTERM for {STOP_TIMEOUT_S}s")

    def kill9(self):
        if self.running():
            self.proc.kill()
            self.proc.wait()

    def sigstop(self):
        assert self.running(), f"{self.name} is not running"
        self.proc.send_signal(signal.SIGSTOP)

    def sigcont(self):
        if self.running():
            self.proc.send_signal(signal.SIGCONT)

    def thread_stacks(self):
        """Every thread's stack (gdb), for a process that hangs; a note
        saying why when there is none."""
        if not self.running():
            return f"(no stacks: {self.name} is not running)"
        try:
            out = subprocess.run(
                ["gdb", "-p", str(self.proc.pid), "-batch", "-nx", "-ex", "thread apply all bt 40"],
                capture_output=True, text=True, timeout=120,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"(no stacks of {self.name}: {e})"
        threads = [l for l in out.stdout.splitlines() if l.startswith(("Thread ", "#"))]
        return f"==== {self.name} threads (gdb) ====\n" + "\n".join(threads)

    def log_text(self, tail_lines=None):
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        if tail_lines is not None:
            text = "\n".join(text.splitlines()[-tail_lines:])
        return text


class ZooKeeperServer(Process):
    """A standalone ZooKeeper (the one in Kafka's libs) on a free port."""

    def __init__(self):
        super().__init__("zookeeper", tempfile.mkdtemp(prefix="cluster-zk-"))
        self.port = cu.free_port()
        self.data_dir = self.tmp / "data"
        self.data_dir.mkdir()
        self.log4j = _log4j_file(self.tmp / "log4j.properties")
        self.connect = f"127.0.0.1:{self.port}"

    def command(self):
        return [
            "java",
            "-Xmx128m",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.4lw.commands.whitelist=ruok,srvr,stat,cons",
            f"-Dlog4j.configuration=file:{self.log4j}",
            "-cp",
            kafka_classpath(),
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(self.port),
            str(self.data_dir),
            str(ZK_TICK_MS),
        ]

    def four_letter(self, word, timeout_s=2.0):
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout_s) as s:
            s.sendall(word.encode())
            out = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    return out.decode(errors="replace")
                out += chunk

    def start(self):
        self.spawn()
        deadline = time.monotonic() + START_TIMEOUT_S["kafka"]
        while True:
            if not self.running():
                raise ClusterError(f"ZooKeeper exited {self.returncode()}\n{self.log_text(80)}")
            try:
                # ruok answers before the database is loaded; srvr shows a
                # Mode only once requests are served.
                if self.four_letter("ruok") == "imok" and "Mode: " in self.four_letter("srvr"):
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ClusterError(f"ZooKeeper not serving in {START_TIMEOUT_S['kafka']}s\n{self.log_text(80)}")
            time.sleep(0.2)

    def client(self):
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.connect, timeout=10.0)
        zk.start(timeout=30)
        return zk

    def cleanup(self):
        self.kill9()
        shutil.rmtree(self.tmp, ignore_errors=True)


class Broker(Process):
    """One broker of a cluster. broker_id None means broker.id=-1 (the broker
    takes a generated id from /brokers/seqid)."""

    def __init__(self, cluster, broker_id, overrides=None):
        tmp = tempfile.mkdtemp(prefix=f"cluster-{TARGET}-b{broker_id if broker_id is not None else 'auto'}-")
        super().__init__(f"broker-{broker_id if broker_id is not None else 'auto'}", tmp)
        self.cluster = cluster
        self.configured_id = broker_id
        self.port = cu.free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_dirs = str(self.tmp / "data")
        os.makedirs(self.log_dirs)
        self.props = {
            "broker.id": str(-1 if broker_id is None else broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": self.log_dirs,
            "zookeeper.connect": cluster.zk_connect,
            "zookeeper.session.timeout.ms": str(DEFAULT_SESSION_TIMEOUT_MS),
            "num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        self.props.update({k: str(v) for k, v in (overrides or {}).items()})

    @property
    def broker_id(self):
        """The id in effect: the configured one, or the generated one that
        meta.properties holds."""
        if self.configured_id is not None:
            return self.configured_id
        meta = self.meta_properties()
        if "broker.id" in meta:
            return int(meta["broker.id"])
        return self.registered_as()

    def registered_as(self):
        """The id under /brokers/ids whose endpoint is this broker's port."""
        zk, ids = self.cluster.zk, self.cluster.path("/brokers/ids")
        try:
            for child in zk.get_children(ids):
                data, _ = zk.get(f"{ids}/{child}")
                if f"127.0.0.1:{self.port}\"" in data.decode(errors="replace"):
                    return int(child)
        except Exception:  # no chroot yet, or a node vanished while listing
            return None
        return None

    def meta_properties(self):
        p = Path(self.log_dirs) / "meta.properties"
        out = {}
        if p.exists():
            for line in p.read_text().splitlines():
                if "=" in line and not line.lstrip().startswith("#"):
                    k, v = line.split("=", 1)
                    out[k.strip()] = v.strip()
        return out

    def start(self, wait=True):
        self.spawn()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout_s=None):
        """Listening, registered in /brokers/ids, and its Metadata lists
        itself with a controller (it has heard from the controller)."""
        timeout_s = timeout_s or start_timeout_s()
        deadline = time.monotonic() + timeout_s
        last = "not checked yet"
        while True:
            if not self.running():
                raise ClusterError(f"{self.name} exited with {self.returncode()}\n{self.log_text(tail_lines=80)}")
            try:
                bid = self.broker_id
                if bid is None:
                    last = f"no meta.properties broker.id and no {self.cluster.chroot}/brokers/ids entry for port {self.port}"
                elif not self.cluster.zk.exists(self.cluster.path(f"/brokers/ids/{bid}")):
                    last = f"{self.cluster.chroot}/brokers/ids/{bid} does not exist in ZooKeeper"
                else:
                    md = raw_metadata(self.port, timeout_s=2.0)
                    if bid in md["brokers"] and md["controller_id"] >= 0:
                        return
                    last = f"registered, but its Metadata lists brokers {sorted(md['brokers'])}, controller {md['controller_id']}"
            except (OSError, ValueError, ClusterError) as e:
                last = f"{type(e).__name__}: {e}"
            if time.monotonic() > deadline:
                raise ClusterError(f"{self.name} (zookeeper.connect={self.cluster.zk_connect}) not ready in "
                                   f"{timeout_s}s: {last}\n{self.log_text(tail_lines=80)}\n{self.thread_stacks()}")
            time.sleep(0.2)

    def wait_exit(self, timeout_s):
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"{self.name} still running after {timeout_s}s\n{self.log_text(tail_lines=60)}")

    def restart(self):
        self.stop()
        return self.start()

    def metadata(self):
        return raw_metadata(self.port)

    def partition_dirs(self, topic):
        """Entries of log.dirs that belong to `topic`, including Kafka's
        renamed <topic>-<p>.<uuid>-delete directories."""
        prefix = f"{topic}-"
        return sorted(e for e in os.listdir(self.log_dirs) if e.startswith(prefix))

    def cleanup(self):
        self.kill9()
        shutil.rmtree(self.tmp, ignore_errors=True)


class KshardBroker(Broker):
    def command(self):
        if not KSHARD_BIN.exists():
            raise ClusterError(f"{KSHARD_BIN} missing: cargo build --release --bins")
        cmd = [str(KSHARD_BIN)]
        for k, v in self.props.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd


class KafkaBroker(Broker):
    def command(self):
        config = self.tmp / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        log4j = _log4j_file(self.tmp / "log4j.properties")
        return [
            "java",
            "-Xmx384m",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            "-Dzookeeper.sasl.client=false",
            f"-Dlog4j.configuration=file:{log4j}",
            "-cp",
            kafka_classpath(),
            "kafka.Kafka",
            str(config),
        ]


def broker_class():
    return KafkaBroker if TARGET == "kafka" else KshardBroker


class Cluster:
    """Brokers sharing one ZooKeeper chroot (/kshard-<uuid>)."""

    def __init__(self, zk_server, zk):
        self.zk_server = zk_server
        self.zk = zk  # kazoo client at the ZooKeeper root
        self.chroot = f"/kshard-{uuid.uuid4().hex[:12]}"
        self.zk_connect = f"{zk_server.connect}{self.chroot}"
        self.all_brokers = []

    # --- brokers ---

    def new_broker(self, broker_id, overrides=None):
        b = broker_class()(self, broker_id, overrides)
        self.all_brokers.append(b)
        return b

    def start(self, n, overrides=None, first_id=1, per_broker=None):
        """Starts brokers first_id..first_id+n-1 together and waits until
        every one is registered and every one's Metadata lists all of them
        with one controller. per_broker, if given, is called with each new
        Broker (its id and PLAINTEXT port already chosen) and returns more
        overrides for that broker alone (e.g. listeners with extra ports)."""
        made = [self.new_broker(first_id + i, overrides) for i in range(n)]
        if per_broker is not None:
            for b in made:
                b.props.update({k: str(v) for k, v in per_broker(b).items()})
        for b in made:
            b.spawn()
        for b in made:
            b.wait_ready()
        self.wait_converged()
        return made

    def broker(self, broker_id):
        """The broker with that id (a running one first, when a test started
        two with the same id)."""
        found = [b for b in self.all_brokers if b.broker_id == broker_id]
        if not found:
            raise KeyError(f"no broker {broker_id}")
        return next((b for b in found if b.running()), found[0])

    def live(self):
        return [b for b in self.all_brokers if b.running()]

    def bootstrap(self, brokers=None):
        return ",".join(b.bootstrap for b in (brokers or self.live()))

    # --- ZooKeeper ---

    def path(self, p):
        return self.chroot if p == "/" else self.chroot + p

    def zk_get(self, p):
        """(raw bytes, stat) of a node under the chroot."""
        return self.zk.get(self.path(p))

    def zk_json(self, p):
        data, _ = self.zk_get(p)
        return json.loads(data)

    def zk_exists(self, p):
        return self.zk.exists(self.path(p))

    def zk_children(self, p):
        return sorted(self.zk.get_children(self.path(p)))

    def registered_ids(self):
        return sorted(int(c) for c in self.zk_children("/brokers/ids"))

    def controller_id(self):
        return self.zk_json("/controller")["brokerid"]

    def controller_epoch(self):
        data, _ = self.zk_get("/controller_epoch")
        return int(data)

    def partition_state(self, topic, partition):
        return self.zk_json(f"/brokers/topics/{topic}/partitions/{partition}/state")

    def assignment(self, topic):
        """{partition: replicas} from /brokers/topics/<topic>."""
        return {int(p): r for p, r in self.zk_json(f"/brokers/topics/{topic}")["partitions"].items()}

    # --- waiting and Metadata ---

    def wait_for(self, pred, timeout_s, what, interval_s=0.1):
        return wait_for(pred, timeout_s, what, interval_s)

    def metadata(self, broker_id):
        return self.broker(broker_id).metadata()

    def metadata_views(self, brokers=None):
        return {b.broker_id: comparable_metadata(b.metadata()) for b in (brokers or self.live())}

    def agreed_metadata(self, brokers=None):
        """The common Metadata view, or None while brokers disagree."""
        views = list(self.metadata_views(brokers).values())
        return views[0] if all(v == views[0] for v in views) else None

    def wait_converged(self, timeout_s=60.0, brokers=None, topics=()):
        """Every live broker registered, and all of them answer the same
        Metadata listing exactly the live brokers, the /controller broker,
        and `topics` with a leader for every partition."""
        brokers = brokers or self.live()
        want_ids = sorted(b.broker_id for b in brokers)

        def agreed():
            if self.registered_ids() != want_ids:
                return None
            view = self.agreed_metadata(brokers)
            if view is None or sorted(view["brokers"]) != want_ids:
                return None
            if view["controller_id"] != self.controller_id():
                return None
            for t in topics:
                tv = view["topics"].get(t)
                if tv is None or tv["error"] != 0 or not tv["partitions"]:
                    return None
                if any(leader < 0 for leader, *_ in tv["partitions"].values()):
                    return None
            return view

        return wait_for(agreed, timeout_s, f"brokers {want_ids} to agree on Metadata (topics {list(topics)})", 0.2)

    def admin(self, broker_id=None, **conf):
        from confluent_kafka.admin import AdminClient

        bs = self.broker(broker_id).bootstrap if broker_id is not None else self.bootstrap()
        return AdminClient({"bootstrap.servers": bs, **conf})

    def create_topic(self, topic, partitions, replication_factor, config=None, via=None):
        from confluent_kafka.admin import NewTopic

        admin = self.admin(via)  # the handle must outlive the future
        futs = admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor, config=config or {})],
            operation_timeout=30,
            request_timeout=60,
        )
        futs[topic].result(90)

    def cleanup(self):
        for b in self.all_brokers:
            b.cleanup()


def kafka_tool(main_class, *args, timeout_s=120, check=True):
    """Runs one of Kafka's command line tools from the jars; returns the
    CompletedProcess (text)."""
    cmd = [
        "java",
        "-Xmx256m",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-Dlog4j.configuration=file:" + str(_tool_log4j()),
        "-cp",
        kafka_classpath(),
        main_class,
        *args,
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    if check and res.returncode != 0:
        raise ClusterError(f"{main_class} {' '.join(args)} exited {res.returncode}\n{res.stdout}\n{res.stderr}")
    return res


_TOOL_LOG4J = []
_TOOL_LOCK = threading.Lock()


def _tool_log4j():
    with _TOOL_LOCK:
        if not _TOOL_LOG4J:
            d = Path(tempfile.mkdtemp(prefix="cluster-tool-"))
            atexit.register(shutil.rmtree, d, True)
            (d / "log4j.properties").write_text(
                "log4j.rootLogger=WARN, stderr\n"
                "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                "log4j.appender.stderr.Target=System.err\n"
                "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            )
            _TOOL_LOG4J.append(d / "log4j.properties")
        return _TOOL_LOG4J[0]
