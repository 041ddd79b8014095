//! DelayedProduce: a produce parked in the shard's purgatory until every
//! partition it appended to has what it waits for, or the request timeout:
//! acks=all waits for the high watermark to pass its last offset
//! (checkEnoughReplicasReachOffset); acks=1 on a direct-mode log waits for
//! its staged append to be written (the log end offset to pass it).

use kshard_shards::oneshot;
use kshard_shards::timer::purgatory::DelayedOperation;

use super::parts::{AppendOrigin, ProducePart};
use super::{Partitions, ProducePartResult};
use crate::protocol::errors;

/// What one partition of a delayed produce waits for.
pub struct ProduceWait {
    pub topic: String,
    pub partition: i32,
    /// The offset the high watermark (acks=all) or the log end offset
    /// (acks=1) must reach.
    pub required_offset: i64,
    pub until_high_watermark: bool,
    /// Index into `results`.
    pub index: usize,
}

pub struct DelayedProduce {
    /// None once satisfied.
    pub waiting: Vec<Option<ProduceWait>>,
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

impl DelayedOperation<Partitions> for DelayedProduce {
    fn try_complete(&mut self, partitions: &Partitions) -> bool {
        {
            for slot in self.waiting.iter_mut() {
                let Some(w) = slot else {
                    continue;
                };
                let outcome = match partitions.partition(&w.topic, w.partition) {
                    Some(part) if part.is_leader => {
                        if part.log.write_failure().is_some() {
                            Some(errors::KAFKA_STORAGE_ERROR)
                        } else if w.until_high_watermark {
                            (part.high_watermark() >= w.required_offset).then(|| {
                                if (part.isr_len() as i32) < part.config.min_insync_replicas {
                                    errors::NOT_ENOUGH_REPLICAS_AFTER_APPEND
                                } else {
                                    errors::NONE
                                }
                            })
                        } else {
                            (part.log.log_end_offset() >= w.required_offset).then_some(errors::NONE)
                        }
                    }
                    // Leadership moved or the partition is gone while waiting.
                    _ => Some(errors::NOT_LEADER_OR_FOLLOWER),
                };
                let code = match outcome {
                    Some(code) => code,
                    // Shutting down: what has not arrived will not.
                    None if partitions.is_closing() => errors::NOT_LEADER_OR_FOLLOWER,
                    None => continue,
                };
                if code != errors::NONE {
                    self.results[w.index].error_code = code;
                    self.results[w.index].base_offset = -1;
                }
                *slot = None;
            }
        }
        if self.waiting.iter().all(Option::is_none) || partitions.is_closing() {
            self.finish();
            return true;
        }
        false
    }

    fn on_expiration(&mut self, _partitions: &Partitions) {
        for w in self.waiting.iter().flatten() {
            self.results[w.index].error_code = errors::REQUEST_TIMED_OUT;
            self.results[w.index].base_offset = -1;
        }
        self.finish();
    }
}

/// Appends one part; returns its result and, if the part must wait, what for.
pub(super) fn append_one(
    partitions: &mut Partitions,
    part: &ProducePart,
    acks: i16,
    now_ms: u64,
    index: usize,
) -> (ProducePartResult, Option<ProduceWait>) {
    if acks == -1 {
        if let Some(code) = partitions.check_enough_replicas(&part.topic, part.partition) {
            return (ProducePartResult::failed(code), None);
        }
    }
    let result = partitions.append(part, now_ms as i64, AppendOrigin::Client);
    if result.error_code != errors::NONE {
        return (result, None);
    }
    // acks=all waits for the high watermark; acks=1 for a staged
    // (direct-mode) append to be written. A duplicate waits for everything
    // staged before it.
    let wait = match acks {
        -1 => partitions
            .uncommitted_end(&part.topic, part.partition)
            .map(|offset| (offset, true)),
        1 => partitions
            .unwritten_end(&part.topic, part.partition)
            .map(|offset| (offset, false)),
        _ => None,
    };
    let wait = wait.map(|(required_offset, until_high_watermark)| ProduceWait {
        topic: part.topic.clone(),
        partition: part.partition,
        required_offset,
        until_high_watermark,
        index,
    });
    (result, wait)
}
