//! Per-shard timers: Kafka's hierarchical timing wheel and the purgatory of
//! delayed operations built on it. Single-threaded, clock passed in as u64
//! milliseconds, so both are deterministic and need no locks.

pub mod purgatory;
pub mod timing_wheel;

pub use purgatory::{DelayedOperation, Purgatory};
pub use timing_wheel::{TimerId, TimingWheel};
