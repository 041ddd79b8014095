//! Codecs for the controller-to-broker RPCs of ZooKeeper-mode Kafka:
//! LeaderAndIsr (key 4), StopReplica (5), UpdateMetadata (6) and
//! ControlledShutdown (7). Kafka 4.0 dropped them, so the `kafka-protocol`
//! crate has none; these follow Apache Kafka 3.9's message definitions.
//!
//! Every message implements `kafka_protocol::protocol::{Encodable,
//! Decodable}`. Decoding mirrors Kafka's generated readers: fields a version
//! lacks take their defaults, unknown tagged fields are skipped, and a count
//! larger than the bytes left is refused before anything is allocated.
//! Encoding mirrors Kafka's generated writers: an ignorable field a version
//! lacks is dropped, a non-ignorable one holding a non-default value is an
//! error. An encode that fails may have written part of the message.

mod controlled_shutdown;
mod leader_and_isr;
mod stop_replica;
#[cfg(test)]
mod tests;
mod update_metadata;

use std::fmt;

use bytes::{Buf, BufMut};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{
    Decodable, Encodable, HeaderVersion, Message, Request, VersionRange,
};

pub use controlled_shutdown::{
    ControlledShutdownRequest, ControlledShutdownResponse, RemainingPartition,
};
pub use leader_and_isr::{
    LeaderAndIsrLiveLeader, LeaderAndIsrPartitionError, LeaderAndIsrPartitionState,
    LeaderAndIsrRequest, LeaderAndIsrResponse, LeaderAndIsrTopicError, LeaderAndIsrTopicState,
};
pub use stop_replica::{
    StopReplicaPartitionError, StopReplicaPartitionState, StopReplicaPartitionV0,
    StopReplicaRequest, StopReplicaResponse, StopReplicaTopicState, StopReplicaTopicV1,
};
pub use update_metadata::{
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
    UpdateMetadataRequest, UpdateMetadataResponse, UpdateMetadataTopicState,
};

pub const LEADER_AND_ISR_API_KEY: i16 = 4;
pub const STOP_REPLICA_API_KEY: i16 = 5;
pub const UPDATE_METADATA_API_KEY: i16 = 6;
pub const CONTROLLED_SHUTDOWN_API_KEY: i16 = 7;

/// Valid versions (lowest, highest), requests and responses alike.
pub const LEADER_AND_ISR_VERSIONS: (i16, i16) = (0, 7);
pub const STOP_REPLICA_VERSIONS: (i16, i16) = (0, 4);
pub const UPDATE_METADATA_VERSIONS: (i16, i16) = (0, 8);
pub const CONTROLLED_SHUTDOWN_VERSIONS: (i16, i16) = (0, 3);

/// First flexible version (compact strings and arrays, tagged fields).
pub const LEADER_AND_ISR_FIRST_FLEXIBLE_VERSION: i16 = 4;
pub const STOP_REPLICA_FIRST_FLEXIBLE_VERSION: i16 = 2;
pub const UPDATE_METADATA_FIRST_FLEXIBLE_VERSION: i16 = 6;
pub const CONTROLLED_SHUTDOWN_FIRST_FLEXIBLE_VERSION: i16 = 3;

fn first_flexible_version(api_key: i16) -> Option<i16> {
    match api_key {
        LEADER_AND_ISR_API_KEY => Some(LEADER_AND_ISR_FIRST_FLEXIBLE_VERSION),
        STOP_REPLICA_API_KEY => Some(STOP_REPLICA_FIRST_FLEXIBLE_VERSION),
        UPDATE_METADATA_API_KEY => Some(UPDATE_METADATA_FIRST_FLEXIBLE_VERSION),
        CONTROLLED_SHUTDOWN_API_KEY => Some(CONTROLLED_SHUTDOWN_FIRST_FLEXIBLE_VERSION),
        _ => None,
    }
}

/// Request header version for `api_key` at `api_version`: 2 in flexible
/// versions, else 1, except ControlledShutdown v0, which predates the client
/// id and uses header v0. Keys other than 4-7 are answered from the
/// `kafka-protocol` crate's table; a key neither knows gives -1.
pub fn request_header_version(api_key: i16, api_version: i16) -> i16 {
    match first_flexible_version(api_key) {
        Some(_) if api_key == CONTROLLED_SHUTDOWN_API_KEY && api_version == 0 => 0,
        Some(flexible) if api_version >= flexible => 2,
        Some(_) => 1,
        None => kafka_protocol::messages::ApiKey::try_from(api_key)
            .map(|key| key.request_header_version(api_version))
            .unwrap_or(-1),
    }
}

