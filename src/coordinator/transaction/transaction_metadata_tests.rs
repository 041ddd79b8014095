use super::*;

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.into(),
        partition,
    }
}

fn tps(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
    list.iter().map(|(t, p)| tp(t, *p)).collect()
}

/// A metadata in `state` at producer id 100, epoch 5 (last epoch 4).
fn meta(state: TransactionState) -> TransactionMetadata {
    let in_txn = matches!(
        state,
        Ongoing | PrepareCommit | PrepareAbort | PrepareEpochFence
    );
    TransactionMetadata {
        producer_epoch: 5,
        last_producer_epoch: 4,
        state,
        topic_partitions: if in_txn {
            tps(&[("t", 0)])
        } else {
            BTreeSet::new()
        },
        txn_start_timestamp_ms: if state == Empty { -1 } else { 500 },
        ..TransactionMetadata::new("tx".into(), 100, 60000, 1000)
    }
}

/// Prepares and completes `prepare`'s transition.
fn run(
    m: &mut TransactionMetadata,
    prepare: impl FnOnce(&mut TransactionMetadata) -> Result<TxnTransitMetadata, IllegalStateError>,
) -> TxnTransitMetadata {
    let t = prepare(m).unwrap();
    assert_eq!(m.pending_state, Some(t.txn_state));
    m.complete_transition(&t).unwrap();
    assert_eq!(m.pending_state, None);
    t
}

#[test]
fn state_ids_and_names_match_kafka() {
    let want = [
        (Empty, 0, "Empty"),
        (Ongoing, 1, "Ongoing"),
        (PrepareCommit, 2, "PrepareCommit"),
        (PrepareAbort, 3, "PrepareAbort"),
        (CompleteCommit, 4, "CompleteCommit"),
        (CompleteAbort, 5, "CompleteAbort"),
        (Dead, 6, "Dead"),
        (PrepareEpochFence, 7, "PrepareEpochFence"),
    ];
    for (state, id, name) in want {
        assert_eq!(state.to_byte(), id);
        assert_eq!(TransactionState::from_byte(id).unwrap(), state);
        assert_eq!(state.name(), name);
        assert_eq!(TransactionState::from_name(name), Some(state));
        assert_eq!(state.to_string(), name);
    }
    assert!(TransactionState::from_byte(8).is_err());
    assert!(TransactionState::from_byte(-1).is_err());
    assert_eq!(TransactionState::from_name("empty"), None);
    let expirable: Vec<_> = TransactionState::ALL
        .into_iter()
        .filter(|s| s.is_expiration_allowed())
        .collect();
    assert_eq!(expirable, vec![Empty, CompleteCommit, CompleteAbort]);
}

#[test]
fn transition_validity_table() {
    // Rows: target state; columns: the current states it may come from.
    let table: [(TransactionState, &[TransactionState]); 8] = [
        (Empty, &[Empty, CompleteCommit, CompleteAbort]),
        (Ongoing, &[Ongoing, Empty, CompleteCommit, CompleteAbort]),
        (PrepareCommit, &[Ongoing]),
        // From Empty or Complete*: an empty abort of transaction version 2.
        (
            PrepareAbort,
            &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
        ),
        (CompleteCommit, &[PrepareCommit]),
        (CompleteAbort, &[PrepareAbort]),
        (Dead, &[Empty, CompleteAbort, CompleteCommit]),
        (PrepareEpochFence, &[Ongoing]),
    ];
    for (to, from_states) in table {
        let mut got: Vec<_> = to.valid_previous_states().to_vec();
        let mut want = from_states.to_vec();
        got.sort_by_key(|s| s.to_byte());
        want.sort_by_key(|s| s.to_byte());
        assert_eq!(got, want, "{to}");
        for from in TransactionState::ALL {
            let mut m = meta(from);
            let target = TxnTransitMetadata {
                txn_state: to,
                ..m.prepare_no_transit()
            };
            let r = m.prepare_transition_to(target);
            assert_eq!(r.is_ok(), from_states.contains(&from), "{from} -> {to}");
            assert_eq!(m.pending_state, r.ok().map(|_| to));
        }
    }
}

#[test]
fn prepare_refuses_while_pending_and_bad_ids() {
    let mut m = meta(Ongoing);
    m.prepare_abort_or_commit(PrepareCommit, 2000).unwrap();
    let e = m.prepare_abort_or_commit(PrepareAbort, 2000).unwrap_err();
    assert!(e.0.contains("already a pending state PrepareCommit"), "{e}");
    assert_eq!(e.error_code(), errors::UNKNOWN_SERVER_ERROR);

    let mut m = meta(Empty);
    assert!(m.prepare_producer_id_rotation(-1, 1, 1, false).is_err());
    // Epoch -1 is allowed only for Dead (a never-bumped metadata expiring).
    let mut m = TransactionMetadata::new("tx".into(), 7, 1000, 0);
    assert!(m.prepare_add_partitions(&tps(&[("t", 0)]), 1, 0).is_err());
    assert_eq!(m.prepare_dead().unwrap().producer_epoch, -1);
}

