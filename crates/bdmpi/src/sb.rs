//! Storage-backed memory in the rank's process: `BDMPI_sbmalloc` and friends.
//!
//! An allocation of at least one page is a `MAP_SHARED` mapping of its own nameless file
//! (`O_TMPFILE`) in `bdmprun`'s working directory (`-wd`), with its blocks allocated up front
//! (`fallocate`), so that writing it back can never fail for lack of space (a write-back that
//! fails would be a `SIGBUS` in the program). Smaller allocations, and all of them when
//! `-sbma` is `none` (BDMPI's default) or outside `bdmprun`, come from `malloc`.
//!
//! Nothing needs a signal handler: a page that was released is read back by the kernel when
//! the program touches it. The mappings and their pages are moved by the runtime's
//! `sbpages`, the one implementation of storage-backed memory that spillway's `SbVec` uses
//! too. The policies of `-sbma` decide when memory is released and how it is read back:
//!
//! * released (**unload**): when the node asks — under `araw`/`lraw` every time the rank
//!   blocks, under `arlw`/`lrlw` only when the node's memory limit (`-rm`) needs the room.
//!   The pages leave the process (`MADV_DONTNEED`), the modified ones are written to the file
//!   (`sync_file_range`, waiting for the write; a failure is reported) and the pages leave the
//!   page cache (`POSIX_FADV_DONTNEED`);
//! * read back (**load**): under the aggressive-read policies (`araw`, `arlw`), when the rank
//!   resumes, the allocations it had in memory when it was unloaded are read back whole
//!   (`MADV_POPULATE_READ`); under the lazy ones (`lraw`, `lrlw`), page by page as the
//!   program touches them.
//!
//! `BDMPI_sbload`/`sbunload` do the same for one allocation on demand, `BDMPI_sbdiscard`
//! drops contents without writing them (they read as zeros afterwards).

#![allow(non_snake_case)]

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use spillway_runtime::sbpages::{self, WriteBack};

use crate::proto;
use crate::report::report;

/// `-sbma`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    None,
    Araw,
    Arlw,
    Lraw,
    Lrlw,
}

impl Policy {
    fn aggressive_read(self) -> bool {
        matches!(self, Policy::Araw | Policy::Arlw)
    }
}

struct Config {
    policy: Policy,
    workdir: Option<PathBuf>,
    page: usize,
}

fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let policy = match std::env::var(proto::ENV_SBMA).as_deref() {
            Ok("araw") => Policy::Araw,
            Ok("arlw") => Policy::Arlw,
            Ok("lraw") => Policy::Lraw,
            Ok("lrlw") => Policy::Lrlw,
            _ => Policy::None,
        };
        let workdir = std::env::var_os(proto::ENV_WORKDIR).map(PathBuf::from);
        let page = sbpages::page_size();
        Config {
            policy,
            workdir,
            page,
        }
    })
}

/// Reads the configuration (at `BDMPI_Init`; allocations before it read it themselves).
pub(crate) fn configure() {
    config();
}

struct Region {
    /// Mapped bytes (whole pages).
    len: usize,
    file: File,
    /// Had pages in memory when it was last unloaded (its working set).
    warm: bool,
    /// Unloaded since the rank last resumed.
    unloaded: bool,
}

static REGIONS: Mutex<BTreeMap<usize, Region>> = Mutex::new(BTreeMap::new());

fn regions() -> std::sync::MutexGuard<'static, BTreeMap<usize, Region>> {
    REGIONS.lock().unwrap_or_else(|e| e.into_inner())
}

fn round_up(n: usize, page: usize) -> usize {
    n.div_ceil(page) * page
}

fn map(size: usize) -> Result<*mut c_void, std::io::Error> {
    let cfg = config();
    let dir = cfg.workdir.as_ref().expect("checked by the caller");
    let len = round_up(size, cfg.page);
    let file = sbpages::spill_file(dir, len)?;
    let p = sbpages::map_shared(&file, len)?.cast::<c_void>();
    regions().insert(
        p as usize,
        Region {
            len,
            file,
            warm: false,
            unloaded: false,
        },
    );
    Ok(p)
}

