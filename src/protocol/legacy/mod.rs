//! Codecs for the request versions Apache Kafka 3.9 serves but the
//! `kafka-protocol` crate (which follows Kafka 4.x, KIP-896) no longer
//! knows: DescribeLogDirs v0 (v1's layout, so the crate's v1 codec serves
//! it), ListOffsets v0, CreateTopics v0-1, DeleteTopics v0, OffsetCommit
//! v0-1, OffsetFetch v0, OffsetForLeaderEpoch v0-1, DescribeConfigs v0, Produce
//! v0-v2 and Fetch v0-v3 (`produce_fetch`; their message sets are converted
//! by `kshard_shards::log::legacy`), and AlterPartition v0-1
//! (`alter_partition`, the only flexible ones). The others are non-flexible; their layouts follow Kafka 3.9's JSON
//! message definitions.
//!
//! A request is decoded into the crate's struct of the next version up (the
//! fields an old version lacks take their Kafka defaults), so the handlers
//! run unchanged, and the handler's response struct is encoded in the old
//! layout. ListOffsets v0 has its own types (`ListOffsetsV0Request`,
//! `ListOffsetsV0Response`): its answer is a list of offsets, not one.
//!
//! Decoding is bounds-checked: a count larger than the bytes left is refused
//! before anything is allocated, and no input panics.

mod alter_partition;
#[cfg(test)]
mod alter_partition_tests;
mod produce_fetch;
#[cfg(test)]
mod produce_fetch_tests;
mod requests;
mod responses;
#[cfg(test)]
mod tests;

use std::any::Any;

use bytes::BufMut;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::Encodable;

pub use alter_partition::{
    AlterPartitionV0Partition, AlterPartitionV0PartitionResponse, AlterPartitionV0Request,
    AlterPartitionV0Response, AlterPartitionV0Topic, AlterPartitionV0TopicResponse,
};
pub use requests::{ListOffsetsV0Partition, ListOffsetsV0Request, ListOffsetsV0Topic};
pub use responses::{
    ListOffsetsV0PartitionResponse, ListOffsetsV0Response, ListOffsetsV0TopicResponse,
};

/// The lowest version the `kafka-protocol` crate decodes for `key`, when
/// this module serves the versions below it.
fn crate_min_version(key: ApiKey) -> Option<i16> {
    match key {
        ApiKey::ListOffsets
        | ApiKey::DeleteTopics
        | ApiKey::OffsetFetch
        | ApiKey::DescribeConfigs
        | ApiKey::DescribeLogDirs
        | ApiKey::AlterReplicaLogDirs => Some(1),
        ApiKey::CreateTopics | ApiKey::OffsetCommit | ApiKey::OffsetForLeaderEpoch => Some(2),
        ApiKey::Produce => Some(3),
        ApiKey::Fetch => Some(4),
        ApiKey::AlterPartition => Some(2),
        _ => None,
    }
}

/// Whether `version` of `key` is one this module encodes and decodes.
pub fn is_legacy(key: ApiKey, version: i16) -> bool {
    crate_min_version(key).is_some_and(|min| (0..min).contains(&version))
}

