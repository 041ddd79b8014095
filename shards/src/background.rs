//! A named thread that runs a queue of blocking file-system jobs (fsyncs,
//! unlinks) in order, off the shards, for the life of the process. Callers
//! are synchronous code that may run outside an executor (tests, tools), so
//! this is a plain thread rather than glommio's `spawn_blocking`. A queue
//! is a `static`; its thread starts with the first job.

use std::sync::{mpsc, Condvar, Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

pub struct BackgroundQueue {
    thread_name: &'static str,
    inner: OnceLock<Inner>,
}

struct Inner {
    jobs: mpsc::Sender<Job>,
    /// Jobs queued and not yet finished.
    pending: Mutex<u64>,
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
        *inner.pending.lock().expect("pending") += 1;
        inner
            .jobs
            .send(Box::new(job))
            .expect("a background queue's thread runs for the process");
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
        let mut pending = inner.pending.lock().expect("pending");
        while *pending > 0 {
            pending = inner.drained.wait(pending).expect("pending");
        }
    }

    fn inner(&'static self) -> &'static Inner {
        self.inner.get_or_init(|| {
            let (jobs, queued) = mpsc::channel::<Job>();
            let queue: &'static BackgroundQueue = self;
            std::thread::Builder::new()
                .name(self.thread_name.into())
                .spawn(move || queue.serve(queued))
                .expect("starting a background queue's thread");
            Inner {
                jobs,
                pending: Mutex::new(0),
                drained: Condvar::new(),
            }
        })
    }

    fn serve(&'static self, queued: mpsc::Receiver<Job>) {
        for job in queued {
            job();
            // Set before the first job was sent, so present here.
            let inner = self.inner.get().expect("started");
            let mut pending = inner.pending.lock().expect("pending");
            *pending -= 1;
            if *pending == 0 {
                inner.drained.notify_all();
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
    fn run_resolves_with_the_jobs_result_after_earlier_jobs() {
        static QUEUE: BackgroundQueue = BackgroundQueue::new("test-run");
        static SEEN: AtomicU64 = AtomicU64::new(0);
        QUEUE.push(|| SEEN.store(7, Ordering::SeqCst));
        let got = futures_lite::future::block_on(QUEUE.run(|| SEEN.load(Ordering::SeqCst) + 1));
        assert_eq!(got, Some(8));
    }
}
