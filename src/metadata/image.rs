//! The broker's metadata image in cluster mode, built as Kafka's
//! ZkMetadataCache is: live brokers replaced by every UpdateMetadata,
//! partition states merged (leader -2 removes a topic being deleted), topic
//! configs read from `/config/topics/<t>` when a topic first appears.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;
use uuid::Uuid;

use crate::config::topic::TopicConfig;
use crate::config::BrokerConfig;
use crate::metadata::metadata_cache::{
    BrokerInfo, ListenerEndpoint, MetadataImage, PartitionInfo, TopicInfo,
};
use crate::metadata::topics::LEADER_DURING_DELETE;
use crate::protocol::inter_broker::UpdateMetadataRequest;

/// One listener of a registered broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerEndpoint {
    pub listener: String,
    pub security_protocol: String,
    pub host: String,
    pub port: u16,
}

/// `/brokers/ids/<id>` decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub id: i32,
    pub endpoints: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    /// The znode's creation time; a new value for a known id is a bounce.
    pub registered_at_ms: i64,
    /// Convenience: the first endpoint.
    pub host: String,
    pub port: u16,
}

impl BrokerRegistration {
    pub fn endpoint(&self, listener: &str) -> Option<&BrokerEndpoint> {
        self.endpoints.iter().find(|e| e.listener == listener)
    }
}

/// Parses `NAME://host:port` (IPv6 hosts in brackets).
fn parse_endpoint(s: &str, protocol_map: &BTreeMap<String, String>) -> Option<BrokerEndpoint> {
    let (listener, rest) = s.split_once("://")?;
    let (host, port) = rest.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some(BrokerEndpoint {
        listener: listener.to_string(),
        security_protocol: protocol_map
            .get(listener)
            .cloned()
            .unwrap_or_else(|| listener.to_string()),
        host: host.to_string(),
        port: port.parse().ok()?,
    })
}

/// BrokerIdZNode.decode for versions 1-5; None for unreadable data.
pub fn decode_broker_registration(id: i32, data: &[u8]) -> Option<BrokerRegistration> {
    let v: Value = serde_json::from_slice(data).ok()?;
    let mut protocol_map = BTreeMap::new();
    if let Some(m) = v
        .get("listener_security_protocol_map")
        .and_then(Value::as_object)
    {
        for (k, p) in m {
            protocol_map.insert(k.clone(), p.as_str()?.to_string());
        }
    }
    let mut endpoints = Vec::new();
    if let Some(list) = v.get("endpoints").and_then(Value::as_array) {
        for e in list {
            endpoints.push(parse_endpoint(e.as_str()?, &protocol_map)?);
        }
    }
    if endpoints.is_empty() {
        // Version 1: host and port only.
        let host = v.get("host")?.as_str()?.to_string();
        let port = u16::try_from(v.get("port")?.as_i64()?).ok()?;
        endpoints.push(BrokerEndpoint {
            listener: "PLAINTEXT".into(),
            security_protocol: "PLAINTEXT".into(),
            host,
            port,
        });
    }
    let first = endpoints[0].clone();
    Some(BrokerRegistration {
        id,
        endpoints,
        rack: v.get("rack").and_then(Value::as_str).map(str::to_string),
        registered_at_ms: 0,
        host: first.host,
        port: first.port,
    })
}

