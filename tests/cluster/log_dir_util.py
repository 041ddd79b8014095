"""Helpers for brokers with two log directories (JBOD), used by
test_log_dir_failure.py and test_alter_replica_log_dirs.py: brokers whose
log.dirs is "<tmp>/d0,<tmp>/d1" (optionally d1 a small tmpfs), listings of
partition directories across both, raw AlterReplicaLogDirs (API 34) and
DescribeLogDirs (API 35), Kafka's kafka-log-dirs and DumpLogSegments tools,
and an idempotent numbered producer whose records carry a padding key (the
value stays "<tag>-<seq>" for durability.LogCheck).

Kafka's names inside a log dir: a replica is "<topic>-<p>"; a replica being
moved to another directory of the same broker is "<topic>-<p>.<uuid>-future"
in the target directory (uuid = 32 lowercase hex digits, a java UUID without
dashes); a replica being deleted (also the source after a move swapped in)
is "<topic>-<p>.<uuid>-delete" until log.segment.delete.delay.ms passes.
"""

import json
import os
import re
import subprocess

import cluster_util as cl
import compat_util as cu
import durability
import test_dynamic_config as dc  # raw request plumbing (tests/compat)

LOG_DIRS_TOOL = "org.apache.kafka.tools.LogDirsCommand"
DUMP_TOOL = "kafka.tools.DumpLogSegments"  # still the Scala tool in 3.9

ALTER_REPLICA_LOG_DIRS = 34
DESCRIBE_LOG_DIRS = 35

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
REPLICA_NOT_AVAILABLE = 9
KAFKA_STORAGE_ERROR = 56
LOG_DIR_NOT_FOUND = 57

STORAGE_EXCEPTION = "org.apache.kafka.common.errors.KafkaStorageException"

_ENTRY = r"(?P<p>\d+)(?:\.(?P<uuid>[0-9a-f]{32})-(?P<suffix>future|delete))?"


# --- brokers with two log directories -------------------------------------------------


def start_two_dir_brokers(cluster, n, overrides=None, tmpfs_mb=None, first_id=1):
    """Brokers first_id..first_id+n-1, each with log.dirs = <tmp>/d0,<tmp>/d1
    (b.dirs is that list). tmpfs_mb {broker id: MiB} mounts a tmpfs of that
    size on the broker's d1 before it starts (the caller unmounts: see
    Mounts). Starts them together and waits until they agree on Metadata."""
    made = []
    for i in range(n):
        b = cluster.new_broker(first_id + i, overrides)
        b.dirs = [str(b.tmp / "d0"), str(b.tmp / "d1")]
        for d in b.dirs:
            os.makedirs(d)
        b.props["log.dirs"] = ",".join(b.dirs)
        b.log_dirs = b.dirs[0]  # where Broker.meta_properties() looks
        made.append(b)
    for b in made:
        size = (tmpfs_mb or {}).get(b.configured_id)
        if size:
            mount_tmpfs(b.dirs[1], size)
    for b in made:
        b.spawn()
    for b in made:
        b.wait_ready()
    cluster.wait_converged()
    return made


def mount_tmpfs(path, size_mb):
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)], check=True)


def remount_tmpfs(path, size_mb):
    subprocess.run(["mount", "-o", f"remount,size={size_mb}m", str(path)], check=True)


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


