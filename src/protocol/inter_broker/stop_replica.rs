//! StopReplica (API key 5), versions 0-4: the controller tells a broker to
//! stop replicating partitions, and optionally to delete them.
//!
//! v1 adds BrokerEpoch and groups partitions by topic; v2 is the first
//! flexible version; v3 moves the delete flag into per-partition states that
//! also carry the leader epoch; v4 adds IsKRaftController.

use bytes::Buf;

use super::{non_default, CodecResult, Reader, Sink, Writer, STOP_REPLICA_FIRST_FLEXIBLE_VERSION};

fn flexible(version: i16) -> bool {
    version >= STOP_REPLICA_FIRST_FLEXIBLE_VERSION
}

#[derive(Debug, Clone, PartialEq)]
pub struct StopReplicaRequest {
    pub controller_id: i32,
    /// v4+.
    pub is_kraft_controller: bool,
    pub controller_epoch: i32,
    /// v1+; -1 when absent.
    pub broker_epoch: i64,
    /// v0-2; from v3 each partition state has its own flag.
    pub delete_partitions: bool,
    /// v0.
    pub ungrouped_partitions: Vec<StopReplicaPartitionV0>,
    /// v1-2.
    pub topics: Vec<StopReplicaTopicV1>,
    /// v3+.
    pub topic_states: Vec<StopReplicaTopicState>,
}

