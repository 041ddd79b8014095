//! What one fetched partition does to the local follower log (Kafka's
//! `processPartitionData`, `truncateOnFetchResponse`,
//! `fetchOffsetAndTruncate`). Synchronous, on the owning shard, on a
//! `&mut Partition`: unit-tested without sockets.

use crate::protocol::errors;
use crate::replica::partition::follower::truncation_offset;
use crate::replica::partition::Partition;

use super::protocol::{FetchedPartition, PartitionFetchRequest};
use crate::protocol::errors::ErrorCode;

/// The fetch fields taken from the local log.
pub fn fetch_request_for(p: &Partition) -> PartitionFetchRequest {
    PartitionFetchRequest {
        topic: p.topic.clone(),
        partition: p.partition,
        topic_id: p.topic_id,
        current_leader_epoch: p.leader_epoch,
        fetch_offset: p.log.log_end_offset(),
        last_fetched_epoch: p.last_fetched_epoch(),
        log_start_offset: p.log.log_start_offset(),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchOutcome {
    /// Records appended (maybe none), high watermark and log start offset
    /// followed, truncated if the leader reported a divergence.
    Applied {
        appended_bytes: usize,
        high_watermark_changed: bool,
        truncated_to: Option<i64>,
    },
    /// The leader has no data at the fetch offset: ask it for its log
    /// end and start offsets, then `apply_out_of_range`.
    OffsetOutOfRange,
    /// Back off and fetch again (a leader error or a failed append).
    Retry {
        error_code: ErrorCode,
        message: String,
    },
}

/// Applies one partition of a fetch response (the request asked for it at
/// `fetch_offset`, which must still be the log end offset).
pub fn apply_fetched_partition(
    p: &mut Partition,
    fetch_offset: i64,
    data: &FetchedPartition,
    now_ms: i64,
) -> FetchOutcome {
    debug_assert_eq!(p.log.log_end_offset(), fetch_offset);
    if p.log_dir_offline() {
        return FetchOutcome::Retry {
            error_code: errors::KAFKA_STORAGE_ERROR,
            message: "its log dir is offline".into(),
        };
    }
    match data.error_code {
        errors::NONE => {}
        errors::OFFSET_OUT_OF_RANGE => return FetchOutcome::OffsetOutOfRange,
        code => {
            return FetchOutcome::Retry {
                error_code: code,
                message: format!("leader error {code}"),
            }
        }
    }
    let mut appended_bytes = 0;
    if let Some(records) = data.records.as_deref().filter(|r| !r.is_empty()) {
        match p.append_records_as_follower(records, now_ms) {
            Ok(Some(info)) => appended_bytes = info.valid_bytes,
            Ok(None) => {}
            Err(e) => {
                return FetchOutcome::Retry {
                    error_code: e.error_code,
                    message: e.message,
                }
            }
        }
    }
    let old_hw = p.high_watermark();
    if data.high_watermark >= 0 {
        let hw = data.high_watermark.min(p.log.log_end_offset());
        p.set_high_watermark(hw);
    }
    if data.log_start_offset >= 0 {
        if let Err(e) = p.maybe_increment_log_start_offset(data.log_start_offset) {
            return FetchOutcome::Retry {
                error_code: errors::KAFKA_STORAGE_ERROR,
                message: format!(
                    "raising the log start offset to {}: {e}",
                    data.log_start_offset
                ),
            };
        }
    }
    let mut truncated_to = None;
    if let Some(diverging) = data.diverging_epoch {
        let leo = p.log.log_end_offset();
        let local = p.leader_epoch_cache.end_offset_for(diverging.0, leo);
        let target = truncation_offset(local, leo, fetch_offset, diverging);
        match p.truncate_to(target, now_ms) {
            Ok(true) => truncated_to = Some(p.log.log_end_offset()),
            Ok(false) => {}
            Err(e) => {
                return FetchOutcome::Retry {
                    error_code: errors::KAFKA_STORAGE_ERROR,
                    message: format!("truncating to {target}: {e}"),
                }
            }
        }
    }
    FetchOutcome::Applied {
        appended_bytes,
        high_watermark_changed: p.high_watermark() != old_hw,
        truncated_to,
    }
}

/// Kafka's `fetchOffsetAndTruncate` once the leader's latest and earliest
/// offsets are known: a leader behind this log (unclean election) makes it
/// truncate to the leader's end; a leader whose log starts beyond this
/// log's end makes it start over at the leader's start. Otherwise the log
/// stays and fetching resumes at its end. Returns the new log end offset.
pub fn apply_out_of_range(
    p: &mut Partition,
    leader_end_offset: i64,
    leader_start_offset: i64,
    now_ms: i64,
) -> std::io::Result<i64> {
    let leo = p.log.log_end_offset();
    if leader_end_offset >= 0 && leader_end_offset < leo {
        log::warn!(
            "{}-{}: resetting the fetch offset from {leo} to the leader's latest offset {leader_end_offset}",
            p.topic,
            p.partition
        );
        p.truncate_to(leader_end_offset, now_ms)?;
    } else if leader_start_offset > leo {
        log::warn!(
            "{}-{}: resetting the fetch offset from {leo} to the leader's start offset {leader_start_offset}",
            p.topic,
            p.partition
        );
        p.truncate_fully_and_start_at(leader_start_offset, now_ms)?;
    }
    Ok(p.log.log_end_offset())
}
