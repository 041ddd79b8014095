//! `kshard::zk::ZkClient` against a real ZooKeeper: the 3.8 server of
//! Apache Kafka 3.9.1's jar set, started per test on a free port.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use kshard::metadata::{MetadataStore, Op, OpResult, StoreError, ANY_VERSION};
use kshard::zk::{NodeEventKind, ZkClient, ZkConfig, ZkEvent};

/// ZooKeeper's tick; its minimum session timeout is two ticks.
const TICK_MS: u64 = 500;

fn kafka_dir() -> PathBuf {
    let cache = match std::env::var_os("KSHARD_CACHE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
            .join(".cache/kshard"),
    };
    cache.join("kafka-3.9.1")
}

fn kafka_libs() -> PathBuf {
    let dir = kafka_dir();
    let libs = dir.join("libs");
    assert!(
        libs.is_dir() && dir.join(".complete").exists(),
        "Kafka 3.9.1 jars not found in {} (no .complete marker): run scripts/kafka-jars.sh",
        libs.display()
    );
    libs
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port")
}

/// A standalone ZooKeeper server, killed when dropped.
struct ZooKeeper {
    child: Child,
    port: u16,
    dir: PathBuf,
}

static SERVERS: AtomicUsize = AtomicUsize::new(0);

impl ZooKeeper {
    fn start() -> ZooKeeper {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "kshard-zk-test-{}-{}",
            std::process::id(),
            SERVERS.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).expect("create ZooKeeper data dir");
        let child = Self::spawn(port, &dir);
        let mut zk = ZooKeeper { child, port, dir };
        zk.wait_serving(Duration::from_secs(30));
        zk
    }

    /// Stops the server (kill -9), keeps it down for `down`, and starts it
    /// again on the same port and data.
    fn restart_after(&mut self, down: Duration) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        thread::sleep(down);
        self.child = Self::spawn(self.port, &self.dir);
        self.wait_serving(Duration::from_secs(30));
    }

    fn spawn(port: u16, dir: &std::path::Path) -> Child {
        let libs = kafka_libs();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("zookeeper.log"))
            .expect("open ZooKeeper log");
        Command::new("java")
            .args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .arg("-Dzookeeper.admin.enableServer=false")
            // Tests need no durability: skip the fsync of every transaction.
            .arg("-Dzookeeper.forceSync=no")
            .arg("-Dzookeeper.4lw.commands.whitelist=srvr")
            .arg("-cp")
            .arg(format!("{}/*", libs.display()))
            .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
            .arg(port.to_string())
            .arg(dir.join("data"))
            .arg(TICK_MS.to_string())
            .arg("0") // maxClientCnxns: unlimited
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("start java (is a JDK installed?)")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("zookeeper.log")).unwrap_or_default()
    }

    /// Waits until "srvr" answers with a mode, i.e. the server serves.
    fn wait_serving(&mut self, within: Duration) {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("ZooKeeper exited ({status}):\n{}", self.log());
            }
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut answer = String::new();
                if s.write_all(b"srvr").is_ok()
                    && s.read_to_string(&mut answer).is_ok()
                    && answer.contains("Mode:")
                {
                    return;
                }
            }
            thread::sleep(Duration::from_millis(50));
        }
        panic!("ZooKeeper did not start serving:\n{}", self.log());
    }

    fn connect(&self, chroot: &str, session_timeout_ms: u64) -> ZkClient {
        ZkClient::connect(&self.config(chroot, session_timeout_ms))
            .unwrap_or_else(|e| panic!("connect: {e}\n{}", self.log()))
    }

    fn config(&self, chroot: &str, session_timeout_ms: u64) -> ZkConfig {
        ZkConfig {
            connect: format!("127.0.0.1:{}{chroot}", self.port),
            session_timeout_ms,
            connection_timeout_ms: 10_000,
        }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill {sig} failed");
    }
}

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn next_event(events: &Receiver<ZkEvent>, within: Duration) -> Option<ZkEvent> {
    events.recv_timeout(within).ok()
}

fn expect_node(events: &Receiver<ZkEvent>, kind: NodeEventKind, path: &str) {
    let want = ZkEvent::Node {
        kind,
        path: path.to_string(),
    };
    match next_event(events, Duration::from_secs(5)) {
        Some(got) => assert_eq!(got, want),
        None => panic!("no event, wanted {want:?}"),
    }
}

fn expect_quiet(events: &Receiver<ZkEvent>, for_ms: u64) {
    if let Some(e) = next_event(events, Duration::from_millis(for_ms)) {
        panic!("unexpected event {e:?}");
    }
}

