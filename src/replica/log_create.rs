//! New partitions' logs made off the shard (`kshard_shards::log::log_create`
//! says why): LeaderAndIsr and topic creation first have the `log-dirs`
//! thread make the directories and first segments of the partitions this
//! shard does not hold yet, then attach them in their synchronous step.
//! Deleted logs are renamed away by the same thread (`Log::delete_queued`),
//! so a topic deleted and created again never finds its old directory.

use std::rc::Rc;

use kshard_shards::log::log_create::{prepare_new_log, LOG_DIRS};
use kshard_shards::mailbox::LocalBoxFuture;

use super::partitions::PreparedLogs;
use super::ReplicaManager;
use crate::metadata::metadata_cache::TopicInfo;

impl ReplicaManager {
    /// Makes, off the shard, the logs of those of `topic`'s partitions `ids`
    /// this shard would create on opening them; `None` when there are none
    /// (the caller opens at once, in arrival order). A partition left out
    /// (its directory exists, or making it failed) is opened as before, and
    /// an error then is reported by the open.
    pub(super) fn prepare_new_logs(
        self: &Rc<Self>,
        topic: &TopicInfo,
        ids: &[i32],
    ) -> Option<LocalBoxFuture<PreparedLogs>> {
        let jobs = self.partitions_mut().new_log_jobs(topic, ids);
        if jobs.is_empty() {
            return None;
        }
        let prepared = LOG_DIRS.run(move || {
            let mut logs = PreparedLogs::new();
            for job in jobs {
                match prepare_new_log(&job.dir, &job.config, 0) {
                    Ok(Some(log)) => {
                        logs.insert(job.partition, log);
                    }
                    Ok(None) => {} // it exists: opened as an existing log
                    Err(e) => log::warn!(
                        "creating log {} off the shard: {e}; opening it will retry",
                        job.dir.display()
                    ),
                }
            }
            // If the shard stopped waiting (shutdown) the logs are dropped
            // unused, their files left for `Log::open`.
            logs
        });
        Some(Box::pin(async move { prepared.await.unwrap_or_default() }))
    }
}

#[cfg(test)]
mod tests {
    use crate::replica::partition::follower::test_support::{
        replica_manager_in, temp_dir, topic_t,
    };

    #[test]
    fn new_logs_are_made_off_the_shard_and_existing_ones_opened() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let dir = temp_dir("log-create");
                let rm = replica_manager_in(&dir);
                let topic = topic_t();
                // t-1 exists (an earlier run's log): Log::open loads it.
                std::fs::create_dir_all(dir.join("t-1")).unwrap();
                let prepared = rm
                    .prepare_new_logs(&topic, &[0, 1])
                    .expect("neither is open")
                    .await;
                assert_eq!(prepared.keys().copied().collect::<Vec<_>>(), vec![0]);
                assert!(dir.join("t-0").join("00000000000000000000.log").exists());
                drop(prepared); // what a shutdown mid-way leaves: Log::open loads it
                rm.open_logs(topic.clone(), vec![0, 1]).await;
                for p in [0, 1] {
                    let ps = rm.partitions();
                    let partition = ps.partition("t", p).expect("open");
                    assert_eq!(partition.log.log_end_offset(), 0);
                }
                assert!(rm.prepare_new_logs(&topic, &[0, 1]).is_none());
                let _ = std::fs::remove_dir_all(&dir);
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
