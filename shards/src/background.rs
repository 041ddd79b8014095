//! A named thread that runs a queue of blocking file-system jobs (fsyncs,
//! unlinks) in order, off the shards, for the life of the process. Callers
//! are synchronous code that may run outside an executor (tests, tools), so
//! this is a plain thread rather than glommio's `spawn_blocking`. A queue
//! is a `static`; its thread starts with the first job.
//!
//! Pushing takes no lock: a shard that waited on a lock the queue's thread
//! holds would wait out that thread's preemption too (a 60 ms `futex` wait
//! under an index write's push was seen on this 2-core VM). The job goes on
//! a lock-free queue and the thread is unparked (an atomic swap, plus a
//! `futex` wake when it sleeps). Only `wait_idle` uses a lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_queue::SegQueue;

type Job = Box<dyn FnOnce() + Send>;

/// Puts the calling thread in `SCHED_BATCH`: it keeps its share of the CPU
/// but no longer preempts the thread running when it wakes. A background
/// thread (an fsync's return, a queue's next job) took the CPU from a
/// shard mid-run: with 2 CPUs, the `log-dirs` and `epoch-checkpoint`
/// threads preempted a shard 8 to 20 times in a run while 1,000
/// partitions were created, holding it off the CPU for up to 13 ms
/// (`perf record -e sched:sched_switch`, tuning.md). Best effort: a
/// thread left in `SCHED_OTHER` only competes as before.
pub fn yield_to_shards() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
}

pub struct BackgroundQueue {
    thread_name: &'static str,
    inner: OnceLock<Inner>,
}

struct Inner {
    jobs: SegQueue<Job>,
    /// Jobs pushed and not yet finished.
    pending: AtomicU64,
    thread: Thread,
    /// Taken by `wait_idle`, and by the queue's thread only when `pending`
    /// reaches zero; never by `push`.
    idle: Mutex<()>,
    drained: Condvar,
}

impl BackgroundQueue {
    pub const fn new(thread_name: &'static str) -> Self {
        BackgroundQueue {
            thread_name,
            inner: OnceLock::new(),
        }
    }

    /// Runs `job` on the queue's thread after every job pushed before it.
    pub fn push(&'static self, job: impl FnOnce() + Send + 'static) {
        let inner = self.inner();
        // Counted before it is visible, so `wait_idle` cannot miss it.
        inner.pending.fetch_add(1, Ordering::AcqRel);
        inner.jobs.push(Box::new(job));
        inner.thread.unpark();
    }

    /// `push`es `job` and resolves with its result once it has run; `None`
    /// if it never ran (the process is exiting).
    pub fn run<T: Send + 'static>(
        &'static self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> impl std::future::Future<Output = Option<T>> {
        let (done, result) = futures_channel::oneshot::channel();
        self.push(move || {
            // The caller may have stopped waiting (shutdown).
            let _ = done.send(job());
        });
        async move { result.await.ok() }
    }

    /// Waits until every job pushed so far has finished.
    pub fn wait_idle(&self) {
        let Some(inner) = self.inner.get() else {
            return;
        };
        let mut idle = inner.idle.lock().expect("idle");
        while inner.pending.load(Ordering::Acquire) > 0 {
            idle = inner.drained.wait(idle).expect("idle");
        }
    }

    fn inner(&'static self) -> &'static Inner {
        self.inner.get_or_init(|| {
            let queue: &'static BackgroundQueue = self;
            let thread = std::thread::Builder::new()
                .name(self.thread_name.into())
                .spawn(move || queue.serve())
                .expect("starting a background queue's thread");
            Inner {
                jobs: SegQueue::new(),
                pending: AtomicU64::new(0),
                thread: thread.thread().clone(),
                idle: Mutex::new(()),
                drained: Condvar::new(),
            }
        })
    }

    fn serve(&'static self) {
        yield_to_shards();
        // The first push unparks this thread once `inner` is set.
        let inner = loop {
            match self.inner.get() {
                Some(inner) => break inner,
                None => std::thread::park(),
            }
        };
        loop {
            let Some(job) = inner.jobs.pop() else {
                // A push between the pop and here leaves the unpark's token:
                // park returns at once.
                std::thread::park();
                continue;
            };
            job();
            if inner.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                // Under the lock, so a `wait_idle` that saw a job pending is
                // already waiting.
                let _idle = inner.idle.lock().expect("idle");
                inner.drained.notify_all();
            }
        }
    }
}

