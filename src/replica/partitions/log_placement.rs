//! Which log dir each of this shard's logs is in (JBOD): a log found at
//! start-up stays where it is, a new one goes where `LogDirs::next_log_dir`
//! says, and a deleted one leaves its dir's count. DescribeLogDirs reads
//! the open logs by dir.

use std::io;
use std::path::PathBuf;

use super::Partitions;
use crate::replica::log_dirs::LogDirs;
use crate::replica::parts::{LogDirPartition, LogDirTopic};

impl Partitions {
    pub fn log_dirs(&self) -> &LogDirs {
        &self.log_dirs
    }

    /// Whether `topic`-`partition` has a log on disk here, open or not.
    pub(super) fn has_log(&self, topic: &str, partition: i32) -> bool {
        self.log_dir_of
            .contains_key(&(topic.to_string(), partition))
    }

    /// The log dir of `topic`-`partition`'s log (its index and path); a
    /// partition with none yet is placed now: in the dir AlterReplicaLogDirs
    /// named for it if that dir is online, else Kafka's `getOrCreateLog`
    /// with `nextLogDirs`. An error when every log dir is offline.
    pub(super) fn place_log(
        &mut self,
        topic: &str,
        partition: i32,
    ) -> io::Result<(usize, PathBuf)> {
        let preferred = self.take_preferred_log_dir(topic, partition);
        let key = (topic.to_string(), partition);
        let index = match self.log_dir_of.get(&key) {
            Some(&i) => i,
            None => {
                let i = match preferred.filter(|&i| !self.log_dirs.is_offline(i)) {
                    Some(i) => {
                        self.log_dirs.log_added(i);
                        i
                    }
                    None => self.log_dirs.next_log_dir().ok_or_else(|| {
                        io::Error::other(format!(
                            "no online log dir to create {topic}-{partition} in (log.dirs {})",
                            self.log_dirs_display()
                        ))
                    })?,
                };
                self.log_dir_of.insert(key, i);
                i
            }
        };
        Ok((index, self.log_dirs.path(index).to_path_buf()))
    }

    /// The log dir index of an open partition's log.
    pub(super) fn log_dir_index(&self, topic: &str, partition: i32) -> usize {
        *self
            .log_dir_of
            .get(&(topic.to_string(), partition))
            .expect("an open log was placed in a log dir")
    }

    /// `topic`-`partition`'s log was deleted (StopReplica with delete, topic
    /// deletion): its dir counts one log fewer.
    pub(super) fn log_deleted(&mut self, topic: &str, partition: i32) {
        let index = self
            .log_dir_of
            .remove(&(topic.to_string(), partition))
            .expect("a deleted log was placed in a log dir");
        self.log_dirs.log_deleted(index);
    }

    /// `log.dirs` for messages: the paths, comma-separated.
    pub(super) fn log_dirs_display(&self) -> String {
        let paths: Vec<String> = self
            .log_dirs
            .paths()
            .map(|p| p.display().to_string())
            .collect();
        paths.join(",")
    }

    /// The names of the topics with partitions open here.
    pub fn topic_names(&self) -> Vec<String> {
        self.topics.keys().cloned().collect()
    }