fn is_no_node(r: &Result<impl std::fmt::Debug, StoreError>, path: &str) -> bool {
    matches!(r, Err(StoreError::NoNode(p)) if p == path)
}

#[test]
fn chroot_crud_sequential_and_multi() {
    let zk = ZooKeeper::start();
    let mut c = zk.connect("/kafka/test", 6000);
    let raw = zk.connect("", 6000);
    // The chroot and its parent exist, seen by a client at the real root.
    assert!(raw.try_exists("/kafka").unwrap().is_some());
    assert!(raw.try_exists("/kafka/test").unwrap().is_some());
    assert_ne!(c.session_id(), 0);
    assert_ne!(c.session_id(), raw.session_id());

    // create / get / set with versions.
    assert_eq!(c.create("/a", b"x", false, false).unwrap(), "/a");
    assert_eq!(raw.get("/kafka/test/a").unwrap().0, b"x");
    let (data, stat) = c.get("/a").unwrap();
    assert_eq!(data, b"x");
    assert_eq!(stat.version, 0);
    assert!(!stat.ephemeral);
    assert!(stat.ctime_ms > 1_600_000_000_000 && stat.mtime_ms == stat.ctime_ms);
    assert_eq!(c.set("/a", b"y", 0).unwrap().version, 1);
    assert!(matches!(c.set("/a", b"z", 0), Err(StoreError::BadVersion(p)) if p == "/a"));
    let stat = c.set("/a", b"z", ANY_VERSION).unwrap();
    assert_eq!(stat.version, 2);
    assert!(stat.mtime_ms >= stat.ctime_ms);
    assert_eq!(c.get("/a").unwrap().0, b"z");

    // Error cases.
    assert!(
        matches!(c.create("/a", b"", false, false), Err(StoreError::NodeExists(p)) if p == "/a")
    );
    assert!(is_no_node(
        &c.create("/missing/child", b"", false, false),
        "/missing/child"
    ));
    assert!(is_no_node(&c.get("/nope"), "/nope"));
    assert!(is_no_node(&c.set("/nope", b"", ANY_VERSION), "/nope"));
    assert!(is_no_node(&c.children("/nope"), "/nope"));
    assert!(matches!(
        c.get("relative"),
        Err(StoreError::BadArguments(_))
    ));
    assert!(matches!(
        c.get("/trailing/"),
        Err(StoreError::BadArguments(_))
    ));
    c.create("/a/b", b"", false, false).unwrap();
    assert!(matches!(c.delete("/a", ANY_VERSION), Err(StoreError::NotEmpty(p)) if p == "/a"));
    assert!(matches!(
        c.delete("/a/b", 5),
        Err(StoreError::BadVersion(_))
    ));
    c.delete("/a/b", 0).unwrap();
    assert!(is_no_node(&c.delete("/a/b", ANY_VERSION), "/a/b"));
    assert!(c.exists("/a/b").is_none());
    assert_eq!(c.exists("/a").unwrap().version, 2);

    // children are sorted; cversion and num_children follow.
    c.create("/p", b"", false, false).unwrap();
    for name in ["c", "a", "b"] {
        c.create(&format!("/p/{name}"), b"", false, false).unwrap();
    }
    assert_eq!(c.children("/p").unwrap(), ["a", "b", "c"]);
    let stat = c.exists("/p").unwrap();
    assert_eq!((stat.num_children, stat.cversion), (3, 3));
    assert_eq!(c.children("/").unwrap(), ["a", "p"]);

    // create_all makes empty parents; NodeExists for the node itself.
    assert_eq!(c.create_all("/x/y/z", b"d").unwrap(), "/x/y/z");
    assert_eq!(c.get("/x/y").unwrap().0, b"");
    assert_eq!(c.get("/x/y/z").unwrap().0, b"d");
    assert!(matches!(
        c.create_all("/x/y/z", b"d"),
        Err(StoreError::NodeExists(_))
    ));
    assert_eq!(c.create_all("/x/w", b"").unwrap(), "/x/w");
    c.delete_recursive("/x").unwrap();
    assert!(c.exists("/x").is_none());
    assert!(is_no_node(&c.delete_recursive("/x"), "/x"));

    // Sequential nodes: a 10-digit per-parent counter.
    c.create("/seq", b"", false, false).unwrap();
    let first = c.create("/seq/n-", b"1", false, true).unwrap();
    let second = c.create("/seq/n-", b"2", false, true).unwrap();
    assert_eq!(first, "/seq/n-0000000000");
    assert_eq!(second, "/seq/n-0000000001");
    assert_eq!(c.get(&second).unwrap().0, b"2");

    // multi: all or nothing, first failing op's error.
    let ops = vec![
        Op::Create {
            path: "/m1".into(),
            data: b"1".to_vec(),
            ephemeral: false,
            sequential: false,
        },
        Op::Check {
            path: "/a".into(),
            expected_version: 2,
        },
        Op::SetData {
            path: "/a".into(),
            data: b"m".to_vec(),
            expected_version: 2,
        },
        Op::Create {
            path: "/seq/n-".into(),
            data: vec![],
            ephemeral: false,
            sequential: true,
        },
        Op::Delete {
            path: "/p/a".into(),
            expected_version: ANY_VERSION,
        },
    ];
    let results = c.multi(&ops).unwrap();
    assert_eq!(results.len(), 5);
    assert_eq!(results[0], OpResult::Created("/m1".into()));
    assert_eq!(results[1], OpResult::Checked);
    assert!(matches!(&results[2], OpResult::Set(s) if s.version == 3));
    assert_eq!(results[3], OpResult::Created("/seq/n-0000000002".into()));
    assert_eq!(results[4], OpResult::Deleted);
    assert_eq!(c.get("/a").unwrap().0, b"m");

    let failing = vec![
        Op::Create {
            path: "/m2".into(),
            data: vec![],
            ephemeral: false,
            sequential: false,
        },
        Op::SetData {
            path: "/a".into(),
            data: b"never".to_vec(),
            expected_version: ANY_VERSION,
        },
        Op::Delete {
            path: "/ghost".into(),
            expected_version: ANY_VERSION,
        },
    ];
    assert!(is_no_node(&c.multi(&failing), "/ghost"));
    assert!(c.exists("/m2").is_none());
    assert_eq!(c.get("/a").unwrap().0, b"m");
    let bad_check = vec![
        Op::Check {
            path: "/a".into(),
            expected_version: 0,
        },
        Op::Delete {
            path: "/m1".into(),
            expected_version: ANY_VERSION,
        },
    ];
    assert!(matches!(c.multi(&bad_check), Err(StoreError::BadVersion(p)) if p == "/a"));
    assert!(c.exists("/m1").is_some());
    assert_eq!(c.multi(&[]).unwrap(), []);
    c.close();
    raw.close();
}

