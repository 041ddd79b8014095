//! Keys and values of `__transaction_state` records in Kafka 3.9's schemas
//! (transaction-coordinator/src/main/resources/common/message/
//! TransactionLogKey.json and TransactionLogValue.json); every key and value
//! starts with an int16 schema version.
//!
//! Key: TransactionLogKey v0 (transactional id). Kafka 3.9 does not fail a
//! load on another key version: it skips the record with a warning ("a left
//! over from an aborted upgrade"). `decode_key` returns an error for it,
//! which the loader skips as it skips a corrupt record.
//!
//! Value: TransactionLogValue v0, or v1 (the first flexible version, written
//! by Kafka 3.9 only once the `transaction.version` feature is >= 1; its 3.9
//! schema has no tagged fields, later ones add tags 0-2, which are skipped).
//! Another value version is an error, as in Kafka. A null value is a
//! tombstone: the transactional id expired. Decoders are bounds-checked and
//! never panic.
//!
//! What Kafka does not persist: the last producer id and epoch (a loaded
//! transaction has -1 for both) and the partitions of an Empty transaction
//! (written as a null array, ignored when read).

use std::collections::BTreeSet;

use super::transaction_metadata::{TopicPartition, TransactionState};

pub const TXN_LOG_KEY_VERSION: i16 = 0;
/// Kafka 3.9's default (`transaction.version` 0).
pub const TXN_LOG_VALUE_VERSION: i16 = 0;
/// Written when the `transaction.version` feature is >= 1.
pub const TXN_LOG_VALUE_FLEXIBLE_VERSION: i16 = 1;

/// One TransactionLogValue: the state Kafka persists for a transactional id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnLogValue {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub txn_timeout_ms: i32,
    pub state: TransactionState,
    /// Always empty for Empty (Kafka writes a null array and ignores it when
    /// reading).
    pub topic_partitions: BTreeSet<TopicPartition>,
    pub txn_last_update_timestamp_ms: i64,
    /// -1: no transaction started.
    pub txn_start_timestamp_ms: i64,
    /// The transaction version the client's transaction runs under (tagged
    /// field 2 of v1; 0 in v0): 2 bumps the epoch at every end.
    pub client_transaction_version: i16,
}

/// ClientTransactionVersion's tag in TransactionLogValue v1.
const CLIENT_TRANSACTION_VERSION_TAG: u32 = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError(pub String);

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CodecError {}

// ---- writing ----

/// Writes int16/int32 lengths (v0) or unsigned varints of length + 1 (v1).
struct Writer {
    out: Vec<u8>,
    flexible: bool,
}

impl Writer {
    fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.out.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    fn str(&mut self, s: &str) {
        // Kafka's generated code throws for a longer string; the wire
        // decoders bound topic names and transactional ids to this.
        assert!(
            s.len() <= i16::MAX as usize,
            "string of {} bytes is too long to be serialized",
            s.len()
        );
        if self.flexible {
            self.uvarint(s.len() as u32 + 1);
        } else {
            self.out.extend_from_slice(&(s.len() as i16).to_be_bytes());
        }
        self.out.extend_from_slice(s.as_bytes());
    }

    /// Array length; None: null.
    fn array_len(&mut self, n: Option<usize>) {
        let n = n.map(|n| i32::try_from(n).expect("array too long"));
        if self.flexible {
            self.uvarint(n.map_or(0, |n| n as u32 + 1));
        } else {
            self.out.extend_from_slice(&n.unwrap_or(-1).to_be_bytes());
        }
    }

    /// An empty tagged-field section (flexible versions only).
    fn no_tagged_fields(&mut self) {
        if self.flexible {
            self.uvarint(0);
        }
    }
}

/// Kafka's `TransactionLog.keyToBytes`.
pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut w = Writer {
        out: Vec::with_capacity(4 + transactional_id.len()),
        flexible: false,
    };
    w.out.extend_from_slice(&TXN_LOG_KEY_VERSION.to_be_bytes());
    w.str(transactional_id);
    w.out
}

/// Kafka's `TransactionLog.valueToBytes`: v0 for a transaction of version
/// 0 (what Kafka 3.9 writes), v1 with its ClientTransactionVersion for any
/// other (2, kshard's only other).
pub fn encode_value(v: &TxnLogValue) -> Vec<u8> {
    if v.client_transaction_version != 0 {
        encode_value_flexible(v)
    } else {
        encode_value_version(v, TXN_LOG_VALUE_VERSION)
    }
}

