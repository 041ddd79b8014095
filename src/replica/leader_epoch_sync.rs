//! Kafka writes the leader-epoch checkpoint durably inside `assign`, on a
//! request thread; here a request's writes are queued to the checkpoint
//! writer thread (`partition::leader_epoch_writes`) and awaited while the
//! shard serves on, their partitions' appends fenced until then.

use std::io;
use std::rc::Rc;

use super::partitions::{dropped_write, LeaderEpochSync};
use super::ReplicaManager;
use crate::protocol::errors;

impl ReplicaManager {
    /// Awaits the leader-epoch checkpoint writes that opening or leading
    /// `topic`'s partitions `ids` queued; their appends stay fenced until
    /// then, and for good if a write fails (Kafka takes the log directory
    /// offline).
    pub(super) async fn sync_leader_epochs(
        self: &Rc<Self>,
        topic: &str,
        ids: &[i32],
    ) -> io::Result<()> {
        let batch = self.partitions_mut().take_leader_epoch_writes(topic, ids);
        let Some(LeaderEpochSync { id, writes }) = batch else {
            return Ok(());
        };
        let count = writes.len();
        for write in writes {
            if let Err(e) = write.await.map_err(|_| dropped_write()).and_then(|r| r) {
                log::error!(
                    "writing {count} leader-epoch checkpoints of {topic}: {e}; \
                     their partitions refuse appends"
                );
                self.fail_parked_appends(
                    |t, p| t == topic && ids.contains(&p),
                    errors::KAFKA_STORAGE_ERROR,
                );
                return Err(e);
            }
        }
        self.partitions_mut().leader_epochs_synced(topic, ids, id);
        self.run_parked_appends(|t, p| t == topic && ids.contains(&p));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use crate::protocol::errors;
    use crate::replica::partition::follower::test_support::{
        batch, replica_manager_in, temp_dir, topic_t, NOW_MS,
    };
    use crate::replica::parts::{AppendOrigin, ProducePart, RoleChange};

    fn produce(epoch: i32) -> ProducePart {
        ProducePart {
            topic: "t".into(),
            partition: 0,
            records: Bytes::from(batch(0, 2, epoch)),
            txn_verification: crate::replica::TxnVerification::Off,
        }
    }

    #[test]
    fn leading_fences_appends_until_the_epoch_checkpoint_is_durable() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let dir = temp_dir("epoch-sync");
                let rm = replica_manager_in(&dir);
                let topic = topic_t();
                let lead = RoleChange {
                    partition: 0,
                    leader: 1,
                    leader_epoch: 3,
                    replicas: vec![1],
                    isr: vec![1],
                    partition_epoch: 0,
                };
                let codes = rm
                    .become_leader_or_follower(topic, vec![lead], Arc::new(Vec::new()))
                    .await;
                assert_eq!(codes, vec![errors::NONE]);
                let checkpoint = dir.join("t-0").join("leader-epoch-checkpoint");
                assert_eq!(
                    std::fs::read_to_string(&checkpoint).unwrap(),
                    "0\n2\n0 0\n3 0\n"
                );
                {
                    let mut ps = rm.partitions_mut();
                    assert_eq!(
                        ps.append(&produce(3), NOW_MS, AppendOrigin::Client)
                            .error_code,
                        errors::NONE
                    );
                }
                // The append is staged (buffered offload): it lands before
                // the role change, as a broker's role change waits for it.
                rm.schedule_direct_write("t", 0);
                rm.quiesce_direct_writes(|_, _| true, std::time::Duration::from_secs(5))
                    .await;
                rm.unfence_appends(|_, _| true);
                let (first, second) = {
                    let mut ps = rm.partitions_mut();
                    // A new epoch's checkpoint taken for syncing fences appends,
                    // and a later batch keeps them fenced past the earlier one.
                    let p = ps.partition_mut("t", 0).unwrap();
                    p.become_leader_or_follower(4, true).unwrap();
                    let first = ps.take_leader_epoch_writes("t", &[0]).unwrap();
                    assert_eq!(first.writes.len(), 1);
                    assert!(ps.take_leader_epoch_writes("t", &[0]).is_none());
                    let refused = ps
                        .append(&produce(4), NOW_MS, AppendOrigin::Client)
                        .error_code;
                    assert_eq!(refused, errors::NOT_LEADER_OR_FOLLOWER);
                    let p = ps.partition_mut("t", 0).unwrap();
                    p.become_leader_or_follower(5, true).unwrap();
                    let second = ps.take_leader_epoch_writes("t", &[0]).unwrap();
                    ps.leader_epochs_synced("t", &[0], first.id);
                    let refused = ps
                        .append(&produce(5), NOW_MS, AppendOrigin::Client)
                        .error_code;
                    assert_eq!(refused, errors::NOT_LEADER_OR_FOLLOWER);
                    ps.leader_epochs_synced("t", &[0], second.id);
                    assert_eq!(
                        ps.append(&produce(5), NOW_MS, AppendOrigin::Client)
                            .error_code,
                        errors::NONE
                    );
                    (first, second)
                };
                for w in first.writes.into_iter().chain(second.writes) {
                    w.await.unwrap().unwrap();
                }
                assert_eq!(
                    std::fs::read_to_string(&checkpoint).unwrap(),
                    "0\n4\n0 0\n3 0\n4 2\n5 2\n"
                );
                crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
