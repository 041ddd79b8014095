//! An index file (`.index`, `.timeindex`) and how entries reach it.
//!
//! An inactive segment's entries are written with `pwrite` when flushed.
//! While a segment is active its file is preallocated (sparse) to the
//! index's capacity, as Kafka's mapped index is, and entries are written
//! behind: each append queues them on the shard (`queue_pending`, no system
//! call), the shard's shipper hands the queue to the `index-writes` thread
//! every few milliseconds (`ship_queued_writes`), and that thread writes
//! them. So `kafka-dump-log` reads a live segment's index a few
//! milliseconds behind the log, and an append never touches the file:
//! writing through a mapping faulted pages in on the shard, and ext4's
//! `page_mkwrite` waited there for the journal (18-350 ms stalls).
//!
//! Ordering: the queued operations of one file run in order on one thread.
//! Whatever the shard itself does to the file (a flush, a truncation, a
//! synchronous close) takes the file's lock, writes every entry not yet
//! landed, and bumps the file's generation when it changes what queued
//! operations would do, so a stale queued write or trim is skipped. Whoever
//! fsyncs a rolled or closed segment's files off the shard first waits for
//! the operations shipped before (`wait_for_landed`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::future::Future;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};

use super::segment::DiskFile;
use crate::background::BackgroundQueue;

/// The thread that writes active indexes' queued entries.
pub static INDEX_WRITES: BackgroundQueue = BackgroundQueue::new("index-writes");

/// The larger entry of the two indexes (the time index's).
const ENTRY_BYTES_MAX: usize = 12;

/// One index's file and the entries handed to it.
pub(super) struct IndexFile {
    file: DiskFile,
    entry_bytes: usize,
    /// Entries handed to the file: written, or queued while active.
    written: usize,
    /// Set once the segment has been active: the file written behind.
    behind: Option<Behind>,
}

struct Behind {
    target: Arc<BehindTarget>,
    /// The target's generation, kept here too: only the index's owner
    /// changes it, and an append must not take the lock (the writer holds
    /// it while `pwrite` may wait on the journal).
    generation: u64,
    /// Entries are queued (the segment is active and preallocated).
    active: bool,
}

impl Behind {
    /// Queued operations from before are skipped from now on.
    fn next_generation(&mut self, landed: &mut Landed) {
        self.generation += 1;
        landed.generation = self.generation;
    }
}

/// An index file shared by its shard and the `index-writes` thread.
struct BehindTarget {
    file: Arc<File>,
    landed: Mutex<Landed>,
}

struct Landed {
    /// Queued operations of an older generation are skipped.
    generation: u64,
    /// Every entry below this byte offset is in the file.
    end_bytes: u64,
}

