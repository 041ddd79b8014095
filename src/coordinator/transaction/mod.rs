//! The transaction coordinator (Kafka 3.9's TransactionCoordinator,
//! TransactionStateManager and TransactionMarkerChannelManager). Like the
//! group coordinator it runs on the controller shard, which owns every
//! `__transaction_state` partition (`kshard_shards::placement::shard_for`),
//! and it coordinates the transactional ids of the partitions this broker
//! leads, loading each on becoming its leader.
//!
//! - `txn_log_codec`: the `__transaction_state` key/value schemas.
//! - `transaction_metadata`: one id's state machine (Kafka's TransactionMetadata).
//! - `transaction_state_manager`: the loaded ids per partition.
//! - `transaction_coordinator`: InitProducerId, AddPartitionsToTxn,
//!   EndTxn, timeouts, and the transaction-log writes.
//! - `end_transaction_v2`: EndTxn under transaction version 2 (an epoch
//!   bump at every end).
//! - `marker_channel`: WriteTxnMarkers to the partition leaders.
//! - `runtime`: topic creation, loading with leadership, the ticker.
//! - `describe`: DescribeTransactions and ListTransactions.

pub mod describe;
mod end_transaction_v2;
pub mod marker_channel;
pub mod runtime;
pub mod transaction_coordinator;
pub mod transaction_metadata;
pub mod transaction_state_manager;
pub mod txn_log_codec;

pub use transaction_coordinator::TransactionCoordinator;

use crate::config::BrokerConfig;

pub const TRANSACTION_STATE_TOPIC: &str = kshard_shards::placement::TRANSACTION_STATE_TOPIC;

/// Kafka's TransactionConfig.
#[derive(Clone, Debug)]
pub struct TxnConfig {
    pub transactional_id_expiration_ms: i64,
    pub transaction_max_timeout_ms: i32,
    /// `transaction.state.log.num.partitions`, until the topic exists.
    pub num_partitions: i32,
    pub abort_timed_out_interval_ms: u64,
    pub remove_expired_interval_ms: u64,
    /// How long a transaction-log write or a marker write may wait for
    /// replication (Kafka's `request.timeout.ms`).
    pub request_timeout_ms: u64,
}

impl TxnConfig {
    pub fn from_broker(c: &BrokerConfig) -> Self {
        TxnConfig {
            transactional_id_expiration_ms: i64::from(c.transactional_id_expiration_ms),
            transaction_max_timeout_ms: c.transaction_max_timeout_ms,
            num_partitions: c.transaction_state_log_num_partitions.max(1),
            abort_timed_out_interval_ms: c
                .transaction_abort_timed_out_transaction_cleanup_interval_ms
                .max(1) as u64,
            remove_expired_interval_ms: c
                .transaction_remove_expired_transaction_cleanup_interval_ms
                .max(1) as u64,
            request_timeout_ms: c.request_timeout_ms.max(1) as u64,
        }
    }
}