/// Response header version for `api_key` at `api_version`: 1 in flexible
/// versions, else 0. Keys other than 4-7 as for [`request_header_version`].
pub fn response_header_version(api_key: i16, api_version: i16) -> i16 {
    match first_flexible_version(api_key) {
        Some(flexible) if api_version >= flexible => 1,
        Some(_) => 0,
        None => kafka_protocol::messages::ApiKey::try_from(api_key)
            .map(|key| key.response_header_version(api_version))
            .unwrap_or(-1),
    }
}

/// A decoded controller-to-broker request.
#[derive(Debug, Clone, PartialEq)]
pub enum InterBrokerRequest {
    LeaderAndIsr(LeaderAndIsrRequest),
    StopReplica(StopReplicaRequest),
    UpdateMetadata(UpdateMetadataRequest),
    ControlledShutdown(ControlledShutdownRequest),
}

/// A decoded response to an [`InterBrokerRequest`].
#[derive(Debug, Clone, PartialEq)]
pub enum InterBrokerResponse {
    LeaderAndIsr(LeaderAndIsrResponse),
    StopReplica(StopReplicaResponse),
    UpdateMetadata(UpdateMetadataResponse),
    ControlledShutdown(ControlledShutdownResponse),
}

fn unknown_api_key(api_key: i16) -> String {
    format!("api key {api_key} is not a controller-to-broker API")
}

fn encode_message<M: Encodable>(message: &M, version: i16) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    message
        .encode(&mut out, version)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

fn decode_message<M: Decodable>(mut body: &[u8], version: i16) -> Result<M, String> {
    M::decode(&mut body, version).map_err(|e| e.to_string())
}

impl InterBrokerRequest {
    pub fn api_key(&self) -> i16 {
        match self {
            Self::LeaderAndIsr(_) => LEADER_AND_ISR_API_KEY,
            Self::StopReplica(_) => STOP_REPLICA_API_KEY,
            Self::UpdateMetadata(_) => UPDATE_METADATA_API_KEY,
            Self::ControlledShutdown(_) => CONTROLLED_SHUTDOWN_API_KEY,
        }
    }

    /// The request body (no header) at `version`.
    pub fn encode_to_vec(&self, version: i16) -> Result<Vec<u8>, String> {
        match self {
            Self::LeaderAndIsr(m) => encode_message(m, version),
            Self::StopReplica(m) => encode_message(m, version),
            Self::UpdateMetadata(m) => encode_message(m, version),
            Self::ControlledShutdown(m) => encode_message(m, version),
        }
    }
}

impl InterBrokerResponse {
    pub fn api_key(&self) -> i16 {
        match self {
            Self::LeaderAndIsr(_) => LEADER_AND_ISR_API_KEY,
            Self::StopReplica(_) => STOP_REPLICA_API_KEY,
            Self::UpdateMetadata(_) => UPDATE_METADATA_API_KEY,
            Self::ControlledShutdown(_) => CONTROLLED_SHUTDOWN_API_KEY,
        }
    }

    /// The response body (no header) at `version`.
    pub fn encode_to_vec(&self, version: i16) -> Result<Vec<u8>, String> {
        match self {
            Self::LeaderAndIsr(m) => encode_message(m, version),
            Self::StopReplica(m) => encode_message(m, version),
            Self::UpdateMetadata(m) => encode_message(m, version),
            Self::ControlledShutdown(m) => encode_message(m, version),
        }
    }
}

/// Decodes a request body (the bytes after the request header). Bytes left
/// over after the message are ignored, as Kafka's request parser does.
pub fn decode_request(
    api_key: i16,
    version: i16,
    body: &[u8],
) -> Result<InterBrokerRequest, String> {
    Ok(match api_key {
        LEADER_AND_ISR_API_KEY => InterBrokerRequest::LeaderAndIsr(decode_message(body, version)?),
        STOP_REPLICA_API_KEY => InterBrokerRequest::StopReplica(decode_message(body, version)?),
        UPDATE_METADATA_API_KEY => {
            InterBrokerRequest::UpdateMetadata(decode_message(body, version)?)
        }
        CONTROLLED_SHUTDOWN_API_KEY => {
            InterBrokerRequest::ControlledShutdown(decode_message(body, version)?)
        }
        _ => return Err(unknown_api_key(api_key)),
    })
}

