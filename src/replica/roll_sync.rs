//! Kafka's `flush-log` scheduler task: the fsyncs of rolled segments (see
//! `kshard_shards::log::RollSyncJob`) run on the shard's blocking thread,
//! so a roll never stalls the requests the shard serves.

use std::rc::Rc;

use super::partitions::RollSync;
use super::ReplicaManager;

impl ReplicaManager {
    /// Starts the background fsync of each roll (taken by
    /// `Partitions::maintain_some`).
    pub fn start_roll_syncs(self: &Rc<Self>, jobs: Vec<RollSync>) {
        for RollSync {
            topic,
            partition,
            log_id,
            job,
        } in jobs
        {
            let rm = self.clone();
            glommio::spawn_local(async move {
                let id = job.id();
                let result = glommio::executor().spawn_blocking(move || job.run()).await;
                let mut partitions = rm.partitions_mut();
                // A partition deleted or reopened meanwhile keeps no record.
                let Some(p) = partitions.partition_mut(&topic, partition) else {
                    return;
                };
                if p.log.log_id() != log_id {
                    return;
                }
                if let Err(e) = p.log.complete_roll_sync(id, result) {
                    log::error!("fsync of rolled segments of {topic}-{partition}: {e}");
                }
            })
            .detach();
        }
    }
}
