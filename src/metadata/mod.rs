//! The metadata store: a ZooKeeper-shaped tree of znodes. `EmbeddedStore`
//! keeps it durable on local disk for a single broker; a ZooKeeper-backed
//! store will implement the same `MetadataStore` trait. `topics` lays
//! Kafka's ZooKeeper JSON documents on top of any store. `meta_properties`
//! and `checkpoints` are the broker's own files in its log dir.

pub mod acls;
pub mod checkpoints;
pub mod configs;
pub mod embedded;
pub mod image;
pub mod meta_properties;
pub mod metadata_cache;
pub mod producer_ids;
pub mod topics;

use std::fmt;
use std::io;

pub use embedded::EmbeddedStore;

/// ZooKeeper's error cases, plus local I/O and corruption.
#[derive(Debug)]
pub enum StoreError {
    NoNode(String),
    NodeExists(String),
    BadVersion(String),
    NotEmpty(String),
    Io(io::Error),
    Corrupt(String),
    /// A malformed path (ZooKeeper's BadArguments / IllegalArgumentException).
    BadArguments(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::NoNode(p) => write!(f, "KeeperErrorCode = NoNode for {p}"),
            StoreError::NodeExists(p) => write!(f, "KeeperErrorCode = NodeExists for {p}"),
            StoreError::BadVersion(p) => write!(f, "KeeperErrorCode = BadVersion for {p}"),
            StoreError::NotEmpty(p) => write!(f, "KeeperErrorCode = Directory not empty for {p}"),
            StoreError::Io(e) => write!(f, "metadata store I/O error: {e}"),
            StoreError::Corrupt(m) => write!(f, "metadata store corrupt: {m}"),
            StoreError::BadArguments(m) => write!(f, "KeeperErrorCode = BadArguments: {m}"),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<io::Error> for StoreError {
    fn from(e: io::Error) -> Self {
        StoreError::Io(e)
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// The subset of ZooKeeper's Stat that Kafka uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Data version, incremented by every set.
    pub version: i32,
    /// Children version, incremented by every child create/delete.
    pub cversion: i32,
    pub ctime_ms: i64,
    pub mtime_ms: i64,
    pub num_children: i32,
    pub ephemeral: bool,
}

/// One operation of an atomic `multi`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Create {
        path: String,
        data: Vec<u8>,
        ephemeral: bool,
        sequential: bool,
    },
    SetData {
        path: String,
        data: Vec<u8>,
        expected_version: i32,
    },
    Delete {
        path: String,
        expected_version: i32,
    },
    /// Fails the multi unless the node's version matches (-1: exists).
    Check {
        path: String,
        expected_version: i32,
    },
}

/// Result of one successful `multi` operation, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    Created(String),
    Set(Stat),
    Deleted,
    Checked,
}

/// Matches any version in set/delete/check (ZooKeeper's -1).
pub const ANY_VERSION: i32 = -1;

/// A ZooKeeper-semantics store. Synchronous: the ZooKeeper implementation
/// will run these on its helper thread; the embedded one on shard 0.
pub trait MetadataStore {
    /// Creates `path`; the parent must exist. With `sequential`, a 10-digit
    /// per-parent counter is appended. Returns the created path.
    fn create(
        &mut self,
        path: &str,
        data: &[u8],
        ephemeral: bool,
        sequential: bool,
    ) -> StoreResult<String>;
    /// Creates `path` and any missing parents (as empty nodes); NodeExists
    /// if `path` itself exists.
    fn create_all(&mut self, path: &str, data: &[u8]) -> StoreResult<String>;
    fn get(&self, path: &str) -> StoreResult<(Vec<u8>, Stat)>;
    fn set(&mut self, path: &str, data: &[u8], expected_version: i32) -> StoreResult<Stat>;
    fn delete(&mut self, path: &str, expected_version: i32) -> StoreResult<()>;
    /// Deletes `path` and everything below it; NoNode if absent.
    fn delete_recursive(&mut self, path: &str) -> StoreResult<()>;
    /// Child names (not full paths), sorted.
    fn children(&self, path: &str) -> StoreResult<Vec<String>>;
    fn exists(&self, path: &str) -> Option<Stat>;
    /// All-or-nothing: either every op applies, or none and the first error returns.
    fn multi(&mut self, ops: &[Op]) -> StoreResult<Vec<OpResult>>;
}

/// Checks a znode path as ZooKeeper's PathUtils.validatePath does (the
/// common cases): absolute, no trailing or double slash, no "." segments,
/// no NUL.
pub fn validate_path(path: &str) -> StoreResult<()> {
    let bad = |why: &str| {
        Err(StoreError::BadArguments(format!(
            "Invalid path string \"{path}\" caused by {why}"
        )))
    };
    if !path.starts_with('/') {
        return bad("path must start with / character");
    }
    if path.len() == 1 {
        return Ok(());
    }
    if path.ends_with('/') {
        return bad("Path must not end with / character");
    }
    for segment in path[1..].split('/') {
        if segment.is_empty() {
            return bad("empty node name specified");
        }
        if segment == "." || segment == ".." {
            return bad("relative paths not allowed");
        }
        if segment.contains('\0') {
            return bad("null character not allowed");
        }
    }
    Ok(())
}

/// Parent of a validated non-root path ("/a/b" → "/a", "/a" → "/").
pub fn parent_of(path: &str) -> &str {
    debug_assert!(path.len() > 1 && path.starts_with('/'));
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}