def unmount_all(cluster):
    """Kills the cluster's brokers (a tmpfs in use cannot be unmounted) and
    unmounts every tmpfs under one of their directories; lazily if busy."""
    mounted = []
    for b in cluster.all_brokers:
        for d in getattr(b, "dirs", []):
            if is_mounted(d):
                mounted.append(d)
    if not mounted:
        return
    for b in cluster.all_brokers:
        b.kill9()
    for d in mounted:
        if subprocess.run(["umount", d], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", d], capture_output=True)


def fs_stats(path):
    """(total bytes, usable bytes) as Java's FileStore reports them."""
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


# --- what is on disk ---------------------------------------------------------------------


def entries(broker, topic):
    """{dir index: sorted entry names of `topic`} over the broker's log dirs:
    replicas, -future and -delete directories."""
    pat = re.compile(rf"^{re.escape(topic)}-{_ENTRY}$")
    out = {}
    for i, d in enumerate(broker.dirs):
        try:
            names = os.listdir(d)
        except FileNotFoundError:
            names = []
        out[i] = sorted(n for n in names if pat.match(n))
    return out


def parse_entry(topic, name):
    """(partition, suffix or None, uuid or None) of an entry name, or None."""
    m = re.match(rf"^{re.escape(topic)}-{_ENTRY}$", name)
    if not m:
        return None
    return int(m.group("p")), m.group("suffix"), m.group("uuid")


def replica_dirs(broker, topic):
    """{partition: dir index} of the broker's (current) replicas of `topic`;
    fails if one partition is in both directories."""
    out = {}
    for i, names in entries(broker, topic).items():
        for n in names:
            p, suffix, _ = parse_entry(topic, n)
            if suffix is None:
                assert p not in out, f"{topic}-{p} in both log dirs of broker {broker.broker_id}: {entries(broker, topic)}"
                out[p] = i
    return out


def all_entries(cluster, topics):
    """Everything of `topics` on every broker, for nothing-changed checks."""
    return {b.broker_id: {t: entries(b, t) for t in topics} for b in cluster.all_brokers if hasattr(b, "dirs")}


def segment_files(broker, dir_index, topic, suffix=".log"):
    """Full paths of `suffix` files in every replica directory of `topic`
    in one log dir, {partition: [paths sorted by base offset]}."""
    out = {}
    d = broker.dirs[dir_index]
    for n in entries(broker, topic)[dir_index]:
        p, sfx, _ = parse_entry(topic, n)
        if sfx is not None:
            continue
        files = sorted(f for f in os.listdir(os.path.join(d, n)) if f.endswith(suffix))
        out[p] = [os.path.join(d, n, f) for f in files]
    return out


def log_bytes(broker, dir_index, topic, partition):
    """Sum of the .log file sizes of one replica (Kafka's log.size)."""
    return sum(os.path.getsize(f) for f in segment_files(broker, dir_index, topic)[partition])


# --- raw AlterReplicaLogDirs (API 34) and DescribeLogDirs (API 35) ------------------------


def _carray(items):
    return cu.uvarint(len(items) + 1) + b"".join(items)


def _array(items):
    return cu.i32(len(items)) + b"".join(items)


def alter_body(dirs, version):
    """dirs: [(path, [(topic, [partitions])])] in wire order."""
    if version >= 2:
        return _carray([
            cu.compact_string(path) + _carray([
                cu.compact_string(t) + _carray([cu.i32(p) for p in ps]) + cu.uvarint(0) for t, ps in topics])
            + cu.uvarint(0) for path, topics in dirs]) + cu.uvarint(0)
    return _array([
        cu.string(path) + _array([cu.string(t) + _array([cu.i32(p) for p in ps]) for t, ps in topics])
        for path, topics in dirs])


def alter_replica_log_dirs(port, dirs, version=2):
    """Raw AlterReplicaLogDirs to the broker on `port`: {(topic, partition):
    error code}."""
    flexible = version >= 2
    with dc.Conn(port) as c:
        r = c.call(ALTER_REPLICA_LOG_DIRS, version, alter_body(dirs, version), flexible=flexible)
    r.i32()  # throttle
    out = {}
    n = r.uvarint() - 1 if flexible else r.i32()
    for _ in range(n):
        name = r.compact_string() if flexible else r.string()
        m = r.uvarint() - 1 if flexible else r.i32()
        for _ in range(m):
            p = r.i32()
            key = (name, p)
            assert key not in out, f"{key} answered twice"
            out[key] = r.i16()
            if flexible:
                r.skip_tags()
        if flexible:
            r.skip_tags()
    if flexible:
        r.skip_tags()
    return out


def describe_log_dirs(port, topics=None, version=4):
    """Raw DescribeLogDirs v4 (flexible) to the broker on `port`; topics
    None = all, else [(topic, [partitions])]. Returns (top-level error,
    {log dir: {"error", "total", "usable", "replicas": {(topic, p): (size,
    offset lag, is future)}}})."""
    assert version >= 4
    if topics is None:
        body = cu.uvarint(0)
    else:
        body = _carray([cu.compact_string(t) + _carray([cu.i32(p) for p in ps]) + cu.uvarint(0) for t, ps in topics])
    body += cu.uvarint(0)
    with dc.Conn(port) as c:
        r = c.call(DESCRIBE_LOG_DIRS, version, body, flexible=True)
    r.i32()  # throttle
    top = r.i16()
    dirs = {}
    for _ in range(r.uvarint() - 1):
        err = r.i16()
        path = r.compact_string()
        replicas = {}
        for _ in range(r.uvarint() - 1):
            name = r.compact_string()
            for _ in range(r.uvarint() - 1):
                p = r.i32()
                size, lag, fut = r.i64(), r.i64(), r.i8() != 0
                r.skip_tags()
                assert (name, p) not in replicas, f"{name}-{p} twice in {path}"
                replicas[(name, p)] = (size, lag, fut)
            r.skip_tags()
        total, usable = r.i64(), r.i64()
        r.skip_tags()
        assert path not in dirs, f"{path} listed twice"
        dirs[path] = {"error": err, "total": total, "usable": usable, "replicas": replicas}
    r.skip_tags()
    return top, dirs


def api_versions(port):
    with cu.connect("127.0.0.1", port) as s:
        s.sendall(cu.api_versions_v3_request(1))
        _, err, versions = cu.parse_api_versions_v3(cu.recv_frame(s))
    assert err == 0, err
    return versions


# --- tools --------------------------------------------------------------------------------


def log_dirs_tool(cluster, brokers=None, topics=None):
    """kafka-log-dirs --describe: {broker: {log dir: (error class name or
    None, {"<topic>-<p>": (size, offsetLag, isFuture)})}}. Checks the two
    lines Kafka prints before the JSON."""
    args = ["--bootstrap-server", cluster.bootstrap(), "--describe"]
    if brokers is not None:
        args += ["--broker-list", ",".join(map(str, brokers))]
    if topics is not None:
        args += ["--topic-list", ",".join(topics)]
    out = cl.kafka_tool(LOG_DIRS_TOOL, *args).stdout
    lines = out.splitlines()
    queried = sorted(brokers) if brokers is not None else sorted(b.broker_id for b in cluster.live())
    assert lines[:2] == ["Querying brokers for log directories information",
                         f"Received log directory information from brokers {','.join(map(str, queried))}"], out
    assert len(lines) == 3, out
    doc = json.loads(lines[2])
    assert doc["version"] == 1, out
    result = {}
    for b in doc["brokers"]:
        dirs = {}
        for d in b["logDirs"]:
            assert set(d) == {"logDir", "error", "partitions"}, d
            parts = {}
            for p in d["partitions"]:
                assert set(p) == {"partition", "size", "offsetLag", "isFuture"}, p
                assert p["partition"] not in parts, d
                parts[p["partition"]] = (p["size"], p["offsetLag"], p["isFuture"])
            dirs[d["logDir"]] = (d["error"], parts)
        result[b["broker"]] = dirs
    return result


DUMP_ERROR_MARKERS = ("Mismatches in", "Non-consecutive offsets", "Found timestamp mismatch",
                      "Found out of order timestamp", "indexed offsets are not found", "Exception", "Error")
_BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* isvalid: (true|false)$")


def dump_segments(files, *extra):
    """DumpLogSegments over `files` (one JVM). Returns (CompletedProcess,
    {file: {"start": base offset line, "batches": [(base, last, count,
    valid)], "trailing": invalid bytes at the end or 0, "records": lines of
    records with --deep-iteration}})."""
    res = cl.kafka_tool(DUMP_TOOL, "--files", ",".join(files), *extra, timeout_s=180, check=False)
    parsed = {}
    cur = None
    for line in res.stdout.splitlines():
        if line.startswith("Dumping "):
            cur = {"start": None, "batches": [], "trailing": 0, "records": 0, "other": []}
            parsed[line[len("Dumping "):]] = cur
        elif cur is None:
            continue
        elif line.startswith("Log starting offset: "):
            cur["start"] = int(line.split(": ", 1)[1])
        elif line.startswith("baseOffset: "):
            m = _BATCH.match(line)
            assert m, line
            cur["batches"].append((int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4) == "true"))
        elif line.startswith("| offset: "):
            cur["records"] += 1
        elif line.startswith("Found ") and " invalid bytes at the end of " in line:
            cur["trailing"] = int(line.split()[1])
        else:
            cur["other"].append(line)
    return res, parsed


