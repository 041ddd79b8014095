//! The active index written behind: what lands, in which order, and what a
//! flush, a roll, a truncation or a synchronous close leaves in the file.

use super::*;
use crate::log::offset_index::OffsetIndex;

const CAPACITY_BYTES: u32 = 4096;

fn active_index(dir: &std::path::Path) -> (OffsetIndex, std::path::PathBuf) {
    let path = dir.join("0.index");
    let f = DiskFile::open(&path, true).unwrap();
    let mut idx = OffsetIndex::create(f, 100, CAPACITY_BYTES).unwrap();
    idx.map_for_appends().unwrap();
    (idx, path)
}

fn land() {
    ship_queued_writes();
    wait_for_landed();
}

/// The file's entries as (relative offset, position), up to the first
/// all-zero entry (the preallocated rest).
fn entries_on_disk(path: &std::path::Path) -> Vec<(u32, u32)> {
    let raw = std::fs::read(path).unwrap();
    raw.chunks_exact(8)
        .map(|c| {
            let rel = u32::from_be_bytes(c[..4].try_into().unwrap());
            let pos = u32::from_be_bytes(c[4..].try_into().unwrap());
            (rel, pos)
        })
        .take_while(|&e| e != (0, 0))
        .collect()
}

fn append(idx: &mut OffsetIndex, from: u32, to: u32) {
    for i in from..to {
        assert!(idx.append(100 + i as i64, i * 100));
    }
    idx.write_through();
}

#[test]
fn appended_entries_reach_the_file_only_off_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    let (mut idx, path) = active_index(dir.path());
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        CAPACITY_BYTES as u64
    );
    append(&mut idx, 1, 6);
    // Queued on this thread, not written: the append made no system call.
    assert!(entries_on_disk(&path).is_empty());
    land();
    let expected: Vec<(u32, u32)> = (1..6).map(|i| (i, i * 100)).collect();
    assert_eq!(entries_on_disk(&path), expected);
    append(&mut idx, 6, 9);
    land();
    assert_eq!(entries_on_disk(&path).len(), 8);
}

#[test]
fn a_roll_trims_the_file_once_its_entries_landed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut idx, path) = active_index(dir.path());
    append(&mut idx, 1, 4);
    idx.deactivate_queued();
    // The roll shipped its queue itself; waiting is what the roll's fsync does.
    wait_for_landed();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * 8);
    assert_eq!(entries_on_disk(&path).len(), 3);
}

#[test]
fn a_trim_queued_before_a_reactivation_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let (mut idx, path) = active_index(dir.path());
    append(&mut idx, 1, 4);
    // Roll, but the shipped trim waits behind a job that blocks the thread
    // until the segment is active again (truncation back into it).
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    INDEX_WRITES.push(move || {
        let _ = blocked.recv();
    });
    idx.deactivate_queued();
    idx.map_for_appends().unwrap();
    release.send(()).unwrap();
    wait_for_landed();
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        CAPACITY_BYTES as u64
    );
    append(&mut idx, 4, 6);
    land();
    assert_eq!(entries_on_disk(&path).len(), 5);
}

#[test]
fn truncation_is_not_undone_by_writes_queued_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut idx, path) = active_index(dir.path());
    append(&mut idx, 1, 4);
    land();
    // Queued, not shipped: entries 4..8.
    append(&mut idx, 4, 8);
    idx.truncate_to(100 + 6).unwrap();
    land();
    // Entries 1..6 kept (4 and 5 written by the truncation itself), the
    // stale writes of 6 and 7 skipped.
    let expected: Vec<(u32, u32)> = (1..6).map(|i| (i, i * 100)).collect();
    assert_eq!(entries_on_disk(&path), expected);
    append(&mut idx, 6, 7);
    land();
    assert_eq!(entries_on_disk(&path).len(), 6);
}

#[test]
fn truncation_zeroes_landed_entries_of_a_preallocated_file() {
    let dir = tempfile::tempdir().unwrap();
    let (mut idx, path) = active_index(dir.path());
    append(&mut idx, 1, 8);
    land();
    idx.truncate_to(100 + 3).unwrap();
    let raw = std::fs::read(&path).unwrap();
    assert_eq!(raw.len(), CAPACITY_BYTES as usize);
    assert!(raw[2 * 8..].iter().all(|&b| b == 0));
    assert_eq!(entries_on_disk(&path).len(), 2);
}

#[test]
fn a_flush_writes_queued_entries_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (mut idx, path) = active_index(dir.path());
    append(&mut idx, 1, 5);
    idx.sync().unwrap();
    assert_eq!(entries_on_disk(&path).len(), 4);
    // The queued copies land later and change nothing.
    land();
    assert_eq!(entries_on_disk(&path).len(), 4);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        CAPACITY_BYTES as u64
    );
}

#[test]
fn a_synchronous_close_trims_and_skips_what_is_still_queued() {
    let dir = tempfile::tempdir().unwrap();
    let (mut idx, path) = active_index(dir.path());
    append(&mut idx, 1, 5);
    idx.unmap_and_trim().unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 4 * 8);
    land();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 4 * 8);
    assert_eq!(entries_on_disk(&path).len(), 4);
}

#[test]
fn interleaved_files_each_get_their_entries() {
    let dir = tempfile::tempdir().unwrap();
    let a_dir = dir.path().join("a");
    let b_dir = dir.path().join("b");
    std::fs::create_dir_all(&a_dir).unwrap();
    std::fs::create_dir_all(&b_dir).unwrap();
    let (mut a, a_path) = active_index(&a_dir);
    let (mut b, b_path) = active_index(&b_dir);
    for i in 1..40 {
        append(&mut a, i, i + 1);
        append(&mut b, i, i + 1);
    }
    land();
    let expected: Vec<(u32, u32)> = (1..40).map(|i| (i, i * 100)).collect();
    assert_eq!(entries_on_disk(&a_path), expected);
    assert_eq!(entries_on_disk(&b_path), expected);
}
