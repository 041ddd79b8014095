//! The broker's clock: wall-clock milliseconds since the epoch, as Kafka's
//! `Time.milliseconds()` (record timestamps, expiry, purgatory deadlines).

/// Milliseconds since the Unix epoch; 0 if the clock reads before it.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
