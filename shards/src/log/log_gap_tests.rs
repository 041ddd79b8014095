//! Follower appends with offset gaps (Kafka's `UnifiedLog.appendAsFollower`
//! of a compacted leader's batches): the first batch may start above the
//! log end offset and batches skip offsets; the log end offset becomes the
//! last offset + 1; a roll starts the new segment at the batch's base
//! offset (Kafka's `roll(Some(firstOffset))`), also when the gap is wider
//! than the active segment's relative offsets. Reads, index lookups,
//! truncation, reopen and recovery treat a gap as "no records there", never
//! as corruption. A leader's append still must start at the log end.

use super::*;

/// Appends the leader's `batches` as one follower append.
fn follow(log: &mut Log, batches: &[&[u8]]) -> Option<i64> {
    let bytes = batches.concat();
    log.append_as_follower(&bytes, &append_info(&bytes), NOW)
        .unwrap()
}

/// (base, last) offsets of every batch from `offset` to the log end,
/// reading as a fetcher does (one segment per read, whole batches).
fn batches_from(log: &Log, offset: i64) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut at = offset;
    while at < log.log_end_offset() {
        let bytes = read_all(log, at);
        let hs = headers(&bytes);
        assert!(!hs.is_empty(), "nothing read at {at}");
        out.extend(hs.iter().map(|h| (h.base_offset, h.last_offset())));
        at = hs.last().unwrap().last_offset() + 1;
    }
    out
}

/// The batch a read at `offset` must start with: the first whose last
/// offset is >= `offset`.
fn expected_first(batches: &[(i64, i64)], offset: i64) -> Option<(i64, i64)> {
    batches.iter().copied().find(|&(_, last)| last >= offset)
}

/// 5-record batches of ~600 bytes at bases 0, 12, 30, 31+... with gaps of
/// 0 to 16 offsets, appended in chunks of 1 to 3 batches; returns
/// (base, last) of each.
fn follow_gapped(log: &mut Log, count: usize) -> Vec<(i64, i64)> {
    let mut all = Vec::new();
    let mut next = log.log_end_offset();
    let mut i = 0;
    while i < count {
        let chunk: Vec<Vec<u8>> = (i..(i + 1 + i % 3).min(count))
            .map(|j| {
                let base = next + (j as i64 * 7) % 17;
                next = base + 5;
                all.push((base, base + 4));
                build_batch(base, 5, NOW + j as i64, 100)
            })
            .collect();
        i += chunk.len();
        let refs: Vec<&[u8]> = chunk.iter().map(|b| b.as_slice()).collect();
        follow(log, &refs);
        assert_eq!(log.log_end_offset(), next, "the end follows the last batch");
    }
    all
}

/// Flushes and drops the log without closing it (a crash after a flush);
/// returns the zero padding a direct-mode active segment leaves on disk.
fn crash(mut log: Log) -> u64 {
    log.flush().unwrap();
    let seg = log.active();
    let logical = seg.size_bytes();
    let path = segment_file_path(log.dir(), seg.base_offset(), LOG_FILE_SUFFIX);
    drop(log);
    std::fs::metadata(path).unwrap().len() - logical
}