/// Decodes a legacy request body into the struct its handler expects
/// (boxed for `protocol::decode_body`). None: not a legacy version.
pub fn decode_request(
    key: ApiKey,
    version: i16,
    body: &[u8],
) -> Option<Result<Box<dyn Any>, String>> {
    if !is_legacy(key, version) {
        return None;
    }
    let mut r = Reader::new(body);
    let decoded: Result<Box<dyn Any>, String> = match key {
        ApiKey::ListOffsets => {
            requests::list_offsets_v0(&mut r).map(|m| Box::new(m) as Box<dyn Any>)
        }
        ApiKey::CreateTopics => requests::create_topics(&mut r, version).map(|m| Box::new(m) as _),
        ApiKey::DeleteTopics => requests::delete_topics_v0(&mut r).map(|m| Box::new(m) as _),
        ApiKey::OffsetCommit => requests::offset_commit(&mut r, version).map(|m| Box::new(m) as _),
        ApiKey::OffsetFetch => requests::offset_fetch_v0(&mut r).map(|m| Box::new(m) as _),
        ApiKey::OffsetForLeaderEpoch => {
            requests::offset_for_leader_epoch(&mut r).map(|m| Box::new(m) as _)
        }
        ApiKey::DescribeConfigs => requests::describe_configs_v0(&mut r).map(|m| Box::new(m) as _),
        ApiKey::Produce => produce_fetch::produce(&mut r).map(|m| Box::new(m) as _),
        ApiKey::Fetch => produce_fetch::fetch(&mut r, version).map(|m| Box::new(m) as _),
        ApiKey::AlterPartition => {
            alter_partition::request(&mut r, version).map(|m| Box::new(m) as _)
        }
        ApiKey::DescribeLogDirs => as_v1::<kafka_protocol::messages::DescribeLogDirsRequest>(body)
            .map(|m| Box::new(m) as _),
        ApiKey::AlterReplicaLogDirs => {
            as_v1::<kafka_protocol::messages::AlterReplicaLogDirsRequest>(body)
                .map(|m| Box::new(m) as _)
        }
        _ => return None,
    };
    Some(decoded.map_err(|e| format!("{key:?} v{version}: {e}")))
}

/// A version 0 that has the layout of version 1: decoded by the crate's v1.
fn as_v1<M: kafka_protocol::protocol::Decodable>(body: &[u8]) -> Result<M, String> {
    let mut bytes = bytes::Bytes::copy_from_slice(body);
    M::decode(&mut bytes, 1).map_err(|e| e.to_string())
}

/// Encodes a response body (no header) in a legacy version's layout. None:
/// not a legacy version, or `body` is not the struct this version encodes.
pub fn encode_response(
    key: ApiKey,
    version: i16,
    body: &dyn Any,
) -> Option<Result<Vec<u8>, String>> {
    if !is_legacy(key, version) {
        return None;
    }
    let mut w = Vec::new();
    let written = match key {
        ApiKey::ListOffsets => {
            responses::list_offsets_v0(&mut w, body.downcast_ref()?);
            Ok(())
        }
        ApiKey::CreateTopics => {
            responses::create_topics(&mut w, body.downcast_ref()?, version);
            Ok(())
        }
        ApiKey::DeleteTopics => {
            responses::delete_topics_v0(&mut w, body.downcast_ref()?);
            Ok(())
        }
        ApiKey::OffsetCommit => responses::offset_commit(&mut w, body.downcast_ref()?),
        ApiKey::OffsetFetch => responses::offset_fetch_v0(&mut w, body.downcast_ref()?),
        ApiKey::OffsetForLeaderEpoch => {
            responses::offset_for_leader_epoch(&mut w, body.downcast_ref()?, version);
            Ok(())
        }
        ApiKey::DescribeConfigs => {
            responses::describe_configs_v0(&mut w, body.downcast_ref()?);
            Ok(())
        }
        ApiKey::Produce => {
            produce_fetch::produce_response(&mut w, body.downcast_ref()?, version);
            Ok(())
        }
        ApiKey::AlterPartition => {
            alter_partition::response(&mut w, body.downcast_ref()?, version);
            Ok(())
        }
        ApiKey::DescribeLogDirs => {
            let response: &kafka_protocol::messages::DescribeLogDirsResponse =
                body.downcast_ref()?;
            response.encode(&mut w, 1).map_err(|e| e.to_string())
        }
        ApiKey::AlterReplicaLogDirs => {
            let response: &kafka_protocol::messages::AlterReplicaLogDirsResponse =
                body.downcast_ref()?;
            response.encode(&mut w, 1).map_err(|e| e.to_string())
        }
        _ => return None,
    };
    Some(
        written
            .map(|()| w)
            .map_err(|e| format!("{key:?} v{version} response: {e}")),
    )
}