/// Kafka's `TransactionLog.valueToBytes` with `transaction.version` >= 1: v1.
pub fn encode_value_flexible(v: &TxnLogValue) -> Vec<u8> {
    encode_value_version(v, TXN_LOG_VALUE_FLEXIBLE_VERSION)
}

fn encode_value_version(v: &TxnLogValue, version: i16) -> Vec<u8> {
    // Kafka throws IllegalStateException here: an Empty transaction has no
    // partitions by construction (prepare_increment_producer_epoch and
    // prepare_producer_id_rotation clear them).
    assert!(
        v.state != TransactionState::Empty || v.topic_partitions.is_empty(),
        "transaction is not expected to have any partitions since its state is Empty: {v:?}"
    );
    let mut w = Writer {
        out: Vec::with_capacity(64),
        flexible: version >= 1,
    };
    w.out.extend_from_slice(&version.to_be_bytes());
    w.out.extend_from_slice(&v.producer_id.to_be_bytes());
    w.out.extend_from_slice(&v.producer_epoch.to_be_bytes());
    w.out.extend_from_slice(&v.txn_timeout_ms.to_be_bytes());
    w.out.push(v.state.to_byte() as u8);
    if v.state == TransactionState::Empty {
        w.array_len(None);
    } else {
        let topics = group_by_topic(&v.topic_partitions);
        w.array_len(Some(topics.len()));
        for (topic, partitions) in topics {
            w.str(topic);
            w.array_len(Some(partitions.len()));
            for p in partitions {
                w.out.extend_from_slice(&p.to_be_bytes());
            }
            w.no_tagged_fields();
        }
    }
    w.out
        .extend_from_slice(&v.txn_last_update_timestamp_ms.to_be_bytes());
    w.out
        .extend_from_slice(&v.txn_start_timestamp_ms.to_be_bytes());
    if w.flexible && v.client_transaction_version != 0 {
        w.uvarint(1);
        w.uvarint(CLIENT_TRANSACTION_VERSION_TAG);
        w.uvarint(2);
        w.out
            .extend_from_slice(&v.client_transaction_version.to_be_bytes());
    } else {
        w.no_tagged_fields();
    }
    w.out
}

/// One PartitionsSchema entry per topic (Kafka's `groupBy(_.topic)`; its
/// order is a hash map's, ours is sorted).
fn group_by_topic(tps: &BTreeSet<TopicPartition>) -> Vec<(&str, Vec<i32>)> {
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for tp in tps {
        match topics.last_mut() {
            Some((topic, partitions)) if *topic == tp.topic => partitions.push(tp.partition),
            _ => topics.push((&tp.topic, vec![tp.partition])),
        }
    }
    topics
}

// ---- reading ----

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Flexible version: compact strings and arrays, tagged fields.
    flexible: bool,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| CodecError(format!("truncated at byte {}", self.pos)))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn i8(&mut self) -> Result<i8, CodecError> {
        Ok(self.take(1)?[0] as i8)
    }

    fn i16(&mut self) -> Result<i16, CodecError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, CodecError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, CodecError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    fn uvarint(&mut self) -> Result<u32, CodecError> {
        let mut v: u32 = 0;
        for i in 0..5 {
            let b = self.take(1)?[0];
            v |= ((b & 0x7f) as u32) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(CodecError("varint too long".into()))
    }

    /// Kafka's non-nullable string: int16 length (v0) or compact (v1).
    fn str(&mut self, field: &str) -> Result<String, CodecError> {
        let n: i64 = if self.flexible {
            self.uvarint()? as i64 - 1
        } else {
            self.i16()? as i64
        };
        if n < 0 {
            return Err(CodecError(format!(
                "non-nullable field {field} was serialized as null"
            )));
        }
        if n > i16::MAX as i64 {
            return Err(CodecError(format!(
                "string field {field} had invalid length {n}"
            )));
        }
        String::from_utf8(self.take(n as usize)?.to_vec())
            .map_err(|_| CodecError(format!("field {field} is not UTF-8")))
    }

    /// Array length; None: null. Every element takes at least one byte,
    /// which bounds the allocation by the input.
    fn array_len(&mut self, field: &str) -> Result<Option<usize>, CodecError> {
        let n: i64 = if self.flexible {
            self.uvarint()? as i64 - 1
        } else {
            self.i32()? as i64
        };
        if n < 0 {
            return Ok(None);
        }
        let remaining = self.buf.len() - self.pos;
        if n as usize > remaining {
            return Err(CodecError(format!(
                "array {field} of {n} elements overruns the {remaining} bytes remaining"
            )));
        }
        Ok(Some(n as usize))
    }

    /// Skips a tagged-field section.
    fn skip_tagged_fields(&mut self) -> Result<(), CodecError> {
        self.tagged_fields(|_, _| Ok(()))
    }

    /// Reads a tagged-field section, handing each field to `f(tag, bytes)`.
    fn tagged_fields(
        &mut self,
        mut f: impl FnMut(u32, &[u8]) -> Result<(), CodecError>,
    ) -> Result<(), CodecError> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.uvarint()?;
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            f(tag, self.take(size)?)?;
        }
        Ok(())
    }
}

