//! State-machine tests of the coordinator against an in-memory log.

use bytes::Bytes;
use kshard_shards::log::batch::{BatchIter, RECORD_BATCH_OVERHEAD};
use kshard_shards::log::records::RecordIter;
use kshard_shards::oneshot;

use super::*;
use crate::coordinator::offsets::{CommitPart, OffsetCommit};
use crate::coordinator::partition_for;
use crate::protocol::errors::ErrorCode;

#[derive(Default)]
struct MemLog {
    batches: Vec<(i32, Vec<u8>)>,
    fail_with: ErrorCode,
}

impl OffsetsLog for MemLog {
    fn append(
        &mut self,
        partition: i32,
        _leader_epoch: i32,
        batch: Vec<u8>,
    ) -> Result<i64, ErrorCode> {
        if self.fail_with != 0 {
            return Err(self.fail_with);
        }
        self.batches.push((partition, batch));
        // One offset per batch is enough to order appends.
        Ok(self.batches.len() as i64)
    }
}

impl GroupCoordinator {
    /// OffsetCommit whose append is replicated at once.
    #[allow(clippy::too_many_arguments)]
    fn commit_offsets_now(
        &mut self,
        log: &mut dyn OffsetsLog,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        retention_ms: i64,
        parts: &[CommitPart],
        now_ms: i64,
    ) -> Vec<ErrorCode> {
        let commit = OffsetCommit {
            group_id,
            generation_id,
            member_id,
            instance_id,
            retention_ms,
            parts,
        };
        let outcome = self.commit_offsets(log, &commit, now_ms);
        if let Some(pending) = outcome.pending {
            assert_eq!(self.complete_commit(pending, errors::NONE), errors::NONE);
        }
        outcome.results
    }

    /// Loads every partition (nothing to replay, or what the caller replayed).
    fn finish_loading_all(&mut self, now_ms: i64) {
        for p in 0..self.config.num_partitions {
            if self.begin_loading(p, 0).is_some() {
                self.finish_loading(p, now_ms);
            }
        }
    }
}

impl MemLog {
    /// Every (key, value) appended, in order.
    fn records(&self) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        for (_, b) in &self.batches {
            for item in BatchIter::new(b) {
                let (_, _, batch) = item.unwrap();
                for r in RecordIter::new(&batch[RECORD_BATCH_OVERHEAD..]) {
                    let r = r.unwrap();
                    out.push((r.key.unwrap().to_vec(), r.value.map(|v| v.to_vec())));
                }
            }
        }
        out
    }
}

fn config(delay_ms: i64) -> CoordinatorConfig {
    CoordinatorConfig {
        num_partitions: 50,
        initial_rebalance_delay_ms: delay_ms,
        min_session_timeout_ms: 6000,
        max_session_timeout_ms: 1_800_000,
        max_group_size: 100,
        offsets_retention_ms: 7 * 24 * 3600 * 1000,
    }
}

fn coordinator(delay_ms: i64) -> GroupCoordinator {
    let mut c = GroupCoordinator::new(config(delay_ms), 0);
    c.finish_loading_all(0);
    c
}

fn join(member: &str, protocols: &[&str]) -> JoinParams {
    JoinParams {
        group_id: "g".into(),
        member_id: member.into(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "".into(),
        rebalance_timeout_ms: 10_000,
        session_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from(p.to_string())))
            .collect(),
        require_known_member_id: true,
        supports_skip_assignment: false,
    }
}

fn ready<T>(rx: oneshot::Receiver<T>) -> Option<T> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut rx = std::pin::pin!(rx);
    match rx.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Ok(v)) => Some(v),
        _ => None,
    }
}

use std::future::Future;

/// MEMBER_ID_REQUIRED, then a real join; returns the member id.
fn join_new(
    c: &mut GroupCoordinator,
    log: &mut MemLog,
    now: i64,
) -> (String, oneshot::Receiver<JoinResult>) {
    let r = ready(c.join_group(log, join("", &["range"]), now)).unwrap();
    assert_eq!(r.error, errors::MEMBER_ID_REQUIRED);
    assert!(r.member_id.starts_with("client-"));
    let rx = c.join_group(log, join(&r.member_id, &["range"]), now);
    (r.member_id, rx)
}

