//! kshard: a Kafka-compatible broker, thread-per-core and shared-nothing.
//! This crate is the broker (config, protocol, handlers, replica manager,
//! controller, metadata); `kshard-shards` is the per-core engine under it.

pub mod admin_limits;
pub mod alloc_guard;
pub mod auto_topic_creation;
pub mod cluster;
pub mod config;
pub mod controller;
pub mod coordinator;
pub mod delayed_fetch;
pub mod delayed_produce;
mod direct_writer;
pub mod handlers;
pub mod leader_epoch;
mod log_flusher;
pub mod metadata;
pub mod metadata_cache;
pub mod partition;
mod partition_follower;
pub mod protocol;
pub mod replica_assignment;
pub mod replica_fetcher;
pub mod replica_manager;
pub mod replication;
pub mod server;
pub mod shard_context;
pub mod shard_handler;
pub mod zk;

/// Every binary and test linking kshard gets the guarded allocator (see alloc_guard).
#[global_allocator]
static ALLOCATOR: alloc_guard::GuardedAllocator = alloc_guard::GuardedAllocator;