/// Applies an UpdateMetadata to `old`. `configs` holds the overrides of
/// topics new to this image (read from ZooKeeper by the caller).
pub fn apply_update_metadata(
    old: &MetadataImage,
    req: &UpdateMetadataRequest,
    config: &BrokerConfig,
    configs: &HashMap<String, BTreeMap<String, String>>,
) -> MetadataImage {
    let listener = &config.inter_broker_listener_name;
    let mut brokers: Vec<BrokerInfo> = req
        .live_brokers
        .iter()
        .filter_map(|b| {
            let ep = b
                .endpoints
                .iter()
                .find(|e| e.listener == *listener)
                .or_else(|| b.endpoints.first());
            let endpoints: Vec<ListenerEndpoint> = b
                .endpoints
                .iter()
                .filter_map(|e| {
                    Some(ListenerEndpoint {
                        listener_name: e.listener.clone(),
                        host: e.host.clone(),
                        port: u16::try_from(e.port).ok()?,
                    })
                })
                .collect();
            match ep {
                Some(e) => Some(BrokerInfo {
                    id: b.id,
                    host: e.host.clone(),
                    port: u16::try_from(e.port).ok()?,
                    rack: b.rack.clone(),
                    endpoints,
                }),
                None => Some(BrokerInfo {
                    id: b.id,
                    host: b.v0_host.clone(),
                    port: u16::try_from(b.v0_port).ok()?,
                    rack: b.rack.clone(),
                    endpoints: vec![ListenerEndpoint {
                        listener_name: "PLAINTEXT".to_string(),
                        host: b.v0_host.clone(),
                        port: u16::try_from(b.v0_port).ok()?,
                    }],
                }),
            }
        })
        .collect();
    brokers.sort_by_key(|b| b.id);
    let mut next = MetadataImage {
        cluster_id: old.cluster_id.clone(),
        controller_id: req.controller_id,
        brokers,
        topics: old.topics.clone(),
        topic_names_by_id: old.topic_names_by_id.clone(),
    };
    // Group the request's partition states by topic.
    let mut by_topic: BTreeMap<&str, Vec<PartitionInfo>> = BTreeMap::new();
    let mut deleted: Vec<&str> = Vec::new();
    for (topic, s) in req.partition_states() {
        if s.leader == LEADER_DURING_DELETE {
            deleted.push(topic);
            continue;
        }
        by_topic.entry(topic).or_default().push(PartitionInfo {
            partition: s.partition_index,
            leader: s.leader,
            leader_epoch: s.leader_epoch,
            replicas: s.replicas.clone(),
            isr: s.isr.clone(),
            offline_replicas: s.offline_replicas.clone(),
        });
    }
    // One image is changed in place: a copy per topic made a full
    // UpdateMetadata quadratic in the topic count (109 ms at 1,000 topics,
    // benches/metadata.rs), all of it on shard 0.
    for t in deleted {
        next.remove_topic(t);
    }
    let topic_ids: HashMap<&str, Uuid> = req
        .topic_states
        .iter()
        .map(|t| (t.topic_name.as_str(), t.topic_id))
        .collect();
    for (name, parts) in by_topic {
        let existing = next.topics.get(name).cloned();
        let mut partitions: BTreeMap<i32, PartitionInfo> = existing
            .as_ref()
            .map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (p.partition, p.clone()))
                    .collect()
            })
            .unwrap_or_default();
        for p in parts {
            partitions.insert(p.partition, p);
        }
        let topic_id = topic_ids
            .get(name)
            .copied()
            .filter(|id| !id.is_nil())
            .or(existing.as_ref().map(|t| t.topic_id))
            .unwrap_or_else(Uuid::nil);
        let overrides = existing
            .as_ref()
            .map(|t| t.overrides.clone())
            .or_else(|| configs.get(name).cloned())
            .unwrap_or_default();
        let topic_config = match existing.as_ref() {
            Some(t) => t.config.clone(),
            None => match TopicConfig::from_overrides(config, &overrides) {
                Ok(c) => Arc::new(c),
                Err(e) => {
                    log::warn!("topic {name}: config overrides invalid ({e}); using defaults");
                    Arc::new(
                        TopicConfig::from_overrides(config, &BTreeMap::new())
                            .expect("broker defaults are a valid topic config"),
                    )
                }
            },
        };
        next.insert_topic(TopicInfo {
            name: name.to_string(),
            topic_id,
            partitions: partitions.into_values().collect(),
            overrides,
            config: topic_config,
            is_internal: name.starts_with("__"),
        });
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_kafka_broker_registrations() {
        let v5 = br#"{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","INTERNAL":"SSL"},"endpoints":["PLAINTEXT://127.0.0.1:9092","INTERNAL://[::1]:9093"],"jmx_port":-1,"port":9092,"host":"127.0.0.1","rack":"r1","version":5,"timestamp":"1700000000000"}"#;
        let r = decode_broker_registration(3, v5).unwrap();
        assert_eq!(r.id, 3);
        assert_eq!((r.host.as_str(), r.port), ("127.0.0.1", 9092));
        assert_eq!(r.rack.as_deref(), Some("r1"));
        let internal = r.endpoint("INTERNAL").unwrap();
        assert_eq!((internal.host.as_str(), internal.port), ("::1", 9093));
        assert_eq!(internal.security_protocol, "SSL");
        let v1 = br#"{"jmx_port":-1,"timestamp":"1","host":"h","version":1,"port":9000}"#;
        let r = decode_broker_registration(1, v1).unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.endpoints[0].listener.as_str()),
            ("h", 9000, "PLAINTEXT")
        );
        assert!(decode_broker_registration(1, b"{").is_none());
        assert!(decode_broker_registration(1, br#"{"endpoints":["nope"]}"#).is_none());
    }
}
