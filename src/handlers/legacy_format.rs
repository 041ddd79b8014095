//! Message formats v0/v1 in the Produce and Fetch handlers: Produce v0-v2
//! message sets are converted to a magic-2 batch before the append (Kafka's
//! `LogValidator` conversion), and Fetch v0-v3 answers are down-converted
//! from the stored magic-2 batches as `KafkaApis.maybeConvertFetchedData`
//! does. The conversions themselves are in `kshard_shards::log::legacy`.
//!
//! Down-converted data cannot go by sendfile: each partition's read is
//! copied into memory (bounded by the fetch's byte limits) and converted.

use bytes::Bytes;
use kshard_shards::log::legacy::down_convert::down_convert;
use kshard_shards::log::legacy::up_convert::{up_convert, UpConverted};
use kshard_shards::log::legacy::RECORD_OVERHEAD_V0;
use kshard_shards::log::{read_slice_bytes, FileSlice};

use crate::handlers::KafkaApis;
use crate::metadata::metadata_cache::TopicInfo;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::protocol::fetch_encoder::{FetchTopicData, RecordsData};
use crate::replica::partition::validation_config_of;
use crate::replica::FetchPartResult;
use crate::util::now_ms;

/// Kafka's UNSUPPORTED_COMPRESSION_TYPE.
const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;

/// A Produce v0-v2 partition's data as the append path takes it: a magic
/// 0/1 message set becomes one magic-2 batch; magic-2 data is kept as
/// sent; None when there is not one whole entry (Kafka appends nothing and
/// answers NONE, base offset -1). Err: Kafka's error code.
pub fn produce_records(
    topic: &TopicInfo,
    partition: i32,
    records: &Bytes,
) -> Result<Option<Bytes>, ErrorCode> {
    let cfg = validation_config_of(&topic.config);
    let topic_partition = format!("{}-{partition}", topic.name);
    match up_convert(records, &cfg, now_ms() as i64, &topic_partition) {
        Ok(UpConverted::Batch(batch)) => Ok(Some(Bytes::from(batch))),
        Ok(UpConverted::AsSent) => Ok(Some(records.clone())),
        Ok(UpConverted::Nothing) => Ok(None),
        Err(e) => {
            log::debug!("Produce to {topic_partition} refused: {e}");
            Err(ErrorCode::from_wire(e.error_code()))
        }
    }
}

/// Kafka's `ProduceRequest.validateRecords` for v3+: a first entry of magic
/// 0 or 1 is INVALID_RECORD (an entry smaller than a v0 message is left to
/// the batch checks, as Kafka's iterator fails on it first).
pub fn records_error_v3(records: &[u8]) -> Option<ErrorCode> {
    const MAGIC_AT: usize = 16;
    let size = i32::from_be_bytes(records.get(8..12)?.try_into().ok()?);
    let magic = *records.get(MAGIC_AT)?;
    (size >= RECORD_OVERHEAD_V0 as i32 && magic < 2).then_some(errors::INVALID_RECORD)
}

/// What a Fetch v0-v3 partition answers in place of its magic-2 records.
pub enum Converted {
    /// No log config (unknown topic or partition): as read.
    Unchanged,
    Records(Bytes),
    /// Kafka's `partitionResponse(tp, error)`: no offsets, no records.
    Error(i16),
}

/// One partition read for Fetch v0-v3 (`to_magic` 0 for v0-v1, 1 for v2-v3).
pub async fn down_convert_partition(
    ctx: &KafkaApis,
    topic: &str,
    partition: i32,
    fetch_offset: i64,
    result: &FetchPartResult,
    to_magic: u8,
) -> Converted {
    let image = ctx.metadata.image();
    let Some(info) = image.topic(topic) else {
        return Converted::Unchanged;
    };
    if partition < 0 || partition as usize >= info.partitions.len() {
        return Converted::Unchanged;
    }
    if info.config.compression_type == "zstd" {
        return Converted::Error(UNSUPPORTED_COMPRESSION_TYPE);
    }
    if !info.config.message_downconversion_enable {
        return Converted::Error(errors::UNSUPPORTED_VERSION.code());
    }
    let raw = match &result.slice {
        None => Vec::new(),
        Some(slice) => match slice_bytes(ctx, slice).await {
            Ok(raw) => raw,
            Err(e) => {
                log::error!("Fetch of {topic}-{partition}: reading for down-conversion: {e}");
                return Converted::Error(errors::NOT_LEADER_OR_FOLLOWER.code());
            }
        },
    };
    match down_convert(&raw, result.read_size as usize, to_magic, fetch_offset) {
        Ok(converted) => Converted::Records(Bytes::from(converted)),
        Err(_) => Converted::Error(UNSUPPORTED_COMPRESSION_TYPE),
    }
}