#[test]
fn single_member_full_cycle_and_persistence() {
    let mut c = coordinator(0);
    let mut log = MemLog::default();
    let (m1, rx) = join_new(&mut c, &mut log, 1);
    let j = ready(rx).expect("joined at once with no initial delay");
    assert_eq!((j.error, j.generation_id), (errors::NONE, 1));
    assert_eq!(j.leader_id, m1);
    assert_eq!(j.members.len(), 1);
    assert_eq!(j.protocol_name.as_deref(), Some("range"));
    assert_eq!(c.groups["g"].state, GroupState::CompletingRebalance);
    // Commit before sync: REBALANCE_IN_PROGRESS.
    let part = CommitPart {
        topic: "t".into(),
        partition: 0,
        offset: 5,
        leader_epoch: -1,
        metadata: Some("meta".into()),
    };
    let r = c.commit_offsets_now(
        &mut log,
        "g",
        1,
        &m1,
        None,
        -1,
        std::slice::from_ref(&part),
        2,
    );
    assert_eq!(r, vec![errors::REBALANCE_IN_PROGRESS]);
    let assignment = Bytes::from_static(b"assign");
    let s = ready(c.sync_group(
        &mut log,
        "g",
        1,
        &m1,
        None,
        None,
        None,
        vec![(m1.clone(), assignment.clone())],
        3,
    ))
    .unwrap();
    assert_eq!(s.error, 0);
    assert_eq!(s.assignment, assignment);
    assert_eq!(c.groups["g"].state, GroupState::Stable);
    assert_eq!(c.heartbeat(&mut log, "g", 1, &m1, None, 4), 0);
    assert_eq!(
        c.heartbeat(&mut log, "g", 0, &m1, None, 4),
        errors::ILLEGAL_GENERATION
    );
    assert_eq!(
        c.heartbeat(&mut log, "g", 1, "nobody", None, 4),
        errors::UNKNOWN_MEMBER_ID
    );
    let r = c.commit_offsets_now(
        &mut log,
        "g",
        1,
        &m1,
        None,
        -1,
        std::slice::from_ref(&part),
        5,
    );
    assert_eq!(r, vec![0]);
    let r = c.commit_offsets_now(
        &mut log,
        "g",
        0,
        &m1,
        None,
        -1,
        std::slice::from_ref(&part),
        5,
    );
    assert_eq!(r, vec![errors::ILLEGAL_GENERATION]);
    let (e, rows) = c.fetch_offsets("g", Some(&[("t".into(), 0), ("t".into(), 1)]));
    assert_eq!(e, 0);
    assert_eq!(rows[0], ("t".into(), 0, 5, -1, "meta".into()));
    assert_eq!(rows[1], ("t".into(), 1, -1, -1, "".into()));

    // Replaying what was written rebuilds the group and its offsets.
    let mut c2 = GroupCoordinator::new(config(0), 0);
    for p in 0..50 {
        c2.begin_loading(p, 0);
    }
    for (k, v) in log.records() {
        c2.load_record(&k, v.as_deref(), 10).unwrap();
    }
    for p in 0..50 {
        c2.finish_loading(p, 10);
    }
    let g = &c2.groups["g"];
    assert_eq!((g.state, g.generation_id), (GroupState::Stable, 1));
    assert_eq!(g.members[&m1].assignment, assignment);
    assert_eq!(
        c2.fetch_offsets("g", None).1,
        vec![("t".into(), 0, 5, -1, "meta".into())]
    );
    // The loaded member still heartbeats with its generation.
    assert_eq!(c2.heartbeat(&mut log, "g", 1, &m1, None, 11), 0);

    // Leaving empties the group; it is then deletable.
    let (top, per) = c.leave_group(&mut log, "g", &[(m1.clone(), None)], 6);
    assert_eq!((top, per), (errors::NONE, vec![errors::NONE]));
    assert_eq!(c.groups["g"].state, GroupState::Empty);
    assert_eq!(c.groups["g"].generation_id, 2);
    assert_eq!(
        c.delete_groups(&mut log, &["g".into(), "nope".into()], 7),
        vec![errors::NONE, errors::GROUP_ID_NOT_FOUND]
    );
    assert!(!c.groups.contains_key("g"));
    let mut c3 = GroupCoordinator::new(config(0), 0);
    for (k, v) in log.records() {
        c3.load_record(&k, v.as_deref(), 10).unwrap();
    }
    assert!(!c3.groups.contains_key("g"), "tombstones replayed");
}