#[test]
fn ephemeral_nodes_vanish_when_the_session_closes() {
    let zk = ZooKeeper::start();
    let mut owner = zk.connect("/eph", 6000);
    let observer = zk.connect("/eph", 6000);
    owner.create("/e", b"me", true, false).unwrap();
    let seq = owner.create("/es-", b"", true, true).unwrap();
    assert_eq!(seq, "/es-0000000001");
    let stat = observer.try_exists("/e").unwrap().unwrap();
    assert!(stat.ephemeral);
    assert!(observer.try_exists(&seq).unwrap().is_some());
    // Ephemerals cannot have children.
    assert!(owner.create("/e/child", b"", false, false).is_err());

    owner.close();
    // Closed, not expired: gone at once.
    assert!(observer.try_exists("/e").unwrap().is_none());
    assert!(observer.try_exists(&seq).unwrap().is_none());
    match owner.get("/") {
        Err(StoreError::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::NotConnected),
        other => panic!("get after close: {other:?}"),
    }

    // Dropping the last clone closes the session too.
    let mut dropped = zk.connect("/eph", 6000);
    dropped.create("/d", b"", true, false).unwrap();
    let clone = dropped.clone();
    drop(dropped);
    assert!(observer.try_exists("/d").unwrap().is_some());
    drop(clone);
    assert!(observer.try_exists("/d").unwrap().is_none());
    observer.close();
}