    /// DescribeLogDirs (Kafka's `ReplicaManager.describeLogDirs`) for
    /// `topic`'s open logs: one entry per log dir holding any of them,
    /// listing those `wanted` (an entry may list none, as Kafka's does).
    /// A current log's offset lag is how far its end trails the high
    /// watermark; there are no future logs yet.
    pub fn describe_log_dirs(&self, topic: &str, wanted: impl Fn(i32) -> bool) -> Vec<LogDirTopic> {
        let Some(parts) = self.topics.get(topic) else {
            return Vec::new();
        };
        let mut by_dir: Vec<LogDirTopic> = Vec::new();
        for (&partition, p) in parts {
            let log_dir_index = self.log_dir_index(topic, partition);
            let at = match by_dir.iter().position(|t| t.log_dir_index == log_dir_index) {
                Some(at) => at,
                None => {
                    by_dir.push(LogDirTopic {
                        log_dir_index,
                        topic: topic.to_string(),
                        partitions: Vec::new(),
                    });
                    by_dir.len() - 1
                }
            };
            if wanted(partition) {
                by_dir[at].partitions.push(LogDirPartition {
                    partition,
                    size_bytes: p.log.size_bytes(),
                    offset_lag: (p.high_watermark() - p.log.log_end_offset()).max(0),
                    is_future: false,
                });
            }
        }
        self.describe_future_logs(topic, &wanted, &mut by_dir);
        by_dir
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use kshard_shards::log::config::IoMode;

    use super::*;
    use crate::metadata::checkpoints::StartupLog;
    use crate::replica::partition::follower::test_support::{temp_dir, topic_t};

    const NOW_MS: i64 = 1_700_000_000_000;

    #[test]
    fn logs_are_placed_evenly_kept_where_found_and_uncounted_when_deleted() {
        let root = temp_dir("log-placement");
        let (a, b) = (root.join("a"), root.join("b"));
        // t-7 is an earlier run's log in b.
        std::fs::create_dir_all(b.join("t-7")).unwrap();
        let (log_dirs, locations) = LogDirs::load(&[a.clone(), b.clone()]).unwrap();
        let log_dirs = Arc::new(log_dirs);
        let startup: crate::metadata::checkpoints::StartupCheckpoints = locations
            .into_iter()
            .map(|(key, log_dir_index)| {
                let log = StartupLog {
                    log_dir_index,
                    ..Default::default()
                };
                (key, log)
            })
            .collect();
        let mut parts = Partitions::new(log_dirs.clone(), startup, 86_400_000, IoMode::Buffered);
        let topic = topic_t();
        let jobs = parts.new_log_jobs(&topic, &[0, 1, 7]);
        let dirs: HashMap<i32, PathBuf> =
            jobs.iter().map(|j| (j.partition, j.dir.clone())).collect();
        assert_eq!(dirs.len(), 2, "t-7 exists: not made again");
        assert_eq!(dirs[&0], a.join("t-0"), "a holds none, b one");
        assert_eq!(dirs[&1], a.join("t-1"), "a tie goes to the first dir");
        parts
            .open_partitions(&topic, &[0, 1, 2, 7], NOW_MS, &mut Default::default())
            .unwrap();
        assert!(
            b.join("t-2").is_dir(),
            "placed on open, without a prepared log"
        );
        assert!(b.join("t-7").join("00000000000000000000.log").exists());
        assert_eq!(
            (log_dirs.partition_count(0), log_dirs.partition_count(1)),
            (2, 2)
        );

        let described = parts.describe_log_dirs("t", |p| p != 1);
        let mut listed: Vec<(usize, Vec<i32>)> = described
            .iter()
            .map(|t| {
                let mut ps: Vec<i32> = t.partitions.iter().map(|p| p.partition).collect();
                ps.sort();
                (t.log_dir_index, ps)
            })
            .collect();
        listed.sort();
        assert_eq!(
            listed,
            vec![(0, vec![0]), (1, vec![2, 7])],
            "t-1 not asked for"
        );

        let entries = parts.checkpoints();
        let in_b: Vec<i32> = entries
            .iter()
            .filter(|e| e.log_dir_index == 1)
            .map(|e| e.partition)
            .collect();
        assert_eq!(in_b.len(), 2, "{entries:?}");
        drop(parts.delete_topic("t"));
        assert_eq!(
            (log_dirs.partition_count(0), log_dirs.partition_count(1)),
            (0, 0)
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn an_offline_log_dir_refuses_appends_and_takes_no_new_logs() {
        use crate::protocol::errors;
        use crate::replica::partition::follower::test_support::batch;
        use crate::replica::parts::{AppendOrigin, ProducePart};

        let root = temp_dir("log-dir-offline");
        let (a, b) = (root.join("a"), root.join("b"));
        let (log_dirs, _) = LogDirs::load(&[a.clone(), b.clone()]).unwrap();
        let log_dirs = Arc::new(log_dirs);
        let mut parts = Partitions::new(
            log_dirs.clone(),
            HashMap::new(),
            86_400_000,
            IoMode::Buffered,
        );
        let topic = topic_t();
        parts
            .open_partitions(&topic, &[0, 1], NOW_MS, &mut Default::default())
            .unwrap();
        let produce = |p: i32| ProducePart {
            topic: "t".into(),
            partition: p,
            records: bytes::Bytes::from(batch(0, 2, 0)),
            txn_verification: crate::replica::TxnVerification::Off,
        };
        assert_eq!(
            parts
                .append(&produce(0), NOW_MS, AppendOrigin::Client)
                .error_code,
            errors::NONE
        );
        // t-0 went to a, t-1 to b; a fails.
        assert!(log_dirs.mark_offline(0, "No space left on device"));
        let refused = parts.append(&produce(0), NOW_MS, AppendOrigin::Client);
        assert_eq!(refused.error_code, errors::KAFKA_STORAGE_ERROR);
        assert_eq!(
            parts
                .append(&produce(1), NOW_MS, AppendOrigin::Client)
                .error_code,
            errors::NONE
        );
        // New logs all go to the dir still online.
        let jobs = parts.new_log_jobs(&topic, &[2, 3]);
        assert!(
            jobs.iter().all(|j| j.dir.starts_with(&b)),
            "{:?}",
            jobs.iter().map(|j| &j.dir).collect::<Vec<_>>()
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
