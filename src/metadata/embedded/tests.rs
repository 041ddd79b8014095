use super::*;
use crate::metadata::{MetadataStore, Op, OpResult, StoreError, ANY_VERSION};
use std::sync::atomic::{AtomicUsize, Ordering};

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("kshard-meta-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn zk_semantics() {
    let dir = TempDir::new("sem");
    let mut s = EmbeddedStore::open(&dir.0).unwrap();
    assert!(matches!(
        s.create("/a/b", b"x", false, false),
        Err(StoreError::NoNode(_))
    ));
    assert_eq!(s.create("/a", b"1", false, false).unwrap(), "/a");
    assert!(matches!(
        s.create("/a", b"1", false, false),
        Err(StoreError::NodeExists(_))
    ));
    s.create("/a/b", b"2", false, false).unwrap();
    let (data, stat) = s.get("/a").unwrap();
    assert_eq!(data, b"1");
    assert_eq!((stat.version, stat.cversion, stat.num_children), (0, 1, 1));
    assert!(matches!(
        s.set("/a", b"3", 5),
        Err(StoreError::BadVersion(_))
    ));
    assert_eq!(s.set("/a", b"3", 0).unwrap().version, 1);
    assert_eq!(s.set("/a", b"4", ANY_VERSION).unwrap().version, 2);
    assert!(matches!(
        s.delete("/a", ANY_VERSION),
        Err(StoreError::NotEmpty(_))
    ));
    assert!(matches!(
        s.delete("/a/b", 3),
        Err(StoreError::BadVersion(_))
    ));
    s.delete("/a/b", 0).unwrap();
    assert!(s.exists("/a/b").is_none());
    assert_eq!(s.get("/a").unwrap().1.cversion, 2);
    assert!(matches!(s.get("/nope"), Err(StoreError::NoNode(_))));
    assert!(matches!(s.get("bad"), Err(StoreError::BadArguments(_))));
    assert!(matches!(
        s.create("/a/", b"", false, false),
        Err(StoreError::BadArguments(_))
    ));
    assert!(matches!(
        s.delete("/", ANY_VERSION),
        Err(StoreError::BadArguments(_))
    ));
    // create_all makes parents empty and fails on an existing leaf.
    s.create_all("/x/y/z", b"leaf").unwrap();
    assert_eq!(s.get("/x/y").unwrap().0, b"");
    assert_eq!(s.get("/x/y/z").unwrap().0, b"leaf");
    assert!(matches!(
        s.create_all("/x/y/z", b""),
        Err(StoreError::NodeExists(_))
    ));
    // Children sorted.
    for name in ["c", "a", "b"] {
        s.create(&format!("/x/{name}"), b"", false, false).unwrap();
    }
    assert_eq!(s.children("/x").unwrap(), vec!["a", "b", "c", "y"]);
    s.delete_recursive("/x").unwrap();
    assert!(s.exists("/x").is_none());
    assert!(matches!(
        s.delete_recursive("/x"),
        Err(StoreError::NoNode(_))
    ));
    assert_eq!(s.children("/").unwrap(), vec!["a"]);
}

#[test]
fn sequential_nodes_use_parent_cversion() {
    let dir = TempDir::new("seq");
    let mut s = EmbeddedStore::open(&dir.0).unwrap();
    s.create("/changes", b"", false, false).unwrap();
    assert_eq!(
        s.create("/changes/c_", b"", false, true).unwrap(),
        "/changes/c_0000000000"
    );
    assert_eq!(
        s.create("/changes/c_", b"", false, true).unwrap(),
        "/changes/c_0000000001"
    );
    s.delete("/changes/c_0000000000", ANY_VERSION).unwrap();
    // The delete bumped cversion too, as in ZooKeeper.
    assert_eq!(
        s.create("/changes/c_", b"", false, true).unwrap(),
        "/changes/c_0000000003"
    );
}

#[test]
fn multi_is_all_or_nothing() {
    let dir = TempDir::new("multi");
    let mut s = EmbeddedStore::open(&dir.0).unwrap();
    s.create("/a", b"v", false, false).unwrap();
    let bad = vec![
        Op::Create {
            path: "/b".into(),
            data: b"1".to_vec(),
            ephemeral: false,
            sequential: false,
        },
        Op::SetData {
            path: "/a".into(),
            data: b"w".to_vec(),
            expected_version: 0,
        },
        Op::Check {
            path: "/a".into(),
            expected_version: 0,
        },
    ];
    assert!(matches!(s.multi(&bad), Err(StoreError::BadVersion(_))));
    assert!(s.exists("/b").is_none());
    assert_eq!(
        s.get("/a").unwrap(),
        (b"v".to_vec(), s.exists("/a").unwrap())
    );
    assert_eq!(s.get("/").unwrap().1.cversion, 1);
    let good = vec![
        Op::Check {
            path: "/a".into(),
            expected_version: 0,
        },
        Op::Create {
            path: "/b".into(),
            data: b"1".to_vec(),
            ephemeral: false,
            sequential: false,
        },
        Op::Create {
            path: "/b/c".into(),
            data: b"2".to_vec(),
            ephemeral: false,
            sequential: false,
        },
        Op::SetData {
            path: "/a".into(),
            data: b"w".to_vec(),
            expected_version: 0,
        },
        Op::Delete {
            path: "/b/c".into(),
            expected_version: 0,
        },
    ];
    let res = s.multi(&good).unwrap();
    assert_eq!(res[0], OpResult::Checked);
    assert_eq!(res[1], OpResult::Created("/b".into()));
    assert!(matches!(res[3], OpResult::Set(st) if st.version == 1));
    assert_eq!(res[4], OpResult::Deleted);
    drop(s);
    let s = EmbeddedStore::open(&dir.0).unwrap();
    assert_eq!(s.get("/a").unwrap().0, b"w");
    assert_eq!(s.children("/b").unwrap(), Vec::<String>::new());
    assert_eq!(s.get("/b").unwrap().1.cversion, 2);
}

