//! Storage-backed memory in the rank's process: `BDMPI_sbmalloc` and friends.
//!
//! An allocation of at least one page is a `MAP_SHARED` mapping of its own nameless file
//! (`O_TMPFILE`) in `bdmprun`'s working directory (`-wd`), with its blocks allocated up front
//! (`fallocate`), so that writing it back can never fail for lack of space (a write-back that
//! fails would be a `SIGBUS` in the program). Smaller allocations, and all of them when
//! `-sbma` is `none` (BDMPI's default) or outside `bdmprun`, come from `malloc`.
//!
//! Nothing needs a signal handler: a page that was released is read back by the kernel when
//! the program touches it. The policies of `-sbma` decide when memory is released and how it
//! is read back:
//!
//! * released (**unload**): when the node asks — under `araw`/`lraw` every time the rank
//!   blocks, under `arlw`/`lrlw` only when the node's memory limit (`-rm`) needs the room.
//!   Modified pages are written to the file (`sync_file_range`, waiting for the write),
//!   the pages leave the process (`MADV_DONTNEED`) and the page cache
//!   (`POSIX_FADV_DONTNEED`);
//! * read back (**load**): under the aggressive-read policies (`araw`, `arlw`), when the rank
//!   resumes, the allocations it had in memory when it was unloaded are read back whole
//!   (`MADV_POPULATE_READ`); under the lazy ones (`lraw`, `lrlw`), page by page as the
//!   program touches them.
//!
//! `BDMPI_sbload`/`sbunload` do the same for one allocation on demand, `BDMPI_sbdiscard`
//! drops contents without writing them (they read as zeros afterwards).

#![allow(non_snake_case)]

use std::collections::BTreeMap;
use std::ffi::{c_void, CString};
use std::os::fd::RawFd;
use std::sync::{Mutex, OnceLock};

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
    workdir: Option<CString>,
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
        let workdir = std::env::var(proto::ENV_WORKDIR)
            .ok()
            .and_then(|d| CString::new(d).ok());
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
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
    fd: RawFd,
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

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// A nameless file in the working directory.
fn file(dir: &CString) -> Result<RawFd, std::io::Error> {
    // SAFETY: open with a valid C string; the result is checked.
    let fd = unsafe {
        libc::open(
            dir.as_ptr(),
            libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd >= 0 {
        return Ok(fd);
    }
    // A file system without O_TMPFILE: create and unlink at once.
    let mut template = dir.as_bytes().to_vec();
    template.extend_from_slice(b"/bdmpi-sb-XXXXXX\0");
    // SAFETY: a writable, NUL-terminated template; the result is checked.
    let fd = unsafe { libc::mkostemp(template.as_mut_ptr().cast(), libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: the template now holds the created file's name.
    unsafe { libc::unlink(template.as_ptr().cast()) };
    Ok(fd)
}

/// Gives the file `len` bytes with their blocks allocated.
fn size_file(fd: RawFd, len: usize) -> Result<(), std::io::Error> {
    // SAFETY: fallocate on our own descriptor.
    if unsafe { libc::fallocate(fd, 0, 0, len as libc::off_t) } == 0 {
        return Ok(());
    }
    let e = errno();
    if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
        return Err(e);
    }
    // SAFETY: ftruncate on our own descriptor.
    if unsafe { libc::ftruncate(fd, len as libc::off_t) } == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

fn map(size: usize) -> Result<*mut c_void, std::io::Error> {
    let cfg = config();
    let dir = cfg.workdir.as_ref().expect("checked by the caller");
    let len = round_up(size, cfg.page);
    let fd = file(dir)?;
    if let Err(e) = size_file(fd, len) {
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    // SAFETY: a new shared mapping of a file we sized to `len`; checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let e = errno();
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    regions().insert(
        p as usize,
        Region {
            len,
            fd,
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
        if let Err(e) = size_file(region.fd, len) {
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
        let e = errno();
        map_.insert(oldptr as usize, region);
        report(
            "BDMPI_sbrealloc",
            format_args!("cannot remap storage-backed memory to {size} bytes: {e}"),
        );
        return std::ptr::null_mut();
    }
    if len < region.len {
        // SAFETY: the file's tail beyond the new mapping is no longer used.
        unsafe { libc::ftruncate(region.fd, len as libc::off_t) };
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
        // SAFETY: our mapping and descriptor, forgotten just now.
        Some(r) => unsafe {
            libc::munmap(ptr, r.len);
            libc::close(r.fd);
        },
        // SAFETY: not ours, so malloc's (the caller's contract).
        None => unsafe { libc::free(ptr) },
    }
}

/// Reads a region back into memory.
fn load(start: usize, r: &Region) {
    loop {
        // SAFETY: populating our own mapping only reads the file into it.
        let rc = unsafe {
            libc::madvise(
                start as *mut c_void,
                r.len,
                22, /* MADV_POPULATE_READ */
            )
        };
        if rc == 0 {
            return;
        }
        match errno().raw_os_error() {
            Some(libc::EINTR) | Some(libc::EAGAIN) => continue,
            Some(libc::EINVAL) => {
                // Kernels before 5.14: read one byte of every page.
                let page = config().page;
                for off in (0..r.len).step_by(page) {
                    // SAFETY: inside our own readable mapping.
                    unsafe { std::ptr::read_volatile((start + off) as *const u8) };
                }
                return;
            }
            _ => {
                // Let the accesses wait for the read started here.
                // SAFETY: as above.
                unsafe { libc::madvise(start as *mut c_void, r.len, libc::MADV_WILLNEED) };
                return;
            }
        }
    }
}

/// Resident bytes of a region.
fn resident(start: usize, r: &Region, page: usize) -> usize {
    let mut vec = vec![0u8; r.len / page];
    // SAFETY: `vec` has one byte per page of our mapping.
    let rc = unsafe { libc::mincore(start as *mut c_void, r.len, vec.as_mut_ptr()) };
    if rc != 0 {
        return r.len;
    }
    vec.iter().filter(|&&b| b & 1 != 0).count() * page
}

/// Writes a region back and drops it from memory and the page cache; returns the bytes that
/// were resident.
fn unload(start: usize, r: &mut Region, page: usize) -> usize {
    let res = resident(start, r, page);
    r.warm = res > 0;
    r.unloaded = true;
    if res == 0 {
        return 0;
    }
    // SAFETY: our own mapping and descriptor; writing back and dropping pages of a shared
    // file mapping keeps their contents in the file, and later accesses read them back.
    unsafe {
        libc::sync_file_range(
            r.fd,
            0,
            r.len as libc::off_t,
            libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER,
        );
        libc::madvise(start as *mut c_void, r.len, libc::MADV_DONTNEED);
        libc::posix_fadvise(r.fd, 0, r.len as libc::off_t, libc::POSIX_FADV_DONTNEED);
    }
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
        let (off, len) = ((from - start) as libc::off_t, (to - from) as libc::off_t);
        // SAFETY: our own mapping and file; punching the range drops its pages (file and
        // page cache) without writing them, and allocating it again keeps later write-backs
        // from needing space; the mapping reads zeros there afterwards.
        unsafe {
            libc::fallocate(
                r.fd,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off,
                len,
            );
            libc::madvise(from as *mut c_void, to - from, libc::MADV_DONTNEED);
            libc::fallocate(r.fd, 0, off, len);
        }
    });
}