/// Kafka's `TransactionLog.readTxnRecordKey`: the transactional id.
/// Trailing bytes are ignored, as Kafka's generated reader does.
pub fn decode_key(bytes: &[u8]) -> Result<String, CodecError> {
    let mut r = Reader {
        buf: bytes,
        pos: 0,
        flexible: false,
    };
    let version = r.i16()?;
    if version != TXN_LOG_KEY_VERSION {
        return Err(CodecError(format!(
            "unknown transaction log key version {version}"
        )));
    }
    r.str("transactionalId")
}

/// Kafka's `TransactionLog.readTxnRecordValue`. None: a tombstone.
pub fn decode_value(bytes: Option<&[u8]>) -> Result<Option<TxnLogValue>, CodecError> {
    let Some(bytes) = bytes else {
        return Ok(None);
    };
    let mut r = Reader {
        buf: bytes,
        pos: 0,
        flexible: false,
    };
    let version = r.i16()?;
    if !(0..=1).contains(&version) {
        return Err(CodecError(format!(
            "unknown version {version} from the transaction log message value"
        )));
    }
    r.flexible = version >= 1;
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let txn_timeout_ms = r.i32()?;
    let status = r.i8()?;
    let state = TransactionState::from_byte(status).map_err(CodecError)?;
    let partitions = read_partitions(&mut r)?;
    let txn_last_update_timestamp_ms = r.i64()?;
    let txn_start_timestamp_ms = r.i64()?;
    // PreviousProducerId (0) and NextProducerId (1) are never written by
    // Kafka 4.0-4.1 and not needed after a load.
    let mut client_transaction_version = 0;
    r.tagged_fields(|tag, bytes| {
        if tag == CLIENT_TRANSACTION_VERSION_TAG {
            let raw: [u8; 2] = bytes.try_into().map_err(|_| {
                CodecError(format!("ClientTransactionVersion of {} bytes", bytes.len()))
            })?;
            client_transaction_version = i16::from_be_bytes(raw);
        }
        Ok(())
    })?;
    Ok(Some(TxnLogValue {
        producer_id,
        producer_epoch,
        txn_timeout_ms,
        state,
        // Kafka adds the partitions only when the state is not Empty.
        topic_partitions: if state == TransactionState::Empty {
            BTreeSet::new()
        } else {
            partitions
        },
        txn_last_update_timestamp_ms,
        txn_start_timestamp_ms,
        client_transaction_version,
    }))
}

/// TransactionPartitions. A null array (Kafka writes it only for Empty, and
/// would fail with a NullPointerException reading it for another state)
/// reads as no partitions.
fn read_partitions(r: &mut Reader<'_>) -> Result<BTreeSet<TopicPartition>, CodecError> {
    let mut tps = BTreeSet::new();
    let Some(topics) = r.array_len("TransactionPartitions")? else {
        return Ok(tps);
    };
    for _ in 0..topics {
        let topic = r.str("topic")?;
        let count = r.array_len("partitionIds")?.ok_or_else(|| {
            CodecError("non-nullable field partitionIds was serialized as null".into())
        })?;
        for _ in 0..count {
            let partition = r.i32()?;
            tps.insert(TopicPartition {
                topic: topic.clone(),
                partition,
            });
        }
        r.skip_tagged_fields()?;
    }
    Ok(tps)
}

#[cfg(test)]
#[path = "txn_log_codec_tests.rs"]
mod tests;
