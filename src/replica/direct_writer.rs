//! The shard's side of direct mode's asynchronous appends: one task per
//! partition with staged appends writes them (see
//! `kshard_shards::log::direct_write`), then wakes the produces and fetches
//! waiting on that partition. Role changes and closes first fence new
//! appends and wait for the staged ones to land.

use std::io;
use std::rc::Rc;
use std::time::Duration;

use kshard_shards::log::log::WriteStep;
use kshard_shards::log::log_create::LOG_DIRS;

use super::ReplicaManager;
use crate::util::now_ms;

/// How often a quiescing caller looks again; writes take microseconds to
/// milliseconds.
const QUIESCE_POLL: Duration = Duration::from_millis(1);

impl ReplicaManager {
    /// Starts the partition's writer task if it has staged appends and no
    /// writer runs.
    pub fn schedule_direct_write(self: &Rc<Self>, topic: &str, partition: i32) {
        {
            let mut partitions = self.partitions_mut();
            let Some(p) = partitions.partition_mut(topic, partition) else {
                return;
            };
            if p.direct_writer_running || !p.log.has_staged_writes() {
                return;
            }
            p.direct_writer_running = true;
        }
        let rm = self.clone();
        let topic = topic.to_string();
        glommio::spawn_local(async move { write_staged(&rm, &topic, partition).await }).detach();
    }

    /// Fences appends to the partitions `filter` selects and waits until
    /// none of them has appends left to write, for at most `timeout`. The
    /// caller acts, then calls `unfence_appends` with the same filter.
    pub async fn quiesce_direct_writes(
        &self,
        filter: impl Fn(&str, i32) -> bool + Clone,
        timeout: Duration,
    ) {
        self.partitions_mut()
            .set_appends_fenced(filter.clone(), true);
        let deadline = std::time::Instant::now() + timeout;
        while self.partitions().any_staged_writes(filter.clone()) {
            if std::time::Instant::now() >= deadline {
                log::warn!("direct writes still pending after {timeout:?}; going ahead");
                return;
            }
            glommio::timer::sleep(QUIESCE_POLL).await;
        }
    }

    /// Lifts the fence; the appends parked behind it go in now.
    pub fn unfence_appends(self: &Rc<Self>, filter: impl Fn(&str, i32) -> bool) {
        self.partitions_mut().set_appends_fenced(&filter, false);
        self.run_parked_appends(filter);
    }
}

/// Writes the partition's staged appends until none are left; a roll's new
/// segment is made on the `log-dirs` thread first (in order with the
/// partition's directory creation and deletion), the appends staying
/// staged meanwhile.
async fn write_staged(rm: &Rc<ReplicaManager>, topic: &str, partition: i32) {
    loop {
        let (step, log_id) = {
            let mut partitions = rm.partitions_mut();
            let Some(p) = partitions.partition_mut(topic, partition) else {
                return;
            };
            match p.begin_direct_write(now_ms() as i64) {
                Ok(WriteStep::Idle) => {
                    p.direct_writer_running = false;
                    return;
                }
                Ok(step) => (step, p.log.log_id()),
                Err(e) => {
                    drop(partitions);
                    stop_writing(rm, topic, partition, e);
                    return;
                }
            }
        };
        match step {
            WriteStep::Write(mut write) => {
                let result = write.execute().await;
                let mut partitions = rm.partitions_mut();
                match partitions.partition_mut(topic, partition) {
                    Some(p) if p.log.log_id() == write.log_id() => {
                        p.complete_direct_write(write, result);
                    }
                    // Closed or deleted meanwhile: nothing waits on that log.
                    _ => return,
                }
            }
            WriteStep::PrepareSegment(job) => {
                let made = LOG_DIRS
                    .run(move || job.run())
                    .await
                    .unwrap_or_else(|| Err(io::Error::other("the log-dirs thread dropped a job")));
                let mut partitions = rm.partitions_mut();
                match partitions.partition_mut(topic, partition) {
                    Some(p) if p.log.log_id() == log_id => match made {
                        Ok(files) => p.log.segment_prepared(files),
                        Err(e) => {
                            drop(partitions);
                            stop_writing(rm, topic, partition, e);
                            return;
                        }
                    },
                    // Closed or deleted meanwhile: an empty segment at its
                    // log end is what a reopen finds, harmless.
                    _ => return,
                }
            }
            // (Idle returned above; looking again would stop the task.)
            WriteStep::Idle => continue,
        }
        rm.on_high_watermark_advanced(topic, partition);
    }
}

/// Planning a write failed: the partition takes no more appends (the
/// waiting produces see the failure), as Kafka takes a failed log
/// directory offline.
fn stop_writing(rm: &Rc<ReplicaManager>, topic: &str, partition: i32, e: io::Error) {
    log::error!(
        "{topic}-{partition}: planning a direct write failed, the partition takes no more appends: {e}"
    );
    {
        let mut partitions = rm.partitions_mut();
        if let Some(p) = partitions.partition_mut(topic, partition) {
            p.log.fail_staged(e.to_string());
            p.direct_writer_running = false;
        }
    }
    rm.on_high_watermark_advanced(topic, partition);
}
