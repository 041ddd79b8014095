//! LeaderAndIsr (API key 4), versions 0-7: the controller tells a broker
//! which partitions it leads or follows.
//!
//! v1 adds IsNew; v2 adds BrokerEpoch and groups partitions by topic; v3 adds
//! AddingReplicas and RemovingReplicas; v4 is the first flexible version; v5
//! adds Type and TopicId (the response switches to topic ids); v6 adds
//! LeaderRecoveryState; v7 adds IsKRaftController.

use bytes::Buf;

use super::{
    non_default, CodecResult, Reader, Sink, Writer, LEADER_AND_ISR_FIRST_FLEXIBLE_VERSION,
};

fn flexible(version: i16) -> bool {
    version >= LEADER_AND_ISR_FIRST_FLEXIBLE_VERSION
}

#[derive(Debug, Clone, PartialEq)]
pub struct LeaderAndIsrRequest {
    pub controller_id: i32,
    /// v7+.
    pub is_kraft_controller: bool,
    pub controller_epoch: i32,
    /// v2+; -1 when absent.
    pub broker_epoch: i64,
    /// v5+: 0 unspecified, 1 incremental, 2 full.
    pub type_: i8,
    /// v0-1: each state carries its topic name.
    pub ungrouped_partition_states: Vec<LeaderAndIsrPartitionState>,
    /// v2+.
    pub topic_states: Vec<LeaderAndIsrTopicState>,
    pub live_leaders: Vec<LeaderAndIsrLiveLeader>,
}