#[test]
fn second_member_triggers_rebalance_and_both_join() {
    let mut c = coordinator(0);
    let mut log = MemLog::default();
    let (m1, rx1) = join_new(&mut c, &mut log, 1);
    ready(rx1).unwrap();
    ready(c.sync_group(&mut log, "g", 1, &m1, None, None, None, vec![], 2)).unwrap();
    // Second member: must not get UNKNOWN_MEMBER_ID; waits for m1 to rejoin.
    let (m2, rx2) = join_new(&mut c, &mut log, 3);
    assert_eq!(c.groups["g"].state, GroupState::PreparingRebalance);
    assert_eq!(
        c.heartbeat(&mut log, "g", 1, &m1, None, 4),
        errors::REBALANCE_IN_PROGRESS
    );
    // Commit during PreparingRebalance is allowed.
    let part = CommitPart {
        topic: "t".into(),
        partition: 0,
        offset: 1,
        leader_epoch: -1,
        metadata: None,
    };
    assert_eq!(
        c.commit_offsets_now(&mut log, "g", 1, &m1, None, -1, &[part], 4),
        vec![0]
    );
    let rx1 = c.join_group(&mut log, join(&m1, &["range"]), 5);
    let j1 = ready(rx1).unwrap();
    let j2 = ready(rx2).unwrap();
    assert_eq!((j1.error, j2.error), (errors::NONE, errors::NONE));
    assert_eq!((j1.generation_id, j2.generation_id), (2, 2));
    assert_eq!(j1.leader_id, m1);
    assert_eq!(j1.members.len(), 2);
    assert!(j2.members.is_empty());
    // The follower's sync waits for the leader's.
    let rx2 = c.sync_group(&mut log, "g", 2, &m2, None, None, None, vec![], 6);
    assert!(
        ready(rx2).is_none(),
        "follower answered before the leader synced"
    );
}

#[test]
fn follower_sync_completes_after_leader() {
    let mut c = coordinator(0);
    let mut log = MemLog::default();
    let (m1, rx1) = join_new(&mut c, &mut log, 1);
    ready(rx1).unwrap();
    ready(c.sync_group(&mut log, "g", 1, &m1, None, None, None, vec![], 2)).unwrap();
    let (m2, rx2) = join_new(&mut c, &mut log, 3);
    ready(c.join_group(&mut log, join(&m1, &["range"]), 5)).unwrap();
    ready(rx2).unwrap();
    let follower = c.sync_group(&mut log, "g", 2, &m2, None, None, None, vec![], 6);
    let a1 = Bytes::from_static(b"a1");
    let a2 = Bytes::from_static(b"a2");
    let leader = c.sync_group(
        &mut log,
        "g",
        2,
        &m1,
        None,
        None,
        None,
        vec![(m1.clone(), a1.clone()), (m2.clone(), a2.clone())],
        7,
    );
    assert_eq!(ready(leader).unwrap().assignment, a1);
    let f = ready(follower).unwrap();
    assert_eq!((f.error, f.assignment), (errors::NONE, a2));
    assert_eq!(c.groups["g"].state, GroupState::Stable);
}

#[test]
fn session_timeout_removes_member_and_rebalances() {
    let mut c = coordinator(0);
    let mut log = MemLog::default();
    let (m1, rx1) = join_new(&mut c, &mut log, 1);
    ready(rx1).unwrap();
    ready(c.sync_group(&mut log, "g", 1, &m1, None, None, None, vec![], 2)).unwrap();
    c.tick(&mut log, 5_000);
    assert!(c.groups["g"].has(&m1));
    c.tick(&mut log, 10_100);
    let g = &c.groups["g"];
    assert!(!g.has(&m1));
    assert_eq!((g.state, g.generation_id), (GroupState::Empty, 2));
}

#[test]
fn inconsistent_protocols_and_bad_session_timeout() {
    let mut c = coordinator(0);
    let mut log = MemLog::default();
    let (_m1, rx1) = join_new(&mut c, &mut log, 1);
    ready(rx1).unwrap();
    let r = ready(c.join_group(&mut log, join("", &["roundrobin"]), 2)).unwrap();
    assert_eq!(r.error, errors::INCONSISTENT_GROUP_PROTOCOL);
    let mut p = join("", &["range"]);
    p.session_timeout_ms = 10;
    assert_eq!(
        ready(c.join_group(&mut log, p, 2)).unwrap().error,
        errors::INVALID_SESSION_TIMEOUT
    );
    let p = join("unknown-member", &["range"]);
    let mut p2 = p;
    p2.group_id = "other".into();
    assert_eq!(
        ready(c.join_group(&mut log, p2, 2)).unwrap().error,
        errors::UNKNOWN_MEMBER_ID
    );
}

