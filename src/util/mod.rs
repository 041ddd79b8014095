//! The lowest layer: small items every other layer may use (the clock, the
//! Java string hash Kafka's placement rules rely on, the guarded allocator).

pub mod alloc_guard;
pub mod async_logger;
pub mod clock;
pub mod java_hash;
pub mod tcp_socket;

pub use clock::{monotonic_ms, now_ms};
pub use java_hash::java_string_hash;
