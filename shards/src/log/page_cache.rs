//! A fetch sends segment bytes by sendfile(2) from the page cache. Where
//! they are not there (a consumer catching up on old data; a direct-mode
//! log, whose O_DIRECT writes never put them there), the read finding where
//! the fetch ends (a walk over batch headers) and the sendfile read them
//! from the disk on the shard, and every connection of the shard waits.
//! So before a fetch reads a partition the shard asks whether the range it
//! would touch is in the page cache (`cachestat(2)`, Linux 6.5) and ready
//! (one-byte reads that must not wait probe it), and if not has the
//! executor's blocking thread read it in first ([`fill`]): the fetch's task
//! waits, the shard does not. Sendfile checks its slice again. Where the
//! kernel cannot say, reads go on as before.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// `cachestat`'s number in the generic syscall table (every architecture
/// since Linux 6.5); libc does not name it for every target yet.
const SYS_CACHESTAT: libc::c_long = 451;

/// Bytes read into the page cache off the shard before a send.
pub static FILLED_BYTES: AtomicU64 = AtomicU64::new(0);

/// Set once `cachestat` is found missing (ENOSYS) or refused (EPERM under
/// a seccomp filter): no more asking.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

fn page_bytes() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    // SAFETY: sysconf reads a constant of the running system.
    *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as u64,
        _ => 4096,
    })
}

/// Whether every page of `len` bytes at `position` of `file` is in the page
/// cache; `None` when the kernel cannot say.
pub fn range_cached(file: &File, position: u64, len: u64) -> Option<bool> {
    if len == 0 {
        return Some(true);
    }
    if UNSUPPORTED.load(Ordering::Relaxed) {
        return None;
    }
    let page = page_bytes();
    let first_page = position / page;
    let end_page = (position + len).div_ceil(page);
    let range = CachestatRange {
        off: first_page * page,
        len: (end_page - first_page) * page,
    };
    let mut stat = Cachestat::default();
    // SAFETY: both pointers are to live, correctly laid out structs; flags 0.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const CachestatRange,
            &mut stat as *mut Cachestat,
            0u32,
        )
    };
    if rc != 0 {
        let err = io::Error::last_os_error();
        if matches!(err.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) {
            UNSUPPORTED.store(true, Ordering::Relaxed);
            log::info!("cachestat(2) unavailable ({err}): fetches sendfile without it");
        }
        return None;
    }
    if stat.nr_cache < end_page - first_page {
        return Some(false);
    }
    // A page readahead put in the cache may still be on its way from the
    // disk, and `cachestat` counts it: a read finding one waits for the
    // disk (up to 259 ms on the shard here, a consumer catching up on 8
    // partitions). Reads that must not wait (RWF_NOWAIT) probe the range.
    Some(probes_ready(file, range.off, range.len, page))
}

/// Probes between two pages read without waiting.
const PROBE_STRIDE_BYTES: u64 = 256 * 1024;

/// Whether one byte of the first page, of every `PROBE_STRIDE_BYTES`, and of
/// the last page can be read without waiting for the disk.
fn probes_ready(file: &File, off: u64, len: u64, page: u64) -> bool {
    let last = off + len - page;
    let mut at = off;
    loop {
        if !readable_now(file, at.min(last)) {
            return false;
        }
        if at >= last {
            return true;
        }
        at += PROBE_STRIDE_BYTES;
    }
}

fn readable_now(file: &File, position: u64) -> bool {
    let mut byte = 0u8;
    let iov = libc::iovec {
        iov_base: &mut byte as *mut u8 as *mut libc::c_void,
        iov_len: 1,
    };
    // SAFETY: one iovec over a live local byte; the descriptor is open.
    let n = unsafe {
        libc::preadv2(
            file.as_raw_fd(),
            &iov,
            1,
            position as libc::off_t,
            libc::RWF_NOWAIT,
        )
    };
    // 0 past the end: nothing to wait for. EAGAIN: the page is not ready.
    // Any other error (a filesystem without RWF_NOWAIT): the kernel cannot
    // say, and the read goes on as it would without the check.
    n >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN)
}

fn dev_null() -> io::Result<&'static File> {
    static DEV_NULL: OnceLock<File> = OnceLock::new();
    if let Some(f) = DEV_NULL.get() {
        return Ok(f);
    }
    let f = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    Ok(DEV_NULL.get_or_init(|| f))
}

/// `posix_fadvise` over the whole of `file`.
pub fn advise(file: &File, advice: libc::c_int) -> io::Result<()> {
    // SAFETY: advice on an open descriptor; no memory is passed.
    match unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, advice) } {
        0 => Ok(()),
        rc => Err(io::Error::from_raw_os_error(rc)),
    }
}

/// Bytes of a closed segment a read would touch that are not all in the
/// page cache (`Log::cold_range`).
#[derive(Clone, Debug)]
pub struct ColdRange {
    pub file: Arc<File>,
    pub position: u64,
    pub len: u64,
}

/// [`fill`]s every range, in order.
pub fn fill_all(ranges: &[ColdRange]) -> io::Result<()> {
    ranges
        .iter()
        .try_for_each(|r| fill(&r.file, r.position, r.len))
}

/// Reads `len` bytes at `position` of `file` into the page cache, blocking
/// the calling thread (never a shard's): a sendfile to /dev/null, so the
/// pages are read without a copy to user space.
pub fn fill(file: &File, position: u64, len: u64) -> io::Result<()> {
    let sink = dev_null()?;
    let mut offset = position as libc::off_t;
    let end = position + len;
    while (offset as u64) < end {
        let remaining = (end - offset as u64) as usize;
        // SAFETY: both descriptors are open for the call; offset is a valid pointer.
        let n =
            unsafe { libc::sendfile(sink.as_raw_fd(), file.as_raw_fd(), &mut offset, remaining) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            break; // the file ends sooner: the send will say so
        }
    }
    FILLED_BYTES.fetch_add(offset as u64 - position, Ordering::Relaxed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn drop_from_cache(file: &File) {
        file.sync_all().unwrap();
        advise(file, libc::POSIX_FADV_DONTNEED).unwrap();
    }

    #[test]
    fn a_range_read_in_is_cached_and_one_dropped_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segment.log");
        let mut file = File::create(&path).unwrap();
        file.write_all(&vec![7u8; 1 << 20]).unwrap();
        drop_from_cache(&file);
        let file = File::open(&path).unwrap();
        let Some(cached) = range_cached(&file, 4096, 300_000) else {
            return; // a kernel without cachestat: nothing to check
        };
        assert!(!cached, "dropped clean pages are not cached");
        fill(&file, 4096, 300_000).unwrap();
        assert_eq!(range_cached(&file, 4096, 300_000), Some(true));
        assert_eq!(range_cached(&file, 0, 0), Some(true));
        assert!(FILLED_BYTES.load(Ordering::Relaxed) >= 300_000);
    }

    #[test]
    fn a_fill_past_the_end_stops_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("short.log");
        std::fs::write(&path, b"abc").unwrap();
        let file = File::open(&path).unwrap();
        fill(&file, 0, 10_000).unwrap();
    }
}
