//! The leader's side of replication, as Kafka's Partition and Replica: each
//! follower's fetch state (`updateFetchState`), the high watermark over the
//! ISR, and when to ask the controller to expand or shrink the ISR
//! (AlterPartition). The owning shard calls these synchronously.

use std::collections::BTreeMap;

use crate::replica::partition::Partition;

/// A follower as the leader sees it (Kafka's ReplicaState).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerState {
    /// -1 until the follower's first fetch.
    pub log_end_offset: i64,
    pub last_caught_up_time_ms: i64,
    pub last_fetch_leader_log_end_offset: i64,
    pub last_fetch_time_ms: i64,
}

/// What a leading partition knows of its replicas; empty while following
/// or on a single broker.
#[derive(Debug, Clone, Default)]
pub struct Leadership {
    /// True in cluster mode once this broker leads by LeaderAndIsr.
    pub replicated: bool,
    pub broker_id: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// The state znode version the ISR was read at (Kafka's partition epoch).
    pub partition_epoch: i32,
    pub followers: BTreeMap<i32, FollowerState>,
    /// The ISR an AlterPartition in flight asks for.
    pub pending_isr: Option<Vec<i32>>,
    /// Log end offset when this leader epoch began.
    pub leader_epoch_start_offset: i64,
}

impl Leadership {
    /// Kafka's maximalIsr: the ISR plus any member an expansion in flight
    /// adds, so the high watermark waits for it.
    pub fn maximal_isr_contains(&self, broker: i32) -> bool {
        self.isr.contains(&broker)
            || self
                .pending_isr
                .as_ref()
                .is_some_and(|p| p.contains(&broker))
    }
}

/// An ISR change for the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterIsr {
    pub topic: String,
    pub topic_id: uuid::Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
}

impl Partition {
    /// makeLeader: followers start unknown; those in the ISR count as
    /// caught up now (Kafka's resetReplicaState for a new leader).
    pub fn make_leader(
        &mut self,
        broker_id: i32,
        leader_epoch: i32,
        replicas: &[i32],
        isr: &[i32],
        partition_epoch: i32,
        now_ms: i64,
    ) -> std::io::Result<()> {
        // Kafka's isNewLeader: follower state starts over only when this
        // broker was not already leading; a new epoch for the same leader
        // (the controller shrank the ISR) keeps what followers reported.
        let new_leader = !(self.is_leader && self.leadership.replicated);
        let new_epoch = leader_epoch != self.leader_epoch || new_leader;
        self.become_leader_or_follower(leader_epoch, true)?;
        let previous = std::mem::take(&mut self.leadership.followers);
        let mut followers = BTreeMap::new();
        for &r in replicas.iter().filter(|&&r| r != broker_id) {
            let state = match previous.get(&r) {
                Some(s) if !new_leader => *s,
                _ => FollowerState {
                    log_end_offset: -1,
                    last_caught_up_time_ms: if isr.contains(&r) { now_ms } else { 0 },
                    last_fetch_leader_log_end_offset: -1,
                    last_fetch_time_ms: 0,
                },
            };
            followers.insert(r, state);
        }
        self.leadership = Leadership {
            replicated: true,
            broker_id,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            partition_epoch,
            followers,
            pending_isr: None,
            leader_epoch_start_offset: if new_epoch {
                self.log.log_end_offset()
            } else {
                self.leadership.leader_epoch_start_offset
            },
        };
        Ok(())
    }

    /// makeFollower: no replication state; the fetcher takes over.
    pub fn make_follower(&mut self, leader_epoch: i32) -> std::io::Result<()> {
        self.become_leader_or_follower(leader_epoch, false)?;
        self.leadership = Leadership::default();
        Ok(())
    }

    pub fn isr_len(&self) -> usize {
        if self.leadership.replicated {
            self.leadership.isr.len()
        } else {
            1
        }
    }

    /// updateFollowerFetchState: records a follower's fetch at
    /// `fetch_offset`; false if the broker is not a replica.
    pub fn update_follower_fetch_state(
        &mut self,
        replica: i32,
        fetch_offset: i64,
        now_ms: i64,
    ) -> bool {
        let leader_end = self.log.log_end_offset();
        let Some(f) = self.leadership.followers.get_mut(&replica) else {
            return false;
        };
        if fetch_offset >= leader_end {
            f.last_caught_up_time_ms = f.last_caught_up_time_ms.max(now_ms);
        } else if fetch_offset >= f.last_fetch_leader_log_end_offset {
            f.last_caught_up_time_ms = f.last_caught_up_time_ms.max(f.last_fetch_time_ms);
        }
        f.log_end_offset = fetch_offset;
        f.last_fetch_leader_log_end_offset = leader_end;
        f.last_fetch_time_ms = now_ms;
        true
    }