#[test]
fn watches_fire_once_in_server_order() {
    let zk = ZooKeeper::start();
    let w = zk.connect("/watch", 6000);
    let mut m = zk.connect("/watch", 6000);
    let events = w.events();

    // exists watch on an absent node fires on creation.
    assert!(w.exists_watch("/n").unwrap().is_none());
    m.create("/n", b"0", false, false).unwrap();
    expect_node(&events, NodeEventKind::Created, "/n");

    // data watch; one-shot: a second change is not reported.
    assert_eq!(w.get_watch("/n").unwrap().0, b"0");
    m.set("/n", b"1", ANY_VERSION).unwrap();
    expect_node(&events, NodeEventKind::DataChanged, "/n");
    m.set("/n", b"2", ANY_VERSION).unwrap();
    expect_quiet(&events, 300);

    // Re-registering while pending: still one event per change.
    w.get_watch("/n").unwrap();
    w.get_watch("/n").unwrap();
    w.exists_watch("/n").unwrap();
    m.set("/n", b"3", ANY_VERSION).unwrap();
    expect_node(&events, NodeEventKind::DataChanged, "/n");
    expect_quiet(&events, 300);

    // exists watch on a present node fires on data change too.
    w.exists_watch("/n").unwrap();
    m.set("/n", b"4", ANY_VERSION).unwrap();
    expect_node(&events, NodeEventKind::DataChanged, "/n");

    // child watch.
    assert!(w.children_watch("/n").unwrap().is_empty());
    m.create("/n/c", b"", false, false).unwrap();
    expect_node(&events, NodeEventKind::ChildrenChanged, "/n");

    // Deleting a node with data and child watches: one Deleted, then the
    // parent's ChildrenChanged, in the server's order.
    w.get_watch("/n/c").unwrap();
    w.children_watch("/n/c").unwrap();
    assert_eq!(w.children_watch("/n").unwrap(), ["c"]);
    m.delete("/n/c", ANY_VERSION).unwrap();
    expect_node(&events, NodeEventKind::Deleted, "/n/c");
    expect_node(&events, NodeEventKind::ChildrenChanged, "/n");
    expect_quiet(&events, 300);

    // exists watch fires on deletion.
    w.exists_watch("/n").unwrap();
    m.delete("/n", ANY_VERSION).unwrap();
    expect_node(&events, NodeEventKind::Deleted, "/n");

    // A burst of changes on many watched nodes arrives in server order.
    let count = 40;
    for i in 0..count {
        m.create(&format!("/o{i}"), b"", false, false).unwrap();
        w.get_watch(&format!("/o{i}")).unwrap();
    }
    let order: Vec<usize> = (0..count).map(|i| (i * 17 + 5) % count).collect();
    let writer = thread::spawn(move || {
        for i in order {
            m.set(&format!("/o{i}"), b"x", ANY_VERSION).unwrap();
        }
        m
    });
    let mut m = writer.join().unwrap();
    for i in (0..count).map(|i| (i * 17 + 5) % count) {
        expect_node(&events, NodeEventKind::DataChanged, &format!("/o{i}"));
    }
    expect_quiet(&events, 200);
    // One multi: the server sends all notifications back to back, in op
    // order, mostly within one read on our side.
    for i in 0..count {
        w.exists_watch(&format!("/o{i}")).unwrap();
    }
    let order: Vec<usize> = (0..count).map(|i| (i * 23 + 11) % count).collect();
    let deletes: Vec<Op> = order
        .iter()
        .map(|i| Op::Delete {
            path: format!("/o{i}"),
            expected_version: ANY_VERSION,
        })
        .collect();
    m.multi(&deletes).unwrap();
    for i in &order {
        expect_node(&events, NodeEventKind::Deleted, &format!("/o{i}"));
    }
    expect_quiet(&events, 200);
    w.close();
    m.close();
}

#[test]
fn expired_session_is_replaced() {
    let zk = ZooKeeper::start();
    let mut c = zk.connect("/exp", 2000);
    let mut observer = zk.connect("/exp", 6000);
    let events = c.events();
    c.create("/e", b"", true, false).unwrap();
    observer.create("/watched", b"", false, false).unwrap();
    c.get_watch("/watched").unwrap();
    let old_session = c.session_id();

    let started = Instant::now();
    c.force_session_expiry().unwrap();
    let mut seen = Vec::new();
    let new_session = loop {
        let left = Duration::from_secs(15).saturating_sub(started.elapsed());
        match next_event(&events, left) {
            Some(ZkEvent::SessionEstablished { session_id }) => break session_id,
            Some(e) => seen.push(e),
            None => panic!("no SessionEstablished; saw {seen:?}\n{}", zk.log()),
        }
    };
    assert!(seen.contains(&ZkEvent::SessionExpired), "saw {seen:?}");
    assert!(
        seen.iter().all(|e| !matches!(e, ZkEvent::Node { .. })),
        "saw {seen:?}"
    );
    assert_ne!(new_session, old_session);
    assert_eq!(c.session_id(), new_session);

    // The old session's ephemeral is gone; the client works again.
    assert!(observer.try_exists("/e").unwrap().is_none());
    c.create("/e", b"again", true, false).unwrap();
    assert!(observer.try_exists("/e").unwrap().unwrap().ephemeral);
    // Watches died with the old session.
    observer.set("/watched", b"1", ANY_VERSION).unwrap();
    expect_quiet(&events, 500);
    c.get_watch("/watched").unwrap();
    observer.set("/watched", b"2", ANY_VERSION).unwrap();
    expect_node(&events, NodeEventKind::DataChanged, "/watched");
    c.close();
    observer.close();
}