/// Decodes a response body (the bytes after the response header).
pub fn decode_response(
    api_key: i16,
    version: i16,
    body: &[u8],
) -> Result<InterBrokerResponse, String> {
    Ok(match api_key {
        LEADER_AND_ISR_API_KEY => InterBrokerResponse::LeaderAndIsr(decode_message(body, version)?),
        STOP_REPLICA_API_KEY => InterBrokerResponse::StopReplica(decode_message(body, version)?),
        UPDATE_METADATA_API_KEY => {
            InterBrokerResponse::UpdateMetadata(decode_message(body, version)?)
        }
        CONTROLLED_SHUTDOWN_API_KEY => {
            InterBrokerResponse::ControlledShutdown(decode_message(body, version)?)
        }
        _ => return Err(unknown_api_key(api_key)),
    })
}

/// Decodes `body` as both the request and the response of `api_key`, for
/// fuzzing: Ok when either decodes.
pub fn decode_any(api_key: i16, version: i16, body: &[u8]) -> Result<(), String> {
    let request = decode_request(api_key, version, body);
    let response = decode_response(api_key, version, body);
    match (request, response) {
        (Err(request), Err(response)) => {
            Err(format!("as request: {request}; as response: {response}"))
        }
        _ => Ok(()),
    }
}

/// Why a message could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError(String);

impl CodecError {
    fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CodecError {}

type CodecResult<T> = Result<T, CodecError>;

fn check_version(message: &str, versions: (i16, i16), version: i16) -> CodecResult<()> {
    if version < versions.0 || version > versions.1 {
        return Err(CodecError::new(format!(
            "{message} has no version {version} (valid {}-{})",
            versions.0, versions.1
        )));
    }
    Ok(())
}

/// The error Kafka's writers raise for a non-ignorable field the version
/// cannot carry.
fn non_default(field: &str, version: i16) -> CodecError {
    CodecError::new(format!(
        "attempted to write a non-default {field} at version {version}"
    ))
}

// Kafka caps every string at i16::MAX bytes, compact ones included.
const MAX_STRING_BYTES: usize = i16::MAX as usize;

/// Bounds-checked reads from the message buffer.
struct Reader<'a, B: Buf> {
    buf: &'a mut B,
}

impl<'a, B: Buf> Reader<'a, B> {
    fn new(buf: &'a mut B) -> Self {
        Self { buf }
    }

    fn need(&self, bytes: usize) -> CodecResult<()> {
        if self.buf.remaining() < bytes {
            return Err(CodecError::new(format!(
                "message ends early: {bytes} byte(s) needed, {} left",
                self.buf.remaining()
            )));
        }
        Ok(())
    }

    fn i8(&mut self) -> CodecResult<i8> {
        self.need(1)?;
        Ok(self.buf.get_i8())
    }

    fn i16(&mut self) -> CodecResult<i16> {
        self.need(2)?;
        Ok(self.buf.get_i16())
    }

    fn i32(&mut self) -> CodecResult<i32> {
        self.need(4)?;
        Ok(self.buf.get_i32())
    }

    fn i64(&mut self) -> CodecResult<i64> {
        self.need(8)?;
        Ok(self.buf.get_i64())
    }

    fn bool(&mut self) -> CodecResult<bool> {
        Ok(self.i8()? != 0)
    }

    fn uuid(&mut self) -> CodecResult<uuid::Uuid> {
        self.need(16)?;
        Ok(uuid::Uuid::from_u128(self.buf.get_u128()))
    }

