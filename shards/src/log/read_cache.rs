//! The fetch read path of `log.io.mode=direct`: segment bytes are read with
//! glommio `DmaFile` reads (O_DIRECT, asynchronous through io_uring, so the
//! shard never blocks on the disk and the page cache is bypassed) into a
//! shard-local LRU of 128 KiB aligned blocks.
//!
//! - One `ReadCache` per shard, used from that shard's tasks only.
//! - Blocks are keyed by (st_dev, st_ino) of the segment file and the block
//!   index, so every shard names a file the same way. The cache keeps one
//!   `DmaFile` per file that has cached blocks; that open descriptor also
//!   pins the inode number, so it cannot be reused by a new file while stale
//!   blocks are cached. A file's `DmaFile` is closed when its last block is
//!   evicted, or as soon as the file is seen deleted (st_nlink == 0).
//! - A block remembers how many of its bytes some slice asked for
//!   (`valid_len`): only those are known to be log bytes, since the direct
//!   writer pads the file's tail block with zeros until the next append.
//!   A slice needing bytes past `valid_len` (the log grew) re-reads the block.
//!   A file shorter than a block's valid bytes (truncated) drops the block.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

use glommio::io::{DmaFile, ReadResult};

use super::FileSlice;

/// Size (and alignment) of a cached block.
pub const READ_CACHE_BLOCK_BYTES: usize = 128 * 1024;

/// Where the chunks of `slice` start: its position, then every read-cache
/// block boundary before its end.
pub fn chunk_starts(slice: &FileSlice) -> impl Iterator<Item = u64> {
    let end = slice.position + slice.len as u64;
    let block = READ_CACHE_BLOCK_BYTES as u64;
    let first_boundary = (slice.position / block + 1) * block;
    std::iter::once(slice.position).chain((first_boundary..end).step_by(READ_CACHE_BLOCK_BYTES))
}

/// Default capacity of one shard's cache.
pub const DEFAULT_READ_CACHE_CAPACITY_BYTES: usize = 16 * 1024 * 1024;

const _: () = assert!(READ_CACHE_BLOCK_BYTES.is_multiple_of(4096));

/// How often open files are checked for deletion, at most.
const PURGE_INTERVAL: Duration = Duration::from_secs(1);

/// A file's identity, stable across descriptors and shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

struct FileStat {
    id: FileId,
    len_bytes: u64,
    deleted: bool,
}

