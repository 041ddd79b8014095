//! Leader selection as Kafka's PartitionLeaderElectionAlgorithms, and the
//! ISR edits of the replica state machine. Pure functions over one
//! partition, so the rules can be tested on their own.

/// A partition's leadership as in `.../partitions/<p>/state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderAndIsr {
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    /// The state znode's version (Kafka's partition epoch).
    pub zk_version: i32,
    pub controller_epoch: i32,
}

/// Kafka's LeaderAndIsr.NoLeader.
pub const NO_LEADER: i32 = -1;
pub use crate::metadata::topics::LEADER_DURING_DELETE;

impl LeaderAndIsr {
    /// The next state with a new leader and ISR: leader epoch + 1.
    pub fn with_leader(&self, leader: i32, isr: Vec<i32>, controller_epoch: i32) -> LeaderAndIsr {
        LeaderAndIsr {
            leader,
            leader_epoch: self.leader_epoch + 1,
            isr,
            zk_version: self.zk_version,
            controller_epoch,
        }
    }
}

/// offlinePartitionLeaderElection: the first replica in assignment order
/// that is alive and in the ISR; with unclean election allowed, else the
/// first live replica. Returns the leader and whether it was unclean.
pub fn offline_partition_leader(
    assignment: &[i32],
    isr: &[i32],
    is_live: &dyn Fn(i32) -> bool,
    unclean_allowed: bool,
) -> Option<(i32, bool)> {
    if let Some(&b) = assignment.iter().find(|&&b| is_live(b) && isr.contains(&b)) {
        return Some((b, false));
    }
    if unclean_allowed {
        return assignment.iter().find(|&&b| is_live(b)).map(|&b| (b, true));
    }
    None
}

/// preferredReplicaPartitionLeaderElection: the first replica of the
/// assignment, if alive and in the ISR.
pub fn preferred_replica_leader(
    assignment: &[i32],
    isr: &[i32],
    is_live: &dyn Fn(i32) -> bool,
) -> Option<i32> {
    let &preferred = assignment.first()?;
    (is_live(preferred) && isr.contains(&preferred)).then_some(preferred)
}

/// controlledShutdownPartitionLeaderElection: the first replica in
/// assignment order that is alive, in the ISR and not shutting down.
pub fn controlled_shutdown_leader(
    assignment: &[i32],
    isr: &[i32],
    is_live: &dyn Fn(i32) -> bool,
    shutting_down: &dyn Fn(i32) -> bool,
) -> Option<i32> {
    assignment
        .iter()
        .copied()
        .find(|&b| is_live(b) && isr.contains(&b) && !shutting_down(b))
}

/// Elects a leader for a partition whose leader is gone. `None` when no
/// replica qualifies: the partition goes offline with leader -1 and keeps
/// its ISR (Kafka never empties it, so a clean election can wait for the
/// last in-sync replica to return).
pub fn elect_offline(
    current: &LeaderAndIsr,
    assignment: &[i32],
    is_live: &dyn Fn(i32) -> bool,
    unclean_allowed: bool,
    controller_epoch: i32,
) -> Option<LeaderAndIsr> {
    let (leader, unclean) =
        offline_partition_leader(assignment, &current.isr, is_live, unclean_allowed)?;
    let isr = if unclean {
        vec![leader]
    } else {
        current
            .isr
            .iter()
            .copied()
            .filter(|&b| is_live(b))
            .collect()
    };
    debug_assert!(isr.contains(&leader));
    Some(current.with_leader(leader, isr, controller_epoch))
}

