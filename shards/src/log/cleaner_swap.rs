//! A cleaned group's swap on disk (Kafka's `LocalLog.replaceSegments`), on
//! the `log-dirs` thread, and its completion after a crash.
//!
//! In order: the group's `.cleaned` files are renamed `.swap` (indexes,
//! then the log: the commit point) and the directory is fsynced; each old
//! segment's files are renamed `<name>.deleted` and unlinked
//! `file.delete.delay.ms` later, as Kafka's asynchronous delete does; the
//! `.swap` files take their final names and the directory is fsynced
//! again. A crash before the commit point leaves the old segments whole
//! (the `.cleaned` and `.swap` files are strays); after it,
//! [`complete_interrupted_swaps`] finishes the swap at the next open.

use std::io;
use std::path::Path;

use super::super::log::sync_dir;
use super::super::log_deleter::delete_after;
use super::super::recovery::{parse_segment_file_name, read_header_at};
use super::super::segment::{
    deleted_name, segment_file_path, DiskFile, INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX,
};
use super::super::transaction_index::TransactionIndex;
use super::{
    remove_if_exists, rename, suffixed, CLEANED_SUFFIX, MAX_SEGMENT_BYTES, SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
};

/// The cleaned group `bases` (its output named after `bases[0]`) takes the
/// old segments' place in `dir`; `txn_index` is the group's aborted
/// transactions, still at its `.cleaned` path.
pub(super) fn commit_files(
    dir: &Path,
    bases: &[i64],
    mut txn_index: TransactionIndex,
    delete_delay_ms: u64,
) -> io::Result<()> {
    let base = bases[0];
    // The renames move files only; a file not there is a bug upstream.
    txn_index.rename_to(suffixed(dir, base, TXN_INDEX_FILE_SUFFIX, SWAP_SUFFIX))?;
    for suffix in [INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX] {
        rename(
            &suffixed(dir, base, suffix, CLEANED_SUFFIX),
            &suffixed(dir, base, suffix, SWAP_SUFFIX),
        )?;
    }
    sync_dir(dir)?; // committed
    let mut doomed = Vec::with_capacity(bases.len() * SEGMENT_SUFFIXES.len());
    for &old in bases {
        for suffix in SEGMENT_SUFFIXES {
            let path = segment_file_path(dir, old, suffix);
            let renamed = deleted_name(&path);
            match std::fs::rename(&path, &renamed) {
                Ok(()) => doomed.push(renamed),
                // Indexes may be missing (rebuilt on load); a segment
                // with no aborted transaction has no `.txnindex`.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    txn_index.rename_to(segment_file_path(dir, base, TXN_INDEX_FILE_SUFFIX))?;
    for suffix in [INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX] {
        rename(
            &suffixed(dir, base, suffix, SWAP_SUFFIX),
            &segment_file_path(dir, base, suffix),
        )?;
    }
    sync_dir(dir)?;
    // The old segments' descriptors are the log's until it drops them:
    // only the names wait out the delay here.
    delete_after(doomed, (), delete_delay_ms);
    Ok(())
}

/// Finishes swaps that reached their commit point (a `<base>.log.swap`)
/// before a crash: the old segments the swap covers are removed and the
/// `.swap` files take their final names. Returns the swaps completed.
/// Called by `Log::open` before stray `.cleaned`/`.swap` files are deleted.
pub fn complete_interrupted_swaps(dir: &Path) -> io::Result<usize> {
    let swap_log_suffix = format!("{LOG_FILE_SUFFIX}{SWAP_SUFFIX}");
    let mut swaps = Vec::new();
    let mut logs = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(base) = parse_segment_file_name(name, &swap_log_suffix) {
            swaps.push(base);
        } else if let Some(base) = parse_segment_file_name(name, LOG_FILE_SUFFIX) {
            logs.push(base);
        }
    }
    swaps.sort_unstable();
    for &base in &swaps {
        let swap_path = suffixed(dir, base, LOG_FILE_SUFFIX, SWAP_SUFFIX);
        let file = DiskFile::open(&swap_path, false)?;
        let len = file.file_len()?.min(MAX_SEGMENT_BYTES);
        // The swap was fsynced before its commit, so its batches are whole;
        // its end bounds the old segments it replaces.
        let mut pos = 0;
        let mut next_offset = base;
        while pos < len {
            match read_header_at(&file, pos, len) {
                Ok(h) => {
                    next_offset = next_offset.max(h.last_offset() + 1);
                    pos += h.total_size() as u64;
                }
                Err(_) => break,
            }
        }
        log::warn!(
            "{}: completing interrupted cleaner swap of segment {base} (offsets to {next_offset})",
            dir.display()
        );
        for &old in logs.iter().filter(|&&b| b > base && b < next_offset) {
            for suffix in SEGMENT_SUFFIXES {
                remove_if_exists(&segment_file_path(dir, old, suffix))?;
            }
        }
        for suffix in [INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX] {
            let swap = suffixed(dir, base, suffix, SWAP_SUFFIX);
            let target = segment_file_path(dir, base, suffix);
            if swap.exists() {
                rename(&swap, &target)?;
            } else {
                // Already renamed or never written: rebuilt on load.
                remove_if_exists(&target)?;
            }
        }
        // Without a `.txnindex.swap` the target is already the group's
        // index, or the group had no aborted transaction, and then neither
        // had its first segment, whose entries the group keeps.
        let txn_swap = suffixed(dir, base, TXN_INDEX_FILE_SUFFIX, SWAP_SUFFIX);
        if txn_swap.exists() {
            rename(
                &txn_swap,
                &segment_file_path(dir, base, TXN_INDEX_FILE_SUFFIX),
            )?;
        }
        rename(&swap_path, &segment_file_path(dir, base, LOG_FILE_SUFFIX))?;
    }
    if !swaps.is_empty() {
        sync_dir(dir)?;
    }
    Ok(swaps.len())
}
