//! The broker's clocks. `now_ms` is wall-clock time, as Kafka's
//! `Time.milliseconds()`, for what is recorded (record timestamps, expiry by
//! age, checkpoints). `monotonic_ms` is Kafka's `Time.hiResClockMs()`, for
//! deadlines and timers (the purgatories): it never jumps when the wall
//! clock is set, so a step of NTP neither fires every delayed operation at
//! once nor parks them for the size of the step.

use std::sync::OnceLock;
use std::time::Instant;

/// Milliseconds since the Unix epoch; 0 if the clock reads before it.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Milliseconds on a monotonic clock since the process first asked; only
/// differences mean anything.
pub fn monotonic_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::monotonic_ms;

    #[test]
    fn monotonic_never_goes_back_and_follows_time() {
        let mut last = monotonic_ms();
        for _ in 0..1000 {
            let now = monotonic_ms();
            assert!(now >= last);
            last = now;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(monotonic_ms() >= last + 20);
    }
}