fn storage_backed(size: usize) -> bool {
    let cfg = config();
    cfg.policy != Policy::None && cfg.workdir.is_some() && size >= cfg.page
}

/// `BDMPI_sbmalloc`: `size` bytes of storage-backed memory (zeroed), or `malloc`'s when small
/// or when storage-backed memory is off. NULL if there is no room.
///
/// # Safety
/// None (an allocator).
#[no_mangle]
pub unsafe extern "C" fn BDMPI_sbmalloc(size: usize) -> *mut c_void {
    if !storage_backed(size) {
        // SAFETY: malloc has no preconditions.
        return unsafe { libc::malloc(size) };
    }
    match map(size) {
        Ok(p) => p,
        Err(e) => {
            report(
                "BDMPI_sbmalloc",
                format_args!("cannot make {size} bytes of storage-backed memory: {e}"),
            );
            std::ptr::null_mut()
        }
    }
}

/// `BDMPI_sbrealloc`: as `realloc` for storage-backed memory (new bytes are zero).
///
/// # Safety
/// `oldptr` is null or came from `BDMPI_sbmalloc`/`sbrealloc` (or `malloc`).
#[no_mangle]
pub unsafe extern "C" fn BDMPI_sbrealloc(oldptr: *mut c_void, size: usize) -> *mut c_void {
    if oldptr.is_null() {
        // SAFETY: an allocation.
        return unsafe { BDMPI_sbmalloc(size) };
    }
    let page = config().page;
    let mut map_ = regions();
    let Some(region) = map_.remove(&(oldptr as usize)) else {
        drop(map_);
        // SAFETY: not ours, so malloc's (the caller's contract).
        return unsafe { libc::realloc(oldptr, size) };
    };
    let len = round_up(size.max(1), page);
    if len > region.len {
        let grown = region
            .file
            .set_len(len as u64)
            .and_then(|()| sbpages::reserve(&region.file, region.len, len));
        if let Err(e) = grown {
            map_.insert(oldptr as usize, region);
            report(
                "BDMPI_sbrealloc",
                format_args!("cannot grow storage-backed memory to {size} bytes: {e}"),
            );
            return std::ptr::null_mut();
        }
    }
    // SAFETY: `oldptr` maps `region.len` bytes of a file of at least `len` bytes; mremap may
    // move it, which the caller expects of realloc.
    let p = unsafe { libc::mremap(oldptr, region.len, len, libc::MREMAP_MAYMOVE) };
    if p == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        map_.insert(oldptr as usize, region);
        report(
            "BDMPI_sbrealloc",
            format_args!("cannot remap storage-backed memory to {size} bytes: {e}"),
        );
        return std::ptr::null_mut();
    }
    if len < region.len {
        // The file's tail beyond the new mapping is no longer used (a failure keeps it).
        let _ = region.file.set_len(len as u64);
    }
    map_.insert(p as usize, Region { len, ..region });
    p
}

/// `BDMPI_sbfree`.
///
/// # Safety
/// `ptr` is null or came from `BDMPI_sbmalloc`/`sbrealloc` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_sbfree(ptr: *mut c_void) {
    if ptr.is_null() {
        return;
    }
    let region = regions().remove(&(ptr as usize));
    match region {
        // SAFETY: our mapping, forgotten just now (its file closes when `r` drops).
        Some(r) => unsafe {
            libc::munmap(ptr, r.len);
        },
        // SAFETY: not ours, so malloc's (the caller's contract).
        None => unsafe { libc::free(ptr) },
    }
}

/// Reads a region back into memory.
fn load(start: usize, r: &Region) {
    // SAFETY: our own whole mapping.
    if let Err(e) = unsafe { sbpages::populate(start as *mut u8, r.len) } {
        report(
            "storage-backed memory",
            format_args!("cannot read {} bytes back: {e}", r.len),
        );
    }
}

