//! The replica layer, as Kafka's `kafka.server.ReplicaManager` and
//! `kafka.cluster.Partition`: one `ReplicaManager` per shard owns the
//! partitions that shard hosts (`Partitions`), both purgatories
//! (`DelayedProduce`, `DelayedFetch`), the follower fetchers, the direct-mode
//! writers, the roll fsyncs and the AlterPartition sender.
//!
//! A partition is touched only by its owning shard; everything here runs on
//! that shard. It imports the cluster layer (to reach the controller) and
//! below, never the router or anything above it.

mod alter_log_dirs;
pub mod alter_partition;
pub mod cleaner_slots;
pub mod delayed_fetch;
pub mod delayed_produce;
mod direct_writer;
pub mod fetcher;
pub mod future_log;
mod leader_epoch_sync;
mod log_create;
mod log_dir_info;
pub mod log_dirs;
mod parked_appends;
pub mod partition;
pub mod partitions;
pub mod parts;
pub mod quota;
mod replica_manager;
mod role_changes;
mod roll_sync;

pub use log_dir_info::LogDirsFilter;
pub use log_dirs::{LogDirs, LogLocations};
pub use partitions::{Partitions, DEFAULT_CLEANER_BACKOFF_MS};
pub use parts::*;
pub use quota::{ReplicaQuota, ReplicationQuotas, UnboundedQuota};
pub use replica_manager::{ReplicaConfig, ReplicaManager};
