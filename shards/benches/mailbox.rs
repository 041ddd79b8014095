//! The cross-shard mailbox (`mailbox.rs`) between two shard executors, each
//! pinned to its own core as in the broker, with the broker's queue size:
//!
//! - `round_trip`: one call at a time from shard 0 to shard 1 (request and
//!   reply). Both receivers are asleep between calls, so every call rings
//!   two doorbells and wakes two executors: the latency of an idle hop.
//! - `in_flight_N`: N tasks on shard 0 calling shard 1 in a loop, so the
//!   receivers find queued envelopes and skip the doorbell (the batched,
//!   busy case). Throughput is calls (request + reply) per second.
//! - `local_dispatch`: the same trivial handler run through the local
//!   dispatcher's shape (`Rc<dyn Fn>` returning a boxed future, awaited on
//!   the calling shard): what `Router::run_on` pays when the partition is
//!   local, the baseline a cross-shard call is compared with.
//!
//! Each runs twice: `wall/` is elapsed time per call; `cpu/` is the
//! process's CPU time (user + system, both shards) per call, which is what
//! a call costs the machine and what the scaling model in tuning.md uses.
//! `placement/shard_for` is the cost of finding a partition's owner.

use std::hint::black_box;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kshard_shards::mailbox::{LocalBoxFuture, MailboxBuilder};
use kshard_shards::placement::shard_for;
use kshard_shards::shard::{run_shards, Pinning, MIN_IO_MEMORY_BYTES};

/// The broker's `MAILBOX_CAPACITY` (src/server/mod.rs).
const QUEUE_CAPACITY: usize = 4096;
const IN_FLIGHT: [u64; 3] = [16, 64, 256];

#[derive(Clone, Copy, Default)]
struct Measured {
    wall: Duration,
    cpu: Duration,
}

/// User + system CPU time of the whole process (every shard thread).
fn process_cpu() -> Duration {
    // SAFETY: getrusage fills the zeroed struct we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

fn trivial_handler(x: u64) -> LocalBoxFuture<u64> {
    Box::pin(async move { x + 1 })
}

/// `calls` calls from shard 0 to shard 1 by `in_flight` concurrent tasks,
/// timed on shard 0 from after both shards joined the mailbox.
fn run_calls(calls: u64, in_flight: u64) -> Measured {
    let in_flight = in_flight.clamp(1, calls.max(1));
    let builder = MailboxBuilder::<u64, u64>::new(2, QUEUE_CAPACITY);
    let joined = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let measured = Arc::new(Mutex::new(Measured::default()));
    let body = {
        let measured = measured.clone();
        move |shard: usize| {
            let (builder, joined, done) = (builder.clone(), joined.clone(), done.clone());
            let measured = measured.clone();
            async move {
                let mailbox = builder.join(shard, trivial_handler).await;
                joined.fetch_add(1, Ordering::SeqCst);
                if shard == 1 {
                    // A coarse poll: a 1 ms timer here woke shard 1 often
                    // enough to slow the idle round trip about 5x.
                    while !done.load(Ordering::SeqCst) {
                        glommio::timer::sleep(Duration::from_millis(20)).await;
                    }
                    return;
                }
                while joined.load(Ordering::SeqCst) < 2 {
                    glommio::timer::sleep(Duration::from_micros(100)).await;
                }
                let (wall_start, cpu_start) = (Instant::now(), process_cpu());
                let tasks: Vec<_> = (0..in_flight)
                    .map(|task| {
                        let mailbox = mailbox.clone();
                        let share = calls / in_flight + u64::from(task < calls % in_flight);
                        glommio::spawn_local(async move {
                            for i in 0..share {
                                let reply = mailbox.call(1, i).await.expect("shard 1 is up");
                                assert_eq!(reply, i + 1);
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await;
                }
                *measured.lock().unwrap() = Measured {
                    wall: wall_start.elapsed(),
                    cpu: process_cpu() - cpu_start,
                };
                done.store(true, Ordering::SeqCst);
            }
        }
    };
    run_shards(2, Pinning::FromCore(0), MIN_IO_MEMORY_BYTES, None, body).expect("shards");
    let m = *measured.lock().unwrap();
    m
}

/// `calls` local dispatches on one shard, as `Router::run_on` does for the
/// shard's own partitions.
fn run_local(calls: u64) -> Measured {
    let measured = Arc::new(Mutex::new(Measured::default()));
    let body = {
        let measured = measured.clone();
        move |_shard: usize| {
            let measured = measured.clone();
            async move {
                let dispatch: Rc<dyn Fn(u64) -> LocalBoxFuture<u64>> = Rc::new(trivial_handler);
                let (wall_start, cpu_start) = (Instant::now(), process_cpu());
                for i in 0..calls {
                    assert_eq!(dispatch(black_box(i)).await, i + 1);
                }
                *measured.lock().unwrap() = Measured {
                    wall: wall_start.elapsed(),
                    cpu: process_cpu() - cpu_start,
                };
            }
        }
    };
    run_shards(1, Pinning::FromCore(0), MIN_IO_MEMORY_BYTES, None, body).expect("shard");
    let m = *measured.lock().unwrap();
    m
}

fn mailbox(c: &mut Criterion) {
    for (clock, pick) in [
        ("wall", (|m: Measured| m.wall) as fn(Measured) -> Duration),
        ("cpu", |m: Measured| m.cpu),
    ] {
        let mut g = c.benchmark_group(format!("mailbox/{clock}"));
        g.sample_size(10);
        g.warm_up_time(Duration::from_secs(1));
        g.measurement_time(Duration::from_secs(4));
        g.throughput(Throughput::Elements(1));
        g.bench_function("round_trip", |b| {
            b.iter_custom(|iters| pick(run_calls(iters, 1)))
        });
        for n in IN_FLIGHT {
            g.bench_function(format!("in_flight_{n}"), |b| {
                b.iter_custom(|iters| pick(run_calls(iters, n)))
            });
        }
        g.bench_function("local_dispatch", |b| {
            b.iter_custom(|iters| pick(run_local(iters)))
        });
        g.finish();
    }
}

fn placement(c: &mut Criterion) {
    let mut g = c.benchmark_group("placement");
    g.throughput(Throughput::Elements(1));
    let mut p = 0i32;
    g.bench_function("shard_for", |b| {
        b.iter(|| {
            p = (p + 1) % 100;
            shard_for(black_box("orders-eu-west-1"), black_box(p), black_box(64))
        })
    });
    g.finish();
}

criterion_group!(benches, mailbox, placement);
criterion_main!(benches);
