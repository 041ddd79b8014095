//! Produce appends that find their partition fenced: a role change waiting
//! for staged appends to land, or a new leader epoch's checkpoint being
//! made durable. Kafka's produce waits on the partition's
//! `leaderIsrUpdateLock` through `makeLeader` instead of failing; here the
//! append waits in its partition's queue and is applied, in arrival order,
//! when the fence lifts.
//!
//! Refusing it (NOT_LEADER_OR_FOLLOWER) sent every producer of a partition
//! whose leader stayed through a new epoch (a follower died) back to
//! metadata, and a pipelining idempotent producer's later batch could land
//! once the fence lifted while an earlier one had been refused: librdkafka
//! answers the OUT_OF_ORDER_SEQUENCE_NUMBER that follows by bumping its
//! epoch and resending what it had not seen acknowledged, duplicates
//! included.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use kshard_shards::oneshot;

use super::delayed_produce::append_one;
use super::delayed_produce::ProduceWait;
use super::parts::{ProducePart, ProducePartResult};
use super::ReplicaManager;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::util::{monotonic_ms, now_ms};

/// The least a parked append waits for its fence, whatever the request's
/// timeout (Kafka's produce waits on the partition lock unbounded): a role
/// change drains staged appends for at most 10 s. Tests wait less.
#[cfg(not(test))]
const PARKED_WAIT_MIN_MS: u64 = 30_000;
#[cfg(test)]
const PARKED_WAIT_MIN_MS: u64 = 300;

/// What a parked append's request is told: the append's result and, if it
/// was appended, what its acks wait for.
pub(super) type ParkedOutcome = (ProducePartResult, Option<ProduceWait>);

/// One partition of a produce request waiting for its partition's fence.
pub(super) struct ParkedAppend {
    part: ProducePart,
    acks: i16,
    index: usize,
    reply: oneshot::Sender<ParkedOutcome>,
}

/// The parked appends of a shard's partitions, each queue in arrival order.
#[derive(Default)]
pub(super) struct ParkedAppends {
    queues: HashMap<(String, i32), VecDeque<ParkedAppend>>,
}

impl ParkedAppends {
    pub(super) fn is_waiting(&self, topic: &str, partition: i32) -> bool {
        // Keyed by an owned String: only looked up when some append waits.
        !self.queues.is_empty() && self.queues.contains_key(&(topic.to_string(), partition))
    }
}

/// A parked part: where its result goes and the reply to wait for.
pub(super) struct ParkedPart {
    pub index: usize,
    pub outcome: oneshot::Receiver<ParkedOutcome>,
}

impl ReplicaManager {
    /// Whether `part`, refused with NOT_LEADER_OR_FOLLOWER, must wait
    /// instead: its partition is fenced. Appends queue only while their
    /// partition is fenced and the fence lifts only with the queue run
    /// (`run_parked_appends`), so an unfenced partition has none waiting
    /// and a later append cannot overtake. A closing broker refuses.
    pub(super) fn must_park(&self, part: &ProducePart) -> bool {
        !self.is_shutting_down()
            && self
                .partitions()
                .appends_fenced(&part.topic, part.partition)
    }

    /// Queues `part` behind its partition's fence.
    pub(super) fn park(&self, part: &ProducePart, acks: i16, index: usize) -> ParkedPart {
        let (reply, outcome) = oneshot::channel();
        let parked = ParkedAppend {
            part: ProducePart {
                topic: part.topic.clone(),
                partition: part.partition,
                records: part.records.clone(),
                txn_verification: part.txn_verification,
            },
            acks,
            index,
            reply,
        };
        self.parked_appends
            .borrow_mut()
            .queues
            .entry((part.topic.clone(), part.partition))
            .or_default()
            .push_back(parked);
        ParkedPart { index, outcome }
    }

    /// Applies, in arrival order, the parked appends of the partitions
    /// `filter` selects whose fence lifted; those of a partition still
    /// fenced keep waiting.
    pub(super) fn run_parked_appends(self: &Rc<Self>, filter: impl Fn(&str, i32) -> bool) {
        let keys: Vec<(String, i32)> = self
            .parked_appends
            .borrow()
            .queues
            .keys()
            .filter(|(t, p)| filter(t, *p))
            .cloned()
            .collect();
        let now = now_ms();
        for key in keys {
            loop {
                let next = {
                    let mut parked = self.parked_appends.borrow_mut();
                    if self.partitions().appends_fenced(&key.0, key.1) {
                        break;
                    }
                    let Some(queue) = parked.queues.get_mut(&key) else {
                        break;
                    };
                    let next = queue.pop_front();
                    if queue.is_empty() {
                        parked.queues.remove(&key);
                    }
                    next
                };
                let Some(parked) = next else {
                    break;
                };
                if parked.reply.is_canceled() {
                    // Its request is gone (timed out): nobody to answer.
                    continue;
                }
                let outcome = append_one(
                    &mut self.partitions_mut(),
                    &parked.part,
                    parked.acks,
                    now,
                    parked.index,
                );
                parked.reply.send(outcome);
            }
        }
    }