/// A named thread that runs each job once its due time has passed, for
/// the life of the process (Kafka's scheduler's `scheduleOnce`, used for
/// `file.delete.delay.ms`). Jobs not yet due when the process exits do not
/// run. Pushing takes no lock, as with `BackgroundQueue`.
pub struct DelayedQueue {
    thread_name: &'static str,
    inner: OnceLock<DelayedInner>,
}

struct DelayedInner {
    jobs: SegQueue<(Instant, Job)>,
    thread: Thread,
}

impl DelayedQueue {
    pub const fn new(thread_name: &'static str) -> Self {
        DelayedQueue {
            thread_name,
            inner: OnceLock::new(),
        }
    }

    /// Runs `job` on the queue's thread once `delay` has passed.
    pub fn push_after(&'static self, delay: Duration, job: impl FnOnce() + Send + 'static) {
        let inner = self.inner();
        inner.jobs.push((Instant::now() + delay, Box::new(job)));
        inner.thread.unpark();
    }

    fn inner(&'static self) -> &'static DelayedInner {
        self.inner.get_or_init(|| {
            let queue: &'static DelayedQueue = self;
            let thread = std::thread::Builder::new()
                .name(self.thread_name.into())
                .spawn(move || queue.serve())
                .expect("starting a delayed queue's thread");
            DelayedInner {
                jobs: SegQueue::new(),
                thread: thread.thread().clone(),
            }
        })
    }

    fn serve(&'static self) {
        yield_to_shards();
        let inner = loop {
            match self.inner.get() {
                Some(inner) => break inner,
                None => std::thread::park(),
            }
        };
        // Few jobs wait at once (a segment each), so a scan is enough.
        let mut waiting: Vec<(Instant, Job)> = Vec::new();
        loop {
            while let Some(job) = inner.jobs.pop() {
                waiting.push(job);
            }
            let now = Instant::now();
            let mut i = 0;
            while i < waiting.len() {
                if waiting[i].0 <= now {
                    let (_, job) = waiting.swap_remove(i);
                    job();
                } else {
                    i += 1;
                }
            }
            // A push meanwhile leaves the unpark's token: park returns at once.
            match waiting.iter().map(|(due, _)| *due).min() {
                Some(due) => {
                    std::thread::park_timeout(due.saturating_duration_since(Instant::now()))
                }
                None => std::thread::park(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn jobs_run_in_order_and_wait_idle_sees_them_done() {
        static QUEUE: BackgroundQueue = BackgroundQueue::new("test-queue");
        static LAST: AtomicU64 = AtomicU64::new(0);
        QUEUE.wait_idle();
        for i in 1..=100u64 {
            QUEUE.push(move || {
                assert_eq!(LAST.swap(i, Ordering::SeqCst), i - 1, "out of order");
            });
        }
        QUEUE.wait_idle();
        assert_eq!(LAST.load(Ordering::SeqCst), 100);
    }

    #[test]
    fn pushes_from_many_threads_all_run_before_wait_idle_returns() {
        static QUEUE: BackgroundQueue = BackgroundQueue::new("test-threads");
        static RAN: AtomicU64 = AtomicU64::new(0);
        let pushers: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..1000 {
                        QUEUE.push(|| {
                            RAN.fetch_add(1, Ordering::SeqCst);
                        });
                    }
                })
            })
            .collect();
        for p in pushers {
            p.join().expect("pusher");
        }
        QUEUE.wait_idle();
        assert_eq!(RAN.load(Ordering::SeqCst), 4000);
    }

    #[test]
    fn run_resolves_with_the_jobs_result_after_earlier_jobs() {
        static QUEUE: BackgroundQueue = BackgroundQueue::new("test-run");
        static SEEN: AtomicU64 = AtomicU64::new(0);
        QUEUE.push(|| SEEN.store(7, Ordering::SeqCst));
        let got = futures_lite::future::block_on(QUEUE.run(|| SEEN.load(Ordering::SeqCst) + 1));
        assert_eq!(got, Some(8));
    }

    #[test]
    fn delayed_jobs_run_after_their_delay_soonest_first() {
        static QUEUE: DelayedQueue = DelayedQueue::new("test-delayed");
        static ORDER: Mutex<Vec<u64>> = Mutex::new(Vec::new());
        let started = Instant::now();
        QUEUE.push_after(Duration::from_millis(300), || {
            ORDER.lock().unwrap().push(300)
        });
        QUEUE.push_after(Duration::from_millis(100), || {
            ORDER.lock().unwrap().push(100)
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            ORDER.lock().unwrap().is_empty(),
            "a job ran before its delay"
        );
        while ORDER.lock().unwrap().len() < 2 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "jobs never ran"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(*ORDER.lock().unwrap(), vec![100, 300]);
    }
}
