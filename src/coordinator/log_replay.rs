//! Reading a coordinator's log back (Kafka's doLoadGroupsAndOffsets and
//! loadTransactionsForTxnTopicPartition share this loop): one read of the
//! local partition at a time, each batch decompressed, each keyed record
//! handed to the caller with its batch's header; control batches (the
//! transaction markers) are handed over whole.

use kshard_shards::log::batch::{BatchHeader, BatchIter, Compression, RECORD_BATCH_OVERHEAD};
use kshard_shards::log::read_slice_bytes;
use kshard_shards::log::records::{decompress, RecordIter};

use crate::protocol::errors;
use crate::replica::ReplicaManager;

/// Largest decompressed batch accepted while replaying.
const MAX_REPLAY_BATCH_BYTES: usize = 64 << 20;
const READ_CHUNK_BYTES: u32 = 4 << 20;

/// What a replay hands its caller.
pub enum Replayed<'a> {
    Record {
        header: &'a BatchHeader,
        key: &'a [u8],
        value: Option<&'a [u8]>,
    },
    /// A control batch, whole.
    Control {
        header: &'a BatchHeader,
        batch: &'a [u8],
    },
}

/// Where a chunk's replay ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayProgress {
    /// The offset after the last batch read; the caller's offset if none.
    pub next_offset: i64,
    /// Keyed records handed over.
    pub records: usize,
}

/// Replays `topic`-`partition` from its log start to its log end, a read
/// at a time, yielding between reads so the shard keeps serving; before
/// each read `still_loading` says whether to go on (the partition may be
/// unloaded or re-elected meanwhile). Returns the records handed to
/// `apply`, None if the load was abandoned.
pub async fn replay_partition(
    replica_manager: &ReplicaManager,
    topic: &str,
    partition: i32,
    mut still_loading: impl FnMut() -> bool,
    mut apply: impl FnMut(Replayed<'_>),
) -> Option<usize> {
    let mut offset = replica_manager
        .partitions()
        .partition(topic, partition)
        .map_or(-1, |p| p.log.log_start_offset());
    let mut records = 0usize;
    let mut scratch = Vec::new();
    while offset >= 0 {
        glommio::yield_if_needed().await;
        if !still_loading() {
            return None;
        }
        match replay_chunk(
            replica_manager,
            topic,
            partition,
            offset,
            &mut scratch,
            &mut apply,
        ) {
            Ok(p) if p.next_offset > offset => {
                offset = p.next_offset;
                records += p.records;
            }
            Ok(_) => break,
            Err(e) => {
                log::error!("replaying {topic}-{partition} at {offset}: {e}");
                break;
            }
        }
    }
    Some(records)
}

/// Replays the batches of one read of `topic`-`partition` at `offset`.
fn replay_chunk(
    replica_manager: &ReplicaManager,
    topic: &str,
    partition: i32,
    offset: i64,
    scratch: &mut Vec<u8>,
    mut f: impl FnMut(Replayed<'_>),
) -> Result<ReplayProgress, String> {
    let mut progress = ReplayProgress {
        next_offset: offset,
        records: 0,
    };
    let bytes = {
        let partitions = replica_manager.partitions();
        let Some(part) = partitions.partition(topic, partition) else {
            return Ok(progress);
        };
        let read = part.read_for_follower(offset, READ_CHUNK_BYTES, true);
        if read.error_code != errors::NONE {
            return Err(format!("error {}", read.error_code));
        }
        let Some(slice) = read.slice else {
            return Ok(progress);
        };
        read_slice_bytes(&slice).map_err(|e| e.to_string())?
    };
    for item in BatchIter::new(&bytes) {
        let Ok((_, header, batch)) = item else {
            break;
        };
        progress.next_offset = header.last_offset() + 1;
        if header.last_offset() < offset {
            continue;
        }
        if header.is_control() {
            f(Replayed::Control {
                header: &header,
                batch,
            });
            continue;
        }
        let codec = Compression::from_attributes(header.attributes).unwrap_or(Compression::None);
        let body = &batch[RECORD_BATCH_OVERHEAD.min(batch.len())..];
        let records: &[u8] = if codec == Compression::None {
            body
        } else {
            if let Err(e) = decompress(codec, body, scratch, MAX_REPLAY_BATCH_BYTES) {
                log::error!(
                    "replaying {topic}-{partition}: batch at {}: {e}",
                    header.base_offset
                );
                continue;
            }
            scratch
        };
        for r in RecordIter::new(records) {
            let Ok(r) = r else {
                break;
            };
            let Some(key) = r.key else {
                continue;
            };
            progress.records += 1;
            f(Replayed::Record {
                header: &header,
                key,
                value: r.value,
            });
        }
    }
    Ok(progress)
}
