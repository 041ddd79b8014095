//! `log.cleaner.threads` on a thread-per-core broker: every shard cleans
//! its own compacted logs, and this bounds how many shards run a cleaning
//! pass at once, as Kafka's thread count bounds how many logs are cleaned
//! at once. The bound is read from the live broker config at each pass, so
//! a dynamic change applies from the next pass.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::config::dynamic::DynamicBrokerConfig;

const THREADS_KEY: &str = "log.cleaner.threads";

/// The broker's cleaning passes in progress, shared by every shard.
pub struct CleanerSlots {
    dynamic_config: Arc<DynamicBrokerConfig>,
    in_use: AtomicUsize,
}

impl CleanerSlots {
    pub fn new(dynamic_config: Arc<DynamicBrokerConfig>) -> Self {
        CleanerSlots {
            dynamic_config,
            in_use: AtomicUsize::new(0),
        }
    }

    /// `log.cleaner.threads` as it stands (Kafka's default 1, at least 1).
    pub fn limit(&self) -> usize {
        self.dynamic_config
            .current()
            .originals()
            .get(THREADS_KEY)
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(1)
            .max(1)
    }

    /// Takes a slot for a pass if fewer than the limit are in use.
    pub fn try_acquire(&self) -> bool {
        let limit = self.limit();
        self.in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_ok()
    }

    /// Gives back a slot taken by `try_acquire`.
    pub fn release(&self) {
        let before = self.in_use.fetch_sub(1, Ordering::AcqRel);
        assert!(before > 0, "a cleaner slot released that was never taken");
    }

    pub fn in_use(&self) -> usize {
        self.in_use.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_live_thread_count_bounds_concurrent_passes() {
        let config = crate::config::BrokerConfig::from_map(&BTreeMap::new()).unwrap();
        let dynamic = Arc::new(DynamicBrokerConfig::new(Arc::new(config)));
        let slots = CleanerSlots::new(dynamic.clone());
        assert_eq!(slots.limit(), 1);
        assert!(slots.try_acquire());
        assert!(!slots.try_acquire());
        dynamic.update_default(&[(THREADS_KEY.to_string(), "2".to_string())].into());
        assert_eq!(slots.limit(), 2);
        assert!(slots.try_acquire());
        assert!(!slots.try_acquire());
        slots.release();
        slots.release();
        assert_eq!(slots.in_use(), 0);
    }
}
