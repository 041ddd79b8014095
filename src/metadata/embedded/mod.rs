//! The embedded, durable metadata store: an in-memory znode tree with
//! ZooKeeper semantics, made durable by a write-ahead log of resolved
//! effects (every mutation fsynced before it returns) and periodic snapshots.
//!
//! Files in the store directory:
//! - `metadata.snapshot`: magic, format, epoch, all persistent nodes, crc32c.
//! - `metadata.log`: header (magic, format, epoch), then records
//!   `[len u32 LE][crc32c(payload) u32 LE][payload]`.
//!
//! A log whose epoch is below the snapshot's is already folded into it (a
//! crash between snapshot rename and log reset) and is discarded. Replay
//! stops at the first torn or corrupt record and truncates the log there.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::{
    parent_of, validate_path, MetadataStore, Op, OpResult, Stat, StoreError, StoreResult,
    ANY_VERSION,
};

const LOG_MAGIC: &[u8; 4] = b"KSML";
const SNAPSHOT_MAGIC: &[u8; 4] = b"KSMS";
const FORMAT_VERSION: u32 = 1;
const LOG_HEADER_BYTES: u64 = 16;
const RECORD_HEADER_BYTES: usize = 8;
/// Largest record accepted on replay; anything bigger is a torn length.
const RECORD_MAX_BYTES: usize = 64 << 20;
/// Compact once the log grows past this.
const COMPACT_THRESHOLD_BYTES: u64 = 4 << 20;

const LOG_FILE: &str = "metadata.log";
const SNAPSHOT_FILE: &str = "metadata.snapshot";
const LOCK_FILE: &str = "lock";

#[derive(Debug, Clone)]
struct Node {
    data: Vec<u8>,
    version: i32,
    cversion: i32,
    ctime_ms: i64,
    mtime_ms: i64,
    ephemeral: bool,
    children: BTreeSet<String>,
}

impl Node {
    fn stat(&self) -> Stat {
        Stat {
            version: self.version,
            cversion: self.cversion,
            ctime_ms: self.ctime_ms,
            mtime_ms: self.mtime_ms,
            num_children: self.children.len() as i32,
            ephemeral: self.ephemeral,
        }
    }
}

/// A resolved, deterministic change; this is what the log records.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Effect {
    Create {
        path: String,
        data: Vec<u8>,
        ephemeral: bool,
        time_ms: i64,
    },
    Set {
        path: String,
        data: Vec<u8>,
        time_ms: i64,
    },
    Delete {
        path: String,
    },
}

impl Effect {
    fn path(&self) -> &str {
        match self {
            Effect::Create { path, .. } | Effect::Set { path, .. } | Effect::Delete { path } => {
                path
            }
        }
    }
}

/// How to reverse one applied effect (for all-or-nothing multi and I/O failures).
enum Undo {
    Created(String),
    Set {
        path: String,
        data: Vec<u8>,
        version: i32,
        mtime_ms: i64,
    },
    Deleted {
        path: String,
        node: Node,
    },
}

pub struct EmbeddedStore {
    dir: PathBuf,
    nodes: BTreeMap<String, Node>,
    log: File,
    log_bytes: u64,
    epoch: u64,
    _lock: File,
    /// Commits leave the fdatasync to the caller (`take_unsynced`), which
    /// runs it off the shard and answers once it is done.
    defer_syncs: bool,
    /// Records written since the last fdatasync (with `defer_syncs`).
    unsynced: bool,
}

/// A committed record that cannot be made durable: its state is already
/// applied and seen, so the broker stops, as Kafka halts on a metadata log
/// write failure.
pub fn halt_on_sync_failure(e: &io::Error) -> ! {
    log::error!("metadata store: fdatasync failed: {e}; halting");
    log::logger().flush();
    std::process::exit(1)
}

