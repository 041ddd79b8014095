//! kshard's per-core engine: shard executors pinned to cores, the cross-shard
//! mailbox, the hierarchical timing wheel and purgatory, the segment log, and the
//! stall detector.
//! Nothing in this crate knows the Kafka request protocol.

pub mod background;
pub mod log;
pub mod mailbox;
pub mod oneshot;
pub mod placement;
pub mod shard;
pub mod stall;
pub mod timer;
