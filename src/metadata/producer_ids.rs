//! Kafka's ZooKeeper-mode `ProducerIdManager`: brokers reserve blocks of
//! producer ids in `/latest_producer_id_block` by a conditional write, so
//! ids are unique across the cluster (and across restarts of one broker).

use super::{MetadataStore, StoreError};

const PRODUCER_ID_BLOCK_PATH: &str = "/latest_producer_id_block";
/// Kafka's `ProducerIdsBlock` size in ZooKeeper mode.
const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// Reserves the next block of producer ids in `/latest_producer_id_block`
/// by a conditional write, retrying when another broker got there first.
/// Returns (block_start, block_end), inclusive.
pub fn reserve_producer_id_block(
    store: &mut dyn MetadataStore,
    broker_id: i32,
) -> Result<(i64, i64), StoreError> {
    loop {
        let (start, version) = match store.get(PRODUCER_ID_BLOCK_PATH) {
            Ok((data, stat)) => (
                parse_block_end(&data).map(|end| end + 1).unwrap_or(0),
                Some(stat.version),
            ),
            Err(StoreError::NoNode(_)) => (0, None),
            Err(e) => return Err(e),
        };
        let end = start + PRODUCER_ID_BLOCK_SIZE - 1;
        let json = format!(
            "{{\"version\":1,\"broker\":{broker_id},\"block_start\":\"{start}\",\"block_end\":\"{end}\"}}"
        );
        let r = match version {
            Some(v) => store
                .set(PRODUCER_ID_BLOCK_PATH, json.as_bytes(), v)
                .map(|_| ()),
            None => store
                .create(PRODUCER_ID_BLOCK_PATH, json.as_bytes(), false, false)
                .map(|_| ()),
        };
        match r {
            Ok(()) => return Ok((start, end)),
            Err(StoreError::BadVersion(_)) | Err(StoreError::NodeExists(_)) => continue,
            Err(e) => return Err(e),
        }
    }
}

fn parse_block_end(data: &[u8]) -> Option<i64> {
    let v: serde_json::Value = serde_json::from_slice(data).ok()?;
    v.get("block_end")?.as_str()?.parse().ok()
}