impl Drop for EmbeddedStore {
    /// A record whose caller never took its sync (none should) is still
    /// made durable before the store closes.
    fn drop(&mut self) {
        if self.unsynced {
            if let Err(e) = self.log.sync_data() {
                log::error!(
                    "metadata store {}: fdatasync at close: {e}",
                    self.dir.display()
                );
            }
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn root_node() -> Node {
    Node {
        data: Vec::new(),
        version: 0,
        cversion: 0,
        ctime_ms: 0,
        mtime_ms: 0,
        ephemeral: false,
        children: BTreeSet::new(),
    }
}

impl EmbeddedStore {
    /// Opens (or creates) the store in `dir`, replaying snapshot and log.
    /// Ephemeral nodes of the previous run are dropped.
    pub fn open(dir: &Path) -> StoreResult<EmbeddedStore> {
        fs::create_dir_all(dir)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))?;
        // SAFETY: flock on a valid, owned descriptor.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(StoreError::Io(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "metadata store {} is locked by another process",
                    dir.display()
                ),
            )));
        }
        let (mut nodes, snapshot_epoch) = match fs::read(dir.join(SNAPSHOT_FILE)) {
            Ok(bytes) => decode_snapshot(&bytes)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let mut m = BTreeMap::new();
                m.insert("/".to_string(), root_node());
                (m, 0)
            }
            Err(e) => return Err(e.into()),
        };
        let log_path = dir.join(LOG_FILE);
        let mut effects_replayed = 0usize;
        let mut log_valid = false;
        if let Ok(mut f) = OpenOptions::new().read(true).write(true).open(&log_path) {
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes)?;
            if let Some(log_epoch) = decode_log_header(&bytes) {
                if log_epoch > snapshot_epoch {
                    return Err(StoreError::Corrupt(format!(
                        "log epoch {log_epoch} is newer than snapshot epoch {snapshot_epoch}"
                    )));
                }
                if log_epoch == snapshot_epoch {
                    let valid_len = replay(&bytes, &mut nodes, &mut effects_replayed)?;
                    if (valid_len as usize) < bytes.len() {
                        log::warn!(
                            "metadata log {}: dropping {} bytes of torn or corrupt tail",
                            log_path.display(),
                            bytes.len() - valid_len as usize
                        );
                        f.set_len(valid_len)?;
                        f.sync_all()?;
                    }
                    log_valid = true;
                }
            }
        }
        let had_ephemerals = drop_ephemerals(&mut nodes);
        let mut store = if log_valid {
            let log = OpenOptions::new().append(true).open(&log_path)?;
            let log_bytes = log.metadata()?.len();
            EmbeddedStore {
                dir: dir.to_path_buf(),
                nodes,
                log,
                log_bytes,
                epoch: snapshot_epoch,
                _lock: lock,
                defer_syncs: false,
                unsynced: false,
            }
        } else {
            let log = write_fresh_log(dir, snapshot_epoch)?;
            EmbeddedStore {
                dir: dir.to_path_buf(),
                nodes,
                log,
                log_bytes: LOG_HEADER_BYTES,
                epoch: snapshot_epoch,
                _lock: lock,
                defer_syncs: false,
                unsynced: false,
            }
        };
        if had_ephemerals || store.log_bytes > COMPACT_THRESHOLD_BYTES {
            store.compact()?;
        }
        log::debug!(
            "metadata store {}: {} nodes, {} effects replayed",
            dir.display(),
            store.nodes.len(),
            effects_replayed
        );
        Ok(store)
    }

    /// Writes a snapshot of the current tree and starts a new, empty log.
    pub fn compact(&mut self) -> StoreResult<()> {
        let next_epoch = self.epoch + 1;
        let snapshot = encode_snapshot(&self.nodes, next_epoch);
        let tmp = self.dir.join(format!("{SNAPSHOT_FILE}.tmp"));
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&snapshot)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, self.dir.join(SNAPSHOT_FILE))?;
        sync_dir(&self.dir)?;
        // The durable snapshot holds every record of the old log.
        self.unsynced = false;
        // From here the old log is stale (epoch below the snapshot's).
        self.log = write_fresh_log(&self.dir, next_epoch)?;
        self.log_bytes = LOG_HEADER_BYTES;
        self.epoch = next_epoch;
        Ok(())
    }

    /// Compacts and closes. Dropping without close is also safe: every
    /// mutation is already durable in the log.
    pub fn close(mut self) -> StoreResult<()> {
        self.compact()
    }

    /// Size of the current log file in bytes.
    pub fn log_size_bytes(&self) -> u64 {
        self.log_bytes
    }

    /// Number of nodes including the root.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    fn node(&self, path: &str) -> StoreResult<&Node> {
        validate_path(path)?;
        self.nodes
            .get(path)
            .ok_or_else(|| StoreError::NoNode(path.to_string()))
    }

    /// Checks a create against current state and resolves its final path.
    fn plan_create(
        &self,
        path: &str,
        data: &[u8],
        ephemeral: bool,
        sequential: bool,
    ) -> StoreResult<Effect> {
        validate_path(path)?;
        if path == "/" {
            return Err(StoreError::NodeExists(path.to_string()));
        }
        let parent_path = parent_of(path);
        let parent = self
            .nodes
            .get(parent_path)
            .ok_or_else(|| StoreError::NoNode(path.to_string()))?;
        if parent.ephemeral {
            return Err(StoreError::BadArguments(format!(
                "ephemeral node {parent_path} cannot have children"
            )));
        }
        let full = if sequential {
            // ZooKeeper uses the parent's cversion as the sequence number.
            format!("{path}{:010}", parent.cversion)
        } else {
            path.to_string()
        };
        if self.nodes.contains_key(&full) {
            return Err(StoreError::NodeExists(full));
        }
        Ok(Effect::Create {
            path: full,
            data: data.to_vec(),
            ephemeral,
            time_ms: now_ms(),
        })
    }

    fn plan_set(&self, path: &str, data: &[u8], expected_version: i32) -> StoreResult<Effect> {
        let node = self.node(path)?;
        if expected_version != ANY_VERSION && expected_version != node.version {
            return Err(StoreError::BadVersion(path.to_string()));
        }
        Ok(Effect::Set {
            path: path.to_string(),
            data: data.to_vec(),
            time_ms: now_ms(),
        })
    }

    fn plan_delete(&self, path: &str, expected_version: i32) -> StoreResult<Effect> {
        if path == "/" {
            return Err(StoreError::BadArguments(
                "cannot delete the root".to_string(),
            ));
        }
        let node = self.node(path)?;
        if expected_version != ANY_VERSION && expected_version != node.version {
            return Err(StoreError::BadVersion(path.to_string()));
        }
        if !node.children.is_empty() {
            return Err(StoreError::NotEmpty(path.to_string()));
        }
        Ok(Effect::Delete {
            path: path.to_string(),
        })
    }

    /// Applies planned effects one by one (each planned against the state
    /// left by the previous), logs them as one record, and rolls everything
    /// back if any step or the fsync fails.
    fn commit(&mut self, effects: Vec<Effect>) -> StoreResult<()> {
        debug_assert!(!effects.is_empty());
        let mut undo = Vec::with_capacity(effects.len());
        for e in &effects {
            match apply_effect(&mut self.nodes, e) {
                Ok(u) => undo.push(u),
                Err(err) => {
                    rollback(&mut self.nodes, undo);
                    return Err(err);
                }
            }
        }
        self.log_applied(&effects, undo)
    }

    /// Logs effects already applied to the tree as one record; `undo`
    /// reverses them if the record cannot be encoded (too large), written
    /// or synced.
    fn log_applied(&mut self, effects: &[Effect], undo: Vec<Undo>) -> StoreResult<()> {
        debug_assert_eq!(effects.len(), undo.len());
        let record = match encode_record(effects) {
            Ok(record) => record,
            Err(err) => {
                rollback(&mut self.nodes, undo);
                return Err(err);
            }
        };
        let written = self.log.write_all(&record).and_then(|_| {
            if self.defer_syncs {
                self.unsynced = true;
                Ok(())
            } else {
                self.log.sync_data()
            }
        });
        if let Err(err) = written {
            rollback(&mut self.nodes, undo);
            // A partial write is a torn tail that replay will drop.
            return Err(err.into());
        }
        self.log_bytes += record.len() as u64;
        if self.log_bytes > COMPACT_THRESHOLD_BYTES {
            self.compact()?;
        }
        Ok(())
    }

    /// From now on a commit writes its record without fdatasync; the caller
    /// takes each unsynced log with `take_unsynced`, syncs it, and only then
    /// answers for what it committed. A failed sync cannot be rolled back
    /// (later commits saw its state), so it is fatal, as a metadata log
    /// write failure is for Kafka.
    pub fn defer_syncs(&mut self) {
        self.defer_syncs = true;
    }

    /// The log to fdatasync for the records committed since the last call,
    /// if any.
    pub fn take_unsynced(&mut self) -> Option<File> {
        if !std::mem::take(&mut self.unsynced) {
            return None;
        }
        match self.log.try_clone() {
            Ok(log) => Some(log),
            Err(e) => {
                // No descriptor to hand over (EMFILE): sync here instead.
                log::warn!("metadata store: {e}; syncing on the caller's thread");
                if let Err(e) = self.log.sync_data() {
                    halt_on_sync_failure(&e);
                }
                None
            }
        }
    }

    /// Plans and applies ops in sequence so later ops see earlier ones,
    /// and returns what reverses them; on failure everything applied so
    /// far is undone. (Planned, undone and applied again, a
    /// 1,000-partition topic's creation held the shard 12 ms.)
    fn run_multi(&mut self, ops: &[Op]) -> StoreResult<AppliedMulti> {
        let mut effects = Vec::with_capacity(ops.len());
        let mut results = Vec::with_capacity(ops.len());
        let mut undo = Vec::with_capacity(ops.len());
        for op in ops {
            let planned = match op {
                Op::Create {
                    path,
                    data,
                    ephemeral,
                    sequential,
                } => self
                    .plan_create(path, data, *ephemeral, *sequential)
                    .map(Some),
                Op::SetData {
                    path,
                    data,
                    expected_version,
                } => self.plan_set(path, data, *expected_version).map(Some),
                Op::Delete {
                    path,
                    expected_version,
                } => self.plan_delete(path, *expected_version).map(Some),
                Op::Check {
                    path,
                    expected_version,
                } => self.node(path).and_then(|n| {
                    if *expected_version != ANY_VERSION && *expected_version != n.version {
                        Err(StoreError::BadVersion(path.clone()))
                    } else {
                        Ok(None)
                    }
                }),
            };
            let effect = match planned.and_then(|p| match p {
                Some(e) => apply_effect(&mut self.nodes, &e).map(|u| Some((e, u))),
                None => Ok(None),
            }) {
                Ok(x) => x,
                Err(err) => {
                    rollback(&mut self.nodes, undo);
                    return Err(err);
                }
            };
            match effect {
                Some((e, u)) => {
                    results.push(match &e {
                        Effect::Create { path, .. } => OpResult::Created(path.clone()),
                        Effect::Set { path, .. } => OpResult::Set(self.nodes[path].stat()),
                        Effect::Delete { .. } => OpResult::Deleted,
                    });
                    effects.push(e);
                    undo.push(u);
                }
                None => results.push(OpResult::Checked),
            }
        }
        Ok(AppliedMulti {
            effects,
            results,
            undo,
        })
    }
}