#[test]
fn static_member_rejoins_without_rebalance_and_old_id_is_fenced() {
    let mut c = coordinator(0);
    let mut log = MemLog::default();
    let mut p = join("", &["range"]);
    p.group_instance_id = Some("inst".into());
    let j = ready(c.join_group(&mut log, p, 1)).unwrap();
    assert_eq!(j.error, 0, "static members skip MEMBER_ID_REQUIRED");
    assert!(j.member_id.starts_with("inst-"));
    let old = j.member_id.clone();
    let a = Bytes::from_static(b"x");
    ready(c.sync_group(
        &mut log,
        "g",
        1,
        &old,
        Some("inst"),
        None,
        None,
        vec![(old.clone(), a.clone())],
        2,
    ))
    .unwrap();
    let mut p = join("", &["range"]);
    p.group_instance_id = Some("inst".into());
    let j = ready(c.join_group(&mut log, p, 3)).unwrap();
    assert_eq!((j.error, j.generation_id), (errors::NONE, 1));
    assert_ne!(j.member_id, old);
    assert_eq!(c.groups["g"].state, GroupState::Stable);
    assert_eq!(
        c.heartbeat(&mut log, "g", 1, &old, Some("inst"), 4),
        errors::FENCED_INSTANCE_ID
    );
    let s = ready(c.sync_group(
        &mut log,
        "g",
        1,
        &j.member_id,
        Some("inst"),
        None,
        None,
        vec![],
        5,
    ))
    .unwrap();
    assert_eq!((s.error, s.assignment), (errors::NONE, a));
    // Administrative removal by instance id (LeaveGroup v3+).
    let (top, per) = c.leave_group(
        &mut log,
        "g",
        &[
            ("".into(), Some("inst".into())),
            ("".into(), Some("x".into())),
        ],
        6,
    );
    assert_eq!(
        (top, per),
        (errors::NONE, vec![errors::NONE, errors::UNKNOWN_MEMBER_ID])
    );
}

#[test]
fn initial_delay_waits_and_simple_commits() {
    let mut c = coordinator(3000);
    let mut log = MemLog::default();
    let (_m1, rx1) = join_new(&mut c, &mut log, 0);
    assert!(ready(rx1).is_none(), "answered before the initial delay");
    assert_eq!(c.groups["g"].members.len(), 1);
    c.tick(&mut log, 3100);
    assert_eq!(c.groups["g"].state, GroupState::CompletingRebalance);

    // A simple consumer (generation -1, no member id) commits to a new group.
    let part = CommitPart {
        topic: "t".into(),
        partition: 2,
        offset: 9,
        leader_epoch: 3,
        metadata: None,
    };
    assert_eq!(
        c.commit_offsets_now(
            &mut log,
            "simple",
            -1,
            "",
            None,
            -1,
            std::slice::from_ref(&part),
            1
        ),
        vec![0]
    );
    assert_eq!(
        c.commit_offsets_now(
            &mut log,
            "gone",
            3,
            "m",
            None,
            -1,
            std::slice::from_ref(&part),
            1
        ),
        vec![errors::ILLEGAL_GENERATION]
    );
    // Non-empty group: only members may commit.
    assert_eq!(
        c.commit_offsets_now(&mut log, "g", -1, "", None, -1, &[part], 1),
        vec![errors::UNKNOWN_MEMBER_ID]
    );
    assert_eq!(c.list_groups(&[]).1.len(), 2);
    assert_eq!(
        c.list_groups(&["Empty".into()]).1,
        vec![("simple".into(), "".into(), "Empty")]
    );
    assert_eq!(
        c.delete_groups(&mut log, &["g".into()], 2),
        vec![errors::NON_EMPTY_GROUP]
    );
    // Expiry: the simple group's offsets go after the retention time.
    let week = 7 * 24 * 3600 * 1000;
    assert_eq!(c.expire_offsets(&mut log, week), 0);
    assert_eq!(c.expire_offsets(&mut log, week + 2), 1);
    assert!(!c.groups.contains_key("simple"));
}

