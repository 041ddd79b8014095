use super::ops::WatchClass;
use super::session::WatchRegistry;
use super::{ConnectString, NodeEventKind, ZkServer, DEFAULT_ZK_PORT};

fn server(host: &str, port: u16) -> ZkServer {
    ZkServer {
        host: host.to_string(),
        port,
    }
}

#[test]
fn parses_hosts_and_ports() {
    let cs = ConnectString::parse("h1:2181,h2:2182,h3").unwrap();
    assert_eq!(
        cs.servers,
        vec![
            server("h1", 2181),
            server("h2", 2182),
            server("h3", DEFAULT_ZK_PORT)
        ]
    );
    assert_eq!(cs.chroot, None);
    assert_eq!(cs.hosts(), "h1:2181,h2:2182,h3:2181");
}

#[test]
fn parses_chroot() {
    let cs = ConnectString::parse("127.0.0.1:2181/kafka/test").unwrap();
    assert_eq!(cs.servers, vec![server("127.0.0.1", 2181)]);
    assert_eq!(cs.chroot.as_deref(), Some("/kafka/test"));
    assert_eq!(cs.hosts(), "127.0.0.1:2181");
    // The chroot starts at the first '/', even right after a server list.
    let cs = ConnectString::parse("a:1,b:2/x").unwrap();
    assert_eq!(cs.servers, vec![server("a", 1), server("b", 2)]);
    assert_eq!(cs.chroot.as_deref(), Some("/x"));
}

#[test]
fn bare_slash_is_no_chroot() {
    let cs = ConnectString::parse("h:2181/").unwrap();
    assert_eq!(cs.chroot, None);
}

#[test]
fn skips_blank_entries_and_whitespace() {
    let cs = ConnectString::parse(" h1:1 ,, h2:2 ,").unwrap();
    assert_eq!(cs.servers, vec![server("h1", 1), server("h2", 2)]);
}

#[test]
fn empty_port_means_default() {
    let cs = ConnectString::parse("h1:").unwrap();
    assert_eq!(cs.servers, vec![server("h1", DEFAULT_ZK_PORT)]);
}

#[test]
fn parses_ipv6() {
    let cs = ConnectString::parse("[::1]:2182,[fe80::1]/c").unwrap();
    assert_eq!(
        cs.servers,
        vec![server("::1", 2182), server("fe80::1", DEFAULT_ZK_PORT)]
    );
    assert_eq!(cs.chroot.as_deref(), Some("/c"));
    assert_eq!(cs.hosts(), "[::1]:2182,[fe80::1]:2181");
}

#[test]
fn rejects_bad_input() {
    for bad in [
        "",
        " , ",
        "/chroot",
        ":2181",
        "h:abc",
        "h:0",
        "h:65536",
        "h:-1",
        "h:2181/bad/",
        "h:2181/a//b",
        "h:2181/a/./b",
        "[::1",
        "[::1]x",
        "[]:2181",
        "::1",
        "h 1:2181",
    ] {
        assert!(
            ConnectString::parse(bad).is_err(),
            "{bad:?} should be rejected"
        );
    }
}

#[test]
fn error_names_the_problem() {
    let e = ConnectString::parse("h:xyz").unwrap_err();
    assert!(e.contains("\"h:xyz\"") && e.contains("bad port"), "{e}");
    let e = ConnectString::parse("h:1/a/").unwrap_err();
    assert!(e.contains("chroot"), "{e}");
}

#[test]
fn registry_keeps_one_watch_per_path_and_class() {
    let mut r = WatchRegistry::default();
    let a = r.register("/a", WatchClass::Data, Some(7), 0).unwrap();
    assert!(r.register("/a", WatchClass::Data, Some(7), 0).is_none());
    let c = r.register("/a", WatchClass::Child, Some(7), 0).unwrap();
    assert_eq!(r.pending_count(), 2);
    assert!(r.fired(a, WatchClass::Data, "/a", NodeEventKind::DataChanged));
    // Re-armable after firing.
    let a2 = r.register("/a", WatchClass::Data, Some(7), 0).unwrap();
    assert_ne!(a, a2);
    assert!(r.fired(c, WatchClass::Child, "/a", NodeEventKind::ChildrenChanged));
    assert_eq!(r.pending_count(), 1);
}

#[test]
fn registry_reports_a_deletion_once() {
    let mut r = WatchRegistry::default();
    let d = r.register("/n", WatchClass::Data, Some(5), 0).unwrap();
    let c = r.register("/n", WatchClass::Child, Some(5), 0).unwrap();
    assert!(r.fired(d, WatchClass::Data, "/n", NodeEventKind::Deleted));
    // The child watch of the same node fires for the same deletion: muted.
    assert!(!r.fired(c, WatchClass::Child, "/n", NodeEventKind::Deleted));
    assert_eq!(r.pending_count(), 0);
}

#[test]
fn registry_keeps_watches_of_a_newer_incarnation() {
    let mut r = WatchRegistry::default();
    let d = r.register("/n", WatchClass::Data, Some(5), 0).unwrap();
    // A child watch set on a re-created node (another czxid) outlives the
    // old node's deletion.
    let c = r.register("/n", WatchClass::Child, Some(9), 0).unwrap();
    assert!(r.fired(d, WatchClass::Data, "/n", NodeEventKind::Deleted));
    assert_eq!(r.pending_count(), 1);
    assert!(r.fired(c, WatchClass::Child, "/n", NodeEventKind::ChildrenChanged));
    // An exists watch on an absent node is never muted by a deletion.
    let e = r.register("/m", WatchClass::Data, None, 0).unwrap();
    let c = r.register("/m", WatchClass::Child, Some(3), 0).unwrap();
    assert!(r.fired(c, WatchClass::Child, "/m", NodeEventKind::Deleted));
    assert!(r.fired(e, WatchClass::Data, "/m", NodeEventKind::Created));
}

#[test]
fn client_is_clone_send_sync() {
    fn check<T: Clone + Send + Sync + 'static>() {}
    check::<super::ZkClient>();
    check::<super::ZkEvent>();
}