#[test]
fn new_producer_gets_epoch_zero() {
    let mut m = TransactionMetadata::new("tx".into(), 7, 1000, 0);
    let t = m.prepare_increment_producer_epoch(2000, None, 10).unwrap();
    assert_eq!(
        (t.producer_id, t.producer_epoch, t.last_producer_epoch),
        (7, 0, -1)
    );
    assert_eq!((t.txn_timeout_ms, t.txn_start_timestamp_ms), (2000, -1));
    m.complete_transition(&t).unwrap();
    assert_eq!(
        (m.state, m.producer_epoch, m.txn_timeout_ms),
        (Empty, 0, 2000)
    );
    assert_eq!(m.txn_last_update_timestamp_ms, 10);

    // An expected epoch with no current epoch (recovering from
    // UNKNOWN_PRODUCER_ID) also bumps to 0.
    let mut m = TransactionMetadata::new("tx".into(), 7, 1000, 0);
    let t = m
        .prepare_increment_producer_epoch(1000, Some(3), 10)
        .unwrap();
    assert_eq!((t.producer_epoch, t.last_producer_epoch), (0, -1));
}

#[test]
fn epoch_bump_with_expected_epoch() {
    // No expected epoch: a new producer instance; the last epoch is reset.
    let mut m = meta(CompleteCommit);
    let t = m
        .prepare_increment_producer_epoch(1000, None, 2000)
        .unwrap();
    assert_eq!((t.producer_epoch, t.last_producer_epoch), (6, -1));
    assert_eq!(t.last_producer_id, 100);

    // The current epoch: bump, remembering it.
    let mut m = meta(CompleteAbort);
    let t = run(&mut m, |m| {
        Ok(m.prepare_increment_producer_epoch(1000, Some(5), 2000)
            .unwrap())
    });
    assert_eq!((t.producer_epoch, t.last_producer_epoch), (6, 5));
    assert_eq!((m.producer_epoch, m.last_producer_epoch), (6, 5));

    // A retry with the previous epoch: no bump.
    let t = m
        .prepare_increment_producer_epoch(1000, Some(5), 3000)
        .unwrap();
    assert_eq!((t.producer_epoch, t.last_producer_epoch), (6, 5));
    m.complete_transition(&t).unwrap();
    assert_eq!(m.producer_epoch, 6);

    // Any other epoch is fenced, and nothing is left pending.
    let e = m
        .prepare_increment_producer_epoch(1000, Some(3), 3000)
        .unwrap_err();
    assert_eq!(e, TxnError::Code(ErrorCode::from_wire(90)));
    assert_eq!(e.error_code(), ErrorCode::from_wire(90));
    assert_eq!(m.pending_state, None);
}

#[test]
fn epoch_exhaustion_and_producer_id_rotation() {
    assert!(!TransactionMetadata::is_epoch_exhausted(i16::MAX - 2));
    assert!(TransactionMetadata::is_epoch_exhausted(i16::MAX - 1));
    assert!(TransactionMetadata::is_epoch_exhausted(i16::MAX));

    let mut m = meta(CompleteCommit);
    m.producer_epoch = i16::MAX - 2;
    let t = m.prepare_increment_producer_epoch(1000, None, 1).unwrap();
    assert_eq!(t.producer_epoch, i16::MAX - 1);
    m.complete_transition(&t).unwrap();
    assert!(m.is_producer_epoch_exhausted());
    let e = m
        .prepare_increment_producer_epoch(1000, None, 1)
        .unwrap_err();
    assert!(matches!(e, TxnError::IllegalState(_)), "{e:?}");
    assert_eq!(e.error_code(), errors::UNKNOWN_SERVER_ERROR);

    let t = run(&mut m, |m| {
        m.prepare_producer_id_rotation(200, 3000, 5, true)
    });
    assert_eq!(
        (
            t.producer_id,
            t.last_producer_id,
            t.producer_epoch,
            t.last_producer_epoch
        ),
        (200, 100, 0, i16::MAX - 1)
    );
    assert_eq!(
        (m.producer_id, m.last_producer_id, m.producer_epoch),
        (200, 100, 0)
    );
    assert_eq!((m.state, m.txn_timeout_ms), (Empty, 3000));
    // As in Kafka, completing to Empty leaves the in-memory start timestamp
    // of the last transaction (the record has -1).
    assert_eq!(
        (t.txn_start_timestamp_ms, m.txn_start_timestamp_ms),
        (-1, 500)
    );
    // A retry of the rotation with the old id is recognised.
    assert!(m.is_valid_producer_id(100, i16::MAX - 1));
    assert!(!m.is_valid_producer_id(100, 3));

    let mut m = meta(CompleteAbort);
    let t = m.prepare_producer_id_rotation(300, 1000, 5, false).unwrap();
    assert_eq!(t.last_producer_epoch, -1);

    // Not while a transaction is pending.
    for state in [Ongoing, PrepareCommit, PrepareAbort] {
        assert!(meta(state)
            .prepare_producer_id_rotation(300, 1, 1, false)
            .is_err());
    }
}

