use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use glommio::{LocalExecutorBuilder, Placement};

use super::*;

/// Generous against a loaded test machine: the yielding task yields every
/// 25 ms slice, the blocking one blocks for 4x the threshold.
const THRESHOLD_MS: u64 = 50;

type Work = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// Runs `work` on a shard executor with a detector and returns its totals.
fn totals_of(work: Work) -> StallTotals {
    run_detected(work).totals(0)
}

/// Runs `work` on a shard executor with a detector, returned once the
/// watchdog has seen the end of the last run.
fn run_detected(work: Work) -> Arc<StallDetector> {
    let settings = StallSettings::from_threshold_ms(THRESHOLD_MS).expect("on");
    let detector = Arc::new(StallDetector::start(settings, 1).expect("detector"));
    let builder = LocalExecutorBuilder::new(Placement::Unbound).name("stall-test");
    let handle = {
        let detector = detector.clone();
        detector
            .configure(builder, 0)
            .spawn(move || {
                detector.register_current_thread(0);
                work()
            })
            .expect("executor")
    };
    handle.join().expect("join");
    // Let the watchdog see the end of the last run.
    std::thread::sleep(3 * settings.tick());
    detector
}

fn busy_for(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[test]
fn a_blocking_task_is_a_stall() {
    let totals = totals_of(Box::new(|| {
        Box::pin(async {
            glommio::timer::sleep(Duration::from_millis(5)).await;
            std::thread::sleep(Duration::from_millis(4 * THRESHOLD_MS));
            glommio::timer::sleep(Duration::from_millis(5)).await;
        })
    }));
    assert_eq!(totals.count, 1, "{totals:?}");
    // The detector stamps a poll's start when the shard records it, a
    // little after the task began: one tick (threshold / 4) of slack.
    assert!(
        totals.worst_us >= (4 * THRESHOLD_MS - THRESHOLD_MS / 4) * 1000,
        "{totals:?}"
    );
    // Not the whole test: the stall ends with the block (give or take a
    // starved watchdog's late look on a loaded machine).
    assert!(
        totals.worst_us < (4 * THRESHOLD_MS + 500) * 1000,
        "{totals:?}"
    );
}

#[test]
fn a_long_stall_is_logged_while_it_lasts() {
    let short = run_detected(Box::new(|| {
        Box::pin(async { std::thread::sleep(Duration::from_millis(4 * THRESHOLD_MS)) })
    }));
    assert_eq!(short.ongoing_logged(0), 0);
    let long = run_detected(Box::new(|| {
        Box::pin(async { std::thread::sleep(LONG_STALL + Duration::from_millis(500)) })
    }));
    assert_eq!(long.ongoing_logged(0), 1);
    // The watchdog sees the end once it is done symbolizing the ongoing
    // stall's stack (about 0.5 s for a debug test binary).
    let deadline = Instant::now() + Duration::from_secs(10);
    while long.totals(0).count == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(long.totals(0).count, 1);
}

#[test]
fn a_busy_task_is_a_stall() {
    let totals = totals_of(Box::new(|| {
        Box::pin(async {
            busy_for(Duration::from_millis(3 * THRESHOLD_MS));
        })
    }));
    assert_eq!(totals.count, 1, "{totals:?}");
    assert!(totals.worst_us >= 3 * THRESHOLD_MS * 1000, "{totals:?}");
}

#[test]
fn a_yielding_task_is_not_a_stall() {
    let totals = totals_of(Box::new(|| {
        Box::pin(async {
            // 8x the threshold of work in 100 µs steps, yielding when the
            // preemption slice is over.
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(8 * THRESHOLD_MS) {
                busy_for(Duration::from_micros(100));
                glommio::yield_if_needed().await;
            }
        })
    }));
    assert_eq!(
        totals,
        StallTotals {
            count: 0,
            worst_us: 0
        }
    );
}

#[test]
fn an_idle_shard_is_not_stalled() {
    let totals = totals_of(Box::new(|| {
        Box::pin(async {
            glommio::timer::sleep(Duration::from_millis(6 * THRESHOLD_MS)).await;
        })
    }));
    assert_eq!(
        totals,
        StallTotals {
            count: 0,
            worst_us: 0
        }
    );
}

#[test]
fn detection_is_off_at_zero() {
    assert_eq!(StallSettings::from_threshold_ms(0), None);
    let s = StallSettings::from_threshold_ms(10).expect("on");
    assert_eq!(s.preempt_slice(), Duration::from_millis(5));
    assert_eq!(s.tick(), Duration::from_micros(2_500));
}

#[test]
fn stats_keep_count_and_worst() {
    let stats = StallStats::default();
    stats.record(Duration::from_millis(30));
    let t = stats.record(Duration::from_millis(12));
    assert_eq!(
        t,
        StallTotals {
            count: 2,
            worst_us: 30_000
        }
    );
    assert_eq!(stats.totals(), t);
}