/// A multi's ops applied to the tree, not yet logged.
struct AppliedMulti {
    effects: Vec<Effect>,
    results: Vec<OpResult>,
    undo: Vec<Undo>,
}

fn rollback(nodes: &mut BTreeMap<String, Node>, undo: Vec<Undo>) {
    for u in undo.into_iter().rev() {
        match u {
            Undo::Created(path) => {
                nodes.remove(&path);
                let name = &path[path.rfind('/').map_or(0, |i| i + 1)..];
                if let Some(parent) = nodes.get_mut(parent_of(&path)) {
                    parent.children.remove(name);
                    parent.cversion -= 1;
                }
            }
            Undo::Set {
                path,
                data,
                version,
                mtime_ms,
            } => {
                if let Some(n) = nodes.get_mut(&path) {
                    n.data = data;
                    n.version = version;
                    n.mtime_ms = mtime_ms;
                }
            }
            Undo::Deleted { path, node } => {
                let name = path[path.rfind('/').map_or(0, |i| i + 1)..].to_string();
                if let Some(parent) = nodes.get_mut(parent_of(&path)) {
                    parent.children.insert(name);
                    parent.cversion -= 1;
                }
                nodes.insert(path, node);
            }
        }
    }
}

/// Applies one effect, checking only structure (so replay of a damaged log
/// reports Corrupt instead of panicking).
fn apply_effect(nodes: &mut BTreeMap<String, Node>, effect: &Effect) -> StoreResult<Undo> {
    match effect {
        Effect::Create {
            path,
            data,
            ephemeral,
            time_ms,
        } => {
            validate_path(path)?;
            if path == "/" || nodes.contains_key(path) {
                return Err(StoreError::NodeExists(path.clone()));
            }
            let name = path[path.rfind('/').map_or(0, |i| i + 1)..].to_string();
            let parent = nodes
                .get_mut(parent_of(path))
                .ok_or_else(|| StoreError::NoNode(path.clone()))?;
            parent.children.insert(name);
            parent.cversion += 1;
            nodes.insert(
                path.clone(),
                Node {
                    data: data.clone(),
                    version: 0,
                    cversion: 0,
                    ctime_ms: *time_ms,
                    mtime_ms: *time_ms,
                    ephemeral: *ephemeral,
                    children: BTreeSet::new(),
                },
            );
            Ok(Undo::Created(path.clone()))
        }
        Effect::Set {
            path,
            data,
            time_ms,
        } => {
            let node = nodes
                .get_mut(path)
                .ok_or_else(|| StoreError::NoNode(path.clone()))?;
            let old = std::mem::replace(&mut node.data, data.clone());
            let undo = Undo::Set {
                path: path.clone(),
                data: old,
                version: node.version,
                mtime_ms: node.mtime_ms,
            };
            node.version = node.version.wrapping_add(1);
            node.mtime_ms = *time_ms;
            Ok(undo)
        }
        Effect::Delete { path } => {
            match nodes.get(path) {
                None => return Err(StoreError::NoNode(path.clone())),
                Some(n) if !n.children.is_empty() => {
                    return Err(StoreError::NotEmpty(path.clone()))
                }
                Some(_) if path == "/" => {
                    return Err(StoreError::BadArguments("cannot delete the root".into()))
                }
                Some(_) => {}
            }
            let node = nodes
                .remove(path)
                .ok_or_else(|| StoreError::NoNode(path.clone()))?;
            let name = &path[path.rfind('/').map_or(0, |i| i + 1)..];
            if let Some(parent) = nodes.get_mut(parent_of(path)) {
                parent.children.remove(name);
                parent.cversion += 1;
            }
            Ok(Undo::Deleted {
                path: path.clone(),
                node,
            })
        }
    }
}

