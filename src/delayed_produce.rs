//! DelayedProduce: an acks=all produce parked in the shard's purgatory
//! until the high watermark of every partition it appended to passes its
//! last offset (checkEnoughReplicasReachOffset), or the request timeout.

use kshard_shards::oneshot;
use kshard_shards::timer::purgatory::DelayedOperation;

use crate::protocol::errors;
use crate::replica_manager::ProducePartResult;
use crate::shard_context::ShardContext;

pub struct DelayedProduce {
    /// (topic, partition, offset the HW must reach, index into `results`);
    /// None once satisfied.
    pub waiting: Vec<Option<(String, i32, i64, usize)>>,
    pub results: Vec<ProducePartResult>,
    pub done: Option<oneshot::Sender<Vec<ProducePartResult>>>,
}

impl DelayedProduce {
    fn finish(&mut self) {
        if let Some(tx) = self.done.take() {
            tx.send(std::mem::take(&mut self.results));
        }
    }
}

impl DelayedOperation<ShardContext> for DelayedProduce {
    fn try_complete(&mut self, ctx: &ShardContext) -> bool {
        {
            let rm = ctx.replica_manager.borrow();
            for slot in self.waiting.iter_mut() {
                let Some((t, p, required, idx)) = slot else {
                    continue;
                };
                let code = match rm.partition(t, *p) {
                    Some(part) if part.is_leader => {
                        if part.high_watermark() < *required {
                            continue;
                        }
                        if (part.isr_len() as i32) < part.config.min_insync_replicas {
                            errors::NOT_ENOUGH_REPLICAS_AFTER_APPEND
                        } else {
                            errors::NONE
                        }
                    }
                    // Leadership moved or the partition is gone while waiting.
                    _ => errors::NOT_LEADER_OR_FOLLOWER,
                };
                if code != errors::NONE {
                    self.results[*idx].error_code = code;
                    self.results[*idx].base_offset = -1;
                }
                *slot = None;
            }
        }
        if self.waiting.iter().all(Option::is_none) || ctx.shutting_down.get() {
            self.finish();
            return true;
        }
        false
    }

    fn on_expiration(&mut self, _ctx: &ShardContext) {
        for (_, _, _, idx) in self.waiting.iter().flatten() {
            self.results[*idx].error_code = errors::REQUEST_TIMED_OUT;
            self.results[*idx].base_offset = -1;
        }
        self.finish();
    }
}