/// Writes a region back and drops it from memory and the page cache; returns the bytes that
/// were resident.
fn unload(start: usize, r: &mut Region, page: usize) -> usize {
    // SAFETY: our own whole mapping.
    let res = unsafe { sbpages::resident_pages(start as *mut u8, r.len) } * page;
    r.warm = res > 0;
    r.unloaded = true;
    if res == 0 {
        return 0;
    }
    // SAFETY: our own whole mapping of `r.file`; later accesses read the pages back.
    let written = unsafe { sbpages::unload(start as *mut u8, r.len, &r.file, 0, WriteBack::Wait) };
    if let Err(e) = written {
        report(
            "storage-backed memory",
            format_args!(
                "cannot write {} bytes back to the working directory: {e}",
                r.len
            ),
        );
    }
    sbpages::drop_cache(&r.file, 0, r.len);
    res
}

/// The node asked for the rank's memory (it is blocked): unloads every region; returns the
/// bytes released.
pub(crate) fn unload_for_block() -> u64 {
    let page = config().page;
    let mut total = 0;
    for (&start, r) in regions().iter_mut() {
        total += unload(start, r, page);
    }
    total as u64
}

/// The rank resumes after an unload: the aggressive-read policies read back what it had in
/// memory.
pub(crate) fn resume() {
    let read = config().policy.aggressive_read();
    for (&start, r) in regions().iter_mut() {
        if r.unloaded && r.warm && read {
            load(start, r);
        }
        r.unloaded = false;
    }
}

/// The region containing `ptr`.
fn with_region(ptr: *mut c_void, f: impl FnOnce(usize, &mut Region)) -> bool {
    let a = ptr as usize;
    let mut map_ = regions();
    if let Some((&start, r)) = map_.range_mut(..=a).next_back() {
        if a < start + r.len {
            f(start, r);
            return true;
        }
    }
    false
}

/// `BDMPI_sbload`: reads the allocation containing `ptr` into memory.
///
/// # Safety
/// None (unknown pointers are ignored).
#[no_mangle]
pub unsafe extern "C" fn BDMPI_sbload(ptr: *mut c_void) {
    with_region(ptr, |start, r| load(start, r));
}

/// `BDMPI_sbloadall`: reads every allocation into memory.
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_sbloadall() {
    for (&start, r) in regions().iter() {
        load(start, r);
    }
}

/// `BDMPI_sbunload`: writes the allocation containing `ptr` back and drops it from memory.
///
/// # Safety
/// None (unknown pointers are ignored).
#[no_mangle]
pub unsafe extern "C" fn BDMPI_sbunload(ptr: *mut c_void) {
    let page = config().page;
    with_region(ptr, |start, r| {
        unload(start, r, page);
        r.unloaded = false;
    });
}

/// `BDMPI_sbunloadall`.
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_sbunloadall() {
    let page = config().page;
    for (&start, r) in regions().iter_mut() {
        unload(start, r, page);
        r.unloaded = false;
    }
}

/// `BDMPI_sbdiscard`: the contents of `[ptr, ptr + size)` (whole pages inside it; a negative
/// size means to the end of the allocation) are dropped without being written: they read as
/// zeros afterwards.
///
/// # Safety
/// The range's contents are not needed any more (the caller's contract).
#[no_mangle]
pub unsafe extern "C" fn BDMPI_sbdiscard(ptr: *mut c_void, size: isize) {
    let page = config().page;
    with_region(ptr, |start, r| {
        let a = ptr as usize;
        let end = if size < 0 {
            start + r.len
        } else {
            (a.saturating_add(size as usize)).min(start + r.len)
        };
        let from = round_up(a, page);
        let to = end / page * page;
        if to <= from {
            return;
        }
        // SAFETY: our own mapping of `r.file`, the caller's range of it (whole pages).
        let done = unsafe { sbpages::discard(from as *mut u8, to - from, &r.file, from - start) };
        if let Err(e) = done {
            report(
                "BDMPI_sbdiscard",
                format_args!("cannot allocate the discarded range again: {e}"),
            );
        }
    });
}