fn drop_ephemerals(nodes: &mut BTreeMap<String, Node>) -> bool {
    let ephemeral: Vec<String> = nodes
        .iter()
        .filter(|(_, n)| n.ephemeral)
        .map(|(p, _)| p.clone())
        .collect();
    for path in &ephemeral {
        // Ephemerals have no children, so plain deletes suffice.
        let _ = apply_effect(nodes, &Effect::Delete { path: path.clone() });
    }
    !ephemeral.is_empty()
}

fn write_fresh_log(dir: &Path, epoch: u64) -> StoreResult<File> {
    let tmp = dir.join(format!("{LOG_FILE}.tmp"));
    {
        let mut f = File::create(&tmp)?;
        let mut header = Vec::with_capacity(LOG_HEADER_BYTES as usize);
        header.extend_from_slice(LOG_MAGIC);
        header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        header.extend_from_slice(&epoch.to_le_bytes());
        f.write_all(&header)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, dir.join(LOG_FILE))?;
    sync_dir(dir)?;
    Ok(OpenOptions::new().append(true).open(dir.join(LOG_FILE))?)
}

/// Replays records after the header; returns the length of the valid prefix.
fn replay(bytes: &[u8], nodes: &mut BTreeMap<String, Node>, count: &mut usize) -> StoreResult<u64> {
    let mut pos = LOG_HEADER_BYTES as usize;
    while bytes.len() - pos >= RECORD_HEADER_BYTES {
        let len = u32::from_le_bytes([bytes[pos], bytes[pos + 1], bytes[pos + 2], bytes[pos + 3]])
            as usize;
        let crc = u32::from_le_bytes([
            bytes[pos + 4],
            bytes[pos + 5],
            bytes[pos + 6],
            bytes[pos + 7],
        ]);
        let body_start = pos + RECORD_HEADER_BYTES;
        if len > RECORD_MAX_BYTES || len > bytes.len() - body_start {
            break;
        }
        let payload = &bytes[body_start..body_start + len];
        if crc32c::crc32c(payload) != crc {
            break;
        }
        let Some(effects) = decode_effects(payload) else {
            break;
        };
        for e in &effects {
            apply_effect(nodes, e).map_err(|err| {
                StoreError::Corrupt(format!("replaying metadata log at byte {pos}: {err}"))
            })?;
        }
        *count += effects.len();
        pos = body_start + len;
    }
    Ok(pos as u64)
}