#[test]
fn is_valid_producer_id_cases() {
    let m = meta(Empty);
    assert!(m.is_valid_producer_id(100, 0));
    assert!(!m.is_valid_producer_id(99, 5));
    let fresh = TransactionMetadata::new("tx".into(), 7, 1000, 0);
    assert!(fresh.is_valid_producer_id(12345, 3));
}

#[test]
fn fence_bumps_epoch_then_aborts() {
    let mut m = meta(Ongoing);
    let fence = m.prepare_fence_producer_epoch().unwrap();
    assert_eq!(
        (
            fence.txn_state,
            fence.producer_epoch,
            fence.last_producer_epoch
        ),
        (PrepareEpochFence, 6, -1)
    );
    assert_eq!(
        fence.txn_last_update_timestamp_ms,
        m.txn_last_update_timestamp_ms
    );
    assert_eq!(m.pending_state, Some(PrepareEpochFence));
    // A fence is never completed.
    assert!(m.complete_transition(&fence).is_err());
    assert_eq!((m.state, m.producer_epoch), (Ongoing, 5));

    let abort = m
        .prepare_abort_after_epoch_fence(fence.producer_epoch, 2000)
        .unwrap();
    assert_eq!(
        (
            abort.txn_state,
            abort.producer_epoch,
            abort.last_producer_epoch
        ),
        (PrepareAbort, 6, -1)
    );
    assert_eq!(abort.topic_partitions, tps(&[("t", 0)]));
    m.complete_transition(&abort).unwrap();
    assert_eq!((m.state, m.producer_epoch), (PrepareAbort, 6));

    let done = run(&mut m, |m| m.prepare_complete(3000));
    assert_eq!(done.txn_state, CompleteAbort);
    assert!(m.topic_partitions.is_empty());
    assert_eq!((m.producer_epoch, m.txn_start_timestamp_ms), (6, 500));

    // Without a pending fence, there is nothing to abort after.
    assert!(meta(Ongoing).prepare_abort_after_epoch_fence(6, 1).is_err());
}

#[test]
fn fence_at_max_epoch_and_after_a_failed_fence() {
    let mut m = meta(Ongoing);
    m.producer_epoch = i16::MAX - 1;
    assert_eq!(
        m.prepare_fence_producer_epoch().unwrap().producer_epoch,
        i16::MAX
    );

    let mut m = meta(Ongoing);
    m.producer_epoch = i16::MAX;
    let e = m.prepare_fence_producer_epoch().unwrap_err();
    assert!(e.0.contains("Short.MaxValue"), "{e}");
    assert_eq!(m.pending_state, None);

    // The bumped epoch of a failed fence was adopted but never returned.
    let mut m = meta(Ongoing);
    m.has_failed_epoch_fence = true;
    assert_eq!(m.prepare_fence_producer_epoch().unwrap().producer_epoch, 5);
    m.pending_state = None;
    m.state = PrepareAbort;
    m.prepare_complete(1).unwrap();
    assert!(!m.has_failed_epoch_fence);
}

#[test]
fn commit_cycle_and_start_timestamps() {
    let mut m = meta(Empty);
    let t = run(&mut m, |m| {
        m.prepare_add_partitions(&tps(&[("a", 1)]), 2000, 0)
    });
    assert_eq!(
        (t.txn_start_timestamp_ms, m.txn_start_timestamp_ms),
        (2000, 2000)
    );
    let t = run(&mut m, |m| {
        m.prepare_add_partitions(&tps(&[("b", 0)]), 2500, 0)
    });
    assert_eq!(t.txn_start_timestamp_ms, 2000);
    assert_eq!(m.topic_partitions, tps(&[("a", 1), ("b", 0)]));
    assert_eq!(m.txn_last_update_timestamp_ms, 2500);

    run(&mut m, |m| m.prepare_abort_or_commit(PrepareCommit, 3000));
    assert_eq!(m.state, PrepareCommit);
    m.remove_partition(&tp("a", 1)).unwrap();
    assert_eq!(m.topic_partitions, tps(&[("b", 0)]));
    let t = run(&mut m, |m| m.prepare_complete(4000));
    assert_eq!((t.txn_state, m.state), (CompleteCommit, CompleteCommit));
    assert!(m.topic_partitions.is_empty());
    assert!(m.remove_partition(&tp("b", 0)).is_err());

    // The next transaction starts afresh.
    let t = m
        .prepare_add_partitions(&tps(&[("c", 0)]), 5000, 0)
        .unwrap();
    assert_eq!(t.txn_start_timestamp_ms, 5000);
    assert_eq!(t.topic_partitions, tps(&[("c", 0)]));
}

