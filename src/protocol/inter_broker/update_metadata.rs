//! UpdateMetadata (API key 6), versions 0-8: the controller pushes cluster
//! metadata (live brokers, partition leaders) to every broker.
//!
//! v1 gives each broker a list of endpoints; v2 adds Rack; v3 adds the
//! endpoint Listener; v4 adds OfflineReplicas; v5 adds BrokerEpoch and groups
//! partitions by topic; v6 is the first flexible version; v7 adds TopicId;
//! v8 adds IsKRaftController and the tagged Type (tag 0).

use bytes::Buf;

use super::{
    non_default, CodecError, CodecResult, Reader, Sink, Writer,
    UPDATE_METADATA_FIRST_FLEXIBLE_VERSION,
};

fn flexible(version: i16) -> bool {
    version >= UPDATE_METADATA_FIRST_FLEXIBLE_VERSION
}

/// Tag of `UpdateMetadataRequest::type_` in v8+.
const TYPE_TAG: u32 = 0;

#[derive(Debug, Clone, PartialEq)]
pub struct UpdateMetadataRequest {
    pub controller_id: i32,
    /// v8+.
    pub is_kraft_controller: bool,
    /// v8+, tagged: 0 unspecified, 1 incremental, 2 full.
    pub type_: i8,
    pub controller_epoch: i32,
    /// v5+; -1 when absent.
    pub broker_epoch: i64,
    /// v0-4: each state carries its topic name.
    pub ungrouped_partition_states: Vec<UpdateMetadataPartitionState>,
    /// v5+.
    pub topic_states: Vec<UpdateMetadataTopicState>,
    pub live_brokers: Vec<UpdateMetadataBroker>,
}

