//! The cross-shard mailbox: request/reply calls between shards.
//!
//! Each shard has one bounded lock-free MPSC queue (crossbeam `ArrayQueue`)
//! that every other shard pushes into. When its queue is empty the shard's
//! receiver task parks and leaves its `Waker` in the inbox; a sender that
//! finds the receiver parked wakes it from its own thread. glommio takes a
//! foreign wake as a queued waker and writes the target executor's eventfd
//! only if that executor is asleep, so a call to a shard that is busy with
//! other work makes no system call and sends no interrupt. (A doorbell
//! socket written on every wake-up cost a `sendto` and an io_uring
//! completion per message even when the target was running; glommio's
//! channel mesh was dropped earlier: it lost wake-ups at start-up.)
//!
//! A call pushes `Envelope::Request` to the target and parks on a local
//! oneshot; the target runs the handler's synchronous part in arrival order
//! (produce ordering relies on this), and pushes `Envelope::Reply` back.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use atomic_waker::AtomicWaker;
use crossbeam_queue::ArrayQueue;

use crate::oneshot;

pub enum Envelope<Req, Resp> {
    Request { id: u64, from: usize, req: Req },
    Reply { id: u64, resp: Resp },
}

pub type LocalBoxFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// One shard's inbox: its queue, its "receiver parked" flag and the
/// parked receiver's waker.
struct Inbox<Req, Resp> {
    queue: ArrayQueue<Envelope<Req, Resp>>,
    sleeping: AtomicBool,
    receiver: AtomicWaker,
    /// Set when the owning shard joins (each shard joins once).
    joined: AtomicBool,
}

/// Built once on the main thread, cloned into every shard.
pub struct MailboxBuilder<Req: Send + 'static, Resp: Send + 'static> {
    inboxes: Arc<Vec<Inbox<Req, Resp>>>,
}

impl<Req: Send + 'static, Resp: Send + 'static> Clone for MailboxBuilder<Req, Resp> {
    fn clone(&self) -> Self {
        MailboxBuilder {
            inboxes: self.inboxes.clone(),
        }
    }
}

impl<Req: Send + 'static, Resp: Send + 'static> MailboxBuilder<Req, Resp> {
    pub fn new(nr_shards: usize, channel_capacity: usize) -> Self {
        assert!(nr_shards >= 1);
        assert!(channel_capacity >= 1);
        let mut inboxes = Vec::with_capacity(nr_shards);
        for _ in 0..nr_shards {
            inboxes.push(Inbox {
                queue: ArrayQueue::new(channel_capacity),
                sleeping: AtomicBool::new(false),
                receiver: AtomicWaker::new(),
                joined: AtomicBool::new(false),
            });
        }
        MailboxBuilder {
            inboxes: Arc::new(inboxes),
        }
    }

    /// Starts shard `shard_id`'s receiver; `handler` serves requests from
    /// other shards.
    pub async fn join<H>(self, shard_id: usize, handler: H) -> Rc<Mailbox<Req, Resp>>
    where
        H: Fn(Req) -> LocalBoxFuture<Resp> + 'static,
    {
        let nr_shards = self.inboxes.len();
        assert!(shard_id < nr_shards);
        let joined_before = self.inboxes[shard_id].joined.swap(true, Ordering::AcqRel);
        assert!(!joined_before, "shard {shard_id} joined the mailbox twice");
        let mailbox = Rc::new(Mailbox {
            shard_id,
            inboxes: self.inboxes,
            next_call_id: Cell::new(1),
            pending: RefCell::new(HashMap::new()),
            full_tickets_issued: (0..nr_shards).map(|_| Cell::new(0)).collect(),
            full_ticket_serving: (0..nr_shards).map(|_| Cell::new(0)).collect(),
        });
        let handler = Rc::new(handler);
        let me = mailbox.clone();
        glommio::spawn_local(async move { me.receive_loop(&*handler).await }).detach();
        mailbox
    }
}

pub struct Mailbox<Req: Send + 'static, Resp: Send + 'static> {
    shard_id: usize,
    inboxes: Arc<Vec<Inbox<Req, Resp>>>,
    next_call_id: Cell<u64>,
    pending: RefCell<HashMap<u64, oneshot::Sender<Resp>>>,
    /// Per target: tickets handed to pushes that found the queue full, and
    /// the ticket whose turn it is. Pushes from this shard land in the order
    /// they were made, full queue or not (a pipelined connection relies on
    /// its produces reaching the owner in request order).
    full_tickets_issued: Vec<Cell<u64>>,
    full_ticket_serving: Vec<Cell<u64>>,
}

/// The target shard is gone (shutting down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardUnavailable(pub usize);

impl<Req: Send + 'static, Resp: Send + 'static> Mailbox<Req, Resp> {
    pub fn shard_id(&self) -> usize {
        self.shard_id
    }
    pub fn nr_shards(&self) -> usize {
        self.inboxes.len()
    }

