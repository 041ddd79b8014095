//! Producer state of one partition, after Kafka 3.9's
//! `ProducerStateManager`, `ProducerStateEntry` and `ProducerAppendInfo`:
//! per producer id the epoch and the metadata of the last five batches,
//! used to answer retried batches with their original offsets and to
//! reject out-of-order sequences and fenced epochs; and the partition's
//! transactions (`producer_txn`): each producer's open transaction, and
//! the ones decided but not yet below the high watermark, which bound the
//! last stable offset. Snapshots use Kafka's `<20-digit offset>.snapshot`
//! file format, version 1.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::producer_snapshot::{list_snapshots, remove_if_exists, SnapshotWrites};
pub use super::producer_snapshot::{snapshot_path, wait_for_snapshot_syncs, SnapshotFile};

use super::batch::{BatchHeader, NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP};

#[path = "producer_txn.rs"]
mod txn;
pub use self::txn::CompletedTxn;

/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`: duplicates are found only
/// among this many most recent batches (the producer's max in-flight).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;
/// Kafka's default `producer.id.expiration.ms` (one day).
pub const DEFAULT_PRODUCER_ID_EXPIRATION_MS: i64 = 86_400_000;
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
const SNAPSHOT_VERSION: i16 = 1;
const SNAPSHOT_CRC_OFFSET: usize = 2;
const SNAPSHOT_ENTRIES_OFFSET: usize = 6;
/// producer_id i64, epoch i16, last_sequence i32, last_offset i64,
/// offset_delta i32, timestamp i64, coordinator_epoch i32,
/// current_txn_first_offset i64.
const SNAPSHOT_ENTRY_BYTES: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;

/// One appended batch, as Kafka's `BatchMetadata`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMetadata {
    pub last_seq: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    pub timestamp_ms: i64,
}

impl BatchMetadata {
    /// First sequence, wrapping below 0 to i32::MAX as Kafka does.
    pub fn first_seq(&self) -> i32 {
        decrement_sequence(self.last_seq, self.offset_delta)
    }
    pub fn first_offset(&self) -> i64 {
        self.last_offset - self.offset_delta as i64
    }
}

fn decrement_sequence(seq: i32, by: i32) -> i32 {
    if seq < by {
        (i32::MAX as i64 - (by as i64 - seq as i64) + 1) as i32
    } else {
        seq - by
    }
}

/// Kafka's `inSequence`: the next sequence follows the last, wrapping at
/// i32::MAX.
fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    next_seq as i64 == last_seq as i64 + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// What the partition knows about one producer id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerStateEntry {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Oldest first; at most `NUM_BATCHES_TO_RETAIN`.
    batches: VecDeque<BatchMetadata>,
    pub coordinator_epoch: i32,
    pub last_timestamp_ms: i64,
    pub current_txn_first_offset: Option<i64>,
}

impl ProducerStateEntry {
    fn empty(producer_id: i64) -> Self {
        ProducerStateEntry {
            producer_id,
            producer_epoch: NO_PRODUCER_EPOCH,
            batches: VecDeque::with_capacity(NUM_BATCHES_TO_RETAIN),
            coordinator_epoch: -1,
            last_timestamp_ms: NO_TIMESTAMP,
            current_txn_first_offset: None,
        }
    }
    pub fn batches(&self) -> impl Iterator<Item = &BatchMetadata> {
        self.batches.iter()
    }
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }
    pub fn last_data_offset(&self) -> i64 {
        self.batches.back().map_or(-1, |b| b.last_offset)
    }
    pub fn last_offset_delta(&self) -> i32 {
        self.batches.back().map_or(0, |b| b.offset_delta)
    }
    fn maybe_update_epoch(&mut self, epoch: i16) {
        if self.producer_epoch != epoch {
            self.batches.clear();
            self.producer_epoch = epoch;
        }
    }
    fn add_batch(&mut self, epoch: i16, meta: BatchMetadata) {
        self.maybe_update_epoch(epoch);
        if self.batches.len() == NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(meta);
        self.last_timestamp_ms = meta.timestamp_ms;
        debug_assert!(self.batches.len() <= NUM_BATCHES_TO_RETAIN);
    }
    /// `findDuplicateBatch`: same epoch and exactly the same sequence range.
    fn find_duplicate(&self, h: &BatchHeader) -> Option<&BatchMetadata> {
        if h.producer_epoch != self.producer_epoch {
            return None;
        }
        let (first, last) = (h.base_sequence, h.last_sequence());
        self.batches
            .iter()
            .find(|b| b.first_seq() == first && b.last_seq == last)
    }
}

/// The outcome of checking a batch against producer state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it (also for batches without a producer id).
    Append,
    /// A retry of a batch already in the log: answer with its offsets and
    /// do not append. Kafka returns error NONE and sets the response's
    /// log_append_time to `timestamp_ms`, the original batch's max timestamp.
    Duplicate {
        first_offset: i64,
        last_offset: i64,
        timestamp_ms: i64,
    },
}

/// Why a batch is refused. (Kafka 3.9 no longer answers UNKNOWN_PRODUCER_ID
/// here, and answers duplicates with NONE, so neither appears.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProducerStateError {
    /// OUT_OF_ORDER_SEQUENCE_NUMBER (45).
    OutOfOrderSequence(String),
    /// INVALID_PRODUCER_EPOCH (47): the epoch is older than the last seen
    /// (Kafka 2.7+ returns this rather than PRODUCER_FENCED on produce).
    InvalidProducerEpoch(String),
    /// INVALID_TXN_STATE (48): a non-transactional batch from a producer
    /// whose transaction is open.
    InvalidTxnState(String),
    /// TRANSACTION_COORDINATOR_FENCED (52): a marker from a coordinator
    /// epoch older than the producer's last marker's.
    TransactionCoordinatorFenced(String),
}

impl ProducerStateError {
    pub fn error_code(&self) -> i16 {
        match self {
            ProducerStateError::OutOfOrderSequence(_) => 45,
            ProducerStateError::InvalidProducerEpoch(_) => 47,
            ProducerStateError::InvalidTxnState(_) => 48,
            ProducerStateError::TransactionCoordinatorFenced(_) => 52,
        }
    }
}

impl fmt::Display for ProducerStateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProducerStateError::OutOfOrderSequence(m) => write!(f, "out of order sequence: {m}"),
            ProducerStateError::InvalidProducerEpoch(m) => write!(f, "invalid producer epoch: {m}"),
            ProducerStateError::InvalidTxnState(m) => write!(f, "invalid transaction state: {m}"),
            ProducerStateError::TransactionCoordinatorFenced(m) => {
                write!(f, "transaction coordinator fenced: {m}")
            }
        }
    }
}

impl std::error::Error for ProducerStateError {}

/// Producer ids of one partition and their snapshots in the partition dir.
pub struct ProducerStateManager {
    dir: PathBuf,
    producer_id_expiration_ms: i64,
    producers: HashMap<i64, ProducerStateEntry>,
    /// One past the last offset applied (Kafka's mapEndOffset).
    map_end_offset: i64,
    /// Kafka's `ongoingTxns`: first offset -> producer id of every open
    /// transaction (each producer's `current_txn_first_offset`).
    ongoing_txns: BTreeMap<i64, i64>,
    /// Kafka's `unreplicatedTxns`: decided transactions by first offset,
    /// until the high watermark passes their marker.
    unreplicated_txns: BTreeMap<i64, CompletedTxn>,
    /// Roll snapshots are written off the shard (`producer_snapshot`).
    snapshot_writes: Arc<SnapshotWrites>,
    /// Its generation: only this manager changes it.
    snapshot_generation: u64,
}

impl ProducerStateManager {
    pub fn new(dir: &Path, producer_id_expiration_ms: i64) -> Self {
        assert!(producer_id_expiration_ms >= 0);
        let (snapshot_writes, snapshot_generation) = SnapshotWrites::for_dir(dir);
        ProducerStateManager {
            dir: dir.to_path_buf(),
            producer_id_expiration_ms,
            producers: HashMap::new(),
            map_end_offset: 0,
            ongoing_txns: BTreeMap::new(),
            unreplicated_txns: BTreeMap::new(),
            snapshot_writes,
            snapshot_generation,
        }
    }

    /// The partition's log moved to `dir` (a future replica swapped in,
    /// AlterReplicaLogDirs): the state in memory is kept, later snapshots
    /// go there. Snapshots queued for the old directory are dropped.
    pub fn relocate(&mut self, dir: &Path) {
        let (snapshot_writes, snapshot_generation) = SnapshotWrites::for_dir(dir);
        self.dir = dir.to_path_buf();
        self.snapshot_writes = snapshot_writes;
        self.snapshot_generation = snapshot_generation;
    }

    /// Checks a client batch (Kafka's duplicate search, then
    /// `checkProducerEpoch`, `checkSequence` and `appendDataBatch`'s
    /// transaction check). Offsets need not be assigned yet. Control
    /// batches (see `check_marker`) and batches without a producer id pass.
    pub fn check(&self, header: &BatchHeader) -> Result<SequenceCheck, ProducerStateError> {
        if !header.has_producer_id() || header.is_control() {
            return Ok(SequenceCheck::Append);
        }
        let pid = header.producer_id;
        let entry = self.producers.get(&pid);
        if let Some(dup) = entry.and_then(|e| e.find_duplicate(header)) {
            return Ok(SequenceCheck::Duplicate {
                first_offset: dup.first_offset(),
                last_offset: dup.last_offset,
                timestamp_ms: dup.timestamp_ms,
            });
        }
        let current_epoch = entry.map_or(NO_PRODUCER_EPOCH, |e| e.producer_epoch);
        let epoch = header.producer_epoch;
        let seq = header.base_sequence;
        if epoch < current_epoch {
            return Err(ProducerStateError::InvalidProducerEpoch(format!(
                "epoch of producer {pid} is {epoch}, smaller than the last seen epoch {current_epoch}"
            )));
        }
        if epoch != current_epoch {
            // A bumped epoch restarts at 0; a producer we have never seen
            // (or whose entries expired) may start anywhere.
            if seq != 0 && current_epoch != NO_PRODUCER_EPOCH {
                return Err(ProducerStateError::OutOfOrderSequence(format!(
                    "invalid sequence number for new epoch of producer {pid}: {epoch} (request epoch), \
                     {seq} (seq. number), {current_epoch} (current producer epoch)"
                )));
            }
        } else {
            let last_seq = entry.map_or(NO_SEQUENCE, |e| e.last_seq());
            if current_epoch != NO_PRODUCER_EPOCH && !in_sequence(last_seq, seq) {
                return Err(ProducerStateError::OutOfOrderSequence(format!(
                    "out of order sequence number for producer {pid}: {seq} (incoming seq. number), \
                     {last_seq} (current end sequence number)"
                )));
            }
        }
        let open_txn = entry.and_then(|e| e.current_txn_first_offset);
        if let (Some(first), false) = (open_txn, header.is_transactional()) {
            return Err(ProducerStateError::InvalidTxnState(format!(
                "expected transactional write from producer {pid}, whose transaction started at offset {first}"
            )));
        }
        Ok(SequenceCheck::Append)
    }

    /// Records an appended batch (offsets assigned); a transactional one
    /// from a producer without an open transaction opens one. The
    /// producer's last timestamp is the batch max timestamp, as in Kafka,
    /// or `append_time_ms` when the batch has none (Kafka would keep -1 and
    /// expire it at once). Markers go through `update_marker`; given one
    /// here, its producer's transaction ends unrecorded (no `CompletedTxn`),
    /// with a warning.
    pub fn update(&mut self, header: &BatchHeader, append_time_ms: i64) {
        let ts = if header.max_timestamp == NO_TIMESTAMP {
            append_time_ms
        } else {
            header.max_timestamp
        };
        self.apply(header, ts);
    }

    fn advance_map_end(&mut self, h: &BatchHeader) {
        let end = h.last_offset() + 1;
        if end > self.map_end_offset {
            self.map_end_offset = end;
        }
    }

    fn apply(&mut self, h: &BatchHeader, timestamp_ms: i64) {
        self.advance_map_end(h);
        if !h.has_producer_id() {
            return;
        }
        if h.is_control() {
            self.end_txn_unrecorded(h, timestamp_ms);
            return;
        }
        let entry = self
            .producers
            .entry(h.producer_id)
            .or_insert_with(|| ProducerStateEntry::empty(h.producer_id));
        entry.add_batch(
            h.producer_epoch,
            BatchMetadata {
                last_seq: h.last_sequence(),
                last_offset: h.last_offset(),
                offset_delta: h.last_offset_delta,
                timestamp_ms,
            },
        );
        if h.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(h.base_offset);
            self.start_txn(h.producer_id, h.base_offset);
        }
    }

    /// Makes the snapshot `<20-digit offset>.snapshot` of the producers and
    /// queues it for the `snapshot-sync` thread, which creates it (tmp file,
    /// rename) and fsyncs it and the directory, as Kafka 3.9 flushes a
    /// roll's snapshot on its scheduler: file creation and fsync on the
    /// shard stall it (tens of ms under write load). A snapshot a crash
    /// leaves torn fails its CRC on load and is deleted, falling back to an
    /// older one and replay. [`wait_for_snapshot_syncs`] waits for the
    /// queue (shutdown). Only each producer's last batch is persisted, as
    /// in Kafka.
    pub fn take_snapshot(&mut self, offset: i64) -> io::Result<()> {
        let snapshot = self.snapshot_file(offset);
        self.snapshot_writes
            .queue(snapshot, self.snapshot_generation);
        Ok(())
    }

    /// The snapshot `take_snapshot` writes, to be written elsewhere (a
    /// closing partition's, on the `log-dirs` thread).
    pub fn snapshot_file(&self, offset: i64) -> SnapshotFile {
        assert!(offset >= 0, "snapshot offset {offset}");
        let mut ids: Vec<&i64> = self.producers.keys().collect();
        ids.sort_unstable();
        let mut buf =
            Vec::with_capacity(SNAPSHOT_ENTRIES_OFFSET + 4 + ids.len() * SNAPSHOT_ENTRY_BYTES);
        buf.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        buf.extend_from_slice(&0u32.to_be_bytes());
        buf.extend_from_slice(&(ids.len() as i32).to_be_bytes());
        for id in ids {
            let e = &self.producers[id];
            buf.extend_from_slice(&id.to_be_bytes());
            buf.extend_from_slice(&e.producer_epoch.to_be_bytes());
            buf.extend_from_slice(&e.last_seq().to_be_bytes());
            buf.extend_from_slice(&e.last_data_offset().to_be_bytes());
            buf.extend_from_slice(&e.last_offset_delta().to_be_bytes());
            buf.extend_from_slice(&e.last_timestamp_ms.to_be_bytes());
            buf.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            buf.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
        }
        let crc = crc32c::crc32c(&buf[SNAPSHOT_ENTRIES_OFFSET..]);
        buf[SNAPSHOT_CRC_OFFSET..SNAPSHOT_ENTRIES_OFFSET].copy_from_slice(&crc.to_be_bytes());
        SnapshotFile::new(&self.dir, offset, buf)
    }

    /// On log open: drops snapshots above `log_end_offset`, loads the newest
    /// valid one (deleting corrupt ones as it goes), skips producers that have
    /// expired by `now_ms`, and returns the offset to replay the log from: the
    /// snapshot's offset (at least `log_start_offset`), else `log_start_offset`.
    pub fn load(
        &mut self,
        log_start_offset: i64,
        log_end_offset: i64,
        now_ms: i64,
    ) -> io::Result<i64> {
        assert!(log_start_offset <= log_end_offset);
        self.producers.clear();
        self.ongoing_txns.clear();
        self.unreplicated_txns.clear();
        let writes = Arc::clone(&self.snapshot_writes);
        let _writes = writes.lock();
        let mut snapshots = list_snapshots(&self.dir)?;
        while let Some((offset, path)) = snapshots.pop() {
            if offset > log_end_offset {
                remove_if_exists(&path)?;
                continue;
            }
            match read_snapshot(&path) {
                Ok(entries) => {
                    for e in entries {
                        if !self.is_expired(&e, now_ms) {
                            // Kafka's loadProducerEntry.
                            if let Some(first) = e.current_txn_first_offset {
                                self.start_txn(e.producer_id, first);
                            }
                            self.producers.insert(e.producer_id, e);
                        }
                    }
                    let start = offset.max(log_start_offset);
                    self.map_end_offset = start;
                    return Ok(start);
                }
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    log::warn!("deleting corrupt producer snapshot {}: {e}", path.display());
                    remove_if_exists(&path)?;
                }
                Err(e) => return Err(e),
            }
        }
        self.map_end_offset = log_start_offset;
        Ok(log_start_offset)
    }

    fn is_expired(&self, e: &ProducerStateEntry, now_ms: i64) -> bool {
        e.current_txn_first_offset.is_none()
            && now_ms.saturating_sub(e.last_timestamp_ms) >= self.producer_id_expiration_ms
    }

    /// Drops producers idle for `producer.id.expiration.ms` (not those with
    /// an open transaction).
    pub fn remove_expired(&mut self, now_ms: i64) {
        let expiration_ms = self.producer_id_expiration_ms;
        self.producers.retain(|_, e| {
            e.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(e.last_timestamp_ms) < expiration_ms
        });
    }

    /// Deletes snapshots whose offset is below `offset` (log start moved).
    pub fn delete_snapshots_before(&mut self, offset: i64) -> io::Result<()> {
        let mut writes = self.snapshot_writes.lock();
        writes.floor_offset = writes.floor_offset.max(offset);
        for (o, path) in list_snapshots(&self.dir)? {
            if o < offset {
                remove_if_exists(&path)?;
            }
        }
        Ok(())
    }

    /// Log truncated to end at `offset`: drops snapshots above it and clears
    /// all state. Follow with `load` (or use `truncate_and_reload`) and replay.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        // Snapshots still queued may be above `offset`: none lands now.
        let mut writes = self.snapshot_writes.lock();
        writes.generation += 1;
        self.snapshot_generation = writes.generation;
        for (o, path) in list_snapshots(&self.dir)? {
            if o > offset {
                remove_if_exists(&path)?;
            }
        }
        self.producers.clear();
        self.ongoing_txns.clear();
        self.unreplicated_txns.clear();
        self.map_end_offset = offset;
        Ok(())
    }

    /// `truncate_to(log_end_offset)` then `load`; returns the replay start.
    pub fn truncate_and_reload(
        &mut self,
        log_start_offset: i64,
        log_end_offset: i64,
        now_ms: i64,
    ) -> io::Result<i64> {
        self.truncate_to(log_end_offset)?;
        self.load(log_start_offset, log_end_offset, now_ms)
    }

    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }
    pub fn last_entry(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }

    /// Every producer the partition knows (DescribeProducers), in no order.
    pub fn active_producers(&self) -> impl Iterator<Item = &ProducerStateEntry> {
        self.producers.values()
    }
    /// One past the last offset applied by `update`/`replay`, or the offset
    /// `load` returned.
    pub fn map_end_offset(&self) -> i64 {
        self.map_end_offset
    }
    /// Offsets of the snapshot files present, ascending.
    pub fn snapshot_offsets(&self) -> io::Result<Vec<i64>> {
        Ok(list_snapshots(&self.dir)?
            .into_iter()
            .map(|(o, _)| o)
            .collect())
    }
}

fn corrupt_snapshot(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Reads a snapshot; format or CRC problems are `InvalidData`.
fn read_snapshot(path: &Path) -> io::Result<Vec<ProducerStateEntry>> {
    let buf = fs::read(path)?;
    if buf.len() < SNAPSHOT_ENTRIES_OFFSET + 4 {
        return Err(corrupt_snapshot(format!("snapshot of {} bytes", buf.len())));
    }
    let be_i16 = |at: usize| i16::from_be_bytes(buf[at..at + 2].try_into().expect("2 bytes"));
    let be_i32 = |at: usize| i32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes"));
    let be_i64 = |at: usize| i64::from_be_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
    let version = be_i16(0);
    if version != SNAPSHOT_VERSION {
        return Err(corrupt_snapshot(format!(
            "unknown snapshot version {version}"
        )));
    }
    let stored = be_i32(SNAPSHOT_CRC_OFFSET) as u32;
    let computed = crc32c::crc32c(&buf[SNAPSHOT_ENTRIES_OFFSET..]);
    if stored != computed {
        return Err(corrupt_snapshot(format!(
            "crc mismatch: stored {stored:#x}, computed {computed:#x}"
        )));
    }
    let count = be_i32(SNAPSHOT_ENTRIES_OFFSET);
    let body = SNAPSHOT_ENTRIES_OFFSET + 4;
    if count < 0 || (buf.len() - body) != count as usize * SNAPSHOT_ENTRY_BYTES {
        return Err(corrupt_snapshot(format!(
            "{count} entries do not fill {} bytes",
            buf.len() - body
        )));
    }
    let mut entries = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        let at = body + i * SNAPSHOT_ENTRY_BYTES;
        let producer_id = be_i64(at);
        let mut e = ProducerStateEntry::empty(producer_id);
        e.producer_epoch = be_i16(at + 8);
        let last_seq = be_i32(at + 10);
        let last_offset = be_i64(at + 14);
        let offset_delta = be_i32(at + 22);
        e.last_timestamp_ms = be_i64(at + 26);
        e.coordinator_epoch = be_i32(at + 34);
        let txn_first = be_i64(at + 38);
        e.current_txn_first_offset = (txn_first >= 0).then_some(txn_first);
        if last_offset >= 0 {
            e.batches.push_back(BatchMetadata {
                last_seq,
                last_offset,
                offset_delta,
                timestamp_ms: e.last_timestamp_ms,
            });
        }
        entries.push(e);
    }
    Ok(entries)
}

#[cfg(test)]
#[path = "producer_state_tests.rs"]
mod tests;
