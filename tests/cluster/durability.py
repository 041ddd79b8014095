"""Durability helpers for the cluster suite: numbered acks=all producers that
record exactly which records were acknowledged (the Java client and
librdkafka, both idempotent), a kill -9 loop over the brokers, and a checker
that reads every partition from the beginning and proves each acknowledged
record is in the log exactly once at the offset it was acknowledged at.

Record values are "<tag>-<seq>"; a producer sends seq to partition
seq % partitions, so per-producer order within a partition is seq order.
Memory is O(records) in 8-byte array slots, so the soak can run for hours.
"""

import array
import os
import random
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import cluster_util as cl
from confluent_kafka import KafkaException

REPO = cl.REPO
JAVA_DIR = REPO / "tests" / "compat" / "java"
JAVA_CLIENT_VERSION = os.environ.get("KSHARD_DURABILITY_JAVA_VERSION", "3.9.1")
JAVA_SOURCE = JAVA_DIR / "src" / "main" / "java" / "kshard" / "compat" / "NumberedProducer.java"

# Small timeouts keep a kill short: the old session must expire before the
# broker can register again (ZooKeeper tickTime 500 allows 1000..10000 ms).
SESSION_TIMEOUT_MS = 3000
LAG_MS = 3000
CLUSTER_OVERRIDES = {
    "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
    "replica.lag.time.max.ms": LAG_MS,
    "unclean.leader.election.enable": "false",
}
DELIVERY_TIMEOUT_MS = 60000
NOT_ACKED = -1
# librdkafka acknowledged the record without an offset: a later batch of
# its partition succeeded while this one's outcome was unknown (its
# IMPLICITACK), so the record is in the log at an offset nobody was told.
IMPLICIT_ACK = -2


class DurabilityError(AssertionError):
    pass


# --- acknowledgement bookkeeping --------------------------------------------


class AckLog:
    """What one producer was told: offsets[seq] = acknowledged offset,
    IMPLICIT_ACK, or NOT_ACKED. A second acknowledgement of one seq is kept
    in double_acked."""

    def __init__(self, tag, partitions):
        self.tag = tag
        self.partitions = partitions
        self.offsets = array.array("q")
        self.acked = 0
        self.implicit = 0
        self.failed = 0
        self.errors = Counter()
        self.double_acked = []  # (seq, first (p, o), second (p, o))
        self.wrong_partition = []  # (seq, partition acknowledged)
        self.fatal = []
        self.lock = threading.Lock()

    def _grow(self, seq):
        if seq >= len(self.offsets):
            self.offsets.extend([NOT_ACKED] * (seq + 1 - len(self.offsets) + 4096))

    def ack(self, seq, partition, offset):
        with self.lock:
            self._grow(seq)
            if partition != seq % self.partitions:
                self.wrong_partition.append((seq, partition))
            if self.offsets[seq] != NOT_ACKED:
                first = (seq % self.partitions, self.offsets[seq])
                self.double_acked.append((seq, first, (partition, offset)))
                return
            self.offsets[seq] = offset
            self.acked += 1
            self.implicit += offset == IMPLICIT_ACK

    def fail(self, seq, reason):
        with self.lock:
            self.failed += 1
            self.errors[reason] += 1

    def acked_offset(self, seq):
        return self.offsets[seq] if seq < len(self.offsets) else NOT_ACKED

    def acked_seqs(self):
        return (s for s, o in enumerate(self.offsets) if o != NOT_ACKED)


# --- producers ----------------------------------------------------------------


