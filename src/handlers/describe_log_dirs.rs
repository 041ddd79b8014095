//! DescribeLogDirs (API 35, v0-v4), as `kafka-log-dirs --describe` reads
//! it (Kafka's `KafkaApis.handleDescribeLogDirsRequest` and
//! `ReplicaManager.describeLogDirs`): every log dir, in `log.dirs` order,
//! with the size and offset lag of the logs asked for (all when `topics` is
//! null) and, from v4, the volume's total and usable bytes. Every shard
//! reports its own open logs; the entries are merged here. Needs DESCRIBE
//! on the cluster.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kshard_shards::mailbox::LocalBoxFuture;

use super::{respond, HandlerResult, KafkaApis};
use crate::protocol::{decode_body, errors, Request};
use crate::replica::{LogDirTopic, LogDirsFilter};
use crate::router::{join_all, ShardRequest, ShardResponse};
use crate::security::authorizer::AclOperation;

/// Partitions by topic, by log dir: what the shards reported, merged.
type LogDirEntries = Vec<BTreeMap<String, Vec<DescribeLogDirsPartition>>>;

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: DescribeLogDirsRequest = decode_body(req)?;
    if !ctx.authorize_cluster(req, AclOperation::Describe) {
        // No dirs; the error code is on the wire from v3 only.
        let denied = DescribeLogDirsResponse::default()
            .with_error_code(errors::CLUSTER_AUTHORIZATION_FAILED.code())
            .with_results(Vec::new());
        return respond(req, &denied);
    }
    let filter: LogDirsFilter = r.topics.map(|topics| {
        let mut wanted: HashMap<String, HashSet<i32>> = HashMap::new();
        for t in topics {
            wanted
                .entry(t.topic.0.to_string())
                .or_default()
                .extend(t.partitions);
        }
        Arc::new(wanted)
    });
    let replies: Vec<LocalBoxFuture<_>> = (0..ctx.nr_shards)
        .map(|shard| {
            let router = ctx.router.clone();
            let filter = filter.clone();
            Box::pin(async move {
                router
                    .run_on(shard, ShardRequest::DescribeLogDirs { filter })
                    .await
            }) as LocalBoxFuture<_>
        })
        .collect();
    let mut entries: LogDirEntries = vec![BTreeMap::new(); ctx.log_dirs.len()];
    for (shard, reply) in join_all(replies).await.into_iter().enumerate() {
        match reply {
            Ok(ShardResponse::LogDirs(topics)) => merge(&mut entries, topics),
            // Only a shard shutting down does not answer.
            _ => log::warn!("DescribeLogDirs: shard {shard} did not answer"),
        }
    }
    let results = entries
        .into_iter()
        .enumerate()
        .map(|(i, topics)| {
            if ctx.log_dirs.is_offline(i) {
                // Kafka lists an offline dir with its error only.
                return DescribeLogDirsResult::default()
                    .with_log_dir(StrBytes::from_string(
                        ctx.log_dirs.path(i).display().to_string(),
                    ))
                    .with_error_code(errors::KAFKA_STORAGE_ERROR.code());
            }
            log_dir_result(ctx.log_dirs.path(i), topics)
        })
        .collect();
    respond(
        req,
        &DescribeLogDirsResponse::default()
            .with_error_code(errors::NONE.code())
            .with_results(results),
    )
}

fn merge(entries: &mut LogDirEntries, topics: Vec<LogDirTopic>) {
    for t in topics {
        let partitions = entries[t.log_dir_index].entry(t.topic).or_default();
        partitions.extend(t.partitions.into_iter().map(|p| {
            DescribeLogDirsPartition::default()
                .with_partition_index(p.partition)
                .with_partition_size(i64::try_from(p.size_bytes).unwrap_or(i64::MAX))
                .with_offset_lag(p.offset_lag)
                .with_is_future_key(p.is_future)
        }));
    }
}

/// One log dir's entry; a volume that cannot be read answers as Kafka's
/// does when `Files.getFileStore` fails (the error, no topics).
fn log_dir_result(
    dir: &Path,
    topics: BTreeMap<String, Vec<DescribeLogDirsPartition>>,
) -> DescribeLogDirsResult {
    let result = DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(dir.display().to_string()));
    let (total_bytes, usable_bytes) = match volume_space_bytes(dir) {
        Ok(space) => space,
        Err(e) => {
            log::error!(
                "Error while describing replica in dir {}: {e}",
                dir.display()
            );
            return result.with_error_code(errors::UNKNOWN_SERVER_ERROR.code());
        }
    };
    let topics = topics
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            DescribeLogDirsTopic::default()
                .with_name(TopicName(StrBytes::from_string(name)))
                .with_partitions(partitions)
        })
        .collect();
    result
        .with_error_code(errors::NONE.code())
        .with_topics(topics)
        .with_total_bytes(total_bytes)
        .with_usable_bytes(usable_bytes)
}

/// The total and usable bytes of the volume holding `dir` (Java's
/// `FileStore.getTotalSpace` and `getUsableSpace`: what an unprivileged
/// writer may use).
fn volume_space_bytes(dir: &Path) -> std::io::Result<(i64, i64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `st` is a valid out-pointer.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let bytes =
        |blocks: u64| i64::try_from(blocks.saturating_mul(st.f_frsize as u64)).unwrap_or(i64::MAX);
    Ok((bytes(st.f_blocks as u64), bytes(st.f_bavail as u64)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replica::LogDirPartition;

    fn topic(dir: usize, name: &str, parts: &[i32]) -> LogDirTopic {
        LogDirTopic {
            log_dir_index: dir,
            topic: name.into(),
            partitions: parts
                .iter()
                .map(|&partition| LogDirPartition {
                    partition,
                    size_bytes: 100 + partition as u64,
                    offset_lag: 0,
                    is_future: false,
                })
                .collect(),
        }
    }

    #[test]
    fn shards_entries_merge_by_dir_and_topic() {
        let mut entries: LogDirEntries = vec![BTreeMap::new(); 2];
        merge(&mut entries, vec![topic(0, "t", &[2]), topic(1, "t", &[1])]);
        merge(&mut entries, vec![topic(0, "t", &[0]), topic(1, "u", &[])]);
        let dir = std::env::temp_dir();
        let a = log_dir_result(&dir, entries[0].clone());
        assert_eq!(a.error_code, 0);
        assert!(a.total_bytes > 0 && a.usable_bytes >= 0, "{a:?}");
        assert_eq!(a.topics.len(), 1);
        let sizes: Vec<(i32, i64)> = a.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.partition_size))
            .collect();
        assert_eq!(sizes, vec![(0, 100), (2, 102)]);
        let b = log_dir_result(&dir, entries[1].clone());
        let names: Vec<&str> = b.topics.iter().map(|t| &*t.name.0).collect();
        assert_eq!(
            names,
            vec!["t", "u"],
            "a topic with no wanted partition is listed, as Kafka does"
        );
        assert!(b.topics[1].partitions.is_empty());
        let missing = log_dir_result(Path::new("/nonexistent/kshard"), BTreeMap::new());
        assert_eq!(missing.error_code, errors::UNKNOWN_SERVER_ERROR.code());
    }
}
