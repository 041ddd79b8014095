//! The global allocator: the system allocator, except that single requests
//! of 1 GiB or more are served by `mmap(MAP_NORESERVE)`.
//!
//! Why: the `kafka-protocol` decoders size a `Vec` from an array count read
//! off the wire before reading any element, so a 20-byte request claiming
//! 2^31 topics asks for hundreds of GiB. The system allocator refuses that
//! and the process aborts. Reserved-but-untouched address space costs no
//! memory, and decoding fails after the first few elements, so the mapping
//! is unmapped again at once. No legitimate allocation is this large
//! (`socket.request.max.bytes` caps a request far below it).

use std::alloc::{GlobalAlloc, Layout, System};

const HUGE_BYTES: usize = 1 << 30;

pub struct GuardedAllocator;

fn page_aligned(layout: &Layout) -> bool {
    layout.align() <= 4096
}

unsafe impl GlobalAlloc for GuardedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= HUGE_BYTES && page_aligned(&layout) {
            // SAFETY: anonymous private mapping; no fd, no existing memory.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    layout.size(),
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            return if p == libc::MAP_FAILED {
                std::ptr::null_mut()
            } else {
                p as *mut u8
            };
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() >= HUGE_BYTES && page_aligned(&layout) {
            // SAFETY: ptr/size are exactly what alloc mapped.
            unsafe {
                libc::munmap(ptr as *mut libc::c_void, layout.size());
            }
            return;
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old_huge = layout.size() >= HUGE_BYTES && page_aligned(&layout);
        let new_huge = new_size >= HUGE_BYTES && page_aligned(&layout);
        if !old_huge && !new_huge {
            // SAFETY: forwarded unchanged.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: the new layout keeps the old alignment; sizes are non-zero.
        unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let new_ptr = self.alloc(new_layout);
            if !new_ptr.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new_ptr, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new_ptr
        }
    }
}

/// Below this, glibc serves allocations from its arenas instead of a fresh
/// `mmap` each (32 MiB is glibc's own ceiling for the threshold).
const MMAP_THRESHOLD_BYTES: libc::c_int = 32 << 20;
/// Free memory an arena keeps before giving it back to the kernel.
const TRIM_THRESHOLD_BYTES: libc::c_int = 64 << 20;

/// Fixes glibc's mmap and trim thresholds (set them before the shards
/// start). Request frames of up to a few MiB are allocated and freed at the
/// rate requests arrive; with glibc's adaptive defaults each shard's arena
/// trimmed freed frames back to the kernel and the next frame faulted fresh,
/// zeroed pages in again (a sixth of the broker's CPU with 100-byte
/// records). The cost is up to `TRIM_THRESHOLD_BYTES` of free memory kept
/// per arena.
pub fn tune_system_allocator() {
    // SAFETY: mallopt only sets allocator parameters; it is called on the
    // main thread before any other thread exists.
    unsafe {
        let mmap_ok = libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
        let trim_ok = libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES);
        assert!(mmap_ok == 1 && trim_ok == 1, "mallopt refused a threshold");
    }
}