impl BehindTarget {
    fn lock(&self) -> MutexGuard<'_, Landed> {
        // A panic while holding it leaves plain counters; keep going.
        self.landed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

enum BehindOp {
    Write {
        position: u64,
        len_bytes: u8,
        bytes: [u8; ENTRY_BYTES_MAX],
    },
    /// The segment became inactive: the file cut to its entries.
    Trim { len_bytes: u64 },
}

struct QueuedOp {
    target: Arc<BehindTarget>,
    generation: u64,
    op: BehindOp,
}

/// This shard's queued operations, and its shipper's waker while idle.
#[derive(Default)]
struct ShardQueue {
    ops: Vec<QueuedOp>,
    waker: Option<Waker>,
}

thread_local! {
    static SHARD_QUEUE: RefCell<ShardQueue> = RefCell::default();
}

/// A queue this long is shipped at once: it bounds the memory queued
/// between two ships, and a log used without a shipper (benches, tools).
const SHIP_AT_OPS: usize = 16_384;

fn enqueue(op: QueuedOp) {
    let (waker, full) = SHARD_QUEUE.with(|q| {
        let mut q = q.borrow_mut();
        q.ops.push(op);
        let waker = if q.ops.len() == 1 {
            q.waker.take()
        } else {
            None
        };
        (waker, q.ops.len() >= SHIP_AT_OPS)
    });
    if let Some(waker) = waker {
        waker.wake();
    }
    if full {
        ship_queued_writes();
    }
}

/// Resolves once this shard has operations queued (for its shipper).
pub fn queued_writes_waiting() -> impl Future<Output = ()> {
    std::future::poll_fn(|cx| {
        SHARD_QUEUE.with(|q| {
            let mut q = q.borrow_mut();
            if q.ops.is_empty() {
                q.waker = Some(cx.waker().clone());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
    })
}

/// Hands this shard's queued operations to the `index-writes` thread.
pub fn ship_queued_writes() {
    let ops = SHARD_QUEUE.with(|q| std::mem::take(&mut q.borrow_mut().ops));
    if !ops.is_empty() {
        INDEX_WRITES.push(move || run_ops(ops));
    }
}

/// Blocks until every operation shipped so far is done (off the shard).
pub fn wait_for_landed() {
    futures_lite::future::block_on(INDEX_WRITES.run(|| ()));
}

/// On the `index-writes` thread. Writes to one file that follow each other
/// in it (the entries one partition queued over a ship interval) become
/// one `pwrite`, even with other files' operations in between; each file's
/// own operations keep their order.
fn run_ops(ops: Vec<QueuedOp>) {
    let mut runs: HashMap<*const BehindTarget, Run> = HashMap::new();
    for op in ops {
        let key = Arc::as_ptr(&op.target);
        match op.op {
            BehindOp::Trim { len_bytes } => {
                if let Some(run) = runs.remove(&key) {
                    run.write();
                }
                let landed = op.target.lock();
                if landed.generation == op.generation {
                    if let Err(e) = op.target.file.set_len(len_bytes) {
                        log::warn!("trimming an index file to {len_bytes} bytes: {e}");
                    }
                }
            }
            BehindOp::Write {
                position,
                len_bytes,
                bytes,
            } => {
                let bytes = &bytes[..len_bytes as usize];
                if let Some(run) = runs.get_mut(&key) {
                    if run.generation == op.generation && run.end() == position {
                        run.bytes.extend_from_slice(bytes);
                        continue;
                    }
                    runs.remove(&key).expect("just found").write();
                }
                runs.insert(
                    key,
                    Run {
                        target: op.target,
                        generation: op.generation,
                        position,
                        bytes: bytes.to_vec(),
                    },
                );
            }
        }
    }
    for (_, run) in runs {
        run.write();
    }
}

/// Entries of one file that follow each other, to write at once.
struct Run {
    target: Arc<BehindTarget>,
    generation: u64,
    position: u64,
    bytes: Vec<u8>,
}

impl Run {
    fn end(&self) -> u64 {
        self.position + self.bytes.len() as u64
    }

    fn write(self) {
        let mut landed = self.target.lock();
        let end = self.end();
        // A gap (an earlier write failed) is left for the next flush to fill.
        if landed.generation != self.generation || end <= landed.end_bytes {
            return;
        }
        let from = landed.end_bytes.max(self.position);
        let skip = (from - self.position) as usize;
        match self.target.file.write_all_at(&self.bytes[skip..], from) {
            Ok(()) if self.position <= landed.end_bytes => landed.end_bytes = end,
            Ok(()) => {}
            Err(e) => log::warn!("writing index entries at {from}: {e}"),
        }
    }
}

impl IndexFile {
    pub fn new(file: DiskFile, entry_bytes: usize, written: usize) -> Self {
        assert!(entry_bytes <= ENTRY_BYTES_MAX);
        IndexFile {
            file,
            entry_bytes,
            written,
            behind: None,
        }
    }

    pub fn file(&self) -> &DiskFile {
        &self.file
    }

    fn bytes(&self, entries: usize) -> u64 {
        (entries * self.entry_bytes) as u64
    }

    /// Writes entries `[from, len)` at their place in the file.
    fn write_entries(
        &self,
        from: usize,
        len: usize,
        encode: impl Fn(usize, &mut [u8]),
    ) -> io::Result<()> {
        if from >= len {
            return Ok(());
        }
        let mut raw = vec![0u8; (len - from) * self.entry_bytes];
        for (n, out) in raw.chunks_exact_mut(self.entry_bytes).enumerate() {
            encode(from + n, out);
        }
        self.file.write_all_at(&raw, self.bytes(from))
    }

    /// Every entry of `len` in the file, here and now (flush, close, sync).
    pub fn write_pending(
        &mut self,
        len: usize,
        encode: impl Fn(usize, &mut [u8]),
    ) -> io::Result<()> {
        assert!(self.written <= len, "entries shrink only by truncation");
        match &self.behind {
            None => self.write_entries(self.written, len, encode)?,
            Some(behind) => {
                let target = behind.target.clone();
                let mut landed = target.lock();
                let from = (landed.end_bytes / self.entry_bytes as u64) as usize;
                self.write_entries(from, len, encode)?;
                landed.end_bytes = landed.end_bytes.max(self.bytes(len));
            }
        }
        self.written = len;
        Ok(())
    }

    /// New entries queued for the `index-writes` thread (an active segment's
    /// append); nothing otherwise, until the next flush.
    pub fn queue_pending(&mut self, len: usize, encode: impl Fn(usize, &mut [u8])) {
        let Some(behind) = self.behind.as_ref().filter(|b| b.active) else {
            return;
        };
        let generation = behind.generation;
        for n in self.written..len {
            let mut bytes = [0u8; ENTRY_BYTES_MAX];
            encode(n, &mut bytes[..self.entry_bytes]);
            enqueue(QueuedOp {
                target: behind.target.clone(),
                generation,
                op: BehindOp::Write {
                    position: self.bytes(n),
                    len_bytes: self.entry_bytes as u8,
                    bytes,
                },
            });
        }
        self.written = len;
    }

    /// The segment became active: every entry written, the file
    /// preallocated to `capacity_bytes`, new entries queued from now on.
    pub fn activate(
        &mut self,
        len: usize,
        capacity_bytes: u64,
        encode: impl Fn(usize, &mut [u8]),
    ) -> io::Result<()> {
        if self.behind.as_ref().is_some_and(|b| b.active) {
            return Ok(());
        }
        self.write_pending(len, encode)?;
        self.file.set_len(capacity_bytes)?;
        match &mut self.behind {
            Some(behind) => {
                // A trim queued when it became inactive must not land now.
                let target = behind.target.clone();
                behind.next_generation(&mut target.lock());
                behind.active = true;
            }
            None => {
                self.behind = Some(Behind {
                    target: Arc::new(BehindTarget {
                        file: self.file.shared(),
                        landed: Mutex::new(Landed {
                            generation: 0,
                            end_bytes: self.bytes(self.written),
                        }),
                    }),
                    generation: 0,
                    active: true,
                })
            }
        }
        Ok(())
    }

    /// The segment became inactive (a roll): the last entries and a trim of
    /// the file to them are queued and shipped; the roll's fsync waits for
    /// them (`queued_writes_landed`). No system call on the shard.
    pub fn deactivate_queued(&mut self, len: usize, encode: impl Fn(usize, &mut [u8])) {
        self.queue_pending(len, encode);
        let Some(behind) = self.behind.as_mut().filter(|b| b.active) else {
            return;
        };
        behind.active = false;
        let op = QueuedOp {
            target: behind.target.clone(),
            generation: behind.generation,
            op: BehindOp::Trim {
                len_bytes: (self.written * self.entry_bytes) as u64,
            },
        };
        enqueue(op);
        ship_queued_writes();
    }

    /// The segment became inactive, done here and now (a synchronous close,
    /// or off the shard after `wait_for_landed`): every entry written and the
    /// file cut to them; queued operations left are skipped.
    pub fn deactivate_now(
        &mut self,
        len: usize,
        encode: impl Fn(usize, &mut [u8]),
    ) -> io::Result<()> {
        self.write_pending(len, encode)?;
        let len_bytes = self.bytes(self.written);
        let Some(behind) = &mut self.behind else {
            return Ok(());
        };
        let target = behind.target.clone();
        let mut landed = target.lock();
        behind.next_generation(&mut landed);
        behind.active = false;
        self.file.set_len(len_bytes)
    }

    /// Entries from `keep` on are gone: zeroed in a preallocated file (they
    /// would read as entries after a crash), cut off otherwise. The file's
    /// lock is held so no queued write lands in between.
    pub fn truncate(&mut self, keep: usize, encode: impl Fn(usize, &mut [u8])) -> io::Result<()> {
        let Some(behind) = &self.behind else {
            if self.written > keep {
                self.file.set_len(self.bytes(keep))?;
                self.written = keep;
            }
            return Ok(());
        };
        let target = behind.target.clone();
        let active = behind.active;
        let mut landed = target.lock();
        let landed_entries = (landed.end_bytes / self.entry_bytes as u64) as usize;
        self.write_entries(landed_entries, keep.min(self.written), encode)?;
        if self.written > keep {
            if active {
                let zeros = vec![0u8; (self.written - keep) * self.entry_bytes];
                self.file.write_all_at(&zeros, self.bytes(keep))?;
            } else {
                self.file.set_len(self.bytes(keep))?;
            }
        }
        self.written = self.written.min(keep);
        landed.end_bytes = self.bytes(self.written);
        self.behind
            .as_mut()
            .expect("checked above")
            .next_generation(&mut landed);
        Ok(())
    }

    /// Whether entries are (or were) queued for the `index-writes` thread:
    /// whoever syncs the file off the shard waits for them first.
    pub fn written_behind(&self) -> bool {
        self.behind.is_some()
    }

    /// Before a background fsync: entries written here unless they are
    /// written behind (the fsync then waits for those, see `written_behind`).
    pub fn flush_unless_behind(
        &mut self,
        len: usize,
        encode: impl Fn(usize, &mut [u8]),
    ) -> io::Result<()> {
        if self.behind.is_some() {
            return Ok(());
        }
        self.write_pending(len, encode)
    }

    /// Every entry of `len` in the file, then fdatasync.
    pub fn sync(&mut self, len: usize, encode: impl Fn(usize, &mut [u8])) -> io::Result<()> {
        self.write_pending(len, encode)?;
        self.file.sync_data()
    }
}

/// Reads an index file's entries. An active segment's file is preallocated
/// to `preallocated_bytes` (its capacity), so after a crash its entries are
/// followed by zeros: for a file of exactly that length, only the bytes
/// before the first hole are read (a preallocated file is sparse; written
/// pages come first) and trailing all-zero entries are dropped, since
/// neither index ever writes an all-zero entry (a segment's first batch is
/// never indexed). The file is then trimmed to its entries, as Kafka trims
/// an index when its segment becomes inactive. Any other file is read whole
/// and left to the caller's checks. Returns whole entries only.
pub fn read_entries(
    file: &super::segment::DiskFile,
    entry_bytes: usize,
    preallocated_bytes: usize,
) -> io::Result<Vec<u8>> {
    let len_bytes = file.file_len()?;
    let whole = len_bytes - len_bytes % entry_bytes as u64;
    let preallocated = len_bytes == preallocated_bytes as u64;
    let read_bytes = if preallocated {
        // Round up to whole entries: an entry may straddle the hole's page.
        let data_end = first_hole(file.file(), whole)?.min(whole);
        data_end.div_ceil(entry_bytes as u64) * entry_bytes as u64
    } else {
        whole
    };
    let mut raw = vec![0u8; read_bytes.min(whole) as usize];
    file.read_exact_at(&mut raw, 0)?;
    if preallocated {
        let mut entries_len = raw.len();
        while entries_len >= entry_bytes
            && raw[entries_len - entry_bytes..entries_len]
                .iter()
                .all(|&b| b == 0)
        {
            entries_len -= entry_bytes;
        }
        raw.truncate(entries_len);
        file.set_len(entries_len as u64)?;
    }
    Ok(raw)
}
/// The offset of the first hole at or after 0, or `len_bytes` when the file
/// system cannot tell (every byte is then read).
fn first_hole(file: &File, len_bytes: u64) -> io::Result<u64> {
    if len_bytes == 0 {
        return Ok(0);
    }
    // SAFETY: lseek on a descriptor we hold; it only moves the offset,
    // which positional reads and writes (pread/pwrite) never use.
    let hole = unsafe { libc::lseek(file.as_raw_fd(), 0, libc::SEEK_HOLE) };
    if hole < 0 {
        return Ok(len_bytes);
    }
    Ok(hole as u64)
}

#[cfg(test)]
#[path = "index_file_tests.rs"]
mod tests;