impl Default for LeaderAndIsrRequest {
    fn default() -> Self {
        Self {
            controller_id: 0,
            is_kraft_controller: false,
            controller_epoch: 0,
            broker_epoch: -1,
            type_: 0,
            ungrouped_partition_states: Vec::new(),
            topic_states: Vec::new(),
            live_leaders: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LeaderAndIsrTopicState {
    pub topic_name: String,
    /// v5+.
    pub topic_id: uuid::Uuid,
    /// The states' own `topic_name` is not on the wire here (it stays empty
    /// on decode); [`LeaderAndIsrRequest::partition_states`] supplies it.
    pub partition_states: Vec<LeaderAndIsrPartitionState>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LeaderAndIsrPartitionState {
    /// v0-1 only (in v2+ the enclosing topic state names the topic).
    pub topic_name: String,
    pub partition_index: i32,
    pub controller_epoch: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    /// Called ZkVersion before Kafka 3.x; the same field.
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    /// v3+.
    pub adding_replicas: Vec<i32>,
    /// v3+.
    pub removing_replicas: Vec<i32>,
    /// v1+.
    pub is_new: bool,
    /// v6+: 0 recovered, 1 recovering.
    pub leader_recovery_state: i8,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LeaderAndIsrLiveLeader {
    pub broker_id: i32,
    pub host_name: String,
    pub port: i32,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LeaderAndIsrResponse {
    pub error_code: i16,
    /// v0-4.
    pub partition_errors: Vec<LeaderAndIsrPartitionError>,
    /// v5+.
    pub topics: Vec<LeaderAndIsrTopicError>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LeaderAndIsrTopicError {
    pub topic_id: uuid::Uuid,
    pub partition_errors: Vec<LeaderAndIsrPartitionError>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LeaderAndIsrPartitionError {
    /// v0-4 only (in v5+ the enclosing topic error carries the topic id).
    pub topic_name: String,
    pub partition_index: i32,
    pub error_code: i16,
}

impl LeaderAndIsrRequest {
    /// Every partition state with its topic name, whether this request
    /// lists them ungrouped (v0-1) or by topic (v2+).
    pub fn partition_states(&self) -> impl Iterator<Item = (&str, &LeaderAndIsrPartitionState)> {
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
        if version >= 7 {
            w.bool(self.is_kraft_controller);
        } else if self.is_kraft_controller {
            return Err(non_default("isKRaftController", version));
        }
        w.i32(self.controller_epoch);
        if version >= 2 {
            w.i64(self.broker_epoch);
        }
        if version >= 5 {
            w.i8(self.type_);
        } else if self.type_ != 0 {
            return Err(non_default("type", version));
        }
        if version <= 1 {
            w.array(
                &self.ungrouped_partition_states,
                flexible,
                "ungroupedPartitionStates",
                |w, state| state.write(w, version),
            )?;
        } else if !self.ungrouped_partition_states.is_empty() {
            return Err(non_default("ungroupedPartitionStates", version));
        }
        if version >= 2 {
            w.array(&self.topic_states, flexible, "topicStates", |w, topic| {
                topic.write(w, version)
            })?;
        } else if !self.topic_states.is_empty() {
            return Err(non_default("topicStates", version));
        }
        w.array(&self.live_leaders, flexible, "liveLeaders", |w, leader| {
            leader.write(w, version)
        })?;
        w.empty_tagged_fields(flexible);
        Ok(())
    }

    pub(super) fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let flexible = flexible(version);
        let mut request = Self {
            controller_id: r.i32()?,
            ..Self::default()
        };
        if version >= 7 {
            request.is_kraft_controller = r.bool()?;
        }
        request.controller_epoch = r.i32()?;
        if version >= 2 {
            request.broker_epoch = r.i64()?;
        }
        if version >= 5 {
            request.type_ = r.i8()?;
        }
        if version <= 1 {
            request.ungrouped_partition_states =
                r.array(flexible, "ungroupedPartitionStates", |r| {
                    LeaderAndIsrPartitionState::read(r, version)
                })?;
        }
        if version >= 2 {
            request.topic_states = r.array(flexible, "topicStates", |r| {
                LeaderAndIsrTopicState::read(r, version)
            })?;
        }
        request.live_leaders = r.array(flexible, "liveLeaders", |r| {
            LeaderAndIsrLiveLeader::read(r, version)
        })?;
        r.skip_tagged_fields(flexible)?;
        Ok(request)
    }
}

impl LeaderAndIsrTopicState {
    fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        let flexible = flexible(version);
        w.string(&self.topic_name, flexible, "topicName")?;
        if version >= 5 {
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
        if version >= 5 {
            topic.topic_id = r.uuid()?;
        }
        topic.partition_states = r.array(flexible, "partitionStates", |r| {
            LeaderAndIsrPartitionState::read(r, version)
        })?;
        r.skip_tagged_fields(flexible)?;
        Ok(topic)
    }
}

impl LeaderAndIsrPartitionState {
    fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        let flexible = flexible(version);
        if version <= 1 {
            w.string(&self.topic_name, flexible, "topicName")?;
        }
        w.i32(self.partition_index);
        w.i32(self.controller_epoch);
        w.i32(self.leader);
        w.i32(self.leader_epoch);
        w.i32_array(&self.isr, flexible, "isr")?;
        w.i32(self.partition_epoch);
        w.i32_array(&self.replicas, flexible, "replicas")?;
        if version >= 3 {
            w.i32_array(&self.adding_replicas, flexible, "addingReplicas")?;
            w.i32_array(&self.removing_replicas, flexible, "removingReplicas")?;
        }
        if version >= 1 {
            w.bool(self.is_new);
        }
        if version >= 6 {
            w.i8(self.leader_recovery_state);
        } else if self.leader_recovery_state != 0 {
            return Err(non_default("leaderRecoveryState", version));
        }
        w.empty_tagged_fields(flexible);
        Ok(())
    }

    fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let flexible = flexible(version);
        let mut state = Self::default();
        if version <= 1 {
            state.topic_name = r.string(flexible, "topicName")?;
        }
        state.partition_index = r.i32()?;
        state.controller_epoch = r.i32()?;
        state.leader = r.i32()?;
        state.leader_epoch = r.i32()?;
        state.isr = r.i32_array(flexible, "isr")?;
        state.partition_epoch = r.i32()?;
        state.replicas = r.i32_array(flexible, "replicas")?;
        if version >= 3 {
            state.adding_replicas = r.i32_array(flexible, "addingReplicas")?;
            state.removing_replicas = r.i32_array(flexible, "removingReplicas")?;
        }
        if version >= 1 {
            state.is_new = r.bool()?;
        }
        if version >= 6 {
            state.leader_recovery_state = r.i8()?;
        }
        r.skip_tagged_fields(flexible)?;
        Ok(state)
    }
}

impl LeaderAndIsrLiveLeader {
    fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        let flexible = flexible(version);
        w.i32(self.broker_id);
        w.string(&self.host_name, flexible, "hostName")?;
        w.i32(self.port);
        w.empty_tagged_fields(flexible);
        Ok(())
    }

    fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let flexible = flexible(version);
        let leader = Self {
            broker_id: r.i32()?,
            host_name: r.string(flexible, "hostName")?,
            port: r.i32()?,
        };
        r.skip_tagged_fields(flexible)?;
        Ok(leader)
    }
}

impl LeaderAndIsrResponse {
    pub(super) fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        let flexible = flexible(version);
        w.i16(self.error_code);
        if version <= 4 {
            w.array(
                &self.partition_errors,
                flexible,
                "partitionErrors",
                |w, error| error.write(w, version),
            )?;
        } else if !self.partition_errors.is_empty() {
            return Err(non_default("partitionErrors", version));
        }
        if version >= 5 {
            w.array(&self.topics, flexible, "topics", |w, topic| {
                topic.write(w, version)
            })?;
        } else if !self.topics.is_empty() {
            return Err(non_default("topics", version));
        }
        w.empty_tagged_fields(flexible);
        Ok(())
    }

    pub(super) fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let flexible = flexible(version);
        let mut response = Self {
            error_code: r.i16()?,
            ..Self::default()
        };
        if version <= 4 {
            response.partition_errors = r.array(flexible, "partitionErrors", |r| {
                LeaderAndIsrPartitionError::read(r, version)
            })?;
        }
        if version >= 5 {
            response.topics = r.array(flexible, "topics", |r| {
                LeaderAndIsrTopicError::read(r, version)
            })?;
        }
        r.skip_tagged_fields(flexible)?;
        Ok(response)
    }
}

impl LeaderAndIsrTopicError {
    fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        let flexible = flexible(version);
        w.uuid(&self.topic_id);
        w.array(
            &self.partition_errors,
            flexible,
            "partitionErrors",
            |w, error| error.write(w, version),
        )?;
        w.empty_tagged_fields(flexible);
        Ok(())
    }

    fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let flexible = flexible(version);
        let topic = Self {
            topic_id: r.uuid()?,
            partition_errors: r.array(flexible, "partitionErrors", |r| {
                LeaderAndIsrPartitionError::read(r, version)
            })?,
        };
        r.skip_tagged_fields(flexible)?;
        Ok(topic)
    }
}

impl LeaderAndIsrPartitionError {
    fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        let flexible = flexible(version);
        if version <= 4 {
            w.string(&self.topic_name, flexible, "topicName")?;
        }
        w.i32(self.partition_index);
        w.i16(self.error_code);
        w.empty_tagged_fields(flexible);
        Ok(())
    }

    fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let flexible = flexible(version);
        let mut error = Self::default();
        if version <= 4 {
            error.topic_name = r.string(flexible, "topicName")?;
        }
        error.partition_index = r.i32()?;
        error.error_code = r.i16()?;
        r.skip_tagged_fields(flexible)?;
        Ok(error)
    }
}