#[test]
fn durable_across_reopen_and_ephemerals_dropped() {
    let dir = TempDir::new("reopen");
    {
        let mut s = EmbeddedStore::open(&dir.0).unwrap();
        s.create("/t", b"", false, false).unwrap();
        for i in 0..300 {
            s.create(
                &format!("/t/n{i:03}"),
                format!("d{i}").as_bytes(),
                false,
                false,
            )
            .unwrap();
        }
        for i in 0..300 {
            s.set(&format!("/t/n{i:03}"), b"updated", ANY_VERSION)
                .unwrap();
        }
        for i in 0..100 {
            s.delete(&format!("/t/n{i:03}"), ANY_VERSION).unwrap();
        }
        s.create("/eph", b"", true, false).unwrap();
        assert!(matches!(
            s.create("/eph/child", b"", false, false),
            Err(StoreError::BadArguments(_))
        ));
        // Dropped without close: the log alone must carry everything.
    }
    let s = EmbeddedStore::open(&dir.0).unwrap();
    assert_eq!(s.children("/t").unwrap().len(), 200);
    let (data, stat) = s.get("/t/n150").unwrap();
    assert_eq!((data.as_slice(), stat.version), (&b"updated"[..], 1));
    assert!(s.exists("/eph").is_none());
    assert!(s.exists("/t/n050").is_none());
    assert_eq!(s.get("/t").unwrap().1.cversion, 400);
}

#[test]
fn torn_tail_and_corrupt_record_truncated() {
    let dir = TempDir::new("torn");
    {
        let mut s = EmbeddedStore::open(&dir.0).unwrap();
        s.create("/a", b"1", false, false).unwrap();
        s.create("/b", b"2", false, false).unwrap();
    }
    let log_path = dir.0.join(LOG_FILE);
    let full = fs::read(&log_path).unwrap();
    // Torn: cut the last record in half.
    let last_len = encode_record(&[Effect::Create {
        path: "/b".into(),
        data: b"2".to_vec(),
        ephemeral: false,
        time_ms: 0,
    }])
    .unwrap()
    .len();
    fs::write(&log_path, &full[..full.len() - last_len / 2]).unwrap();
    {
        let mut s = EmbeddedStore::open(&dir.0).unwrap();
        assert!(s.exists("/a").is_some());
        assert!(s.exists("/b").is_none());
        assert_eq!(
            fs::metadata(&log_path).unwrap().len() as usize,
            full.len() - last_len
        );
        // Appends after truncation replay fine.
        s.create("/c", b"3", false, false).unwrap();
    }
    // Corrupt: flip a payload byte of the /c record; it and anything after is dropped.
    let mut bytes = fs::read(&log_path).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0xff;
    fs::write(&log_path, &bytes).unwrap();
    let s = EmbeddedStore::open(&dir.0).unwrap();
    assert!(s.exists("/a").is_some());
    assert!(s.exists("/c").is_none());
    // Garbage header: treated as an empty log over the snapshot.
    drop(s);
    fs::write(&log_path, b"junk").unwrap();
    let s = EmbeddedStore::open(&dir.0).unwrap();
    assert!(s.exists("/a").is_none());
    assert_eq!(s.node_count(), 1);
}