    fn unsigned_varint(&mut self) -> CodecResult<u32> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let byte = self.i8()? as u8;
            if i == 4 && byte > 0x0f {
                return Err(CodecError::new("unsigned varint is longer than 32 bits"));
            }
            value |= u32::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(CodecError::new("unsigned varint is longer than 5 bytes"))
    }

    /// The length prefix of a string: None for null.
    fn string_len(&mut self, flexible: bool, field: &str) -> CodecResult<Option<usize>> {
        // Kafka reads any negative length as null.
        let len = if flexible {
            i64::from(self.unsigned_varint()?) - 1
        } else {
            i64::from(self.i16()?)
        };
        if len < 0 {
            return Ok(None);
        }
        let len = len as usize;
        if len > MAX_STRING_BYTES {
            return Err(CodecError::new(format!(
                "string field {field} had invalid length {len}"
            )));
        }
        self.need(len)?;
        Ok(Some(len))
    }

    fn string_bytes(&mut self, len: usize) -> String {
        let mut raw = vec![0; len];
        self.buf.copy_to_slice(&mut raw);
        // Kafka's Java reader replaces malformed UTF-8 rather than failing.
        match String::from_utf8(raw) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }
    }

    fn string(&mut self, flexible: bool, field: &str) -> CodecResult<String> {
        match self.string_len(flexible, field)? {
            Some(len) => Ok(self.string_bytes(len)),
            None => Err(CodecError::new(format!(
                "non-nullable field {field} was serialized as null"
            ))),
        }
    }

    fn nullable_string(&mut self, flexible: bool, field: &str) -> CodecResult<Option<String>> {
        Ok(self
            .string_len(flexible, field)?
            .map(|len| self.string_bytes(len)))
    }

    /// The element count of a non-nullable array, refused when it exceeds
    /// the bytes left (every element here takes at least one byte).
    fn array_len(&mut self, flexible: bool, field: &str) -> CodecResult<usize> {
        let len = if flexible {
            i64::from(self.unsigned_varint()?) - 1
        } else {
            i64::from(self.i32()?)
        };
        if len < 0 {
            return Err(CodecError::new(format!(
                "non-nullable field {field} was serialized as null"
            )));
        }
        let len = len as usize;
        if len > self.buf.remaining() {
            return Err(CodecError::new(format!(
                "tried to allocate a collection of size {len}, but there are only {} bytes remaining",
                self.buf.remaining()
            )));
        }
        Ok(len)
    }

    fn array<T>(
        &mut self,
        flexible: bool,
        field: &str,
        mut element: impl FnMut(&mut Self) -> CodecResult<T>,
    ) -> CodecResult<Vec<T>> {
        let len = self.array_len(flexible, field)?;
        let mut items = Vec::with_capacity(len.min(self.buf.remaining()));
        for _ in 0..len {
            items.push(element(self)?);
        }
        Ok(items)
    }

    fn i32_array(&mut self, flexible: bool, field: &str) -> CodecResult<Vec<i32>> {
        self.array(flexible, field, |r| r.i32())
    }

    /// Reads a tagged-field section: fields whose tag is in `known` go to
    /// `on_field`, the rest are skipped.
    fn tagged_fields(
        &mut self,
        known: &[u32],
        mut on_field: impl FnMut(u32, &[u8]) -> CodecResult<()>,
    ) -> CodecResult<()> {
        let count = self.unsigned_varint()?;
        for _ in 0..count {
            let tag = self.unsigned_varint()?;
            let size = self.unsigned_varint()? as usize;
            self.need(size)?;
            if known.contains(&tag) {
                let mut data = vec![0; size];
                self.buf.copy_to_slice(&mut data);
                on_field(tag, &data)?;
            } else {
                self.buf.advance(size);
            }
        }
        Ok(())
    }

    /// Skips the tagged-field section of a struct with no known tags; a
    /// no-op in versions that are not flexible.
    fn skip_tagged_fields(&mut self, flexible: bool) -> CodecResult<()> {
        if flexible {
            self.tagged_fields(&[], |_, _| Ok(()))?;
        }
        Ok(())
    }
}

/// Where encoded bytes go: a buffer, or a byte count for `compute_size`.
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

struct BufSink<'a, B: BufMut>(&'a mut B);

impl<B: BufMut> Sink for BufSink<'_, B> {
    fn put(&mut self, bytes: &[u8]) {
        self.0.put_slice(bytes);
    }
}

#[derive(Default)]
struct SizeSink(usize);

impl Sink for SizeSink {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

struct Writer<S: Sink> {
    sink: S,
}

impl<S: Sink> Writer<S> {
    fn i8(&mut self, value: i8) {
        self.sink.put(&value.to_be_bytes());
    }

    fn i16(&mut self, value: i16) {
        self.sink.put(&value.to_be_bytes());
    }

    fn i32(&mut self, value: i32) {
        self.sink.put(&value.to_be_bytes());
    }

    fn i64(&mut self, value: i64) {
        self.sink.put(&value.to_be_bytes());
    }

    fn bool(&mut self, value: bool) {
        self.i8(i8::from(value));
    }

    fn uuid(&mut self, value: &uuid::Uuid) {
        self.sink.put(value.as_bytes());
    }

    fn unsigned_varint(&mut self, mut value: u32) {
        let mut out = [0u8; 5];
        let mut len = 0;
        while value >= 0x80 {
            out[len] = (value as u8 & 0x7f) | 0x80;
            value >>= 7;
            len += 1;
        }
        out[len] = value as u8;
        self.sink.put(&out[..=len]);
    }

