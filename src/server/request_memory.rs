//! The bytes of requests being read and queued, bounded per shard: Kafka's
//! `queued.max.request.bytes` with its `SimpleMemoryPool` and channel muting.
//!
//! Kafka allocates a request's whole declared size from the pool as soon as
//! the 4-byte size arrives; kshard reserves a request's buffer when its
//! first body bytes arrive, and its pages become memory only as bytes land
//! in them, so the pool is charged with bytes actually received, and a
//! connection that only sent a size prefix costs nothing. A connection may
//! read while the bytes charged by the *other* connections of its shard are
//! under the shard's share; otherwise it stops reading (is muted) until
//! requests finish and give their bytes back. Like Kafka's non-strict pool,
//! a connection that may read can take the shard past its share, by at most
//! one request (`socket.request.max.bytes`) plus one read, so one
//! connection can always finish its own request and the shard never waits
//! on itself.
//!
//! Why per-shard shares and not one broker-wide atomic: every read and every
//! finished request touches the counter, and a shared atomic would put a
//! cache line bouncing between cores on the hot path of a shared-nothing
//! broker. Connections are spread evenly over the shards (SO_REUSEPORT), so
//! equal shares bound the broker as a whole: at most
//! `queued.max.request.bytes + shards × (socket.request.max.bytes + one read)`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Waker;

/// One shard's share of `queued.max.request.bytes`.
pub struct RequestMemoryPool {
    share_bytes: usize,
    used_bytes: Cell<usize>,
    /// Muted connections, woken when the pool drops below the share.
    waiters: RefCell<Vec<Waker>>,
}

impl RequestMemoryPool {
    pub fn new(share_bytes: usize) -> Rc<Self> {
        Rc::new(RequestMemoryPool {
            share_bytes: share_bytes.max(1),
            used_bytes: Cell::new(0),
            waiters: RefCell::new(Vec::new()),
        })
    }

    pub fn share_bytes(&self) -> usize {
        self.share_bytes
    }

    pub fn used_bytes(&self) -> usize {
        self.used_bytes.get()
    }

    /// True when a connection that holds `own` may read more.
    pub fn may_read(&self, own: &Charge) -> bool {
        self.used_bytes.get().saturating_sub(own.bytes) < self.share_bytes
    }

    /// Registers a muted connection's waker, woken when requests give
    /// their bytes back.
    pub fn wake_when_may_read(&self, waker: &Waker) {
        let mut waiters = self.waiters.borrow_mut();
        if !waiters.iter().any(|w| w.will_wake(waker)) {
            waiters.push(waker.clone());
        }
    }

    /// An empty charge against this pool.
    pub fn charge(self: &Rc<Self>) -> Charge {
        Charge {
            pool: self.clone(),
            bytes: 0,
        }
    }

    fn release(&self, bytes: usize) {
        let used = self.used_bytes.get().saturating_sub(bytes);
        self.used_bytes.set(used);
        if used < self.share_bytes && bytes > 0 {
            for w in self.waiters.borrow_mut().drain(..) {
                w.wake();
            }
        }
    }
}

/// Bytes held against a pool; given back when dropped.
pub struct Charge {
    pool: Rc<RequestMemoryPool>,
    bytes: usize,
}

impl Charge {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn add(&mut self, bytes: usize) {
        self.bytes += bytes;
        let used = &self.pool.used_bytes;
        used.set(used.get() + bytes);
    }

    /// Moves `bytes` (at most all of them) into a charge of their own.
    pub fn split(&mut self, bytes: usize) -> Charge {
        let bytes = bytes.min(self.bytes);
        self.bytes -= bytes;
        Charge {
            pool: self.pool.clone(),
            bytes,
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.pool.release(self.bytes);
    }
}

/// `queued.max.request.bytes` when it is -1 or 0 (Kafka: no bound). kshard
/// always bounds it, because it grows request buffers in native memory
/// where Kafka's are capped by the JVM heap (1 GiB by default): 1/8 of the
/// memory the process may use (physical memory, or the cgroup's limit when
/// lower), capped at 1 GiB like Kafka's default heap, and never below one
/// largest request.
pub fn default_queued_max_request_bytes(socket_request_max_bytes: usize) -> usize {
    const CAP_BYTES: usize = 1 << 30;
    let memory = usable_memory_bytes().unwrap_or(CAP_BYTES * 8);
    (memory / 8).min(CAP_BYTES).max(socket_request_max_bytes)
}

/// The broker-wide bound in effect for `queued.max.request.bytes`.
pub fn queued_max_request_bytes(configured: i64, socket_request_max_bytes: usize) -> usize {
    if configured > 0 {
        usize::try_from(configured).unwrap_or(usize::MAX)
    } else {
        default_queued_max_request_bytes(socket_request_max_bytes)
    }
}

fn usable_memory_bytes() -> Option<usize> {
    // SAFETY: sysconf has no preconditions.
    let (pages, page_bytes) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let physical = if pages > 0 && page_bytes > 0 {
        Some((pages as usize).saturating_mul(page_bytes as usize))
    } else {
        None
    };
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|p| std::fs::read_to_string(p).ok())
    .find_map(|s| s.trim().parse::<usize>().ok());
    match (physical, cgroup) {
        (Some(p), Some(c)) => Some(p.min(c)),
        (p, c) => p.or(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_muted_only_by_the_others() {
        let pool = RequestMemoryPool::new(100);
        let mut a = pool.charge();
        let b = pool.charge();
        a.add(150);
        assert!(pool.may_read(&a), "a alone may finish its own request");
        assert!(!pool.may_read(&b), "b waits for a");
        let frame = a.split(120);
        assert_eq!(a.bytes(), 30);
        assert_eq!(pool.used_bytes(), 150);
        assert!(!pool.may_read(&b));
        drop(frame);
        assert_eq!(pool.used_bytes(), 30);
        assert!(pool.may_read(&b));
        drop(a);
        assert_eq!(pool.used_bytes(), 0);
    }

    #[test]
    fn default_bound_is_at_least_one_request_and_at_most_a_gib() {
        let b = default_queued_max_request_bytes(100 << 20);
        assert!((100 << 20..=1 << 30).contains(&b), "{b}");
        assert_eq!(default_queued_max_request_bytes(2 << 30), 2 << 30);
        assert_eq!(queued_max_request_bytes(5000, 100), 5000);
        assert_eq!(
            queued_max_request_bytes(-1, 100),
            default_queued_max_request_bytes(100)
        );
    }
}
