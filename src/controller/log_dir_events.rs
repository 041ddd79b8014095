//! Failed log directories, as Kafka 3.9's ZooKeeper controller learns of
//! them: a broker whose directory fails writes a sequential
//! `/log_dir_event_notification/log_dir_event_<seq>`; the controller sends
//! that broker LeaderAndIsr for every replica it holds, and the answers
//! (every LeaderAndIsr answer, in fact) say which replicas are in an
//! offline directory (KAFKA_STORAGE_ERROR). Those replicas count as
//! offline: partitions they led get new leaders, and they leave the ISR.

use std::collections::BTreeSet;

use bytes::Bytes;
use kafka_protocol::protocol::Decodable;

use super::KafkaController;
use crate::metadata::{MetadataStore, StoreError, StoreResult, ANY_VERSION};
use crate::protocol::errors;
use crate::protocol::inter_broker::{LeaderAndIsrResponse, LEADER_AND_ISR_VERSIONS};

pub const LOG_DIR_EVENT_NOTIFICATION_PATH: &str = "/log_dir_event_notification";
/// Sequential children are `log_dir_event_<seq>`.
pub const LOG_DIR_EVENT_PREFIX: &str = "log_dir_event_";
/// LogDirEventNotificationHandler.LogDirFailureEvent.
pub const LOG_DIR_FAILURE_EVENT: i64 = 1;

/// `{"version":1,"broker":<id>,"event":1}`.
pub fn encode_log_dir_event(broker_id: i32) -> String {
    format!("{{\"version\":1,\"broker\":{broker_id},\"event\":{LOG_DIR_FAILURE_EVENT}}}")
}

/// The broker of a log dir failure notification; None if unreadable.
pub fn decode_log_dir_event(data: &[u8]) -> Option<i32> {
    let v: serde_json::Value = serde_json::from_slice(data).ok()?;
    if v.get("event").and_then(|e| e.as_i64()) != Some(LOG_DIR_FAILURE_EVENT) {
        return None;
    }
    i32::try_from(v.get("broker")?.as_i64()?).ok()
}

impl KafkaController {
    /// processLogDirEventNotification: reads and deletes the notifications
    /// (re-arming the watch), then asks those brokers about every replica.
    pub(super) fn on_log_dir_event_notification(&mut self) -> StoreResult<()> {
        let children = self.zk.children_watch(LOG_DIR_EVENT_NOTIFICATION_PATH)?;
        let mut brokers = BTreeSet::new();
        for c in children
            .iter()
            .filter(|c| c.starts_with(LOG_DIR_EVENT_PREFIX))
        {
            let path = format!("{LOG_DIR_EVENT_NOTIFICATION_PATH}/{c}");
            match self.zk.get(&path) {
                Ok((data, _)) => match decode_log_dir_event(&data) {
                    Some(b) => {
                        brokers.insert(b);
                    }
                    None => log::warn!("{path}: unreadable log dir event"),
                },
                Err(StoreError::NoNode(_)) => {}
                Err(e) => return Err(e),
            }
            match self.zk.delete(&path, ANY_VERSION) {
                Ok(()) | Err(StoreError::NoNode(_)) => {}
                Err(e) => return Err(e),
            }
        }
        if brokers.is_empty() {
            return Ok(());
        }
        log::info!("log directory failure reported by brokers {brokers:?}");
        self.on_broker_log_dir_failure(&brokers);
        Ok(())
    }

    /// onBrokerLogDirFailure: LeaderAndIsr for every replica on the
    /// brokers; their answers mark the replicas in failed directories.
    fn on_broker_log_dir_failure(&mut self, brokers: &BTreeSet<i32>) {
        let mut batch = self.batch();
        for &b in brokers.iter().filter(|b| self.ctx.is_live(**b)) {
            for (t, p) in self.ctx.partitions_on_broker(b) {
                batch.add_leader_and_isr(&[b], &t, p, false);
            }
        }
        self.send(batch);
    }

    /// LeaderAndIsrResponseReceived: replicas answered with
    /// KAFKA_STORAGE_ERROR are in an offline directory, the others are
    /// online; newly offline ones are taken offline.
    pub(super) fn on_leader_and_isr_response(&mut self, broker: i32, body: &Bytes) {
        if !self.ctx.is_live(broker) {
            return;
        }
        let mut b = body.clone();
        let response = match LeaderAndIsrResponse::decode(&mut b, LEADER_AND_ISR_VERSIONS.1) {
            Ok(r) => r,
            Err(e) => {
                log::warn!("LeaderAndIsr answer from broker {broker}: {e}");
                return;
            }
        };
        if response.error_code != errors::NONE.code() {
            log::warn!(
                "LeaderAndIsr answer from broker {broker}: error {}",
                errors::ErrorCode::from_wire(response.error_code)
            );
            return;
        }
        let mut offline = BTreeSet::new();
        let mut online = BTreeSet::new();
        for t in &response.topics {
            let Some(name) = self.topic_name_of(t.topic_id) else {
                continue;
            };
            for e in &t.partition_errors {
                let key = (name.clone(), e.partition_index);
                if e.error_code == errors::KAFKA_STORAGE_ERROR.code() {
                    offline.insert(key);
                } else if e.error_code == errors::NONE.code() {
                    online.insert(key);
                }
            }
        }
        let known = self.ctx.replicas_on_offline_dirs.entry(broker).or_default();
        for k in &online {
            known.remove(k);
        }
        let newly: BTreeSet<(String, i32)> = offline.difference(known).cloned().collect();
        known.extend(offline);
        if newly.is_empty() {
            return;
        }
        log::warn!(
            "broker {broker} holds {} replicas in offline log directories: {:?}",
            newly.len(),
            newly.iter().take(10).collect::<Vec<_>>()
        );
        let gone = |b: i32, t: &str, p: i32| b == broker && newly.contains(&(t.to_string(), p));
        if let Err(e) = self.on_replicas_become_offline(&gone, false) {
            self.on_zk_failure("taking replicas in offline log directories offline", e);
        }
    }

    pub(super) fn topic_name_of(&self, topic_id: uuid::Uuid) -> Option<String> {
        self.ctx
            .topics
            .iter()
            .find(|(_, e)| e.topic_id == topic_id)
            .map(|(t, _)| t.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_dir_events_round_trip() {
        assert_eq!(
            encode_log_dir_event(3),
            r#"{"version":1,"broker":3,"event":1}"#
        );
        assert_eq!(
            decode_log_dir_event(encode_log_dir_event(3).as_bytes()),
            Some(3)
        );
        assert_eq!(
            decode_log_dir_event(br#"{"version":1,"broker":3,"event":2}"#),
            None
        );
        assert_eq!(decode_log_dir_event(b"nope"), None);
    }
}