def check_dump_covers(parsed, files, end):
    """The dumped .log segments of one replica (files in base-offset order)
    hold every offset [0, end) exactly once, each batch valid, no trailing
    bytes; returns the number of batches."""
    nxt = 0
    batches = 0
    for f in files:
        d = parsed[f]
        base = int(os.path.basename(f).split(".")[0])
        assert d["start"] == base, (f, d["start"])
        assert d["trailing"] == 0, f"{f}: {d['trailing']} invalid bytes at the end"
        assert d["other"] == [], (f, d["other"][:5])
        for b0, b1, count, valid in d["batches"]:
            assert valid, f"{f}: batch {b0}..{b1} isvalid: false"
            assert b0 == nxt and b1 - b0 + 1 == count, f"{f}: batch {b0}..{b1} (count {count}) after offset {nxt - 1}"
            nxt = b1 + 1
            batches += 1
    assert nxt == end, f"segments {files} end at offset {nxt}, log end {end}"
    return batches


# --- a numbered producer with bulk --------------------------------------------------------


class PaddedProducer(durability.RdkafkaProducer):
    """durability.RdkafkaProducer whose records carry a key of key_bytes
    bytes (bulk for filling a directory), in batches of at most batch_bytes
    (a batch larger than the topic's segment.bytes is refused with
    RECORD_LIST_TOO_LARGE)."""

    def __init__(self, bootstrap, topic, partitions, tag="pad", rate=200, key_bytes=8000, batch_bytes=65536):
        super().__init__(bootstrap, topic, partitions, tag=tag, rate=rate, key=b"k" * key_bytes,
                         batch_bytes=batch_bytes)


def acked_per_partition(log):
    """{partition: acknowledged records} of an AckLog."""
    out = {}
    for seq in log.acked_seqs():
        p = seq % log.partitions
        out[p] = out.get(p, 0) + 1
    return out


def check_all_acked(bootstrap, topic, partitions, producer):
    """Reads the whole topic: every acknowledged record exactly once at the
    offset it was acknowledged at, nothing else. Returns the summary."""
    summary, check = durability.check_topic(bootstrap, topic, partitions, [producer.log])
    assert check.problems() == [], check.problems()
    assert summary["unacked_present"] == 0, summary
    assert summary["records_read"] == summary["records_acked"] == producer.log.acked, summary
    return summary
