use std::collections::BTreeSet;

use super::*;
use crate::coordinator::transaction::transaction_metadata::{
    TopicPartition, TransactionState, TRANSACTION_VERSION_2,
};
use TransactionResult::{Abort, Commit};

const PID: i64 = 100;

/// A version-2 metadata in `state` at producer id 100, epoch 5.
fn meta(state: TransactionState) -> TransactionMetadata {
    let mut m = TransactionMetadata::new("tx".into(), PID, 60000, 1000);
    m.producer_epoch = 5;
    m.last_producer_epoch = 4;
    m.state = state;
    m.client_transaction_version = TRANSACTION_VERSION_2;
    if state == Ongoing {
        m.topic_partitions = BTreeSet::from([TopicPartition {
            topic: "t".into(),
            partition: 0,
        }]);
        m.txn_start_timestamp_ms = 500;
    }
    m
}

fn code(v: EndV2) -> errors::ErrorCode {
    match v {
        EndV2::Answer(a) => a.error,
        EndV2::Bump(_) => errors::NONE,
    }
}

#[test]
fn kafkas_table_of_ends() {
    use errors::{INVALID_TXN_STATE as ITS, PRODUCER_FENCED as PF};
    let bump = |s| EndV2::Bump(s);
    let current = EndV2::Answer(EndTxnResult {
        error: errors::NONE,
        producer_id: PID,
        producer_epoch: 5,
    });
    // (state, result, epoch in the request, what happens)
    let cases = [
        (Ongoing, Commit, 5, bump(PrepareCommit)),
        (Ongoing, Abort, 5, bump(PrepareAbort)),
        (Ongoing, Commit, 4, EndV2::Answer(EndTxnResult::failed(PF))),
        (Ongoing, Abort, 4, EndV2::Answer(EndTxnResult::failed(PF))),
        (Empty, Abort, 5, bump(PrepareAbort)),
        (Empty, Commit, 5, EndV2::Answer(EndTxnResult::failed(ITS))),
        (CompleteAbort, Abort, 4, current),
        (CompleteAbort, Abort, 5, bump(PrepareAbort)),
        (
            CompleteAbort,
            Commit,
            4,
            EndV2::Answer(EndTxnResult::failed(ITS)),
        ),
        (CompleteCommit, Commit, 4, current),
        (
            CompleteCommit,
            Commit,
            5,
            EndV2::Answer(EndTxnResult::failed(ITS)),
        ),
        (
            CompleteCommit,
            Abort,
            4,
            EndV2::Answer(EndTxnResult::failed(ITS)),
        ),
        (CompleteCommit, Abort, 5, bump(PrepareAbort)),
        (
            CompleteCommit,
            Commit,
            3,
            EndV2::Answer(EndTxnResult::failed(PF)),
        ),
    ];
    for (state, result, epoch, want) in cases {
        let got = check_end_v2(&meta(state), PID, epoch, result);
        assert_eq!(got, want, "{state:?} {result:?} epoch {epoch}");
    }
    let mut pending = meta(Ongoing);
    pending.pending_state = Some(PrepareCommit);
    assert_eq!(
        code(check_end_v2(&pending, PID, 5, Commit)),
        errors::CONCURRENT_TRANSACTIONS
    );
    assert_eq!(
        code(check_end_v2(&meta(Ongoing), PID + 1, 5, Commit)),
        errors::INVALID_PRODUCER_ID_MAPPING
    );
}

/// A transaction ends with the epoch bumped; the markers carry it; the
/// client continues with it.
#[test]
fn an_end_bumps_the_epoch() {
    let mut m = meta(Ongoing);
    let t = m
        .prepare_abort_or_commit_bumping_epoch(PrepareCommit, None, 2000)
        .unwrap();
    assert_eq!((t.producer_id, t.producer_epoch), (PID, 6));
    m.complete_transition(&t).unwrap();
    assert_eq!(
        (m.state, m.producer_epoch, m.last_producer_epoch),
        (PrepareCommit, 6, 5)
    );
    let c = m.prepare_complete(2001).unwrap();
    assert_eq!((c.producer_id, c.producer_epoch), (PID, 6));
    m.complete_transition(&c).unwrap();
    assert_eq!((m.state, m.producer_epoch), (CompleteCommit, 6));
    // A retry of that commit (epoch 5) is answered with the epoch.
    assert_eq!(
        check_end_v2(&m, PID, 5, Commit),
        EndV2::Answer(EndTxnResult {
            error: errors::NONE,
            producer_id: PID,
            producer_epoch: 6
        })
    );
}

/// At an exhausted epoch the end moves to the next producer id at epoch 0
/// (its markers carry the old id at 32767); a retry across it is known.
#[test]
fn an_exhausted_epoch_moves_to_the_next_producer_id() {
    let mut m = meta(Ongoing);
    m.producer_epoch = i16::MAX - 1;
    let t = m
        .prepare_abort_or_commit_bumping_epoch(PrepareAbort, Some(200), 2000)
        .unwrap();
    assert_eq!((t.producer_id, t.producer_epoch), (PID, i16::MAX));
    m.complete_transition(&t).unwrap();
    let c = m.prepare_complete(2001).unwrap();
    assert_eq!((c.producer_id, c.producer_epoch), (200, 0));
    m.complete_transition(&c).unwrap();
    assert_eq!(
        (m.producer_id, m.producer_epoch, m.last_producer_id),
        (200, 0, PID)
    );
    assert_eq!(
        check_end_v2(&m, PID, i16::MAX - 1, Abort),
        EndV2::Answer(EndTxnResult {
            error: errors::NONE,
            producer_id: 200,
            producer_epoch: 0
        })
    );
}

/// An abort with nothing sent: a transaction of no partition starts and
/// ends now, with the bump.
#[test]
fn an_empty_abort_bumps_the_epoch() {
    let mut m = meta(CompleteCommit);
    m.txn_start_timestamp_ms = 500;
    let t = m
        .prepare_abort_or_commit_bumping_epoch(PrepareAbort, None, 3000)
        .unwrap();
    assert_eq!(t.txn_start_timestamp_ms, 3000);
    m.complete_transition(&t).unwrap();
    let c = m.prepare_complete(3001).unwrap();
    m.complete_transition(&c).unwrap();
    assert_eq!((m.state, m.producer_epoch), (CompleteAbort, 6));
    assert!(m
        .prepare_abort_or_commit_bumping_epoch(PrepareCommit, None, 3002)
        .is_err());
}