    /// Pushes to `target`'s queue, waiting while it is full (bounded memory;
    /// receivers never block, so the queue always drains). Waiting pushes
    /// take tickets, so a later push never overtakes an earlier one.
    async fn push(&self, target: usize, mut envelope: Envelope<Req, Resp>) {
        let inbox = &self.inboxes[target];
        let issued = &self.full_tickets_issued[target];
        let serving = &self.full_ticket_serving[target];
        if issued.get() == serving.get() {
            match inbox.queue.push(envelope) {
                Ok(()) => {
                    self.wake_if_parked(inbox);
                    return;
                }
                Err(back) => envelope = back,
            }
        }
        let ticket = issued.get();
        issued.set(ticket + 1);
        loop {
            if serving.get() == ticket {
                match inbox.queue.push(envelope) {
                    Ok(()) => break,
                    Err(back) => envelope = back,
                }
            }
            inbox.receiver.wake();
            glommio::timer::sleep(Duration::from_micros(50)).await;
        }
        serving.set(ticket + 1);
        debug_assert!(serving.get() <= issued.get());
        self.wake_if_parked(inbox);
    }

    fn wake_if_parked(&self, inbox: &Inbox<Req, Resp>) {
        if inbox.sleeping.swap(false, Ordering::SeqCst) {
            inbox.receiver.wake();
        }
    }

    /// Calls shard `target` (never this shard: local work is run directly).
    pub async fn call(self: &Rc<Self>, target: usize, req: Req) -> Result<Resp, ShardUnavailable> {
        assert!(target < self.nr_shards() && target != self.shard_id);
        let id = self.next_call_id.get();
        self.next_call_id.set(id + 1);
        let (tx, rx) = oneshot::channel();
        self.pending.borrow_mut().insert(id, tx);
        self.push(
            target,
            Envelope::Request {
                id,
                from: self.shard_id,
                req,
            },
        )
        .await;
        rx.await.map_err(|_| ShardUnavailable(target))
    }

    async fn receive_loop<H>(self: Rc<Self>, handler: &H)
    where
        H: Fn(Req) -> LocalBoxFuture<Resp>,
    {
        let inbox = &self.inboxes[self.shard_id];
        loop {
            let mut drained = 0usize;
            while let Some(envelope) = inbox.queue.pop() {
                self.on_envelope(envelope, handler);
                drained += 1;
                if drained.is_multiple_of(256) {
                    // Let the handlers' tasks and connections run too.
                    glommio::yield_if_needed().await;
                }
            }
            // Park: the waker first, then the flag, then one more look, so
            // a sender either sees the flag (and wakes us) or its envelope
            // is seen here.
            std::future::poll_fn(|cx| {
                inbox.receiver.register(cx.waker());
                inbox.sleeping.store(true, Ordering::SeqCst);
                if inbox.queue.is_empty() {
                    return Poll::Pending;
                }
                Poll::Ready(())
            })
            .await;
            inbox.sleeping.store(false, Ordering::SeqCst);
        }
    }

    fn on_envelope<H>(self: &Rc<Self>, envelope: Envelope<Req, Resp>, handler: &H)
    where
        H: Fn(Req) -> LocalBoxFuture<Resp>,
    {
        match envelope {
            Envelope::Request { id, from, req } => {
                // The handler's synchronous part runs here, in arrival order.
                let fut = handler(req);
                let me = self.clone();
                glommio::spawn_local(async move {
                    let resp = fut.await;
                    me.push(from, Envelope::Reply { id, resp }).await;
                })
                .detach();
            }
            Envelope::Reply { id, resp } => {
                if let Some(tx) = self.pending.borrow_mut().remove(&id) {
                    tx.send(resp);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// Two shards call each other many times with tiny queues, so pushes wait
    /// on full queues and receivers sleep and wake constantly: every call is
    /// answered (no lost wake-up), with the right reply.
    #[test]
    fn every_call_is_answered_under_pressure() {
        const CALLS_PER_TASK: u64 = 5_000;
        const TASKS: u64 = 4;
        let builder = MailboxBuilder::<(usize, u64), u64>::new(2, 8);
        let answered = Arc::new(AtomicU64::new(0));
        let body = {
            let answered = answered.clone();
            move |shard: usize| {
                let builder = builder.clone();
                let answered = answered.clone();
                async move {
                    let handler = move |(from, seq): (usize, u64)| -> LocalBoxFuture<u64> {
                        assert_ne!(from, shard);
                        Box::pin(async move { seq * 2 })
                    };
                    let mb = builder.join(shard, handler).await;
                    let other = 1 - shard;
                    let mut tasks = Vec::new();
                    for task in 0..TASKS {
                        let mb = mb.clone();
                        let answered = answered.clone();
                        tasks.push(glommio::spawn_local(async move {
                            for i in 0..CALLS_PER_TASK {
                                let seq = task * CALLS_PER_TASK + i;
                                let r = mb.call(other, (shard, seq)).await.unwrap();
                                assert_eq!(r, seq * 2);
                                answered.fetch_add(1, Ordering::Relaxed);
                            }
                        }));
                    }
                    for t in tasks {
                        t.await;
                    }
                    // Keep serving until the peer is done too.
                    while answered.load(Ordering::Relaxed) < 2 * TASKS * CALLS_PER_TASK {
                        glommio::timer::sleep(Duration::from_millis(1)).await;
                    }
                }
            }
        };
        crate::shard::run_shards(
            2,
            crate::shard::Pinning::Unbound,
            crate::shard::MIN_IO_MEMORY_BYTES,
            None,
            body,
        )
        .unwrap();
        assert_eq!(answered.load(Ordering::Relaxed), 2 * TASKS * CALLS_PER_TASK);
    }
}
