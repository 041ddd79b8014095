//! Kafka's asynchronous segment delete (`file.delete.delay.ms`): a segment
//! that retention or truncation removes leaves the log at once, its files
//! are renamed `<name>.deleted` and unlinked after the delay; a reopened
//! log removes `.deleted` files left by a broker that stopped first.

use super::*;
use std::time::{Duration, Instant};

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn deleted_in(dir: &Path) -> Vec<String> {
    names_in(dir)
        .into_iter()
        .filter(|n| n.ends_with(".deleted"))
        .collect()
}

/// A log of several small segments, then retention by bytes.
fn retained_log(dir: &Path, file_delete_delay_ms: u64) -> Log {
    let config = LogConfig {
        file_delete_delay_ms,
        ..small_config()
    };
    let (mut log, _) = open(dir, config.clone(), 0);
    for _ in 0..30 {
        append(&mut log, 5, NOW, 100);
    }
    log.set_config(LogConfig {
        retention_bytes: 4096,
        ..config
    });
    assert!(log.delete_old_segments(NOW).unwrap() > 0);
    log
}

#[test]
fn deleted_segments_are_renamed_then_unlinked_after_the_delay() {
    let dir = test_dir();
    let started = Instant::now();
    let log = retained_log(dir.path(), 600);
    let first = log.segment_base_offsets()[0];
    assert!(first > 0);
    let doomed = deleted_in(dir.path());
    for suffix in [LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX] {
        let path = segment_file_path(dir.path(), 0, suffix);
        assert!(!path.exists(), "{} kept its name", path.display());
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        assert!(doomed.contains(&format!("{name}.deleted")), "{doomed:?}");
    }
    // Still there until the delay has passed (if this thread was that slow,
    // the check proves nothing, so it is skipped).
    if started.elapsed() < Duration::from_millis(400) {
        assert_eq!(deleted_in(dir.path()), doomed);
    }
    while !deleted_in(dir.path()).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "never unlinked"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(started.elapsed() >= Duration::from_millis(600));
    assert!(!read_all(&log, first).is_empty());
}

#[test]
fn truncation_defers_the_unlink_too() {
    let dir = test_dir();
    let config = LogConfig {
        file_delete_delay_ms: 60_000,
        ..small_config()
    };
    let (mut log, _) = open(dir.path(), config, 0);
    for _ in 0..30 {
        append(&mut log, 5, NOW, 100);
    }
    let bases = log.segment_base_offsets();
    log.truncate_to(bases[1]).unwrap();
    let last = *bases.last().unwrap();
    let name = segment_file_path(dir.path(), last, LOG_FILE_SUFFIX);
    let name = name.file_name().unwrap().to_str().unwrap();
    assert!(deleted_in(dir.path()).contains(&format!("{name}.deleted")));
    // A broker stopped before the delay: the next open removes them.
    drop(log);
    let (log, _) = open(dir.path(), small_config(), 0);
    assert!(
        deleted_in(dir.path()).is_empty(),
        "{:?}",
        names_in(dir.path())
    );
    assert_eq!(log.log_end_offset(), bases[1]);
}