#[test]
fn offset_delete_respects_subscriptions() {
    let mut c = coordinator(0);
    let mut log = MemLog::default();
    // Subscription metadata naming topic "t".
    let meta = Bytes::from_static(&[0, 0, 0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff]);
    let mut p = join("", &["range"]);
    p.require_known_member_id = false;
    p.protocols = vec![("range".into(), meta)];
    let j = ready(c.join_group(&mut log, p, 1)).unwrap();
    ready(c.sync_group(&mut log, "g", 1, &j.member_id, None, None, None, vec![], 2)).unwrap();
    let parts = ["t", "u"].map(|t| CommitPart {
        topic: t.into(),
        partition: 0,
        offset: 1,
        leader_epoch: -1,
        metadata: None,
    });
    assert_eq!(
        c.commit_offsets_now(&mut log, "g", 1, &j.member_id, None, -1, &parts, 3),
        vec![0, 0]
    );
    let (e, r) = c.delete_offsets(&mut log, "g", &[("t".into(), 0), ("u".into(), 0)], 4);
    assert_eq!(
        (e, r),
        (
            errors::NONE,
            vec![errors::GROUP_SUBSCRIBED_TO_TOPIC, errors::NONE]
        )
    );
    assert_eq!(c.fetch_offsets("g", None).1.len(), 1);
    assert_eq!(
        c.delete_offsets(&mut log, "none", &[], 4).0,
        errors::GROUP_ID_NOT_FOUND
    );
    // A failed append is reported per partition.
    log.fail_with = errors::NOT_LEADER_OR_FOLLOWER;
    let r = c.commit_offsets_now(&mut log, "g", 1, &j.member_id, None, -1, &parts[..1], 5);
    assert_eq!(r, vec![errors::NOT_COORDINATOR]);
}

#[test]
fn groups_of_partitions_not_led_here_get_not_coordinator() {
    // A broker that leads no __consumer_offsets partition: clients must
    // look elsewhere, and ListGroups is empty.
    let mut c = GroupCoordinator::new(config(0), 0);
    let mut log = MemLog::default();
    let r = ready(c.join_group(&mut log, join("", &["range"]), 1)).unwrap();
    assert_eq!(r.error, errors::NOT_COORDINATOR);
    assert_eq!(
        c.heartbeat(&mut log, "g", 1, "m", None, 1),
        errors::NOT_COORDINATOR
    );
    assert_eq!(c.list_groups(&[]), (errors::NONE, Vec::new()));
    assert_eq!(c.describe_group("g").0, errors::NOT_COORDINATOR);
    assert_eq!(
        c.delete_groups(&mut log, &["g".to_string()], 1),
        vec![errors::NOT_COORDINATOR]
    );
    assert!(log.batches.is_empty());
    // Loading: COORDINATOR_LOAD_IN_PROGRESS, and ListGroups says so too.
    let p = partition_for("g", 50);
    let load_id = c.begin_loading(p, 3).expect("a new load");
    assert!(c.is_loading_for(p, load_id));
    assert_eq!(c.begin_loading(p, 4), None, "already loading");
    assert_eq!(c.partitions[&p].leader_epoch, 4);
    assert_eq!(
        c.describe_group("g").0,
        errors::COORDINATOR_LOAD_IN_PROGRESS
    );
    assert_eq!(c.list_groups(&[]).0, errors::COORDINATOR_LOAD_IN_PROGRESS);
    c.finish_loading(p, 2);
    assert_eq!(c.describe_group("g").0, errors::NONE);
    assert_eq!(c.list_groups(&[]), (errors::NONE, Vec::new()));
}

#[test]
fn unloading_a_partition_answers_waiting_members_not_coordinator() {
    let mut c = coordinator(0);
    let mut log = MemLog::default();
    let (m1, rx1) = join_new(&mut c, &mut log, 1);
    let j1 = ready(rx1).unwrap();
    // m1 waits in SyncGroup (it is not the only one to sync: a second
    // member joined), then the partition moves away.
    let (_m2, rx2) = join_new(&mut c, &mut log, 2);
    let p = partition_for("g", 50);
    // A resignation older than the election is ignored.
    assert_eq!(c.unload(p, Some(-1)), None);
    assert!(c.groups.contains_key("g"));
    assert_eq!(c.unload(p, Some(0)), Some(1));
    assert_eq!(ready(rx2).unwrap().error, errors::NOT_COORDINATOR);
    assert!(c.groups.is_empty());
    assert_eq!(
        c.heartbeat(&mut log, "g", j1.generation_id, &m1, None, 3),
        errors::NOT_COORDINATOR
    );
    assert_eq!(c.next_timer_ms(), None, "the group's timers are gone");
}