    /// maybeIncrementLeaderHW: the smallest log end offset over the
    /// (maximal) ISR; the high watermark never goes back. True if it moved.
    /// A smaller candidate is normal, not a violation (a follower in the
    /// ISR that has not fetched this epoch reports -1, one that truncated
    /// reports less): the high watermark then stays where it is.
    pub fn maybe_increment_high_watermark(&mut self) -> bool {
        let leo = self.log.log_end_offset();
        let mut new_hw = leo;
        // Only the (maximal) ISR counts. Kafka also waits for a caught-up
        // follower about to join, but only while its broker is alive, which
        // a partition cannot see; leaving it out never commits less safely.
        if self.leadership.replicated {
            for (id, f) in &self.leadership.followers {
                if self.leadership.maximal_isr_contains(*id) {
                    new_hw = new_hw.min(f.log_end_offset);
                }
            }
        }
        if new_hw > self.high_watermark() {
            self.increment_high_watermark(new_hw);
            return true;
        }
        false
    }

    /// maybeExpandIsr: a follower outside the ISR that reached the high
    /// watermark (and this epoch's start) joins.
    pub fn isr_to_expand(&self, replica: i32) -> Option<Vec<i32>> {
        let l = &self.leadership;
        if !l.replicated || l.pending_isr.is_some() || l.isr.contains(&replica) {
            return None;
        }
        let f = l.followers.get(&replica)?;
        if f.log_end_offset >= self.high_watermark()
            && f.log_end_offset >= l.leader_epoch_start_offset
        {
            let mut isr = l.isr.clone();
            isr.push(replica);
            return Some(isr);
        }
        None
    }

    /// maybeShrinkIsr: followers not caught up within the lag time leave.
    pub fn isr_to_shrink(&self, now_ms: i64, replica_lag_time_max_ms: i64) -> Option<Vec<i32>> {
        let l = &self.leadership;
        if !l.replicated || l.pending_isr.is_some() {
            return None;
        }
        let out_of_sync: Vec<i32> = l
            .isr
            .iter()
            .copied()
            .filter(|r| *r != l.broker_id)
            .filter(|r| {
                l.followers
                    .get(r)
                    .is_some_and(|f| now_ms - f.last_caught_up_time_ms > replica_lag_time_max_ms)
            })
            .collect();
        if out_of_sync.is_empty() {
            return None;
        }
        Some(
            l.isr
                .iter()
                .copied()
                .filter(|r| !out_of_sync.contains(r))
                .collect(),
        )
    }

    /// The AlterPartition item for `new_isr`, marking it in flight.
    pub fn request_isr_change(&mut self, new_isr: Vec<i32>) -> AlterIsr {
        debug_assert!(self.leadership.pending_isr.is_none());
        self.leadership.pending_isr = Some(new_isr.clone());
        AlterIsr {
            topic: self.topic.clone(),
            topic_id: self.topic_id,
            partition: self.partition,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.leadership.partition_epoch,
            new_isr,
        }
    }

