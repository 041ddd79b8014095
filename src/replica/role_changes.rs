//! ReplicaManager's `becomeLeaderOrFollower` (LeaderAndIsr) for one topic's
//! partitions on this shard, applied in steps of a few partitions.
//!
//! Opening an existing log reads its checkpoints, indexes and producer
//! snapshot (about 0.2 ms per partition here): a 1,000-partition
//! LeaderAndIsr applied in one step held a restarted broker's shard for
//! about 100 ms. Each step is synchronous and the shard may run other tasks
//! between steps; the controller sends a broker one request at a time and
//! this answers after the last step, so no later role change interleaves.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use kshard_shards::mailbox::LocalBoxFuture;

use super::fetcher::{FollowedPartition, LeaderEndpoint};
use super::partitions::PreparedLogs;
use super::parts::RoleChange;
use super::ReplicaManager;
use crate::metadata::metadata_cache::TopicInfo;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::util::now_ms;

/// Partitions opened or changed role in one synchronous step (16 existing
/// logs open in about 3 ms); a step of a shard's 500 partitions held it
/// for 10-100 ms.
pub(super) const PARTITIONS_PER_STEP: usize = 16;

impl ReplicaManager {
    /// Kafka's `becomeLeaderOrFollower` for one topic's partitions on this
    /// shard: role changes, then the fetchers follow (makeLeaders/makeFollowers).
    pub fn become_leader_or_follower(
        self: &Rc<Self>,
        topic: Arc<TopicInfo>,
        parts: Vec<RoleChange>,
        leaders: Arc<Vec<LeaderEndpoint>>,
    ) -> LocalBoxFuture<Vec<ErrorCode>> {
        for p in &parts {
            self.assert_owned(&topic.name, p.partition);
        }
        let partition_ids: Vec<i32> = parts.iter().map(|p| p.partition).collect();
        let topic_name = topic.name.clone();
        let applied = match self.prepare_new_logs(&topic, &partition_ids) {
            // Nothing to create: the first step is applied now, in arrival order.
            None => self.apply_role_changes(topic, parts, leaders, PreparedLogs::new()),
            // The controller sends a broker one request at a time, each
            // answered after this future, so no later role change overtakes
            // this one while its new logs are made.
            Some(prepare) => {
                let rm = self.clone();
                Box::pin(async move {
                    let prepared = prepare.await;
                    rm.apply_role_changes(topic, parts, leaders, prepared).await
                })
            }
        };
        let rm = self.clone();
        Box::pin(async move {
            let mut codes = applied.await;
            if rm
                .sync_leader_epochs(&topic_name, &partition_ids)
                .await
                .is_err()
            {
                for code in codes.iter_mut().filter(|c| **c == errors::NONE) {
                    *code = errors::KAFKA_STORAGE_ERROR;
                }
            }
            codes
        })
    }

    /// The role changes in steps of `PARTITIONS_PER_STEP`, the first applied
    /// before this returns when its partitions are quiesced; codes in the
    /// order of `parts`.
    fn apply_role_changes(
        self: &Rc<Self>,
        topic: Arc<TopicInfo>,
        parts: Vec<RoleChange>,
        leaders: Arc<Vec<LeaderEndpoint>>,
        mut prepared: PreparedLogs,
    ) -> LocalBoxFuture<Vec<ErrorCode>> {
        let parts_count = parts.len();
        let mut rest = parts.into_iter();
        let first: Vec<RoleChange> = rest.by_ref().take(PARTITIONS_PER_STEP).collect();
        let first_prepared = take_prepared(&mut prepared, &first);
        let first_step =
            self.apply_role_change_step(topic.clone(), first, &leaders, first_prepared);
        if rest.len() == 0 {
            return first_step;
        }
        let rm = self.clone();
        Box::pin(async move {
            let mut codes = Vec::with_capacity(parts_count);
            codes.extend(first_step.await);
            loop {
                let step: Vec<RoleChange> = rest.by_ref().take(PARTITIONS_PER_STEP).collect();
                if step.is_empty() {
                    break;
                }
                glommio::yield_if_needed().await;
                let step_prepared = take_prepared(&mut prepared, &step);
                let step_codes = rm
                    .apply_role_change_step(topic.clone(), step, &leaders, step_prepared)
                    .await;
                codes.extend(step_codes);
            }
            assert_eq!(codes.len(), parts_count);
            codes
        })
    }

    /// One synchronous step of LeaderAndIsr (once its partitions are
    /// quiesced), their new logs attached from `prepared`.
    fn apply_role_change_step(
        self: &Rc<Self>,
        topic: Arc<TopicInfo>,
        parts: Vec<RoleChange>,
        leaders: &Arc<Vec<LeaderEndpoint>>,
        mut prepared: PreparedLogs,
    ) -> LocalBoxFuture<Vec<ErrorCode>> {
        let ids: Vec<(String, i32)> = parts
            .iter()
            .map(|p| (topic.name.clone(), p.partition))
            .collect();
        let leaders = leaders.clone();
        self.run_quiesced(ids, move |rm| {
            let codes = rm.partitions_mut().become_leader_or_follower(
                &topic,
                &parts,
                rm.broker_id,
                now_ms() as i64,
                &mut prepared,
            );
            rm.update_fetchers(&topic, &parts, &codes, &leaders);
            // Fetches and produces parked on partitions that changed role re-check.
            for p in &parts {
                rm.on_high_watermark_advanced(&topic.name, p.partition);
            }
            codes
        })
    }

    /// makeFollowers / makeLeaders for the fetchers: followed partitions fetch
    /// from their new leader, led ones stop fetching.
    fn update_fetchers(
        self: &Rc<Self>,
        topic: &TopicInfo,
        parts: &[RoleChange],
        codes: &[ErrorCode],
        leaders: &[LeaderEndpoint],
    ) {
        assert_eq!(parts.len(), codes.len());
        let mut stop = Vec::new();
        let mut by_leader: BTreeMap<i32, Vec<FollowedPartition>> = BTreeMap::new();
        for (rc, code) in parts.iter().zip(codes) {
            if *code != errors::NONE {
                continue;
            }
            if rc.leader == self.broker_id || rc.leader < 0 {
                stop.push((topic.name.clone(), rc.partition));
            } else {
                by_leader
                    .entry(rc.leader)
                    .or_default()
                    .push(FollowedPartition {
                        topic: topic.name.clone(),
                        partition: rc.partition,
                        topic_id: topic.topic_id,
                        leader_epoch: rc.leader_epoch,
                    });
            }
        }
        let mut fetchers = self.replica_fetchers.borrow_mut();
        fetchers.remove_partitions(&stop);
        for (leader, followed) in by_leader {
            match leaders.iter().find(|l| l.broker_id == leader) {
                Some(endpoint) => fetchers.add_partitions(self, endpoint.clone(), followed),
                None => log::warn!(
                    "no endpoint for leader {leader} of {}; not fetching",
                    topic.name
                ),
            }
        }
    }
}

/// The prepared logs of `parts`' partitions, taken out of `prepared`.
fn take_prepared(prepared: &mut PreparedLogs, parts: &[RoleChange]) -> PreparedLogs {
    parts
        .iter()
        .filter_map(|p| Some((p.partition, prepared.remove(&p.partition)?)))
        .collect()
}