impl MetadataStore for EmbeddedStore {
    fn create(
        &mut self,
        path: &str,
        data: &[u8],
        ephemeral: bool,
        sequential: bool,
    ) -> StoreResult<String> {
        let effect = self.plan_create(path, data, ephemeral, sequential)?;
        let full = effect.path().to_string();
        self.commit(vec![effect])?;
        Ok(full)
    }

    fn create_all(&mut self, path: &str, data: &[u8]) -> StoreResult<String> {
        validate_path(path)?;
        if self.nodes.contains_key(path) {
            return Err(StoreError::NodeExists(path.to_string()));
        }
        let mut effects = Vec::new();
        let time_ms = now_ms();
        let mut prefix = String::new();
        let segments: Vec<&str> = path[1..].split('/').collect();
        for (i, segment) in segments.iter().enumerate() {
            prefix.push('/');
            prefix.push_str(segment);
            if self.nodes.contains_key(&prefix) {
                continue;
            }
            let last = i + 1 == segments.len();
            let bytes = if last { data.to_vec() } else { Vec::new() };
            effects.push(Effect::Create {
                path: prefix.clone(),
                data: bytes,
                ephemeral: false,
                time_ms,
            });
        }
        self.commit(effects)?;
        Ok(path.to_string())
    }

    fn get(&self, path: &str) -> StoreResult<(Vec<u8>, Stat)> {
        let n = self.node(path)?;
        Ok((n.data.clone(), n.stat()))
    }