    fn string_len(&mut self, len: usize, flexible: bool, field: &str) -> CodecResult<()> {
        if len > MAX_STRING_BYTES {
            return Err(CodecError::new(format!(
                "'{field}' field is too long to be serialized"
            )));
        }
        if flexible {
            self.unsigned_varint(len as u32 + 1);
        } else {
            self.i16(len as i16);
        }
        Ok(())
    }

    fn string(&mut self, value: &str, flexible: bool, field: &str) -> CodecResult<()> {
        self.string_len(value.len(), flexible, field)?;
        self.sink.put(value.as_bytes());
        Ok(())
    }

    fn nullable_string(
        &mut self,
        value: Option<&str>,
        flexible: bool,
        field: &str,
    ) -> CodecResult<()> {
        match value {
            Some(value) => self.string(value, flexible, field),
            None if flexible => {
                self.unsigned_varint(0);
                Ok(())
            }
            None => {
                self.i16(-1);
                Ok(())
            }
        }
    }

    fn array<T>(
        &mut self,
        items: &[T],
        flexible: bool,
        field: &str,
        mut element: impl FnMut(&mut Self, &T) -> CodecResult<()>,
    ) -> CodecResult<()> {
        // i32::MAX elements fit both the INT32 and the compact (len + 1) form.
        let len = i32::try_from(items.len())
            .ok()
            .filter(|&len| len < i32::MAX)
            .ok_or_else(|| CodecError::new(format!("'{field}' has too many elements")))?;
        if flexible {
            self.unsigned_varint(len as u32 + 1);
        } else {
            self.i32(len);
        }
        for item in items {
            element(self, item)?;
        }
        Ok(())
    }

    fn i32_array(&mut self, items: &[i32], flexible: bool, field: &str) -> CodecResult<()> {
        self.array(items, flexible, field, |w, &v| {
            w.i32(v);
            Ok(())
        })
    }

    /// An empty tagged-field section in flexible versions.
    fn empty_tagged_fields(&mut self, flexible: bool) {
        if flexible {
            self.unsigned_varint(0);
        }
    }
}

/// Implements the `kafka-protocol` traits for a top-level message that has
/// `write(&self, &mut Writer, version)` and `read(&mut Reader, version)`.
macro_rules! impl_message {
    ($ty:ident, $key:expr, $versions:expr, $header_version:path) => {
        impl Encodable for $ty {
            fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> anyhow::Result<()> {
                check_version(stringify!($ty), $versions, version)?;
                self.write(&mut Writer { sink: BufSink(buf) }, version)?;
                Ok(())
            }

            fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
                check_version(stringify!($ty), $versions, version)?;
                let mut writer = Writer {
                    sink: SizeSink::default(),
                };
                self.write(&mut writer, version)?;
                Ok(writer.sink.0)
            }
        }

        impl Decodable for $ty {
            fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> anyhow::Result<Self> {
                check_version(stringify!($ty), $versions, version)?;
                Ok(Self::read(&mut Reader::new(buf), version)?)
            }
        }

        impl Message for $ty {
            const VERSIONS: VersionRange = VersionRange {
                min: $versions.0,
                max: $versions.1,
            };
            const DEPRECATED_VERSIONS: Option<VersionRange> = None;
        }

        impl HeaderVersion for $ty {
            fn header_version(version: i16) -> i16 {
                $header_version($key, version)
            }
        }
    };
}

/// Implements the traits for a request and its response.
macro_rules! impl_api {
    ($($request:ident, $response:ident, $key:expr, $versions:expr;)*) => {
        $(
            impl_message!($request, $key, $versions, request_header_version);
            impl_message!($response, $key, $versions, response_header_version);

            impl Request for $request {
                const KEY: i16 = $key;
                type Response = $response;
            }
        )*
    };
}

impl_api! {
    LeaderAndIsrRequest, LeaderAndIsrResponse, LEADER_AND_ISR_API_KEY, LEADER_AND_ISR_VERSIONS;
    StopReplicaRequest, StopReplicaResponse, STOP_REPLICA_API_KEY, STOP_REPLICA_VERSIONS;
    UpdateMetadataRequest, UpdateMetadataResponse, UPDATE_METADATA_API_KEY, UPDATE_METADATA_VERSIONS;
    ControlledShutdownRequest, ControlledShutdownResponse, CONTROLLED_SHUTDOWN_API_KEY,
        CONTROLLED_SHUTDOWN_VERSIONS;
}