#[test]
fn a_paused_server_disconnects_without_losing_the_session() {
    let zk = ZooKeeper::start();
    let c = zk.connect("", 6000);
    let events = c.events();
    let session = c.session_id();
    let root_children = c.children("/").unwrap();
    zk.signal("-STOP");
    let paused = Instant::now();
    // A call issued while the server is unresponsive waits for it.
    let caller = {
        let c = c.clone();
        thread::spawn(move || c.children("/"))
    };
    let got = next_event(&events, Duration::from_secs(5));
    thread::sleep(Duration::from_millis(3500).saturating_sub(paused.elapsed()));
    zk.signal("-CONT");
    assert_eq!(got, Some(ZkEvent::Disconnected), "\n{}", zk.log());
    assert_eq!(
        next_event(&events, Duration::from_secs(5)),
        Some(ZkEvent::Connected)
    );
    assert_eq!(caller.join().unwrap().unwrap(), root_children);
    assert_eq!(c.session_id(), session);
    expect_quiet(&events, 200);
    c.close();
}

/// ZooKeeper down for longer than the session timeout and restarted on its
/// data: the server restores the session, and the client keeps it (its
/// ephemeral node, its watches) as ZooKeeper's Java client does, instead of
/// giving up after 7/5 of the timeout as the crate does on its own. Each
/// watch fires once for a change made right after the restart, whether the
/// change lands before or after the watch is set again.
#[test]
fn a_restarted_server_keeps_the_session() {
    let mut zk = ZooKeeper::start();
    let mut c = zk.connect("/keep", 2000);
    let events = c.events();
    let session = c.session_id();
    c.create("/eph", b"", true, false).unwrap();
    c.create("/data", b"0", false, false).unwrap();
    c.create("/parent", b"", false, false).unwrap();
    c.get_watch("/data").unwrap();
    c.children_watch("/parent").unwrap();
    assert!(c.exists_watch("/later").unwrap().is_none());
    c.create("/quiet", b"", false, false).unwrap();
    c.get_watch("/quiet").unwrap();

    zk.restart_after(Duration::from_millis(4000));
    let mut observer = zk.connect("/keep", 6000);
    observer.set("/data", b"1", ANY_VERSION).unwrap();
    observer.create("/parent/kid", b"", false, false).unwrap();
    observer.create("/later", b"", false, false).unwrap();

    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while seen
        .iter()
        .filter(|e| matches!(e, ZkEvent::Node { .. }))
        .count()
        < 3
    {
        match next_event(&events, deadline.saturating_duration_since(Instant::now())) {
            Some(e) => seen.push(e),
            None => panic!("saw only {seen:?}\n{}", zk.log()),
        }
    }
    assert_eq!(seen.first(), Some(&ZkEvent::Disconnected), "{seen:?}");
    assert!(seen.contains(&ZkEvent::Connected), "{seen:?}");
    assert!(
        !seen.iter().any(|e| matches!(
            e,
            ZkEvent::SessionExpired | ZkEvent::SessionEstablished { .. }
        )),
        "{seen:?}"
    );
    for (kind, path) in [
        (NodeEventKind::DataChanged, "/data"),
        (NodeEventKind::ChildrenChanged, "/parent"),
        (NodeEventKind::Created, "/later"),
    ] {
        let want = ZkEvent::Node {
            kind,
            path: path.into(),
        };
        assert!(seen.contains(&want), "no {want:?} in {seen:?}");
    }
    expect_quiet(&events, 300);
    assert_eq!(c.session_id(), session);
    let eph = observer.try_exists("/eph").unwrap().expect("/eph kept");
    assert!(eph.ephemeral);
    // The unchanged node's watch was set again and still fires.
    observer.set("/quiet", b"1", ANY_VERSION).unwrap();
    expect_node(&events, NodeEventKind::DataChanged, "/quiet");
    c.close();
    observer.close();
}

#[test]
fn connect_times_out_with_kafkas_message() {
    let port = free_port();
    let started = Instant::now();
    let err = ZkClient::connect(&ZkConfig {
        connect: format!("127.0.0.1:{port}"),
        session_timeout_ms: 6000,
        connection_timeout_ms: 500,
    })
    .unwrap_err();
    assert_eq!(
        err,
        "Timed out waiting for connection while in state: CONNECTING"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    let err = ZkClient::connect(&ZkConfig {
        connect: "127.0.0.1:notaport".into(),
        session_timeout_ms: 6000,
        connection_timeout_ms: 500,
    })
    .unwrap_err();
    assert!(err.contains("bad port"), "{err}");
}