impl Default for UpdateMetadataRequest {
    fn default() -> Self {
        Self {
            controller_id: 0,
            is_kraft_controller: false,
            type_: 0,
            controller_epoch: 0,
            broker_epoch: -1,
            ungrouped_partition_states: Vec::new(),
            topic_states: Vec::new(),
            live_brokers: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct UpdateMetadataTopicState {
    pub topic_name: String,
    /// v7+.
    pub topic_id: uuid::Uuid,
    /// The states' own `topic_name` is not on the wire here (it stays empty
    /// on decode); [`UpdateMetadataRequest::partition_states`] supplies it.
    pub partition_states: Vec<UpdateMetadataPartitionState>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct UpdateMetadataPartitionState {
    /// v0-4 only (in v5+ the enclosing topic state names the topic).
    pub topic_name: String,
    pub partition_index: i32,
    pub controller_epoch: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub zk_version: i32,
    pub replicas: Vec<i32>,
    /// v4+.
    pub offline_replicas: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct UpdateMetadataBroker {
    pub id: i32,
    /// v0 only.
    pub v0_host: String,
    /// v0 only.
    pub v0_port: i32,
    /// v1+.
    pub endpoints: Vec<UpdateMetadataEndpoint>,
    /// v2+; Kafka's default is the empty string, not null.
    pub rack: Option<String>,
}

impl Default for UpdateMetadataBroker {
    fn default() -> Self {
        Self {
            id: 0,
            v0_host: String::new(),
            v0_port: 0,
            endpoints: Vec::new(),
            rack: Some(String::new()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct UpdateMetadataEndpoint {
    pub port: i32,
    pub host: String,
    /// v3+.
    pub listener: String,
    pub security_protocol: i16,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct UpdateMetadataResponse {
    pub error_code: i16,
}

impl UpdateMetadataRequest {
    /// Every partition state with its topic name, whether this request
    /// lists them ungrouped (v0-4) or by topic (v5+).
    pub fn partition_states(&self) -> impl Iterator<Item = (&str, &UpdateMetadataPartitionState)> {
        let ungrouped = self
            .ungrouped_partition_states
            .iter()
            .map(|state| (state.topic_name.as_str(), state));
        let grouped = self.topic_states.iter().flat_map(|topic| {
            topic
                .partition_states
                .iter()
                .map(move |state| (topic.topic_name.as_str(), state))
        });
        ungrouped.chain(grouped)
    }

    pub(super) fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        let flexible = flexible(version);
        w.i32(self.controller_id);
        if version >= 8 {
            w.bool(self.is_kraft_controller);
        } else if self.is_kraft_controller {
            return Err(non_default("isKRaftController", version));
        }
        if version < 8 && self.type_ != 0 {
            return Err(non_default("type", version));
        }
        w.i32(self.controller_epoch);
        if version >= 5 {
            w.i64(self.broker_epoch);
        }
        if version <= 4 {
            w.array(
                &self.ungrouped_partition_states,
                flexible,
                "ungroupedPartitionStates",
                |w, state| state.write(w, version),
            )?;
        } else if !self.ungrouped_partition_states.is_empty() {
            return Err(non_default("ungroupedPartitionStates", version));
        }
        if version >= 5 {
            w.array(&self.topic_states, flexible, "topicStates", |w, topic| {
                topic.write(w, version)
            })?;
        } else if !self.topic_states.is_empty() {
            return Err(non_default("topicStates", version));
        }
        w.array(&self.live_brokers, flexible, "liveBrokers", |w, broker| {
            broker.write(w, version)
        })?;
        if flexible {
            // Like Kafka, the tagged Type is written only when not default.
            if self.type_ != 0 {
                w.unsigned_varint(1);
                w.unsigned_varint(TYPE_TAG);
                w.unsigned_varint(1);
                w.i8(self.type_);
            } else {
                w.unsigned_varint(0);
            }
        }
        Ok(())
    }

    pub(super) fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let flexible = flexible(version);
        let mut request = Self {
            controller_id: r.i32()?,
            ..Self::default()
        };
        if version >= 8 {
            request.is_kraft_controller = r.bool()?;
        }
        request.controller_epoch = r.i32()?;
        if version >= 5 {
            request.broker_epoch = r.i64()?;
        }
        if version <= 4 {
            request.ungrouped_partition_states =
                r.array(flexible, "ungroupedPartitionStates", |r| {
                    UpdateMetadataPartitionState::read(r, version)
                })?;
        }
        if version >= 5 {
            request.topic_states = r.array(flexible, "topicStates", |r| {
                UpdateMetadataTopicState::read(r, version)
            })?;
        }
        request.live_brokers = r.array(flexible, "liveBrokers", |r| {
            UpdateMetadataBroker::read(r, version)
        })?;
        if flexible {
            let mut type_ = request.type_;
            r.tagged_fields(&[TYPE_TAG], |tag, data| {
                // Kafka rejects the tag in v6-7, where Type does not exist.
                if version < 8 {
                    return Err(CodecError::new(format!(
                        "tag {tag} is not valid for version {version}"
                    )));
                }
                match data {
                    &[value] => type_ = value as i8,
                    _ => {
                        return Err(CodecError::new(format!(
                            "tagged field type has {} bytes, expected 1",
                            data.len()
                        )))
                    }
                }
                Ok(())
            })?;
            request.type_ = type_;
        }
        Ok(request)
    }
}

impl UpdateMetadataTopicState {
    fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        let flexible = flexible(version);
        w.string(&self.topic_name, flexible, "topicName")?;
        if version >= 7 {
            w.uuid(&self.topic_id);
        }
        w.array(
            &self.partition_states,
            flexible,
            "partitionStates",
            |w, state| state.write(w, version),
        )?;
        w.empty_tagged_fields(flexible);
        Ok(())
    }

    fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let flexible = flexible(version);
        let mut topic = Self {
            topic_name: r.string(flexible, "topicName")?,
            ..Self::default()
        };
        if version >= 7 {
            topic.topic_id = r.uuid()?;
        }
        topic.partition_states = r.array(flexible, "partitionStates", |r| {
            UpdateMetadataPartitionState::read(r, version)
        })?;
        r.skip_tagged_fields(flexible)?;
        Ok(topic)
    }
}

impl UpdateMetadataPartitionState {
    fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        let flexible = flexible(version);
        if version <= 4 {
            w.string(&self.topic_name, flexible, "topicName")?;
        }
        w.i32(self.partition_index);
        w.i32(self.controller_epoch);
        w.i32(self.leader);
        w.i32(self.leader_epoch);
        w.i32_array(&self.isr, flexible, "isr")?;
        w.i32(self.zk_version);
        w.i32_array(&self.replicas, flexible, "replicas")?;
        if version >= 4 {
            w.i32_array(&self.offline_replicas, flexible, "offlineReplicas")?;
        }
        w.empty_tagged_fields(flexible);
        Ok(())
    }

    fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let flexible = flexible(version);
        let mut state = Self::default();
        if version <= 4 {
            state.topic_name = r.string(flexible, "topicName")?;
        }
        state.partition_index = r.i32()?;
        state.controller_epoch = r.i32()?;
        state.leader = r.i32()?;
        state.leader_epoch = r.i32()?;
        state.isr = r.i32_array(flexible, "isr")?;
        state.zk_version = r.i32()?;
        state.replicas = r.i32_array(flexible, "replicas")?;
        if version >= 4 {
            state.offline_replicas = r.i32_array(flexible, "offlineReplicas")?;
        }
        r.skip_tagged_fields(flexible)?;
        Ok(state)
    }
}

impl UpdateMetadataBroker {
    fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        let flexible = flexible(version);
        w.i32(self.id);
        if version == 0 {
            w.string(&self.v0_host, flexible, "v0Host")?;
            w.i32(self.v0_port);
        }
        if version >= 1 {
            w.array(&self.endpoints, flexible, "endpoints", |w, endpoint| {
                endpoint.write(w, version)
            })?;
        }
        if version >= 2 {
            w.nullable_string(self.rack.as_deref(), flexible, "rack")?;
        }
        w.empty_tagged_fields(flexible);
        Ok(())
    }

    fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let flexible = flexible(version);
        let mut broker = Self {
            id: r.i32()?,
            ..Self::default()
        };
        if version == 0 {
            broker.v0_host = r.string(flexible, "v0Host")?;
            broker.v0_port = r.i32()?;
        }
        if version >= 1 {
            broker.endpoints = r.array(flexible, "endpoints", |r| {
                UpdateMetadataEndpoint::read(r, version)
            })?;
        }
        if version >= 2 {
            broker.rack = r.nullable_string(flexible, "rack")?;
        }
        r.skip_tagged_fields(flexible)?;
        Ok(broker)
    }
}

impl UpdateMetadataEndpoint {
    fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        let flexible = flexible(version);
        w.i32(self.port);
        w.string(&self.host, flexible, "host")?;
        if version >= 3 {
            w.string(&self.listener, flexible, "listener")?;
        }
        w.i16(self.security_protocol);
        w.empty_tagged_fields(flexible);
        Ok(())
    }

    fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let flexible = flexible(version);
        let mut endpoint = Self {
            port: r.i32()?,
            host: r.string(flexible, "host")?,
            ..Self::default()
        };
        if version >= 3 {
            endpoint.listener = r.string(flexible, "listener")?;
        }
        endpoint.security_protocol = r.i16()?;
        r.skip_tagged_fields(flexible)?;
        Ok(endpoint)
    }
}

impl UpdateMetadataResponse {
    pub(super) fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        w.i16(self.error_code);
        w.empty_tagged_fields(flexible(version));
        Ok(())
    }

    pub(super) fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let response = Self {
            error_code: r.i16()?,
        };
        r.skip_tagged_fields(flexible(version))?;
        Ok(response)
    }
}
