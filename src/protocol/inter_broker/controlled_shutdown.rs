//! ControlledShutdown (API key 7), versions 0-3: a broker asks the
//! controller to move leadership away before it stops. The response lists
//! the partitions it still leads.
//!
//! v0 uses request header v0 (no client id); v2 adds BrokerEpoch; v3 is the
//! first flexible version.

use bytes::Buf;

use super::{CodecResult, Reader, Sink, Writer, CONTROLLED_SHUTDOWN_FIRST_FLEXIBLE_VERSION};

fn flexible(version: i16) -> bool {
    version >= CONTROLLED_SHUTDOWN_FIRST_FLEXIBLE_VERSION
}

#[derive(Debug, Clone, PartialEq)]
pub struct ControlledShutdownRequest {
    pub broker_id: i32,
    /// v2+; -1 when absent.
    pub broker_epoch: i64,
}

impl Default for ControlledShutdownRequest {
    fn default() -> Self {
        Self {
            broker_id: 0,
            broker_epoch: -1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ControlledShutdownResponse {
    pub error_code: i16,
    pub remaining_partitions: Vec<RemainingPartition>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct RemainingPartition {
    pub topic_name: String,
    pub partition_index: i32,
}

impl ControlledShutdownRequest {
    pub(super) fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        w.i32(self.broker_id);
        if version >= 2 {
            w.i64(self.broker_epoch);
        }
        w.empty_tagged_fields(flexible(version));
        Ok(())
    }

    pub(super) fn read<B: Buf>(r: &mut Reader<'_, B>, version: i16) -> CodecResult<Self> {
        let mut request = Self {
            broker_id: r.i32()?,
            ..Self::default()
        };
        if version >= 2 {
            request.broker_epoch = r.i64()?;
        }
        r.skip_tagged_fields(flexible(version))?;
        Ok(request)
    }
}

impl ControlledShutdownResponse {
    pub(super) fn write<S: Sink>(&self, w: &mut Writer<S>, version: i16) -> CodecResult<()> {
        let flexible = flexible(version);
        w.i16(self.error_code);
        w.array(
            &self.remaining_partitions,
            flexible,
            "remainingPartitions",
            |w, partition| {
                w.string(&partition.topic_name, flexible, "topicName")?;
                w.i32(partition.partition_index);
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
            remaining_partitions: r.array(flexible, "remainingPartitions", |r| {
                let partition = RemainingPartition {
                    topic_name: r.string(flexible, "topicName")?,
                    partition_index: r.i32()?,
                };
                r.skip_tagged_fields(flexible)?;
                Ok(partition)
            })?,
        };
        r.skip_tagged_fields(flexible)?;
        Ok(response)
    }
}