/// Removes `replica` from the ISR (OfflineReplica / controlled shutdown of
/// a follower). The last member stays: with the leader removed the
/// partition gets no leader but keeps that ISR. `None` when nothing changes.
pub fn remove_from_isr(
    current: &LeaderAndIsr,
    replica: i32,
    controller_epoch: i32,
) -> Option<LeaderAndIsr> {
    if !current.isr.contains(&replica) {
        return None;
    }
    let leader = if current.leader == replica {
        NO_LEADER
    } else {
        current.leader
    };
    let isr: Vec<i32> = if current.isr.len() == 1 {
        current.isr.clone()
    } else {
        current
            .isr
            .iter()
            .copied()
            .filter(|&b| b != replica)
            .collect()
    };
    if leader == current.leader && isr == current.isr {
        return None;
    }
    Some(current.with_leader(leader, isr, controller_epoch))
}

/// The initial state of a new partition: the first live replica leads, the
/// live replicas are the ISR, epoch 0. `None` with no live replica (the
/// partition stays New until one registers).
pub fn initial_leader_and_isr(
    assignment: &[i32],
    is_live: &dyn Fn(i32) -> bool,
    controller_epoch: i32,
) -> Option<LeaderAndIsr> {
    let live: Vec<i32> = assignment.iter().copied().filter(|&b| is_live(b)).collect();
    let &leader = live.first()?;
    Some(LeaderAndIsr {
        leader,
        leader_epoch: 0,
        isr: live,
        zk_version: 0,
        controller_epoch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(leader: i32, isr: &[i32]) -> LeaderAndIsr {
        LeaderAndIsr {
            leader,
            leader_epoch: 4,
            isr: isr.to_vec(),
            zk_version: 7,
            controller_epoch: 1,
        }
    }

    #[test]
    fn offline_election_prefers_assignment_order_within_isr() {
        let live = |b: i32| b != 1;
        let next = elect_offline(&state(1, &[1, 3, 2]), &[1, 2, 3], &live, false, 2).unwrap();
        assert_eq!(next.leader, 2);
        assert_eq!(next.isr, vec![3, 2]);
        assert_eq!(next.leader_epoch, 5);
        assert_eq!(next.controller_epoch, 2);
        assert_eq!(next.zk_version, 7);
    }

    #[test]
    fn offline_election_without_live_isr_needs_unclean() {
        let live = |b: i32| b == 3;
        assert_eq!(
            elect_offline(&state(1, &[1, 2]), &[1, 2, 3], &live, false, 2),
            None
        );
        let next = elect_offline(&state(1, &[1, 2]), &[1, 2, 3], &live, true, 2).unwrap();
        assert_eq!((next.leader, next.isr.clone()), (3, vec![3]));
    }

    #[test]
    fn removing_the_last_isr_member_keeps_it_and_drops_the_leader() {
        let next = remove_from_isr(&state(2, &[2]), 2, 3).unwrap();
        assert_eq!((next.leader, next.isr.clone()), (NO_LEADER, vec![2]));
        let next = remove_from_isr(&state(2, &[2, 3]), 3, 3).unwrap();
        assert_eq!((next.leader, next.isr.clone()), (2, vec![2]));
        assert_eq!(remove_from_isr(&state(2, &[2]), 3, 3), None);
    }

    #[test]
    fn preferred_and_controlled_shutdown_choices() {
        let all = |_| true;
        assert_eq!(
            preferred_replica_leader(&[3, 1, 2], &[1, 2, 3], &all),
            Some(3)
        );
        assert_eq!(preferred_replica_leader(&[3, 1, 2], &[1, 2], &all), None);
        let leaving = |b: i32| b == 3;
        assert_eq!(
            controlled_shutdown_leader(&[3, 1, 2], &[3, 2], &all, &leaving),
            Some(2)
        );
        assert_eq!(
            controlled_shutdown_leader(&[3, 1], &[3], &all, &leaving),
            None
        );
    }

    #[test]
    fn new_partitions_start_with_live_replicas() {
        let live = |b: i32| b != 0;
        let s = initial_leader_and_isr(&[0, 1, 2], &live, 5).unwrap();
        assert_eq!(
            (s.leader, s.isr.clone(), s.leader_epoch, s.controller_epoch),
            (1, vec![1, 2], 0, 5)
        );
        assert_eq!(initial_leader_and_isr(&[0], &live, 5), None);
    }
}