fn gaps_within_a_segment_read_index_and_truncate() {
    let dir = test_dir();
    let config = LogConfig {
        index_interval_bytes: 512,
        ..base_config()
    };
    let (mut log, _) = open(dir.path(), config, 0);
    // The first batch may start above an empty log's end.
    assert_eq!(follow(&mut log, &[&build_batch(3, 2, NOW, 10)]), None);
    assert_eq!(log.log_end_offset(), 5);
    let mut batches = vec![(3, 4)];
    batches.extend(follow_gapped(&mut log, 30));
    let leo = log.log_end_offset();
    assert_eq!(leo, batches.last().unwrap().1 + 1);
    assert_eq!(log.segment_count(), 1);
    assert!(batches.windows(2).any(|w| w[1].0 > w[0].1 + 1), "gaps");

    // Every index entry names a batch's last offset and that batch's start.
    let seg = log.segment_for(0).unwrap();
    let idx = seg.offset_index();
    assert!(idx.entries() > 5, "{} entries", idx.entries());
    for n in 0..idx.entries() {
        let e = idx.entry(n);
        let h = seg.read_header(e.position as u64).unwrap();
        assert_eq!(h.last_offset(), e.offset, "entry {n}");
    }
    // A read at any offset, in a gap or not, starts at the next batch.
    for offset in 0..leo {
        let want = expected_first(&batches, offset).unwrap();
        let info = log.read(offset, 1, i64::MAX, true).unwrap();
        let h = headers(&read_slice_bytes(&info.slice.unwrap()).unwrap());
        assert_eq!((h[0].base_offset, h[0].last_offset()), want, "at {offset}");
        assert_eq!(info.first_batch_base_offset, want.0);
        let (_, pos) = log.position_of(offset).unwrap().unwrap();
        assert_eq!(seg.read_header(pos).unwrap().base_offset, want.0);
    }
    assert_eq!(batches_from(&log, 0), batches);
    assert!(log.read(leo, 1, i64::MAX, true).unwrap().slice.is_none());
    assert!(matches!(
        log.read(leo + 1, 1, i64::MAX, true),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    // Producer-state replay from a gap visits the batches after it.
    let gap = batches.windows(2).find(|w| w[1].0 > w[0].1 + 1).unwrap();
    let in_gap = gap[0].1 + 1;
    let mut seen = Vec::new();
    log.for_each_batch_from(in_gap, |h, _| seen.push(h.base_offset))
        .unwrap();
    assert_eq!(seen[0], gap[1].0);
    assert_eq!(
        seen.len(),
        batches.iter().filter(|b| b.0 >= gap[1].0).count()
    );
    // Delayed fetch's byte count from a gap starts at the next batch.
    let from_next = read_all(&log, gap[1].0).len() as u64;
    assert_eq!(log.bytes_between(in_gap, leo).unwrap(), Some(from_next));

    // Truncating into a gap cuts the batches above it: the end is the
    // last batch below it, and fetching resumes there.
    log.truncate_to(in_gap).unwrap();
    assert_eq!(log.log_end_offset(), in_gap);
    let kept: Vec<(i64, i64)> = batches.iter().copied().filter(|b| b.1 < in_gap).collect();
    assert_eq!(batches_from(&log, 0), kept);
    log.truncate_to(gap[1].0 - 1).unwrap();
    assert_eq!(log.log_end_offset(), in_gap, "nothing above the end to cut");
    follow(&mut log, &[&build_batch(in_gap + 3, 1, NOW, 10)]);
    assert_eq!(log.log_end_offset(), in_gap + 4);
    // A leader (after an election) continues at the end.
    append(&mut log, 2, NOW, 10);
    assert_eq!(log.log_end_offset(), in_gap + 6);
}

fn gaps_across_rolls_start_segments_at_the_batch() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), small_config(), 0);
    let mut batches = Vec::new();
    let mut rolls = Vec::new();
    for i in 0..40 {
        let base = log.log_end_offset() + 3 + i % 4;
        let leo = log.log_end_offset();
        if let Some(new_base) = follow(&mut log, &[&build_batch(base, 5, NOW + i, 100)]) {
            // At the batch, not at the old end: the gap stays a gap.
            assert_eq!(new_base, base);
            assert!(leo < base);
            rolls.push(new_base);
        }
        batches.push((base, base + 4));
    }
    assert!(rolls.len() >= 5, "rolled {} times", rolls.len());
    assert_eq!(log.segment_base_offsets()[1..], rolls[..]);
    let bases = log.segment_base_offsets();
    for w in bases.windows(2) {
        let seg = &log.segments[&w[0]];
        assert!(seg.next_offset() < w[1], "a gap before segment {}", w[1]);
        assert!(segment_file_path(dir.path(), w[1], LOG_FILE_SUFFIX).exists());
        // A read at the end of one segment (a gap) gets the next one's first batch.
        let h = headers(&read_all(&log, seg.next_offset()));
        assert_eq!(h[0].base_offset, w[1]);
    }
    assert_eq!(batches_from(&log, 0), batches);
    // Truncating into the gap before a segment drops that segment.
    let victim = bases[bases.len() - 1];
    let end_before = log.segments[&bases[bases.len() - 2]].next_offset();
    log.truncate_to(victim - 1).unwrap();
    assert_eq!(log.log_end_offset(), end_before);
    assert_eq!(log.segment_base_offsets(), bases[..bases.len() - 1]);
    assert!(!segment_file_path(dir.path(), victim, LOG_FILE_SUFFIX).exists());
}

fn gaps_wider_than_a_segment_can_index() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), base_config(), 0);
    follow(&mut log, &[&build_batch(0, 3, NOW, 10)]);
    // The largest relative offset still fits the active segment.
    let edge = i32::MAX as i64;
    assert_eq!(
        follow(&mut log, &[&build_batch(edge - 1, 2, NOW, 10)]),
        None
    );
    // One more does not: roll at the batch.
    let far = edge + 1000;
    assert_eq!(
        follow(&mut log, &[&build_batch(far, 2, NOW, 10)]),
        Some(far)
    );
    assert_eq!(log.segment_base_offsets(), vec![0, far]);
    assert_eq!(log.log_end_offset(), far + 2);
    assert_eq!(headers(&read_all(&log, edge + 1))[0].base_offset, far);
    let before = batches_from(&log, 0);
    assert_eq!(before, vec![(0, 2), (edge - 1, edge), (far, far + 1)]);
    log.close().unwrap();
    let (log, stats) = open(dir.path(), base_config(), far + 2);
    assert_eq!(stats.segments_scanned, 0);
    assert_eq!(log.log_end_offset(), far + 2);
    assert_eq!(batches_from(&log, 0), before);

    // An empty log whose segment cannot index the batch rolls too; the
    // empty segment stays (as in Kafka) and so does the start offset.
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), base_config(), 0);
    let far = 3_000_000_000i64;
    assert_eq!(
        follow(&mut log, &[&build_batch(far, 4, NOW, 10)]),
        Some(far)
    );
    assert_eq!(log.segment_base_offsets(), vec![0, far]);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, far + 4));
    assert_eq!(batches_from(&log, 0), vec![(far, far + 3)]);
    let padding = crash(log);
    let (log, stats) = open(dir.path(), base_config(), 0);
    assert_eq!(stats.bytes_truncated, padding);
    assert_eq!(log.log_end_offset(), far + 4);
    assert_eq!(batches_from(&log, 0), vec![(far, far + 3)]);
}

