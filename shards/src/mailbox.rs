//! The cross-shard mailbox: request/reply calls between shards over glommio's
//! channel mesh (one SPSC ring per ordered pair of shards, no locks).
//!
//! A call sends `Envelope::Request` to the target shard and parks on a local
//! oneshot; the target runs the handler and sends `Envelope::Reply` back over
//! the mesh. The handler runs its synchronous part in arrival order, so two
//! requests from one shard to another are applied in the order they were
//! sent (produce ordering relies on this).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use glommio::channels::channel_mesh::{Full, MeshBuilder, Receivers, Senders};

use crate::oneshot;

pub enum Envelope<Req, Resp> {
    Request { id: u64, req: Req },
    Reply { id: u64, resp: Resp },
}

pub type LocalBoxFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// Builds the mesh once for all shards, then each shard joins it.
pub struct MailboxBuilder<Req: Send + 'static, Resp: Send + 'static> {
    mesh: MeshBuilder<Envelope<Req, Resp>, Full>,
    /// mesh peer index + 1 of each shard (0 = not joined yet). The mesh
    /// numbers peers in join order, which need not be shard order.
    peer_of_shard: Arc<Vec<AtomicUsize>>,
}

impl<Req: Send + 'static, Resp: Send + 'static> Clone for MailboxBuilder<Req, Resp> {
    fn clone(&self) -> Self {
        MailboxBuilder {
            mesh: self.mesh.clone(),
            peer_of_shard: self.peer_of_shard.clone(),
        }
    }
}

impl<Req: Send + 'static, Resp: Send + 'static> MailboxBuilder<Req, Resp> {
    pub fn new(nr_shards: usize, channel_capacity: usize) -> Self {
        assert!(nr_shards >= 1);
        assert!(channel_capacity >= 1);
        MailboxBuilder {
            mesh: MeshBuilder::full(nr_shards, channel_capacity),
            peer_of_shard: Arc::new((0..nr_shards).map(|_| AtomicUsize::new(0)).collect()),
        }
    }

    /// Joins the mesh from shard `shard_id` and waits for every shard to join.
    /// `handler` serves requests from other shards.
    pub async fn join<H>(self, shard_id: usize, handler: H) -> Rc<Mailbox<Req, Resp>>
    where
        H: Fn(Req) -> LocalBoxFuture<Resp> + 'static,
    {
        let nr_shards = self.peer_of_shard.len();
        assert!(shard_id < nr_shards);
        let (senders, receivers) = if nr_shards > 1 {
            let (s, r) = self.mesh.join().await.expect("join channel mesh");
            (Some(s), Some(r))
        } else {
            (None, None)
        };
        if let Some(s) = &senders {
            self.peer_of_shard[shard_id].store(s.peer_id() + 1, Ordering::Release);
        }
        // Startup-only barrier: wait until every shard published its peer id.
        let mut peer_of_shard = vec![0usize; nr_shards];
        if nr_shards > 1 {
            loop {
                let mut all = true;
                for (i, p) in self.peer_of_shard.iter().enumerate() {
                    let v = p.load(Ordering::Acquire);
                    if v == 0 {
                        all = false;
                        break;
                    }
                    peer_of_shard[i] = v - 1;
                }
                if all {
                    break;
                }
                glommio::timer::sleep(Duration::from_millis(1)).await;
            }
        }
        let mut shard_of_peer = vec![0usize; nr_shards];
        for (shard, &peer) in peer_of_shard.iter().enumerate() {
            shard_of_peer[peer] = shard;
        }
        let mailbox = Rc::new(Mailbox {
            shard_id,
            nr_shards,
            senders,
            peer_of_shard,
            next_call_id: Cell::new(1),
            pending: RefCell::new(HashMap::new()),
        });
        if let Some(mut receivers) = receivers {
            let handler = Rc::new(handler);
            for (peer, stream) in receivers.streams() {
                let from_shard = shard_of_peer[peer];
                let mailbox = mailbox.clone();
                let handler = handler.clone();
                glommio::spawn_local(async move {
                    while let Some(envelope) = stream.recv().await {
                        mailbox.on_envelope(from_shard, envelope, &*handler);
                    }
                })
                .detach();
            }
            drop_receivers(receivers);
        }
        mailbox
    }
}

fn drop_receivers<T: Send>(_r: Receivers<T>) {}

pub struct Mailbox<Req: Send + 'static, Resp: Send + 'static> {
    shard_id: usize,
    nr_shards: usize,
    senders: Option<Senders<Envelope<Req, Resp>>>,
    peer_of_shard: Vec<usize>,
    next_call_id: Cell<u64>,
    pending: RefCell<HashMap<u64, oneshot::Sender<Resp>>>,
}

/// The target shard is gone (shutting down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardUnavailable(pub usize);

impl<Req: Send + 'static, Resp: Send + 'static> Mailbox<Req, Resp> {
    pub fn shard_id(&self) -> usize {
        self.shard_id
    }
    pub fn nr_shards(&self) -> usize {
        self.nr_shards
    }

    /// Calls shard `target` (never this shard: local work is run directly).
    pub async fn call(self: &Rc<Self>, target: usize, req: Req) -> Result<Resp, ShardUnavailable> {
        assert!(target < self.nr_shards && target != self.shard_id);
        let senders = self.senders.as_ref().expect("multi-shard mesh");
        let id = self.next_call_id.get();
        self.next_call_id.set(id + 1);
        let (tx, rx) = oneshot::channel();
        self.pending.borrow_mut().insert(id, tx);
        if senders
            .send_to(self.peer_of_shard[target], Envelope::Request { id, req })
            .await
            .is_err()
        {
            self.pending.borrow_mut().remove(&id);
            return Err(ShardUnavailable(target));
        }
        rx.await.map_err(|_| ShardUnavailable(target))
    }

    fn on_envelope<H>(
        self: &Rc<Self>,
        from_shard: usize,
        envelope: Envelope<Req, Resp>,
        handler: &H,
    ) where
        H: Fn(Req) -> LocalBoxFuture<Resp>,
    {
        match envelope {
            Envelope::Request { id, req } => {
                // The handler's synchronous part runs here, in arrival order.
                let fut = handler(req);
                let me = self.clone();
                glommio::spawn_local(async move {
                    let resp = fut.await;
                    let senders = me.senders.as_ref().expect("multi-shard mesh");
                    // A closed peer means it is shutting down; nobody waits for the reply.
                    let _ = senders
                        .send_to(me.peer_of_shard[from_shard], Envelope::Reply { id, resp })
                        .await;
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
