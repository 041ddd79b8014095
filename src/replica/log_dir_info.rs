//! DescribeLogDirs on one shard: its open logs by log dir, gathered a topic
//! at a time so that many partitions never hold the shard for long.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::parts::LogDirTopic;
use super::ReplicaManager;

/// Partitions asked for by topic; `None` asks for every log.
pub type LogDirsFilter = Option<Arc<HashMap<String, HashSet<i32>>>>;

impl ReplicaManager {
    /// Kafka's `describeLogDirs` for this shard's open logs (`filter` as
    /// the request's topics); the caller merges the shards' entries.
    pub async fn describe_log_dirs(&self, filter: LogDirsFilter) -> Vec<LogDirTopic> {
        let names = self.partitions().topic_names();
        let mut out = Vec::new();
        for name in names {
            let wanted = |p: i32| {
                filter
                    .as_ref()
                    .is_none_or(|f| f.get(&name).is_some_and(|ps| ps.contains(&p)))
            };
            out.extend(self.partitions().describe_log_dirs(&name, wanted));
            glommio::yield_if_needed().await;
        }
        out
    }
}
