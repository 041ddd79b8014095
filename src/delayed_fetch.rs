//! DelayedFetch: a long-polling fetch parked in the shard's purgatory until
//! one of its partitions has data past the fetch offset (the high watermark
//! moved) or its max wait passes. It only signals; the fetch handler then
//! reads the logs again and answers.

use kshard_shards::oneshot;
use kshard_shards::timer::purgatory::DelayedOperation;

use crate::shard_context::ShardContext;

pub struct DelayedFetch {
    /// (topic, partition, fetch offset) on this shard.
    pub parts: Vec<(String, i32, i64)>,
    /// A follower's fetch (waits for the log end offset).
    pub replica: bool,
    /// Some until completed; `true` = data arrived, `false` = timed out.
    pub done: Option<oneshot::Sender<bool>>,
}

impl DelayedOperation<ShardContext> for DelayedFetch {
    fn try_complete(&mut self, ctx: &ShardContext) -> bool {
        let ready = {
            let rm = ctx.replica_manager.borrow();
            self.parts
                .iter()
                .any(|(t, p, offset)| rm.has_data_beyond(t, *p, *offset, self.replica))
        };
        if ready || ctx.shutting_down.get() {
            if let Some(tx) = self.done.take() {
                tx.send(ready);
            }
            return true;
        }
        false
    }

    fn on_expiration(&mut self, _ctx: &ShardContext) {
        if let Some(tx) = self.done.take() {
            tx.send(false);
        }
    }
}