/// A commit of t-0 at `offset` by a consumer outside group management.
fn simple_commit(
    c: &mut GroupCoordinator,
    log: &mut MemLog,
    offset: i64,
    now_ms: i64,
) -> crate::coordinator::offsets::CommitOutcome {
    let parts = [CommitPart {
        topic: "t".into(),
        partition: 0,
        offset,
        leader_epoch: -1,
        metadata: None,
    }];
    let commit = OffsetCommit {
        group_id: "s",
        generation_id: -1,
        member_id: "",
        instance_id: None,
        retention_ms: -1,
        parts: &parts,
    };
    c.commit_offsets(log, &commit, now_ms)
}

#[test]
fn commits_are_visible_only_once_replicated() {
    let mut c = coordinator(0);
    let mut log = MemLog::default();
    let first = simple_commit(&mut c, &mut log, 5, 1);
    let second = simple_commit(&mut c, &mut log, 9, 2);
    assert_eq!(first.results, vec![errors::NONE]);
    assert_eq!(second.results, vec![errors::NONE]);
    let offset_of = |c: &GroupCoordinator| c.fetch_offsets("s", None).1.first().map(|r| r.2);
    assert_eq!(offset_of(&c), None, "pending commits are not fetched");
    // The expiry does not take a group with commits in flight.
    c.config.offsets_retention_ms = 0;
    c.expire_offsets(&mut log, 3);
    assert!(c.groups.contains_key("s"));
    // The newer commit replicates first; the older one must not replace it.
    assert_eq!(c.complete_commit(second.pending.unwrap(), errors::NONE), 0);
    assert_eq!(offset_of(&c), Some(9));
    assert_eq!(c.complete_commit(first.pending.unwrap(), errors::NONE), 0);
    assert_eq!(offset_of(&c), Some(9));
    // A failed replication is answered as Kafka maps it, and not applied.
    let third = simple_commit(&mut c, &mut log, 12, 4);
    assert_eq!(
        c.complete_commit(third.pending.unwrap(), errors::REQUEST_TIMED_OUT),
        errors::COORDINATOR_NOT_AVAILABLE
    );
    assert_eq!(offset_of(&c), Some(9));
    // A commit whose partition was unloaded (and loaded again) meanwhile
    // only reports its error: the new load read the log.
    let fourth = simple_commit(&mut c, &mut log, 15, 5);
    let p = partition_for("s", 50);
    c.unload(p, None);
    assert!(c.begin_loading(p, 1).is_some());
    c.finish_loading(p, 6);
    assert_eq!(c.complete_commit(fourth.pending.unwrap(), errors::NONE), 0);
    assert!(!c.groups.contains_key("s"));
}

/// One member joins at 1 ms and syncs at 2 ms: a Stable group "g".
fn stable_alone(c: &mut GroupCoordinator, log: &mut MemLog) -> (String, JoinResult) {
    let (m1, rx) = join_new(c, log, 1);
    let j = ready(rx).unwrap();
    let s = c.sync_group(log, "g", j.generation_id, &m1, None, None, None, vec![], 2);
    assert_eq!(ready(s).unwrap().error, errors::NONE);
    (m1, j)
}

#[test]
fn timers_fire_at_their_millisecond() {
    // A member's session ends exactly session_timeout_ms after its last
    // heartbeat: still there 1 ms before, gone at the deadline.
    let mut c = coordinator(0);
    let mut log = MemLog::default();
    let (m1, j) = stable_alone(&mut c, &mut log);
    assert_eq!(
        c.heartbeat(&mut log, "g", j.generation_id, &m1, None, 1_000),
        0
    );
    c.tick(&mut log, 10_999);
    assert!(c.groups["g"].has(&m1));
    assert_eq!(c.next_timer_ms(), Some(11_000));
    c.tick(&mut log, 11_000);
    assert!(c.groups["g"].members.is_empty());
    assert!(c.groups["g"].is(GroupState::Empty));
}