/// A slice's bytes in memory: from the tail cache, the shard's read cache
/// (direct mode) or the page cache.
async fn slice_bytes(ctx: &KafkaApis, slice: &FileSlice) -> std::io::Result<Vec<u8>> {
    if slice.cached.is_some() || !slice.direct {
        return read_slice_bytes(slice);
    }
    let mut out = Vec::with_capacity(slice.len as usize);
    for pos in kshard_shards::log::read_cache::chunk_starts(slice) {
        let data = ctx
            .replica_manager
            .read_cache
            .read_chunk(slice, pos)
            .await?;
        out.extend_from_slice(&data);
    }
    Ok(out)
}

/// Puts the converted records into the response, whose partitions are the
/// request's in order (Fetch v0-v3 have no sessions).
pub fn apply(topics: &mut [FetchTopicData], converted: Vec<Converted>) {
    let partitions = topics.iter_mut().flat_map(|t| t.partitions.iter_mut());
    for (p, c) in partitions.zip(converted) {
        // Clients of Fetch v0-v5 may not know KAFKA_STORAGE_ERROR.
        if p.error_code == errors::KAFKA_STORAGE_ERROR {
            p.error_code = errors::NOT_LEADER_OR_FOLLOWER.code();
        }
        match c {
            Converted::Unchanged => {}
            Converted::Records(b) if b.is_empty() => p.records = RecordsData::Empty,
            Converted::Records(b) => p.records = RecordsData::Bytes(b),
            Converted::Error(code) => {
                p.error_code = code;
                p.high_watermark = -1;
                p.last_stable_offset = -1;
                p.log_start_offset = -1;
                p.records = RecordsData::Null;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::fetch_encoder::FetchPartitionData;
    use kshard_shards::log::legacy::write_message;
    use kshard_shards::log::records::BatchBuilder;
    use uuid::Uuid;

    #[test]
    fn produce_v3_refuses_magic_0_and_1_only() {
        for magic in [0u8, 1] {
            let mut m = Vec::new();
            write_message(&mut m, 0, magic, 0, 5, Some(b"k"), Some(b"v"));
            assert_eq!(records_error_v3(&m), Some(errors::INVALID_RECORD));
            // Even cut short: Kafka finds no magic-2 batch either.
            assert_eq!(records_error_v3(&m[..20]), Some(errors::INVALID_RECORD));
        }
        let batch = BatchBuilder::new(0).add(1, None, Some(b"v"), &[]).build();
        assert_eq!(records_error_v3(&batch), None);
        assert_eq!(records_error_v3(&[]), None);
        assert_eq!(records_error_v3(&[0; 16]), None);
    }

    #[test]
    fn conversion_errors_clear_the_partition() {
        let part = |partition, error_code| FetchPartitionData {
            partition,
            error_code,
            high_watermark: 7,
            last_stable_offset: 7,
            log_start_offset: 0,
            diverging_epoch: None,
            current_leader: None,
            aborted_transactions: None,
            records: RecordsData::Empty,
        };
        let mut topics = vec![FetchTopicData {
            name: "t".into(),
            topic_id: Uuid::nil(),
            partitions: vec![
                part(0, 0),
                part(1, 0),
                part(2, errors::KAFKA_STORAGE_ERROR.code()),
            ],
        }];
        let converted = vec![
            Converted::Records(Bytes::from_static(b"x")),
            Converted::Error(UNSUPPORTED_COMPRESSION_TYPE),
            Converted::Unchanged,
        ];
        apply(&mut topics, converted);
        let p = &topics[0].partitions;
        assert!(matches!(&p[0].records, RecordsData::Bytes(b) if &b[..] == b"x"));
        assert_eq!((p[1].error_code, p[1].high_watermark), (76, -1));
        assert!(matches!(p[1].records, RecordsData::Null));
        assert_eq!(p[2].error_code, errors::NOT_LEADER_OR_FOLLOWER);
    }
}
