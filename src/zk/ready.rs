//! A set of futures polled in the order they were woken.
//!
//! The crate hands each one-shot watch its own receiver, woken by the
//! session task in the order ZooKeeper's notifications arrive. Polling the
//! watch futures strictly in wake order keeps that order on our event
//! channel; a FIFO ready queue makes that a property of this code rather
//! than of a scheduler.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

pub(crate) type LocalFuture<T> = Pin<Box<dyn Future<Output = T>>>;

#[derive(Default)]
struct Queue {
    order: VecDeque<u64>,
    queued: HashSet<u64>,
    parent: Option<Waker>,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding this lock leaves only ids behind: still usable.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct EntryWaker {
    id: u64,
    shared: Arc<Shared>,
}

impl Wake for EntryWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let parent = {
            let mut q = self.shared.lock();
            if q.queued.insert(self.id) {
                q.order.push_back(self.id);
            }
            q.parent.clone()
        };
        if let Some(w) = parent {
            w.wake();
        }
    }
}

struct Entry<T> {
    future: LocalFuture<T>,
    waker: Waker,
}

pub(crate) struct ReadySet<T> {
    entries: HashMap<u64, Entry<T>>,
    shared: Arc<Shared>,
    next_id: u64,
}

impl<T> ReadySet<T> {
    pub(crate) fn new() -> Self {
        ReadySet {
            entries: HashMap::new(),
            shared: Arc::new(Shared::default()),
            next_id: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    fn insert(&mut self, future: LocalFuture<T>, front: bool) {
        let id = self.next_id;
        self.next_id += 1;
        let waker = Waker::from(Arc::new(EntryWaker {
            id,
            shared: self.shared.clone(),
        }));
        self.entries.insert(id, Entry { future, waker });
        let mut q = self.shared.lock();
        q.queued.insert(id);
        if front {
            q.order.push_front(id);
        } else {
            q.order.push_back(id);
        }
    }

    /// Adds a future, first polled after those already woken.
    pub(crate) fn push_back(&mut self, future: LocalFuture<T>) {
        self.insert(future, false);
    }

    /// Adds a future polled before everything already woken.
    pub(crate) fn push_front(&mut self, future: LocalFuture<T>) {
        self.insert(future, true);
    }

    /// Drops every future (their wakers then find nothing to poll).
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        let mut q = self.shared.lock();
        q.order.clear();
        q.queued.clear();
    }

    /// Polls woken futures in wake order until one completes.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<T> {
        {
            let mut q = self.shared.lock();
            if !q.parent.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                q.parent = Some(cx.waker().clone());
            }
        }
        loop {
            let id = {
                let mut q = self.shared.lock();
                let Some(id) = q.order.pop_front() else {
                    return Poll::Pending;
                };
                q.queued.remove(&id);
                id
            };
            let Some(entry) = self.entries.get_mut(&id) else {
                continue;
            };
            let waker = entry.waker.clone();
            let mut entry_cx = Context::from_waker(&waker);
            if let Poll::Ready(out) = entry.future.as_mut().poll(&mut entry_cx) {
                self.entries.remove(&id);
                return Poll::Ready(out);
            }
        }
    }
}