fn fstat_fd(fd: i32) -> io::Result<FileStat> {
    // SAFETY: an all-zero `stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open for the duration of the call (borrowed by the
    // caller) and `st` is a valid, writable `stat`.
    if unsafe { libc::fstat(fd, &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(FileStat {
        id: FileId {
            dev: st.st_dev,
            ino: st.st_ino,
        },
        len_bytes: st.st_size.max(0) as u64,
        deleted: st.st_nlink == 0,
    })
}

type BlockKey = (FileId, u64);

struct Block {
    data: ReadResult,
    /// Leading bytes of `data` known to be log bytes.
    valid_len: usize,
    last_use: u64,
}

struct OpenFile {
    dma: Rc<DmaFile>,
    cached_blocks: usize,
}

struct Inner {
    blocks: HashMap<BlockKey, Block>,
    /// last_use -> key; the first entry is the least recently used block.
    lru: BTreeMap<u64, BlockKey>,
    files: HashMap<FileId, OpenFile>,
    clock: u64,
    hits: u64,
    misses: u64,
    bytes_cached: usize,
    last_purge: Instant,
}

/// A shard-local cache of aligned segment blocks, filled by DMA reads.
pub struct ReadCache {
    inner: RefCell<Inner>,
    capacity_blocks: usize,
}

fn close_later(dma: Rc<DmaFile>) {
    // Closing is asynchronous; an Rc still held by an in-flight read makes
    // this a plain drop, and the last holder's drop closes the descriptor.
    glommio::spawn_local(async move {
        let _ = dma.close_rc().await;
    })
    .detach();
}

impl Inner {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn remove_block(&mut self, key: &BlockKey) {
        let Some(block) = self.blocks.remove(key) else {
            return;
        };
        self.lru.remove(&block.last_use);
        self.bytes_cached -= block.data.len();
        let file = self
            .files
            .get_mut(&key.0)
            .expect("a cached block's file is open");
        file.cached_blocks -= 1;
        if file.cached_blocks == 0 {
            let file = self.files.remove(&key.0).expect("present");
            close_later(file.dma);
        }
    }

    /// Forgets every block of `id` and closes its DmaFile.
    fn drop_file(&mut self, id: FileId) {
        if !self.files.contains_key(&id) {
            return;
        }
        let keys: Vec<BlockKey> = self.blocks.keys().filter(|k| k.0 == id).copied().collect();
        for key in &keys {
            self.remove_block(key);
        }
        debug_assert!(!self.files.contains_key(&id));
    }

    /// Drops the files deleted since the last check (their disk space is
    /// held by our descriptor), at most once per `PURGE_INTERVAL`.
    fn purge_deleted(&mut self, now: Instant) {
        if now.duration_since(self.last_purge) < PURGE_INTERVAL {
            return;
        }
        self.last_purge = now;
        let deleted: Vec<FileId> = self
            .files
            .iter()
            .filter(|(_, f)| fstat_fd(f.dma.as_raw_fd()).map_or(true, |st| st.deleted))
            .map(|(id, _)| *id)
            .collect();
        for id in deleted {
            self.drop_file(id);
        }
    }
}

impl ReadCache {
    /// A cache of at most `capacity_bytes` (at least one block).
    pub fn new(capacity_bytes: usize) -> ReadCache {
        ReadCache {
            inner: RefCell::new(Inner {
                blocks: HashMap::new(),
                lru: BTreeMap::new(),
                files: HashMap::new(),
                clock: 0,
                hits: 0,
                misses: 0,
                bytes_cached: 0,
                last_purge: Instant::now(),
            }),
            capacity_blocks: (capacity_bytes / READ_CACHE_BLOCK_BYTES).max(1),
        }
    }

    /// (hits, misses, bytes cached now).
    pub fn stats(&self) -> (u64, u64, usize) {
        let inner = self.inner.borrow();
        (inner.hits, inner.misses, inner.bytes_cached)
    }

    /// Files with an open DmaFile (one per file with cached blocks).
    pub fn open_files(&self) -> usize {
        self.inner.borrow().files.len()
    }

    /// The bytes of `slice` from `pos` to the end of `pos`'s block or of the
    /// slice, whichever is first; never empty. Call it from `slice.position`
    /// on, advancing by the returned length, until the slice end.
    pub async fn read_chunk(&self, slice: &FileSlice, pos: u64) -> io::Result<ReadResult> {
        let end = slice.position + slice.len as u64;
        assert!(
            pos >= slice.position && pos < end,
            "read_chunk at {pos} outside the slice"
        );
        let st = fstat_fd(slice.file.as_raw_fd())?;
        let block_index = pos / READ_CACHE_BLOCK_BYTES as u64;
        let block_start = block_index * READ_CACHE_BLOCK_BYTES as u64;
        let need_len =
            (end.min(block_start + READ_CACHE_BLOCK_BYTES as u64) - block_start) as usize;
        let offset = (pos - block_start) as usize;
        let key = (st.id, block_index);
        let dma = {
            let mut inner = self.inner.borrow_mut();
            if st.deleted {
                inner.drop_file(st.id);
            } else if let Some(block) = inner.blocks.get(&key) {
                let (valid_len, last_use) = (block.valid_len, block.last_use);
                if st.len_bytes < block_start + valid_len as u64 {
                    // Truncated since it was read: the bytes may be rewritten.
                    inner.remove_block(&key);
                } else if valid_len >= need_len {
                    let data = block.data.clone();
                    let now = inner.tick();
                    inner.lru.remove(&last_use);
                    inner.lru.insert(now, key);
                    inner.blocks.get_mut(&key).expect("present").last_use = now;
                    inner.hits += 1;
                    return Ok(sub_slice(&data, offset, need_len));
                }
            }
            inner.misses += 1;
            inner.purge_deleted(Instant::now());
            inner.files.get(&st.id).map(|f| f.dma.clone())
        };
        let dma = match dma {
            Some(d) => d,
            None => Rc::new(open_dma(&slice.file).await?),
        };
        let data = dma
            .read_at_aligned(block_start, READ_CACHE_BLOCK_BYTES)
            .await
            .map_err(io::Error::from)?;
        if data.len() < need_len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "segment block at {block_start}: read {} bytes, the fetch slice needs {need_len}",
                    data.len()
                ),
            ));
        }
        let out = sub_slice(&data, offset, need_len);
        if !st.deleted {
            self.insert(key, data, need_len, dma);
        }
        Ok(out)
    }

    fn insert(&self, key: BlockKey, data: ReadResult, valid_len: usize, dma: Rc<DmaFile>) {
        let mut inner = self.inner.borrow_mut();
        // Another task may have filled the block meanwhile: keep the newest.
        inner.remove_block(&key);
        let file = inner.files.entry(key.0).or_insert(OpenFile {
            dma,
            cached_blocks: 0,
        });
        file.cached_blocks += 1;
        let now = inner.tick();
        inner.bytes_cached += data.len();
        inner.lru.insert(now, key);
        inner.blocks.insert(
            key,
            Block {
                data,
                valid_len,
                last_use: now,
            },
        );
        while inner.blocks.len() > self.capacity_blocks {
            let (_, &oldest) = inner.lru.first_key_value().expect("lru tracks every block");
            inner.remove_block(&oldest);
        }
        debug_assert_eq!(inner.blocks.len(), inner.lru.len());
        debug_assert!(inner.bytes_cached <= self.capacity_blocks * READ_CACHE_BLOCK_BYTES);
    }
}

fn sub_slice(data: &ReadResult, offset: usize, need_len: usize) -> ReadResult {
    debug_assert!(offset < need_len && need_len <= data.len());
    ReadResult::slice(data, offset, need_len - offset).expect("range checked against the block")
}

/// Opens the file behind `file` again, with O_DIRECT, as a DmaFile: the
/// magic link in /proc reaches the inode even if it was unlinked.
async fn open_dma(file: &File) -> io::Result<DmaFile> {
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    DmaFile::open(&path).await.map_err(io::Error::from)
}

#[cfg(test)]
#[path = "read_cache_tests.rs"]
mod tests;