    fn set(&mut self, path: &str, data: &[u8], expected_version: i32) -> StoreResult<Stat> {
        let effect = self.plan_set(path, data, expected_version)?;
        self.commit(vec![effect])?;
        Ok(self.nodes[path].stat())
    }

    fn delete(&mut self, path: &str, expected_version: i32) -> StoreResult<()> {
        let effect = self.plan_delete(path, expected_version)?;
        self.commit(vec![effect])
    }

    fn delete_recursive(&mut self, path: &str) -> StoreResult<()> {
        self.node(path)?;
        if path == "/" {
            return Err(StoreError::BadArguments(
                "cannot delete the root".to_string(),
            ));
        }
        // Post-order: children before parents.
        let mut order = Vec::new();
        let mut stack = vec![(path.to_string(), false)];
        while let Some((p, expanded)) = stack.pop() {
            if expanded {
                order.push(Effect::Delete { path: p });
                continue;
            }
            let node = &self.nodes[&p];
            stack.push((p.clone(), true));
            for child in node.children.iter().rev() {
                stack.push((format!("{p}/{child}"), false));
            }
        }
        self.commit(order)
    }

    fn children(&self, path: &str) -> StoreResult<Vec<String>> {
        Ok(self.node(path)?.children.iter().cloned().collect())
    }

    fn exists(&self, path: &str) -> Option<Stat> {
        self.node(path).ok().map(Node::stat)
    }

    fn multi(&mut self, ops: &[Op]) -> StoreResult<Vec<OpResult>> {
        let AppliedMulti {
            effects,
            results,
            undo,
        } = self.run_multi(ops)?;
        if !effects.is_empty() {
            self.log_applied(&effects, undo)?;
        }
        // Set stats are as of each op, as ZooKeeper reports them.
        Ok(results)
    }
}

mod codec;
use codec::{decode_effects, decode_log_header, decode_snapshot, encode_record, encode_snapshot};

#[cfg(test)]
mod tests;