    /// The controller's answer to an AlterPartition: applied if it is for
    /// this leader epoch; the pending request is cleared either way.
    pub fn apply_isr_change(&mut self, leader_epoch: i32, isr: Option<(Vec<i32>, i32)>) {
        self.leadership.pending_isr = None;
        if let Some((isr, partition_epoch)) = isr {
            if leader_epoch == self.leader_epoch && self.is_leader {
                self.leadership.isr = isr;
                self.leadership.partition_epoch = partition_epoch;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::replica::partition::follower::test_support::{batch, follower_in, temp_dir, NOW_MS};

    const LAG_MS: i64 = 10_000;

    /// A leader (broker 1) of replicas [1, 2, 3] with `records` records.
    fn leader_with(records: usize) -> crate::replica::partition::Partition {
        let dir = temp_dir("replication");
        let mut p = follower_in(&dir, 0, 0, &[]);
        if records > 0 {
            p.append_records_as_follower(&batch(0, records, 0), NOW_MS)
                .unwrap();
        }
        p.make_leader(1, 1, &[1, 2, 3], &[1, 2, 3], 5, NOW_MS)
            .unwrap();
        p
    }

    #[test]
    fn high_watermark_is_the_slowest_in_sync_replica() {
        let mut p = leader_with(10);
        let hw0 = p.high_watermark();
        // Followers unknown until they fetch: nothing new is committed.
        assert!(!p.maybe_increment_high_watermark());
        assert!(p.update_follower_fetch_state(2, 10, NOW_MS));
        assert!(!p.maybe_increment_high_watermark());
        assert!(p.update_follower_fetch_state(3, 6, NOW_MS));
        assert!(p.maybe_increment_high_watermark());
        assert_eq!(p.high_watermark(), 6);
        assert!(hw0 <= 6);
        // Never backwards, even if a follower reports less.
        p.update_follower_fetch_state(3, 2, NOW_MS + 1);
        assert!(!p.maybe_increment_high_watermark());
        assert_eq!(p.high_watermark(), 6);
        assert!(
            !p.update_follower_fetch_state(9, 1, NOW_MS),
            "not a replica"
        );
    }

    #[test]
    #[should_panic(expected = "passes the log end offset")]
    fn a_leader_high_watermark_past_the_log_end_is_a_bug() {
        let mut p = leader_with(10);
        p.increment_high_watermark(11);
    }

    #[test]
    #[should_panic(expected = "goes back")]
    fn a_leader_high_watermark_going_back_is_a_bug() {
        let mut p = leader_with(10);
        p.update_follower_fetch_state(2, 10, NOW_MS);
        p.update_follower_fetch_state(3, 10, NOW_MS);
        assert!(p.maybe_increment_high_watermark());
        p.increment_high_watermark(5);
    }

    #[test]
    fn caught_up_time_follows_kafka_update_fetch_state() {
        let mut p = leader_with(10);
        // Reaching the leader's end at fetch time: caught up now.
        p.update_follower_fetch_state(2, 10, NOW_MS + 100);
        assert_eq!(
            p.leadership.followers[&2].last_caught_up_time_ms,
            NOW_MS + 100
        );
        // Behind now but at the end as of the previous fetch: caught up then.
        p.append_records_as_follower(&batch(10, 5, 1), NOW_MS)
            .unwrap();
        p.update_follower_fetch_state(2, 10, NOW_MS + 200);
        assert_eq!(
            p.leadership.followers[&2].last_caught_up_time_ms,
            NOW_MS + 100
        );
        // Short of the end as of the previous fetch (15): no progress.
        p.update_follower_fetch_state(2, 12, NOW_MS + 300);
        assert_eq!(
            p.leadership.followers[&2].last_caught_up_time_ms,
            NOW_MS + 100
        );
        p.update_follower_fetch_state(2, 15, NOW_MS + 400);
        assert_eq!(
            p.leadership.followers[&2].last_caught_up_time_ms,
            NOW_MS + 400
        );
    }

    #[test]
    fn isr_shrinks_on_lag_and_expands_at_the_high_watermark() {
        let mut p = leader_with(10);
        p.update_follower_fetch_state(2, 10, NOW_MS);
        p.update_follower_fetch_state(3, 10, NOW_MS);
        p.maybe_increment_high_watermark();
        assert_eq!(p.isr_to_shrink(NOW_MS + LAG_MS, LAG_MS), None);
        p.update_follower_fetch_state(2, 10, NOW_MS + LAG_MS);
        let shrunk = p.isr_to_shrink(NOW_MS + LAG_MS + 1, LAG_MS).unwrap();
        assert_eq!(shrunk, vec![1, 2]);
        let change = p.request_isr_change(shrunk.clone());
        assert_eq!((change.leader_epoch, change.partition_epoch), (1, 5));
        assert_eq!(
            p.isr_to_shrink(NOW_MS + 3 * LAG_MS, LAG_MS),
            None,
            "one change in flight"
        );
        p.apply_isr_change(1, Some((shrunk, 6)));
        assert_eq!(
            (p.leadership.isr.clone(), p.leadership.partition_epoch),
            (vec![1, 2], 6)
        );
        assert_eq!(
            p.isr_to_expand(3),
            Some(vec![1, 2, 3]),
            "3 is at the high watermark"
        );
        // A stale answer (older leader epoch) is not applied.
        p.request_isr_change(vec![1, 2, 3]);
        p.apply_isr_change(0, Some((vec![1], 9)));
        assert_eq!(p.leadership.isr, vec![1, 2]);
        assert!(p.leadership.pending_isr.is_none());
    }
}