impl Default for StopReplicaRequest {
    fn default() -> Self {
        Self {
            controller_id: 0,
            is_kraft_controller: false,
            controller_epoch: 0,
            broker_epoch: -1,
            delete_partitions: false,
            ungrouped_partitions: Vec::new(),
            topics: Vec::new(),
            topic_states: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct StopReplicaPartitionV0 {
    pub topic_name: String,
    pub partition_index: i32,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct StopReplicaTopicV1 {
    pub name: String,
    pub partition_indexes: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct StopReplicaTopicState {
    pub topic_name: String,
    pub partition_states: Vec<StopReplicaPartitionState>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StopReplicaPartitionState {
    pub partition_index: i32,
    /// -1 when the controller does not know it (and by default).
    pub leader_epoch: i32,
    pub delete_partition: bool,
}

impl Default for StopReplicaPartitionState {
    fn default() -> Self {
        Self {
            partition_index: 0,
            leader_epoch: -1,
            delete_partition: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct StopReplicaResponse {
    pub error_code: i16,
    pub partition_errors: Vec<StopReplicaPartitionError>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct StopReplicaPartitionError {
    pub topic_name: String,
    pub partition_index: i32,
    pub error_code: i16,
}

impl StopReplicaRequest {
    pub(super) fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        let flexible = flexible(version);
        w.i32(self.controller_id);
        if version >= 4 {
            w.bool(self.is_kraft_controller);
        } else if self.is_kraft_controller {
            return Err(non_default("isKRaftController", version));
        }
        w.i32(self.controller_epoch);
        if version >= 1 {
            w.i64(self.broker_epoch);
        }
        if version <= 2 {
            w.bool(self.delete_partitions);
        } else if self.delete_partitions {
            return Err(non_default("deletePartitions", version));
        }
        if version == 0 {
            w.array(
                &self.ungrouped_partitions,
                flexible,
                "ungroupedPartitions",
                |w, partition| {
                    w.string(&partition.topic_name, flexible, "topicName")?;
                    w.i32(partition.partition_index);
                    Ok(())
                },
            )?;
        } else if !self.ungrouped_partitions.is_empty() {
            return Err(non_default("ungroupedPartitions", version));
        }
        if (1..=2).contains(&version) {
            w.array(&self.topics, flexible, "topics", |w, topic| {
                w.string(&topic.name, flexible, "name")?;
                w.i32_array(&topic.partition_indexes, flexible, "partitionIndexes")?;
                w.empty_tagged_fields(flexible);
                Ok(())
            })?;
        } else if !self.topics.is_empty() {
            return Err(non_default("topics", version));
        }
        if version >= 3 {
            w.array(&self.topic_states, flexible, "topicStates", |w, topic| {
                topic.write(w, flexible)
            })?;
        } else if !self.topic_states.is_empty() {
            return Err(non_default("topicStates", version));
        }
        w.empty_tagged_fields(flexible);
        Ok(())
    }

    pub(super) fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let flexible = flexible(version);
        let mut request = Self {
            controller_id: r.i32()?,
            ..Self::default()
        };
        if version >= 4 {
            request.is_kraft_controller = r.bool()?;
        }
        request.controller_epoch = r.i32()?;
        if version >= 1 {
            request.broker_epoch = r.i64()?;
        }
        if version <= 2 {
            request.delete_partitions = r.bool()?;
        }
        if version == 0 {
            request.ungrouped_partitions = r.array(flexible, "ungroupedPartitions", |r| {
                Ok(StopReplicaPartitionV0 {
                    topic_name: r.string(flexible, "topicName")?,
                    partition_index: r.i32()?,
                })
            })?;
        }
        if (1..=2).contains(&version) {
            request.topics = r.array(flexible, "topics", |r| {
                let topic = StopReplicaTopicV1 {
                    name: r.string(flexible, "name")?,
                    partition_indexes: r.i32_array(flexible, "partitionIndexes")?,
                };
                r.skip_tagged_fields(flexible)?;
                Ok(topic)
            })?;
        }
        if version >= 3 {
            request.topic_states = r.array(flexible, "topicStates", |r| {
                StopReplicaTopicState::read(r, flexible)
            })?;
        }
        r.skip_tagged_fields(flexible)?;
        Ok(request)
    }
}

impl StopReplicaTopicState {
    fn write<S: Sink>(&self, w: &mut Writer<S>, flexible: bool) -> CodecResult<()> {
        w.string(&self.topic_name, flexible, "topicName")?;
        w.array(
            &self.partition_states,
            flexible,
            "partitionStates",
            |w, state| {
                w.i32(state.partition_index);
                w.i32(state.leader_epoch);
                w.bool(state.delete_partition);
                w.empty_tagged_fields(flexible);
                Ok(())
            },
        )?;
        w.empty_tagged_fields(flexible);
        Ok(())
    }

    fn read<B: Buf>(r: &mut Reader<'_, B>, flexible: bool) -> CodecResult<Self> {
        let topic = Self {
            topic_name: r.string(flexible, "topicName")?,
            partition_states: r.array(flexible, "partitionStates", |r| {
                let state = StopReplicaPartitionState {
                    partition_index: r.i32()?,
                    leader_epoch: r.i32()?,
                    delete_partition: r.bool()?,
                };
                r.skip_tagged_fields(flexible)?;
                Ok(state)
            })?,
        };
        r.skip_tagged_fields(flexible)?;
        Ok(topic)
    }
}

impl StopReplicaResponse {
    pub(super) fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        let flexible = flexible(version);
        w.i16(self.error_code);
        w.array(
            &self.partition_errors,
            flexible,
            "partitionErrors",
            |w, error| {
                w.string(&error.topic_name, flexible, "topicName")?;
                w.i32(error.partition_index);
                w.i16(error.error_code);
                w.empty_tagged_fields(flexible);
                Ok(())
            },
        )?;
        w.empty_tagged_fields(flexible);
        Ok(())
    }

    pub(super) fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let flexible = flexible(version);
        let response = Self {
            error_code: r.i16()?,
            partition_errors: r.array(flexible, "partitionErrors", |r| {
                let error = StopReplicaPartitionError {
                    topic_name: r.string(flexible, "topicName")?,
                    partition_index: r.i32()?,
                    error_code: r.i16()?,
                };
                r.skip_tagged_fields(flexible)?;
                Ok(error)
            })?,
        };
        r.skip_tagged_fields(flexible)?;
        Ok(response)
    }
}