def java_classpath():
    """kafka-clients 3.9.1 plus NumberedProducer: the Maven build's classes
    when they are current, else a javac build of the one source file into a
    scratch directory (scripts/setup.sh skips Maven when Client.class is
    newer than Client.java)."""
    base = JAVA_DIR / "target" / f"kc-{JAVA_CLIENT_VERSION}"
    libs = base / "libs"
    if not libs.is_dir():
        raise DurabilityError(f"{libs} missing: run scripts/setup.sh")
    built = base / "classes" / "kshard" / "compat" / "NumberedProducer.class"
    if built.exists() and built.stat().st_mtime >= JAVA_SOURCE.stat().st_mtime:
        return f"{base / 'classes'}:{libs}/*"
    out = Path(f"/tmp/kshard-numbered-producer-{JAVA_CLIENT_VERSION}")
    cls = out / "kshard" / "compat" / "NumberedProducer.class"
    if not cls.exists() or cls.stat().st_mtime < JAVA_SOURCE.stat().st_mtime:
        out.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(["javac", "-d", str(out), "-cp", f"{libs}/*", str(JAVA_SOURCE)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise DurabilityError(f"javac NumberedProducer failed:\n{res.stderr}")
    return f"{out}:{libs}/*"


class JavaProducer:
    """kshard.compat.NumberedProducer (kafka-clients, enable.idempotence=true,
    acks=all) in a child JVM; its acknowledgement lines feed an AckLog."""

    def __init__(self, bootstrap, topic, partitions, tag="java", rate=200, log_dir=None):
        self.log = AckLog(tag, partitions)
        self.tag = tag
        self.stderr_path = Path(log_dir or "/tmp") / f"producer-{tag}-{os.getpid()}.log"
        cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
               "-Dorg.slf4j.simpleLogger.showDateTime=true",
               "-cp", java_classpath(), "kshard.compat.NumberedProducer",
               "--bootstrap", bootstrap, "--topic", topic, "--partitions", str(partitions),
               "--tag", tag, "--rate", str(rate), "--delivery-timeout-ms", str(DELIVERY_TIMEOUT_MS)]
        self.stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        self.done = None
        self.reader = threading.Thread(target=self._read, name=f"{tag}-acks", daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            kind, _, rest = line.partition(" ")
            if kind == "a":
                p, o, seq = (int(x) for x in rest.split())
                self.log.ack(seq, p, o)
            elif kind == "e":
                seq, _, reason = rest.partition(" ")
                self.log.fail(int(seq), reason.split(" ", 1)[0])
            elif kind == "fatal":
                self.log.fatal.append(rest)
            elif kind == "done":
                self.done = tuple(int(x) for x in rest.split())

    def running(self):
        return self.proc.poll() is None

    def health(self):
        """None while the JVM runs, else why it is gone."""
        if self.running():
            return None
        return (f"Java producer {self.tag} exited {self.proc.returncode}:\n"
                f"{self.stderr_path.read_text(errors='replace')[-3000:]}")

    def stop(self, timeout_s=DELIVERY_TIMEOUT_MS / 1000 + 60):
        """Closes stdin: the producer stops sending, flushes and exits."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            rc = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise DurabilityError(f"Java producer {self.tag} did not finish in {timeout_s}s")
        finally:
            self.reader.join(30)
            self.stderr.close()
        if rc != 0 or self.done is None:
            raise DurabilityError(f"Java producer {self.tag} exited {rc} (done={self.done}):\n"
                                  f"{self.stderr_path.read_text(errors='replace')[-3000:]}")
        return self.done

    def kill(self):
        if self.running():
            self.proc.kill()
            self.proc.wait()


class RdkafkaProducer:
    """confluent_kafka Producer (librdkafka, enable.idempotence=true,
    acks=all) in a thread; delivery reports feed an AckLog. Records carry
    `key` if given (the AckLog reads only the value "<tag>-<seq>");
    `batch_bytes` caps librdkafka's batch.size; pause()/resume() stop and
    restart sending."""

    def __init__(self, bootstrap, topic, partitions, tag="rdkafka", rate=200, key=None, batch_bytes=None,
                 log_dir=None):
        from confluent_kafka import Producer

        self.key = key
        self.paused = threading.Event()
        self.log = AckLog(tag, partitions)
        self.tag = tag
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.sent = 0
        self.stopping = threading.Event()
        self.unflushed = None
        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": DELIVERY_TIMEOUT_MS,
            "request.timeout.ms": 10000,
            "retry.backoff.ms": 100,
            "reconnect.backoff.max.ms": 1000,
            "topic.metadata.refresh.interval.ms": 5000,
            "error_cb": self._error,
            **({"batch.size": batch_bytes} if batch_bytes else {}),
            **(self._debug_log(log_dir) if log_dir else {}),
        })
        self.thread = threading.Thread(target=self._run, name=f"{tag}-produce", daemon=True)
        self.thread.start()

    def _debug_log(self, log_dir):
        """librdkafka's idempotence log (PID and epoch changes, drains,
        sequence errors) to producer-<tag>-<pid>.log in `log_dir`: kept
        with the broker logs when a check fails."""
        import logging

        logger = logging.getLogger(f"rdkafka-{self.tag}-{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        handler = logging.FileHandler(Path(log_dir) / f"producer-{self.tag}-{os.getpid()}.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        return {"debug": "eos,msg", "logger": logger}

    def pause(self, timeout_s=60):
        """Stops sending and waits until every record sent is reported."""
        self.paused.set()
        cl.wait_for(lambda: self.log.acked + self.log.failed >= self.sent, timeout_s,
                    f"producer {self.tag}: every record sent reported")

    def resume(self, rate=None):
        """Sends again, at `rate` records/s if given."""
        if rate is not None:
            self.rate = rate
        self.paused.clear()

    def _error(self, err):
        if err.fatal():
            self.log.fatal.append(f"{err.name()}: {err.str()}")

    def _report(self, err, msg):
        seq = int(msg.value().decode().rsplit("-", 1)[1])
        if err is None:
            offset = msg.offset()
            self.log.ack(seq, msg.partition(), IMPLICIT_ACK if offset is None or offset < 0 else offset)
        else:
            self.log.fail(seq, err.name())

    def _run(self):
        start = time.monotonic()
        base = 0
        while not self.stopping.is_set() and not self.log.fatal:
            if self.paused.is_set():
                self.producer.poll(0.05)
                start, base = time.monotonic(), self.sent
                continue
            due = start + (self.sent - base) / self.rate
            now = time.monotonic()
            if now < due:
                self.producer.poll(min(due - now, 0.05))
                continue
            seq = self.sent
            try:
                self.producer.produce(self.topic, key=self.key, value=f"{self.tag}-{seq}".encode(),
                                      partition=seq % self.partitions, on_delivery=self._report)
            except BufferError:
                self.producer.poll(0.1)
                continue
            except KafkaException as e:  # only a fatal producer state refuses produce()
                self.log.fatal.append(f"produce: {e}")
                break
            self.sent += 1
            self.producer.poll(0)
        self.unflushed = self.producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 30)
        self.producer = None  # destroys the handle: no reconnect chatter after the cluster is gone

    def running(self):
        return self.thread.is_alive()

    def health(self):
        if self.log.fatal:
            return f"librdkafka producer {self.tag} fatal: {self.log.fatal[:3]}"
        return None if self.running() else f"librdkafka producer {self.tag} thread ended"

    def stop(self, timeout_s=DELIVERY_TIMEOUT_MS / 1000 + 60):
        self.stopping.set()
        self.thread.join(timeout_s)
        if self.thread.is_alive() or self.unflushed:
            raise DurabilityError(f"librdkafka producer {self.tag}: {self.unflushed} records never reported")
        return (self.sent, self.log.acked, self.log.failed)

    def kill(self):
        self.stopping.set()


def wait_acked_more(producers, more, timeout_s):
    """Waits until every producer has `more` acknowledgements beyond its
    count now (the producers are live again after the chaos)."""
    base = {p.tag: p.log.acked for p in producers}

    def more_acked():
        for p in producers:
            broken = p.health()
            if broken:
                raise DurabilityError(broken)
        return all(p.log.acked >= base[p.tag] + more for p in producers)

    deadline = time.monotonic() + timeout_s
    while not more_acked():
        if time.monotonic() > deadline:
            got = {p.tag: p.log.acked - base[p.tag] for p in producers}
            raise DurabilityError(f"waited {timeout_s}s for {more} more acknowledgements from each producer; got {got}")
        time.sleep(0.2)


# --- reading and checking the log ------------------------------------------------


class LogCheck:
    """Streams every partition's records from offset 0 to the high watermark
    and checks them against the producers' AckLogs."""

    def __init__(self, acklogs, partitions):
        self.logs = {a.tag: a for a in acklogs}
        self.partitions = partitions
        self.seen = {t: bytearray() for t in self.logs}  # read count per seq, saturating at 255
        self.next_offset = {}
        self.last_seq = {}  # (tag, partition) -> (seq, offset)
        self.last_epoch = {}
        self.records = 0
        self.gaps = []  # (partition, expected offset, got offset)
        self.misplaced = []  # (tag, seq, acked (p, o), read (p, o))
        self.duplicated = []  # (tag, seq, partition, offset)
        self.order = []  # (tag, partition, (seq, offset) before, (seq, offset) after)
        self.epoch_order = []  # (partition, offset, epoch before, epoch)
        self.foreign = []  # (partition, offset, value)
        self.unacked_present = 0
        self.high_watermarks = {}

    def add(self, partition, offset, value, leader_epoch):
        self.records += 1
        want = self.next_offset.get(partition, 0)
        if offset != want:
            self.gaps.append((partition, want, offset))
        self.next_offset[partition] = offset + 1
        if leader_epoch is not None and leader_epoch >= 0:
            before = self.last_epoch.get(partition)
            if before is not None and leader_epoch < before:
                self.epoch_order.append((partition, offset, before, leader_epoch))
            self.last_epoch[partition] = leader_epoch
        try:
            tag, seq_s = value.decode().rsplit("-", 1)
            seq = int(seq_s)
            log = self.logs[tag]
        except (ValueError, KeyError, UnicodeDecodeError, AttributeError):
            self.foreign.append((partition, offset, value))
            return
        seen = self.seen[tag]
        if seq >= len(seen):
            seen.extend(bytes(seq + 1 - len(seen) + 4096))
        if seen[seq]:
            self.duplicated.append((tag, seq, partition, offset))
        seen[seq] = min(255, seen[seq] + 1)
        acked = log.acked_offset(seq)
        if acked == NOT_ACKED:
            self.unacked_present += 1
        elif acked == IMPLICIT_ACK:
            if seq % log.partitions != partition:
                self.misplaced.append((tag, seq, (seq % log.partitions, acked), (partition, offset)))
        elif (seq % log.partitions, acked) != (partition, offset):
            self.misplaced.append((tag, seq, (seq % log.partitions, acked), (partition, offset)))
        prev = self.last_seq.get((tag, partition))
        if prev is not None and seq <= prev[0]:
            self.order.append((tag, partition, prev, (seq, offset)))
        self.last_seq[(tag, partition)] = (seq, offset)

    def finish(self):
        """Lost = acknowledged but never read. Returns the summary dict."""
        self.lost = []
        acked_total = 0
        for tag, log in self.logs.items():
            seen = self.seen[tag]
            for seq in log.acked_seqs():
                acked_total += 1
                if seq >= len(seen) or not seen[seq]:
                    self.lost.append((tag, seq, (seq % log.partitions, log.offsets[seq])))
        for p in range(self.partitions):
            hw = self.high_watermarks.get(p)
            if hw is not None and self.next_offset.get(p, 0) != hw:
                self.gaps.append((p, self.next_offset.get(p, 0), f"high watermark {hw}"))
        double = sum(len(log.double_acked) for log in self.logs.values())
        wrong_p = sum(len(log.wrong_partition) for log in self.logs.values())
        verified = acked_total - len(self.lost) - sum(1 for m in self.misplaced)
        return {
            "records_acked": acked_total,
            "records_verified": verified,
            "records_read": self.records,
            "unacked_present": self.unacked_present,
            "lost": len(self.lost),
            "duplicated": len(self.duplicated),
            "double_acked": double,
            "misplaced": len(self.misplaced),
            "order_violations": len(self.order),
            "epoch_order_violations": len(self.epoch_order),
            "gaps": len(self.gaps),
            "foreign": len(self.foreign),
            "wrong_partition_acks": wrong_p,
            "high_watermarks": dict(sorted(self.high_watermarks.items())),
        }

    def problems(self, limit=10):
        """Human-readable failures, empty when the log is as acknowledged."""
        out = []

        def show(name, items):
            if items:
                out.append(f"{len(items)} {name}, e.g. {items[:limit]}")

        show("acknowledged records lost (tag, seq, acked (partition, offset))", self.lost)
        show("acknowledged records at another offset (tag, seq, acked, read)", self.misplaced)
        show("records read twice (tag, seq, partition, offset)", self.duplicated)
        for log in self.logs.values():
            show(f"{log.tag} records acknowledged twice (seq, first, second)", log.double_acked)
            show(f"{log.tag} acknowledgements for the wrong partition (seq, partition)", log.wrong_partition)
        show("per-producer order violations (tag, partition, (seq, offset) before, after)", self.order)
        show("leader epochs going backwards (partition, offset, epoch before, epoch)", self.epoch_order)
        show("offset gaps below the high watermark (partition, expected, got)", self.gaps)
        show("records nobody produced (partition, offset, value)", self.foreign)
        return out


def read_partitions(bootstrap, topic, partitions, sink, timeout_s=300.0):
    """Reads each partition from the beginning to its high watermark (the
    end offset ListOffsets answers with), passing (partition, offset, value,
    leader_epoch) to sink(...); returns {partition: high watermark}."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", max_poll_records=5000,
                             fetch_max_bytes=16 * 1024 * 1024, max_partition_fetch_bytes=4 * 1024 * 1024,
                             request_timeout_ms=30000)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        begins = consumer.beginning_offsets(tps)
        for tp in tps:
            if begins[tp] != 0:
                raise DurabilityError(f"{tp}: log start offset {begins[tp]}, expected 0 (nothing deletes)")
        consumer.seek_to_beginning(*tps)
        remaining = {tp for tp in tps if ends[tp] > 0}
        deadline = time.monotonic() + timeout_s
        while remaining:
            if time.monotonic() > deadline:
                pos = {tp.partition: consumer.position(tp) for tp in remaining}
                raise DurabilityError(f"reading {topic} timed out at {pos}, ends "
                                      f"{ {tp.partition: ends[tp] for tp in remaining} }")
            for tp, recs in consumer.poll(timeout_ms=1000).items():
                for r in recs:
                    if r.offset < ends[tp]:
                        sink(r.partition, r.offset, r.value, r.leader_epoch)
            for tp in list(remaining):
                if consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
        return {tp.partition: ends[tp] for tp in tps}
    finally:
        consumer.close()


def check_topic(bootstrap, topic, partitions, acklogs):
    """Reads the whole topic and returns (summary dict, LogCheck)."""
    check = LogCheck(acklogs, partitions)
    check.high_watermarks = read_partitions(bootstrap, topic, partitions, check.add)
    summary = check.finish()
    return summary, check


# --- brokers: kill -9 and come back ------------------------------------------------


def registration_owner(cluster, broker_id):
    """The ZooKeeper session owning /brokers/ids/<id>, or None."""
    stat = cluster.zk.exists(cluster.path(f"/brokers/ids/{broker_id}"))
    return stat.ephemeralOwner if stat else None


def wait_registration_gone(cluster, broker_id, timeout_s=None):
    timeout_s = timeout_s or SESSION_TIMEOUT_MS / 1000 * 3 + 10
    cluster.wait_for(lambda: registration_owner(cluster, broker_id) is None, timeout_s,
                     f"/brokers/ids/{broker_id} to vanish (its ZooKeeper session to expire)", 0.1)


def kill_and_restart(cluster, broker, old_owner=None):
    """kill -9, then start again on the same log dir. kshard is started at
    once (it waits for its old registration to vanish itself); Kafka exits
    when /brokers/ids/<id> still exists, so for Kafka the old session must
    expire first. Returns (seconds until registered again, seconds until
    ready)."""
    bid = broker.broker_id
    old_owner = old_owner or registration_owner(cluster, bid)
    t0 = time.monotonic()
    broker.kill9()
    if cl.TARGET == "kafka":
        wait_registration_gone(cluster, bid)
    broker.start(wait=False)

    def registered():
        if not broker.running():
            raise cl.ClusterError(f"{broker.name} exited {broker.returncode()}\n{broker.log_text(tail_lines=60)}")
        owner = registration_owner(cluster, bid)
        return owner is not None and owner != old_owner

    cluster.wait_for(registered, SESSION_TIMEOUT_MS / 1000 * 3 + cl.start_timeout_s(),
                     f"broker {bid} registered with a new session", 0.1)
    t_reg = time.monotonic() - t0
    broker.wait_ready()
    return t_reg, time.monotonic() - t0


def partition_states(cluster, topic, partitions):
    return {p: cluster.partition_state(topic, p) for p in range(partitions)}


def isr_full(cluster, topic, partitions, broker_ids):
    states = partition_states(cluster, topic, partitions)
    return all(set(broker_ids) <= set(s["isr"]) and s["leader"] >= 0 for s in states.values())


def wait_in_every_isr(cluster, topic, partitions, broker_id, timeout_s):
    """True once broker_id is in the ISR of every partition, False on timeout."""
    try:
        cluster.wait_for(lambda: isr_full(cluster, topic, partitions, [broker_id]), timeout_s,
                         f"broker {broker_id} in every ISR of {topic}", 0.2)
        return True
    except cl.ClusterError:
        return False


class KillLoop:
    """Kills a random broker with SIGKILL `kills` times, restarting it at
    once on the same log dir and waiting (bounded) until it is back in the
    ISR of every partition. Only one broker is down at a time, so two of
    three stay alive."""

    def __init__(self, cluster, topic, partitions, kills, seed=None, rejoin_timeout_s=None, progress=print):
        self.cluster = cluster
        self.topic = topic
        self.partitions = partitions
        self.kills = kills
        self.seed = seed if seed is not None else random.randrange(1 << 30)
        self.rng = random.Random(self.seed)
        self.rejoin_timeout_s = rejoin_timeout_s or (30.0 if cl.TARGET != "kafka" else 90.0)
        self.progress = progress
        self.done = 0
        self.roles = Counter()  # leader / follower / controller kills
        self.rejoin_timeouts = []  # (kill number, broker id)
        self.rejoin_s = []
        self.register_s = []
        self.stop_requested = threading.Event()

    def run(self, status=None):
        ids = sorted(b.broker_id for b in self.cluster.live())
        t_start = time.monotonic()
        for n in range(1, self.kills + 1):
            if self.stop_requested.is_set():
                break
            victim_id = self.rng.choice(ids)
            victim = self.cluster.broker(victim_id)
            states = partition_states(self.cluster, self.topic, self.partitions)
            led = [p for p, s in states.items() if s["leader"] == victim_id]
            try:
                controller = self.cluster.controller_id() == victim_id
            except Exception:  # /controller is briefly absent during a failover
                controller = False
            self.roles["leader" if led else "follower"] += 1
            if controller:
                self.roles["controller"] += 1
            t_reg, t_ready = kill_and_restart(self.cluster, victim)
            t0 = time.monotonic()
            back = wait_in_every_isr(self.cluster, self.topic, self.partitions, victim_id, self.rejoin_timeout_s)
            t_isr = time.monotonic() - t0
            self.register_s.append(t_reg)
            self.rejoin_s.append(t_isr)
            if not back:
                self.rejoin_timeouts.append((n, victim_id))
            self.done = n
            extra = f" | {status()}" if status else ""
            self.progress(f"kill {n}/{self.kills} broker {victim_id} (led {led}{', controller' if controller else ''}):"
                          f" registered {t_reg:.1f}s, ready {t_ready:.1f}s, "
                          f"{'in every ISR' if back else 'NOT in every ISR'} after {t_isr:.1f}s;"
                          f" elapsed {time.monotonic() - t_start:.0f}s{extra}")
        return self.done

    def figures(self):
        def stats(xs):
            return {"avg": round(sum(xs) / len(xs), 2), "max": round(max(xs), 2)} if xs else {}

        return {"kills": self.done, "seed": self.seed, "roles": dict(self.roles),
                "register_s": stats(self.register_s), "rejoin_s": stats(self.rejoin_s),
                "rejoin_timeouts": self.rejoin_timeouts}


def create_durability_topic(cluster, topic, partitions, replication_factor=3, min_isr=2):
    cluster.create_topic(topic, partitions, replication_factor, {"min.insync.replicas": str(min_isr)})
    cluster.wait_converged(topics=[topic])
    ids = [b.broker_id for b in cluster.live()]
    cluster.wait_for(lambda: isr_full(cluster, topic, partitions, ids), 60, f"full ISRs for {topic}")


def run_kill_loop(cluster, topic, partitions, kills, rate=200, seed=None, progress=print, log_dir=None,
                  stop_event=None):
    """The whole scenario on a started cluster: producers on, `kills`
    kills, producers off, check. Returns (summary dict, problem lines,
    the LogCheck for details)."""
    t0 = time.monotonic()
    create_durability_topic(cluster, topic, partitions)
    bootstrap = cluster.bootstrap()
    producers = []
    summary = {"target": cl.TARGET}
    try:
        producers.append(JavaProducer(bootstrap, topic, partitions, "java", rate, log_dir))
        producers.append(RdkafkaProducer(bootstrap, topic, partitions, "rdkafka", rate, log_dir=log_dir))
        wait_acked_more(producers, 50, 90)
        loop = KillLoop(cluster, topic, partitions, kills, seed, progress=progress)
        if stop_event is not None:
            loop.stop_requested = stop_event

        def status():
            for p in producers:
                broken = p.health()
                if broken:
                    raise DurabilityError(broken)
            return " ".join(f"{p.tag} acked {p.log.acked} failed {p.log.failed}" for p in producers)

        try:
            loop.run(status)
        finally:
            summary.update(loop.figures())
        ids = [b.broker_id for b in cluster.all_brokers]
        cluster.wait_for(lambda: isr_full(cluster, topic, partitions, ids), 90,
                         f"every broker {ids} in every ISR after the kills")
        # Live again after the chaos: each producer gets more acknowledgements.
        wait_acked_more(producers, 50, 90)
        for p in producers:
            p.stop()
    finally:
        for p in producers:
            p.kill()
    summary["produced_s"] = round(time.monotonic() - t0, 1)
    summary["producers"] = {p.tag: {"acked": p.log.acked, "implicit": p.log.implicit, "failed": p.log.failed,
                                    "errors": dict(p.log.errors.most_common(8)), "fatal": p.log.fatal}
                            for p in producers}
    t_check = time.monotonic()
    figures, check = check_topic(cluster.bootstrap(), topic, partitions, [p.log for p in producers])
    problems = check.problems()
    summary.update(figures)
    summary["check_s"] = round(time.monotonic() - t_check, 1)
    summary["elapsed_s"] = round(time.monotonic() - t0, 1)
    for p in producers:
        if p.log.fatal:
            problems.append(f"{p.tag} producer hit fatal errors: {p.log.fatal[:3]}")
    return summary, problems, check