    /// Fails the parked appends of the partitions `filter` selects (their
    /// fence will not lift: the leader-epoch checkpoint write failed).
    pub(super) fn fail_parked_appends(&self, filter: impl Fn(&str, i32) -> bool, code: ErrorCode) {
        let mut parked = self.parked_appends.borrow_mut();
        parked.queues.retain(|(t, p), queue| {
            if !filter(t, *p) {
                return true;
            }
            for a in queue.drain(..) {
                a.reply.send((ProducePartResult::failed(code), None));
            }
            false
        });
    }

    /// Waits for a parked append's outcome until `deadline_ms` (monotonic),
    /// or `PARKED_WAIT_MIN_MS` if that is later.
    pub(super) async fn parked_outcome(
        &self,
        parked: ParkedPart,
        deadline_ms: u64,
    ) -> ParkedOutcome {
        let wait_ms = deadline_ms
            .saturating_sub(monotonic_ms())
            .max(PARKED_WAIT_MIN_MS);
        let timeout = async {
            glommio::timer::sleep(std::time::Duration::from_millis(wait_ms)).await;
            Ok((ProducePartResult::failed(errors::REQUEST_TIMED_OUT), None))
        };
        match futures_lite::future::or(parked.outcome, timeout).await {
            Ok(outcome) => outcome,
            // Dropped unanswered: the shard is closing.
            Err(oneshot::Canceled) => (
                ProducePartResult::failed(errors::NOT_LEADER_OR_FOLLOWER),
                None,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use crate::protocol::errors;
    use crate::replica::partition::follower::test_support::{
        producer_batch, replica_manager_in, temp_dir, topic_t,
    };
    use crate::replica::parts::{ProducePart, RoleChange};

    const PRODUCER_ID: i64 = 9;

    /// Broker 1 alone leads t-0 at `leader_epoch`.
    fn lead(leader_epoch: i32) -> RoleChange {
        RoleChange {
            partition: 0,
            leader: 1,
            leader_epoch,
            replicas: vec![1],
            isr: vec![1],
            partition_epoch: 0,
        }
    }

    fn produce(count: usize, seq: i32) -> Vec<ProducePart> {
        vec![ProducePart {
            topic: "t".into(),
            partition: 0,
            records: Bytes::from(producer_batch(0, count, 0, PRODUCER_ID, seq)),
            txn_verification: crate::replica::TxnVerification::Off,
        }]
    }

    #[test]
    fn appends_wait_for_a_new_leader_epoch_then_go_in_in_arrival_order() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let dir = temp_dir("parked-appends");
                let rm = replica_manager_in(&dir);
                let codes = rm
                    .become_leader_or_follower(topic_t(), vec![lead(3)], Arc::new(Vec::new()))
                    .await;
                assert_eq!(codes, vec![errors::NONE]);
                // The same leader at a new epoch: its checkpoint write fences
                // appends until it is durable.
                let mut role_change =
                    rm.become_leader_or_follower(topic_t(), vec![lead(4)], Arc::new(Vec::new()));
                // Polled once: the checkpoint write is queued, appends fenced.
                assert!(futures_lite::future::poll_once(&mut role_change)
                    .await
                    .is_none());
                assert!(rm.partitions().appends_fenced("t", 0));
                let first = rm.append_records(produce(2, 0), 1, 30_000);
                let second = rm.append_records(produce(3, 2), 1, 30_000);
                // Gone before the fence lifts: never appended.
                let abandoned = rm.append_records(produce(1, 5), 1, 30_000);
                drop(abandoned);
                assert_eq!(role_change.await, vec![errors::NONE]);
                assert!(!rm.partitions().appends_fenced("t", 0));
                let third = rm.append_records(produce(2, 5), 1, 30_000);
                let offsets: Vec<(i16, i64)> = [first.await, second.await, third.await]
                    .iter()
                    .map(|r| (r[0].error_code.code(), r[0].base_offset))
                    .collect();
                assert_eq!(offsets, vec![(0, 0), (0, 2), (0, 5)]);
                assert!(!rm.parked_appends.borrow().is_waiting("t", 0));
                crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn a_parked_append_times_out_with_its_request() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let dir = temp_dir("parked-timeout");
                let rm = replica_manager_in(&dir);
                let codes = rm
                    .become_leader_or_follower(topic_t(), vec![lead(3)], Arc::new(Vec::new()))
                    .await;
                assert_eq!(codes, vec![errors::NONE]);
                rm.partitions_mut().set_appends_fenced(|_, _| true, true);
                let started = std::time::Instant::now();
                let late = rm.append_records(produce(2, 0), 1, 20).await;
                assert_eq!(late[0].error_code, errors::REQUEST_TIMED_OUT);
                // However short the request's timeout, the fence gets its time.
                assert!(started.elapsed().as_millis() >= super::PARKED_WAIT_MIN_MS as u128);
                rm.unfence_appends(|_, _| true);
                // The timed-out append was dropped: the next sequence starts at 0.
                let r = rm.append_records(produce(2, 0), 1, 30_000).await;
                assert_eq!((r[0].error_code, r[0].base_offset), (errors::NONE, 0));
                crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
