//! Background fsync of rolled segments (`log_roll_sync.rs`).

use super::*;

fn log_with_rolls(dir: &Path, rolls: usize) -> (Log, Vec<i64>) {
    let (mut log, _) = open(dir, base_config(), 0);
    let mut bases = Vec::new();
    for i in 0..rolls {
        append(&mut log, 5, NOW + i as i64, 10);
        bases.push(log.roll(NOW).unwrap());
    }
    (log, bases)
}

#[test]
fn a_roll_moves_the_recovery_point_once_its_sync_completes() {
    let dir = test_dir();
    let (mut log, bases) = log_with_rolls(dir.path(), 1);
    assert_eq!(log.recovery_point(), 0, "the roll did not fsync in line");
    assert_eq!(log.pending_roll_syncs(), 1);
    let jobs = log.take_roll_syncs();
    assert_eq!(jobs.len(), 1);
    assert!(log.take_roll_syncs().is_empty(), "a job is handed out once");
    jobs[0].run().unwrap();
    log.complete_roll_sync(jobs[0].id(), Ok(())).unwrap();
    assert_eq!(log.recovery_point(), bases[0]);
    assert_eq!(log.pending_roll_syncs(), 0);
}

#[test]
fn a_later_roll_waits_for_the_earlier_ones() {
    let dir = test_dir();
    let (mut log, bases) = log_with_rolls(dir.path(), 2);
    let jobs = log.take_roll_syncs();
    assert_eq!(jobs.len(), 2);
    log.complete_roll_sync(jobs[1].id(), jobs[1].run()).unwrap();
    assert_eq!(log.recovery_point(), 0, "the first roll is not synced yet");
    log.complete_roll_sync(jobs[0].id(), jobs[0].run()).unwrap();
    assert_eq!(log.recovery_point(), bases[1]);
}

#[test]
fn a_failed_sync_is_retried_and_flush_does_not_wait_for_it() {
    let dir = test_dir();
    let (mut log, _) = log_with_rolls(dir.path(), 1);
    append(&mut log, 3, NOW, 10);
    let job = log.take_roll_syncs().pop().unwrap();
    let failed = log.complete_roll_sync(job.id(), Err(io::Error::other("EIO")));
    assert!(failed.is_err());
    assert_eq!(log.recovery_point(), 0);
    let retry = log.take_roll_syncs().pop().expect("handed out again");
    assert_eq!(retry.id(), job.id());
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), log.log_end_offset());
    assert_eq!(log.pending_roll_syncs(), 0, "flush synced the rolled files");
    // The background completion arriving late changes nothing.
    log.complete_roll_sync(retry.id(), Ok(())).unwrap();
    assert_eq!(log.recovery_point(), log.log_end_offset());
}

#[test]
fn truncation_settles_pending_rolls_first() {
    let dir = test_dir();
    let (mut log, bases) = log_with_rolls(dir.path(), 2);
    let jobs = log.take_roll_syncs();
    log.truncate_to(bases[0] + 1).unwrap();
    assert_eq!(log.pending_roll_syncs(), 0);
    assert!(log.recovery_point() <= log.log_end_offset());
    // Completions of the settled rolls must not move the recovery point
    // over data written after the truncation.
    append(&mut log, 5, NOW, 10);
    let rp = log.recovery_point();
    for j in &jobs {
        log.complete_roll_sync(j.id(), Ok(())).unwrap();
    }
    assert_eq!(log.recovery_point(), rp);
}

#[test]
fn reopen_after_unsynced_roll_recovers_from_the_old_recovery_point() {
    let dir = test_dir();
    let (mut log, _) = log_with_rolls(dir.path(), 2);
    append(&mut log, 5, NOW, 10);
    let end = log.log_end_offset();
    // A crash now would recover from offset 0; the data is all there.
    assert_eq!(log.recovery_point(), 0);
    drop(log);
    let (log, _) = open(dir.path(), base_config(), 0);
    assert_eq!(log.log_end_offset(), end);
}