#[test]
fn complete_rejects_mismatches() {
    // No pending state.
    let mut m = meta(Ongoing);
    let t = m.prepare_no_transit();
    assert!(m
        .complete_transition(&t)
        .unwrap_err()
        .0
        .contains("does not have a pending state"));

    // Pending state differs from the transit's state.
    let commit = m.prepare_abort_or_commit(PrepareCommit, 2000).unwrap();
    let abort = TxnTransitMetadata {
        txn_state: PrepareAbort,
        ..commit.clone()
    };
    assert!(m.complete_transition(&abort).is_err());
    assert_eq!((m.state, m.pending_state), (Ongoing, Some(PrepareCommit)));
    // Another epoch or partition set.
    let stale = TxnTransitMetadata {
        producer_epoch: 4,
        ..commit.clone()
    };
    assert!(m.complete_transition(&stale).is_err());
    let more = TxnTransitMetadata {
        topic_partitions: tps(&[("t", 0), ("u", 0)]),
        ..commit.clone()
    };
    assert!(m.complete_transition(&more).is_err());
    m.complete_transition(&commit).unwrap();

    // Ongoing must not change the timeout or drop partitions.
    let mut m = meta(Ongoing);
    let t = m
        .prepare_add_partitions(&tps(&[("u", 1)]), 2000, 0)
        .unwrap();
    let shrunk = TxnTransitMetadata {
        topic_partitions: tps(&[("u", 1)]),
        ..t.clone()
    };
    assert!(m.complete_transition(&shrunk).is_err());
    let retimed = TxnTransitMetadata {
        txn_timeout_ms: 1,
        ..t.clone()
    };
    assert!(m.complete_transition(&retimed).is_err());

    // Empty must keep the epoch, bump it by one, or restart at 0 with a new id.
    let mut m = meta(CompleteCommit);
    let t = m
        .prepare_increment_producer_epoch(1000, None, 2000)
        .unwrap();
    for bad in [
        TxnTransitMetadata {
            producer_epoch: 7,
            ..t.clone()
        },
        TxnTransitMetadata {
            txn_start_timestamp_ms: 5,
            ..t.clone()
        },
        TxnTransitMetadata {
            topic_partitions: tps(&[("t", 0)]),
            ..t.clone()
        },
        TxnTransitMetadata {
            producer_epoch: 0,
            ..t.clone()
        },
    ] {
        assert!(m.complete_transition(&bad).is_err(), "{bad:?}");
    }
    m.complete_transition(&t).unwrap();

    // Complete* needs a start timestamp.
    let mut m = meta(PrepareAbort);
    let t = m.prepare_complete(2000).unwrap();
    let unstarted = TxnTransitMetadata {
        txn_start_timestamp_ms: -1,
        ..t.clone()
    };
    assert!(m.complete_transition(&unstarted).is_err());

    // Dead is removed from the cache, never completed.
    let mut m = meta(Empty);
    let t = m.prepare_dead().unwrap();
    assert!(m.complete_transition(&t).unwrap_err().0.contains("Dead"));
}

#[test]
fn log_value_bridge() {
    let mut m = meta(Ongoing);
    m.last_producer_id = 50;
    let v = m.to_log_value();
    assert_eq!(
        (
            v.producer_id,
            v.producer_epoch,
            v.state,
            v.txn_start_timestamp_ms
        ),
        (100, 5, Ongoing, 500)
    );
    let loaded = TransactionMetadata::from_log_value("tx", &v);
    // The last producer id and epoch are not persisted.
    assert_eq!(
        loaded,
        TransactionMetadata {
            last_producer_id: -1,
            last_producer_epoch: -1,
            ..m.clone()
        }
    );
    let t = m.prepare_abort_or_commit(PrepareCommit, 9).unwrap();
    let v = t.to_log_value();
    assert_eq!(
        (v.state, v.txn_last_update_timestamp_ms),
        (PrepareCommit, 9)
    );
    assert_eq!(v.topic_partitions, tps(&[("t", 0)]));
}