/// The bytes of one line of a golden-vector file (`<message> <version>
/// <hex body>`, written by the generators in tests/legacy_golden).
#[cfg(test)]
fn golden_vector(text: &str, name: &str, version: i16) -> Vec<u8> {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name} {version} ")))
        .unwrap_or_else(|| panic!("no golden vector {name} v{version}"));
    let hex = line.rsplit(' ').next().unwrap();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

// Kafka caps every string at i16::MAX bytes.
const MAX_STRING_BYTES: usize = i16::MAX as usize;

/// Bounds-checked reads of non-flexible fields.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.buf.len() < n {
            return Err(format!(
                "message ends early: {n} byte(s) needed, {} left",
                self.buf.len()
            ));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array_of<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub(crate) fn i8(&mut self) -> Result<i8, String> {
        Ok(i8::from_be_bytes(self.array_of()?))
    }

    pub(crate) fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(self.array_of()?))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.array_of()?))
    }

    pub(crate) fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_be_bytes(self.array_of()?))
    }

    pub(crate) fn bool(&mut self) -> Result<bool, String> {
        Ok(self.i8()? != 0)
    }

    /// A nullable string: Kafka reads any negative length as null and
    /// replaces malformed UTF-8 rather than failing.
    pub(crate) fn nullable_string(&mut self, field: &str) -> Result<Option<String>, String> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let len = len as usize;
        if len > MAX_STRING_BYTES {
            return Err(format!("string field {field} had invalid length {len}"));
        }
        Ok(Some(String::from_utf8_lossy(self.take(len)?).into_owned()))
    }

    /// Nullable bytes (Produce records): any negative length is null.
    pub(crate) fn nullable_bytes(&mut self, field: &str) -> Result<Option<&'a [u8]>, String> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(None);
        }
        let len = len as usize;
        if len > self.buf.len() {
            return Err(format!(
                "{field} of {len} bytes, but there are only {} bytes remaining",
                self.buf.len()
            ));
        }
        self.take(len).map(Some)
    }

    pub(crate) fn string(&mut self, field: &str) -> Result<String, String> {
        self.nullable_string(field)?
            .ok_or_else(|| format!("non-nullable field {field} was serialized as null"))
    }

    /// The element count of a nullable array (None for null), refused when
    /// it exceeds the bytes left: every element takes at least one byte.
    pub(crate) fn nullable_array_len(&mut self, field: &str) -> Result<Option<usize>, String> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(None);
        }
        let len = len as usize;
        if len > self.buf.len() {
            return Err(format!(
                "tried to allocate a collection of size {len} for {field}, but there are only {} bytes remaining",
                self.buf.len()
            ));
        }
        Ok(Some(len))
    }

    pub(crate) fn nullable_array<T>(
        &mut self,
        field: &str,
        mut element: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Option<Vec<T>>, String> {
        let Some(len) = self.nullable_array_len(field)? else {
            return Ok(None);
        };
        let mut items = Vec::with_capacity(len);
        for _ in 0..len {
            items.push(element(self)?);
        }
        Ok(Some(items))
    }

    pub(crate) fn array<T>(
        &mut self,
        field: &str,
        element: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        self.nullable_array(field, element)?
            .ok_or_else(|| format!("non-nullable field {field} was serialized as null"))
    }
}

/// Non-flexible writes. Strings and counts longer than the wire allows are
/// cut to the wire's limit rather than written wrong; no handler produces them.
pub(crate) trait Writer {
    fn string(&mut self, s: &str);
    fn nullable_string(&mut self, s: Option<&str>);
    fn count(&mut self, n: usize);
}

impl Writer for Vec<u8> {
    fn string(&mut self, s: &str) {
        let len = s.len().min(MAX_STRING_BYTES);
        self.put_i16(len as i16);
        self.put_slice(&s.as_bytes()[..len]);
    }

    fn nullable_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.string(s),
            None => self.put_i16(-1),
        }
    }

    fn count(&mut self, n: usize) {
        self.put_i32(i32::try_from(n).unwrap_or(i32::MAX));
    }
}
