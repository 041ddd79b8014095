//! Shared counters, latency histograms, the live progress line and the
//! final summary (text or JSON).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Latencies are recorded in microseconds, 1 us .. 1 hour, 3 significant digits.
const HIST_MAX_US: u64 = 3_600_000_000;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, 3).expect("static histogram bounds are valid")
}

/// Counters and histograms shared by the worker threads and the reporter.
pub struct Stats {
    pub records: AtomicU64,
    pub payload_bytes: AtomicU64,
    pub errors: AtomicU64,
    /// Reset every progress interval.
    interval: Mutex<Histogram<u64>>,
    total: Mutex<Histogram<u64>>,
}

impl Stats {
    pub fn new() -> Arc<Stats> {
        Arc::new(Stats {
            records: AtomicU64::new(0),
            payload_bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            interval: Mutex::new(new_histogram()),
            total: Mutex::new(new_histogram()),
        })
    }

    pub fn add(&self, records: u64, payload_bytes: u64) {
        self.records.fetch_add(records, Ordering::Relaxed);
        self.payload_bytes
            .fetch_add(payload_bytes, Ordering::Relaxed);
    }

    /// Merges a worker's local histogram (recorded without locks) in.
    pub fn merge(&self, local: &mut Histogram<u64>) {
        if local.is_empty() {
            return;
        }
        self.interval
            .lock()
            .expect("stats lock")
            .add(&*local)
            .expect("same bounds");
        self.total
            .lock()
            .expect("stats lock")
            .add(&*local)
            .expect("same bounds");
        local.reset();
    }

    pub fn total_histogram(&self) -> Histogram<u64> {
        self.total.lock().expect("stats lock").clone()
    }
}

pub fn record_us(h: &mut Histogram<u64>, latency: Duration) {
    h.saturating_record((latency.as_micros() as u64).max(1));
}

/// Prints a progress line every second while stderr is a terminal.
pub struct Reporter {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Reporter {
    pub fn start(label: &'static str, stats: Arc<Stats>) -> Reporter {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let tty = std::io::stderr().is_terminal();
        let handle = std::thread::spawn(move || {
            let mut last_records = 0u64;
            let mut last_bytes = 0u64;
            let mut last = Instant::now();
            while !stop2.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                if last.elapsed() < Duration::from_secs(1) {
                    continue;
                }
                let secs = last.elapsed().as_secs_f64();
                last = Instant::now();
                let records = stats.records.load(Ordering::Relaxed);
                let bytes = stats.payload_bytes.load(Ordering::Relaxed);
                let h = {
                    let mut i = stats.interval.lock().expect("stats lock");
                    let copy = i.clone();
                    i.reset();
                    copy
                };
                if tty {
                    let mut err = std::io::stderr().lock();
                    let _ = write!(
                        err,
                        "\r{label}: {:>10.0} records/s {:>9.2} MB/s  p50 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms  total {records}   ",
                        (records - last_records) as f64 / secs,
                        (bytes - last_bytes) as f64 / secs / MB,
                        ms(h.value_at_quantile(0.5)),
                        ms(h.value_at_quantile(0.99)),
                        ms(h.max()),
                    );
                    let _ = err.flush();
                }
                last_records = records;
                last_bytes = bytes;
            }
            if tty {
                let _ = writeln!(std::io::stderr());
            }
        });
        Reporter {
            stop,
            handle: Some(handle),
        }
    }

    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// MB as Kafka's perf tools count it (MiB).
const MB: f64 = 1024.0 * 1024.0;

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// The final figures of one run.
pub struct Summary {
    pub mode: &'static str,
    pub records: u64,
    pub payload_bytes: u64,
    pub errors: u64,
    pub elapsed: Duration,
    /// (name, histogram) pairs, e.g. ("latency", ...), ("e2e_latency", ...).
    pub latencies: Vec<(&'static str, Histogram<u64>)>,
}

impl Summary {
    pub fn records_per_s(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn mb_per_s(&self) -> f64 {
        self.payload_bytes as f64 / MB / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "mode": self.mode,
            "records": self.records,
            "payload_bytes": self.payload_bytes,
            "errors": self.errors,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "records_per_s": self.records_per_s(),
            "mb_per_s": self.mb_per_s(),
        });
        for (name, h) in &self.latencies {
            v[format!("{name}_ms")] = serde_json::json!({
                "count": h.len(),
                "mean": h.mean() / 1000.0,
                "p50": ms(h.value_at_quantile(0.5)),
                "p90": ms(h.value_at_quantile(0.9)),
                "p99": ms(h.value_at_quantile(0.99)),
                "p999": ms(h.value_at_quantile(0.999)),
                "max": ms(h.max()),
            });
        }
        v
    }

    pub fn print(&self, json: bool) {
        if json {
            println!("{}", self.to_json());
            return;
        }
        println!(
            "{}: {} records in {:.2} s: {:.1} records/s, {:.2} MB/s, {} errors",
            self.mode,
            self.records,
            self.elapsed.as_secs_f64(),
            self.records_per_s(),
            self.mb_per_s(),
            self.errors
        );
        for (name, h) in &self.latencies {
            println!(
                "  {name} ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}  (mean {:.2}, n={})",
                ms(h.value_at_quantile(0.5)),
                ms(h.value_at_quantile(0.9)),
                ms(h.value_at_quantile(0.99)),
                ms(h.value_at_quantile(0.999)),
                ms(h.max()),
                h.mean() / 1000.0,
                h.len()
            );
        }
    }
}
