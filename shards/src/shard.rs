//! Shard executors: one glommio `LocalExecutor` per shard, pinned to a core.

use std::io;
use std::os::unix::io::AsRawFd;
use std::sync::Arc;

use glommio::{LocalExecutorBuilder, Placement};

use crate::stall::{StallDetector, StallSettings};

/// The CPUs this process may run on, in order (sched_getaffinity via core_affinity).
pub fn available_cores() -> Vec<usize> {
    let mut ids: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect();
    ids.sort_unstable();
    if ids.is_empty() {
        ids.push(0);
    }
    ids
}

/// Where shard threads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pinning {
    /// Shard i on the (offset + i)-th CPU the process may use (wrapping).
    FromCore(usize),
    /// Wherever the kernel's scheduler puts them.
    Unbound,
}

/// glommio's default I/O arena per executor (registered with io_uring and
/// so resident): what direct I/O's DMA buffers come from.
pub const DIRECT_IO_MEMORY_BYTES: usize = 10 * 1024 * 1024;
/// The arena when nothing uses DMA buffers (page-cache I/O): glommio's floor.
pub const MIN_IO_MEMORY_BYTES: usize = 64 * 1024;

/// Registers the process for private expedited `membarrier`, which glommio
/// issues before each executor parks. glommio registers lazily, from the
/// first executor to park, and the registration waits for an RCU grace
/// period (60-250 ms on this machine) while that shard, and any other that
/// parks meanwhile, is stuck in it. Registered here first, glommio's own
/// registration returns at once (the kernel sees the process registered).
/// Cheapest while the process has a single thread (no grace period to wait
/// for), so the broker calls it first thing in `main`; again here it returns
/// at once. Without the syscall glommio falls back to another barrier.
pub fn register_membarrier() {
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;
    // SAFETY: membarrier takes two integers and touches no memory of ours.
    let r = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            0 as libc::c_int,
        )
    };
    if r != 0 {
        log::debug!(
            "membarrier registration: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Descriptor slots reserved at start (fewer when `RLIMIT_NOFILE` allows
/// fewer): 512 KiB of kernel memory at most.
pub const DESCRIPTOR_TABLE_SLOTS_MAX: u64 = 64 * 1024;

/// Grows the process's descriptor table once, at start, to what the
/// descriptor limit allows (up to [`DESCRIPTOR_TABLE_SLOTS_MAX`]). The
/// kernel grows it by doubling when a new descriptor does not fit, and in
/// a multi-threaded process each growth waits for an RCU grace period
/// while every thread opening a descriptor waits too: two shards were held
/// 80 and 14 ms in `dup` by one growth under produce load. The table never
/// shrinks, so one growth here, while the process has a single thread,
/// spares the shards all of them. Best effort: failing costs only that.
pub fn reserve_descriptor_table() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    let slots = limit.rlim_cur.min(DESCRIPTOR_TABLE_SLOTS_MAX);
    if slots < 2 {
        return;
    }
    let Ok(null) = std::fs::File::open("/dev/null") else {
        return;
    };
    // The lowest free descriptor at or above the table's last slot: the
    // kernel grows the table to hold it.
    let last_slot = (slots - 1) as libc::c_int;
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor `null` keeps open; the copy is
    // closed at once and owned by nothing else.
    unsafe {
        let copy = libc::fcntl(null.as_raw_fd(), libc::F_DUPFD_CLOEXEC, last_slot);
        if copy >= 0 {
            libc::close(copy);
        }
    }
}

/// Starts `nr_shards` executors, shard i pinned to the i-th available core
/// (wrapping when there are more shards than cores), each running `body(i)`
/// with an I/O arena of `io_memory_bytes` and, with `stall` set, a stall
/// detector; waits for all of them (the detector then logs its totals).
pub fn run_shards<F, Fut>(
    nr_shards: usize,
    pinning: Pinning,
    io_memory_bytes: usize,
    stall: Option<StallSettings>,
    body: F,
) -> io::Result<()>
where
    F: Fn(usize) -> Fut + Send + Clone + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    assert!(nr_shards >= 1);
    register_membarrier();
    let cores = available_cores();
    let detector = match stall {
        Some(settings) => Some(Arc::new(StallDetector::start(settings, nr_shards)?)),
        None => None,
    };
    let mut handles = Vec::with_capacity(nr_shards);
    for shard_id in 0..nr_shards {
        let placement = match pinning {
            Pinning::FromCore(offset) => Placement::Fixed(cores[(offset + shard_id) % cores.len()]),
            Pinning::Unbound => Placement::Unbound,
        };
        let body = body.clone();
        let mut builder = LocalExecutorBuilder::new(placement)
            .name(&format!("shard-{shard_id}"))
            .io_memory(io_memory_bytes.max(MIN_IO_MEMORY_BYTES));
        if let Some(detector) = &detector {
            builder = detector.configure(builder, shard_id);
        }
        let detector = detector.clone();
        let handle = builder
            .spawn(move || {
                if let Some(detector) = detector {
                    detector.register_current_thread(shard_id);
                }
                body(shard_id)
            })
            .map_err(|e| io::Error::other(format!("starting shard {shard_id}: {e}")))?;
        handles.push(handle);
    }
    for (i, h) in handles.into_iter().enumerate() {
        h.join()
            .map_err(|e| io::Error::other(format!("shard {i} failed: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptor_table_slots() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("FDSize:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("FDSize")
    }

    #[test]
    fn the_descriptor_table_is_grown_to_the_limit() {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct we pass.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
            0
        );
        reserve_descriptor_table();
        let want = limit.rlim_cur.min(DESCRIPTOR_TABLE_SLOTS_MAX);
        assert!(
            descriptor_table_slots() >= want,
            "{} slots, limit {want}",
            descriptor_table_slots()
        );
    }
}