fn gapped_logs_reopen_and_recover() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), small_config(), 0);
    let batches = follow_gapped(&mut log, 60);
    let bases = log.segment_base_offsets();
    assert!(bases.len() > 3);
    let leo = log.log_end_offset();
    // Clean close: nothing to scan.
    log.close().unwrap();
    let (log, stats) = open(dir.path(), small_config(), leo);
    assert_eq!(stats.segments_scanned, 0);
    assert_eq!(
        (log.log_end_offset(), log.segment_base_offsets()),
        (leo, bases.clone())
    );
    assert_eq!(batches_from(&log, 0), batches);
    let padding = crash(log);
    // A crash with the recovery point at 0: every segment is scanned and
    // no gap is taken for damage.
    let (log, stats) = open(dir.path(), small_config(), 0);
    assert_eq!(stats.segments_scanned, bases.len());
    assert_eq!(stats.bytes_truncated, padding, "only direct mode's padding");
    assert_eq!(stats.batches_recovered, batches.len() as u64);
    assert_eq!(
        (log.log_end_offset(), log.segment_base_offsets()),
        (leo, bases.clone())
    );
    assert_eq!(batches_from(&log, 0), batches);
    log.close().unwrap();
    // Half a batch at the end: only that batch goes, and the end is the
    // last whole batch's, not the next offset after a gap.
    let active = *bases.last().unwrap();
    let path = segment_file_path(dir.path(), active, LOG_FILE_SUFFIX);
    let data = std::fs::read(&path).unwrap();
    std::fs::write(&path, &data[..data.len() - 50]).unwrap();
    let (mut log, stats) = open(dir.path(), small_config(), active);
    assert_eq!(stats.segments_scanned, 1);
    assert!(stats.bytes_truncated > 0);
    let kept = &batches[..batches.len() - 1];
    assert_eq!(log.log_end_offset(), kept.last().unwrap().1 + 1);
    assert_eq!(batches_from(&log, 0), kept);
    // The fetcher asks for the lost batch again.
    let last = *batches.last().unwrap();
    follow(&mut log, &[&build_batch(last.0, 5, NOW, 100)]);
    assert_eq!(log.log_end_offset(), leo);
}

in_both_modes!(
    gaps_within_a_segment_read_index_and_truncate,
    gaps_across_rolls_start_segments_at_the_batch,
    gaps_wider_than_a_segment_can_index,
    gapped_logs_reopen_and_recover,
);

// What the follower checks before appending (see `check_follower_append_shape`
// and `LogSegment::index_batches`): a violation is a bug and stops the broker.

#[test]
#[should_panic(expected = "follower append at offset 4 below the log end offset 5")]
fn follower_append_below_the_end_is_a_bug() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), base_config(), 0);
    follow(&mut log, &[&build_batch(0, 5, NOW, 10)]);
    follow(&mut log, &[&build_batch(4, 2, NOW, 10)]);
}

#[test]
#[should_panic(expected = "batch at offset 12 (last offset 12) appended where offset 15 is next")]
fn follower_batches_going_back_are_a_bug() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), base_config(), 0);
    follow(
        &mut log,
        &[&build_batch(10, 5, NOW, 10), &build_batch(12, 1, NOW, 10)],
    );
}

#[test]
#[should_panic(expected = "batch at offset 10 (last offset 14) appended where offset 8 is next")]
fn follower_info_off_its_first_batch_is_a_bug() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), base_config(), 0);
    let b = build_batch(10, 5, NOW, 10);
    let mut info = append_info(&b);
    info.first_offset = 8;
    let _ = log.append_as_follower(&b, &info, NOW);
}

#[test]
#[should_panic(expected = "spans more than a segment can index")]
fn follower_append_wider_than_a_segment_is_a_bug() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), base_config(), 0);
    follow(
        &mut log,
        &[
            &build_batch(0, 1, NOW, 10),
            &build_batch(i32::MAX as i64 + 1, 1, NOW, 10),
        ],
    );
}