#[test]
fn a_wall_clock_step_neither_fires_nor_parks_timers() {
    // Timers run on the timer clock: the wall clock jumping an hour ahead
    // (the skew falls by as much) leaves a 10 s session alone, and the
    // session still ends 10 s of timer clock after the last heartbeat.
    let mut c = coordinator(0);
    let mut log = MemLog::default();
    let (m1, _) = stable_alone(&mut c, &mut log);
    let hour_ms = 3_600_000;
    c.set_clock_skew(-hour_ms);
    c.tick(&mut log, 5_000 + hour_ms);
    assert!(
        c.groups["g"].has(&m1),
        "the step did not expire the session"
    );
    c.tick(&mut log, 10_002 + hour_ms);
    assert!(!c.groups["g"].has(&m1), "expired on the timer clock");
}

fn txn_commit(
    c: &mut GroupCoordinator,
    log: &mut MemLog,
    producer_id: i64,
    offset: i64,
    now_ms: i64,
) -> crate::coordinator::txn_offsets::TxnCommitOutcome {
    let parts = [CommitPart {
        topic: "t".into(),
        partition: 0,
        offset,
        leader_epoch: -1,
        metadata: None,
    }];
    let commit = crate::coordinator::txn_offsets::TxnOffsetCommit {
        group_id: "s",
        producer_id,
        producer_epoch: 0,
        generation_id: -1,
        member_id: "",
        instance_id: None,
        parts: &parts,
    };
    c.txn_commit_offsets(log, &commit, now_ms)
}

#[test]
fn transactional_offsets_wait_for_their_marker() {
    let mut c = coordinator(0);
    let mut log = MemLog::default();
    let p = partition_for("s", 50);
    let offset_of = |c: &GroupCoordinator| c.fetch_offsets("s", None).1.first().map(|r| r.2);
    // Committed by producer 7: pending (and unstable) until its marker.
    let o = txn_commit(&mut c, &mut log, 7, 5, 1);
    assert_eq!(o.results, vec![errors::NONE]);
    assert!(o.stored.is_some());
    assert!(c.has_pending_txn_offset("s", "t", 0));
    assert_eq!(offset_of(&c), None);
    // A marker on another partition or of another producer changes nothing.
    c.complete_txn_offsets(p + 1, 7, true);
    c.complete_txn_offsets(p, 8, true);
    assert!(c.has_pending_txn_offset("s", "t", 0));
    c.complete_txn_offsets(p, 7, true);
    assert!(!c.has_pending_txn_offset("s", "t", 0));
    assert_eq!(offset_of(&c), Some(5));
    // An abort drops them.
    txn_commit(&mut c, &mut log, 7, 9, 2);
    c.complete_txn_offsets(p, 7, false);
    assert_eq!(offset_of(&c), Some(5));
    // A failed append is no longer pending.
    let o = txn_commit(&mut c, &mut log, 9, 11, 3);
    c.fail_txn_commit(&o);
    assert!(!c.has_pending_txn_offset("s", "t", 0));
    // The batch is the producer's, transactional.
    let (_, batch) = log.batches.last().unwrap();
    let h = kshard_shards::log::batch::BatchHeader::parse(batch).unwrap();
    assert!(h.is_transactional() && h.producer_id == 9);
}

#[test]
fn transactional_offsets_are_replayed_with_their_markers() {
    let mut c = coordinator(0);
    let mut log = MemLog::default();
    txn_commit(&mut c, &mut log, 7, 5, 1);
    txn_commit(&mut c, &mut log, 8, 6, 2);
    // Reloaded from the log: 7 committed (its marker replayed), 8 still open.
    let mut fresh = coordinator(0);
    let p = partition_for("s", 50);
    fresh.unload(p, None);
    assert!(fresh.begin_loading(p, 1).is_some());
    for (_, batch) in &log.batches {
        let h = kshard_shards::log::batch::BatchHeader::parse(batch).unwrap();
        for r in RecordIter::new(&batch[RECORD_BATCH_OVERHEAD..]) {
            let r = r.unwrap();
            fresh
                .load_txn_record(&h, r.key.unwrap(), r.value, 3)
                .unwrap();
        }
    }
    fresh.complete_txn_offsets(p, 7, true);
    fresh.finish_loading(p, 4);
    assert_eq!(
        fresh.fetch_offsets("s", None).1.first().map(|r| r.2),
        Some(5)
    );
    assert!(fresh.has_pending_txn_offset("s", "t", 0));
    fresh.complete_txn_offsets(p, 8, true);
    assert_eq!(
        fresh.fetch_offsets("s", None).1.first().map(|r| r.2),
        Some(6)
    );
}
