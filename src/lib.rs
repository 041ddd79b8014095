//! kshard: a Kafka-compatible broker, thread-per-core and shared-nothing.
//! This crate is the broker; `kshard-shards` is the per-core engine under it.
//!
//! The top-level modules are layers, listed from the top; a module imports
//! only modules below it (`tests/layering.rs` checks this):
//! server → handlers → coordinator → admin → router → quota → security →
//! replica → cluster → controller → zk → metadata → protocol → config → util.

pub mod admin;
pub mod cluster;
pub mod config;
pub mod controller;
pub mod coordinator;
pub mod handlers;
pub mod metadata;
pub mod protocol;
pub mod quota;
pub mod replica;
pub mod router;
pub mod security;
pub mod server;
pub mod util;
pub mod zk;

/// Every binary and test linking kshard gets the guarded allocator (see alloc_guard).
#[global_allocator]
static ALLOCATOR: util::alloc_guard::GuardedAllocator = util::alloc_guard::GuardedAllocator;
