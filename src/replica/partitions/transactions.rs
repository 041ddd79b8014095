//! The transactional side of the shard's partitions: KIP-890 verification
//! guards, transaction markers from the coordinator, and the producers a
//! partition knows (DescribeProducers).

use super::{appendable, Partitions};
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::replica::parts::{ActiveProducer, TxnMarkerPart, TxnVerifyPart};

impl Partitions {
    /// KIP-890's first step on each partition a transactional producer
    /// writes: the verification guard it must bring back, None if its
    /// transaction is already under way there.
    pub fn prepare_txn_verification(
        &mut self,
        part: &TxnVerifyPart,
    ) -> Result<Option<u64>, ErrorCode> {
        let absent = self.absent_error();
        let p = appendable(&mut self.topics, &part.topic, part.partition, absent)?;
        p.maybe_start_txn_verification(part)
    }

    /// The producers of a partition this broker leads (DescribeProducers).
    pub fn active_producers(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Vec<ActiveProducer>, ErrorCode> {
        let p = self
            .partition(topic, partition)
            .ok_or_else(|| self.absent_error())?;
        if !p.is_leader {
            return Err(errors::NOT_LEADER_OR_FOLLOWER);
        }
        Ok(p.producer_state
            .active_producers()
            .map(|e| ActiveProducer {
                producer_id: e.producer_id,
                producer_epoch: e.producer_epoch,
                last_sequence: e.last_seq(),
                last_timestamp_ms: e.last_timestamp_ms,
                coordinator_epoch: e.coordinator_epoch,
                current_txn_start_offset: e.current_txn_first_offset.unwrap_or(-1),
            })
            .collect())
    }

    /// A transaction marker from the coordinator (WriteTxnMarkers): the
    /// offset after it, or the partition's error.
    pub fn append_txn_marker(
        &mut self,
        part: &TxnMarkerPart,
        now_ms: i64,
    ) -> Result<i64, ErrorCode> {
        let absent = self.absent_error();
        let partition = appendable(&mut self.topics, &part.topic, part.partition, absent)?;
        match partition.append_txn_marker(&part.marker, &mut self.validator, now_ms) {
            Ok(end_offset) => {
                partition.maybe_increment_high_watermark();
                Ok(end_offset)
            }
            Err(e) => {
                log::info!(
                    "{}-{}: transaction marker of producer {} refused: error {} {}",
                    part.topic,
                    part.partition,
                    part.marker.producer_id,
                    e.error_code,
                    e.message
                );
                Err(e.error_code)
            }
        }
    }
}