#[test]
fn compaction_and_stale_log() {
    let dir = TempDir::new("compact");
    let big = vec![7u8; 64 << 10];
    {
        let mut s = EmbeddedStore::open(&dir.0).unwrap();
        s.create("/big", b"", false, false).unwrap();
        // ~4.5 MiB of writes crosses the threshold at least once.
        for i in 0..72 {
            s.set("/big", &big[..(big.len() - i)], ANY_VERSION).unwrap();
        }
        assert!(s.log_size_bytes() < COMPACT_THRESHOLD_BYTES);
        assert!(dir.0.join(SNAPSHOT_FILE).exists());
        s.create("/after", b"x", false, false).unwrap();
    }
    {
        let s = EmbeddedStore::open(&dir.0).unwrap();
        let (data, stat) = s.get("/big").unwrap();
        assert_eq!((data.len(), stat.version), (big.len() - 71, 72));
        assert_eq!(s.get("/after").unwrap().0, b"x");
        s.close().unwrap();
    }
    // Simulate a crash between snapshot rename and log reset: an old-epoch
    // log next to a newer snapshot must be ignored, not replayed twice.
    let stale = {
        let mut s = EmbeddedStore::open(&dir.0).unwrap();
        s.create("/n", b"", false, false).unwrap();
        let log = fs::read(dir.0.join(LOG_FILE)).unwrap();
        s.compact().unwrap();
        log
    };
    fs::write(dir.0.join(LOG_FILE), &stale).unwrap();
    let s = EmbeddedStore::open(&dir.0).unwrap();
    assert_eq!(s.get("/n").unwrap().1.version, 0);
    assert_eq!(s.children("/").unwrap(), vec!["after", "big", "n"]);
}

#[test]
fn corrupt_snapshot_is_an_error_and_lock_excludes() {
    let dir = TempDir::new("snap");
    {
        let mut s = EmbeddedStore::open(&dir.0).unwrap();
        s.create("/a", b"1", false, false).unwrap();
        assert!(matches!(
            EmbeddedStore::open(&dir.0),
            Err(StoreError::Io(_))
        ));
        s.close().unwrap();
    }
    let p = dir.0.join(SNAPSHOT_FILE);
    let mut bytes = fs::read(&p).unwrap();
    bytes[20] ^= 1;
    fs::write(&p, &bytes).unwrap();
    assert!(matches!(
        EmbeddedStore::open(&dir.0),
        Err(StoreError::Corrupt(_))
    ));
    // Truncated snapshots of every length fail cleanly, never panic.
    bytes[20] ^= 1;
    for cut in 0..bytes.len() {
        assert!(decode_snapshot(&bytes[..cut]).is_err());
    }
    assert!(decode_snapshot(&bytes).is_ok());
}

#[test]
fn record_decoder_is_bounds_safe() {
    let rec = encode_record(&[
        Effect::Create {
            path: "/a".into(),
            data: b"xyz".to_vec(),
            ephemeral: true,
            time_ms: 5,
        },
        Effect::Set {
            path: "/a".into(),
            data: vec![],
            time_ms: 6,
        },
        Effect::Delete { path: "/a".into() },
    ])
    .unwrap();
    let payload = &rec[RECORD_HEADER_BYTES..];
    assert_eq!(decode_effects(payload).unwrap().len(), 3);
    for cut in 0..payload.len() {
        assert!(decode_effects(&payload[..cut]).is_none());
    }
    assert!(decode_effects(&[0xff, 0xff, 0xff, 0xff]).is_none());
}

#[test]
fn oversized_multi_is_refused_and_changes_nothing() {
    let dir = TempDir::new("oversized");
    let mut s = EmbeddedStore::open(&dir.0).unwrap();
    s.create("/t", b"", false, false).unwrap();
    let chunk = vec![b'x'; 1 << 20];
    let ops: Vec<Op> = (0..(RECORD_MAX_BYTES >> 20) + 1)
        .map(|i| Op::Create {
            path: format!("/t/{i}"),
            data: chunk.clone(),
            ephemeral: false,
            sequential: false,
        })
        .collect();
    assert!(matches!(s.multi(&ops), Err(StoreError::BadArguments(_))));
    assert!(s.children("/t").unwrap().is_empty());
    s.create("/t/after", b"1", false, false).unwrap();
    drop(s);
    let s = EmbeddedStore::open(&dir.0).unwrap();
    assert_eq!(s.children("/t").unwrap(), vec!["after".to_string()]);
}

#[test]
fn deferred_syncs_are_handed_to_the_caller_once() {
    let dir = TempDir::new("deferred");
    {
        let mut s = EmbeddedStore::open(&dir.0).unwrap();
        s.create("/a", b"", false, false).unwrap();
        assert!(s.take_unsynced().is_none(), "synced on commit by default");
        s.defer_syncs();
        assert!(s.take_unsynced().is_none(), "nothing written yet");
        s.create("/a/b", b"1", false, false).unwrap();
        s.set("/a/b", b"2", ANY_VERSION).unwrap();
        let log = s.take_unsynced().expect("two records to sync");
        log.sync_data().unwrap();
        assert!(s.take_unsynced().is_none(), "handed out once");
        // A failed op writes nothing.
        assert!(s.create("/a/b", b"", false, false).is_err());
        assert!(s.take_unsynced().is_none());
        s.create("/a/c", b"3", false, false).unwrap();
        // Not taken: the store syncs it when it closes.
    }
    let s = EmbeddedStore::open(&dir.0).unwrap();
    assert_eq!(s.get("/a/b").unwrap().0, b"2");
    assert_eq!(s.get("/a/c").unwrap().0, b"3");
}
