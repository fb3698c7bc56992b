//! The system calls storage-backed memory is made of, in one place: the runtime's [`SbVec`]
//! and libbdmpi's `BDMPI_sbmalloc` both map nameless spill files and move their pages in and
//! out with these, in the same order and with the same error handling.
//!
//! * A spill file is nameless (it goes with the process) and has its blocks allocated when it
//!   is made or grown, so that writing its pages back cannot fail for lack of space (a failed
//!   write-back of a mapping is a `SIGBUS` in the program).
//! * **unload**: the pages leave the process first (`MADV_DONTNEED`, one TLB flush for the
//!   range; writing back pages that are still mapped write-protects them one by one, each with
//!   a TLB shootdown), then the modified ones are written to the file (`sync_file_range`,
//!   waited for or not). Their contents stay in the page cache until then.
//! * **load**: `MADV_POPULATE_READ` reads the range in large requests (kernels before 5.14:
//!   one byte of every page is read).
//! * **prefetch**: `MADV_WILLNEED` starts reading in the background.
//!
//! [`SbVec`]: super::SbVec

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// `MADV_POPULATE_READ` (Linux 5.14), not in every libc crate version.
const MADV_POPULATE_READ: libc::c_int = 22;

/// A nameless file in `dir` of `len` bytes, its blocks allocated.
///
/// # Errors
/// The file cannot be made or the directory cannot hold `len` bytes.
pub fn spill_file(dir: &Path, len: usize) -> io::Result<File> {
    let file = tempfile::tempfile_in(dir)?;
    file.set_len(len as u64)?;
    reserve(&file, 0, len)?;
    Ok(file)
}

/// Allocates the blocks of bytes `[from, to)` of `file` (within its length), so that writing
/// them back cannot fail later; a file system without `fallocate` is left to allocate them
/// when written.
///
/// # Errors
/// No space (or another error of `fallocate`).
pub fn reserve(file: &File, from: usize, to: usize) -> io::Result<()> {
    if to <= from {
        return Ok(());
    }
    // SAFETY: plain fallocate on our own descriptor within the file's length.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, from as i64, (to - from) as i64) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) => Ok(()),
        _ => Err(e),
    }
}

/// Maps `len` bytes of fresh private anonymous memory (zero-filled), readable and writable.
///
/// # Errors
/// The mapping cannot be made (address space, map count).
pub fn map_anonymous(len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh private anonymous mapping; the kernel picks the address; no existing
    // memory is affected; failure is checked.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(ptr.cast())
}

/// Maps the first `len` bytes of `file` (of at least that length), shared and writable.
///
/// # Errors
/// The mapping cannot be made (address space, map count).
pub fn map_shared(file: &File, len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh shared mapping of a file of at least `len` bytes; the kernel picks the
    // address; failure is checked.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(ptr.cast())
}

/// Reads the pages of `[ptr, ptr + len)` into memory now.
///
/// # Errors
/// The read failed (the pages are then read when touched; their readahead was started).
///
/// # Safety
/// The range is page-aligned and lies inside one readable mapping of the caller's.
pub unsafe fn populate(ptr: *mut u8, len: usize) -> io::Result<()> {
    loop {
        // SAFETY: the caller's range; populating only reads the file into it.
        if unsafe { libc::madvise(ptr.cast(), len, MADV_POPULATE_READ) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) | Some(libc::EAGAIN) => continue,
            Some(libc::EINVAL) => {
                // Kernels before 5.14: read one byte of every page.
                for off in (0..len).step_by(page_size()) {
                    // SAFETY: inside the caller's readable range; a volatile read faults the
                    // page in without changing it.
                    unsafe { std::ptr::read_volatile(ptr.add(off)) };
                }
                return Ok(());
            }
            _ => {
                // SAFETY: as above; the accesses then wait for the read started here.
                unsafe { prefetch(ptr, len) };
                return Err(e);
            }
        }
    }
}

/// Starts reading the pages of `[ptr, ptr + len)` in the background.
///
/// # Safety
/// The range is page-aligned and lies inside one mapping of the caller's.
pub unsafe fn prefetch(ptr: *mut u8, len: usize) {
    // SAFETY: the caller's range; MADV_WILLNEED only starts readahead.
    unsafe { libc::madvise(ptr.cast(), len, libc::MADV_WILLNEED) };
}

/// How an unload writes modified pages back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteBack {
    /// Nothing was modified.
    None,
    /// Start writing and return (the write-back overlaps with other work).
    Start,
    /// Write and wait until the pages are on the disk.
    Wait,
}

/// Releases `[ptr, ptr + len)`, a mapping of bytes `[offset, offset + len)` of `file`: the
/// pages leave the process, then the modified ones are written back as `write` says.
///
/// # Errors
/// The write-back failed (the pages' contents are still in the page cache).
///
/// # Safety
/// The range is page-aligned and is exactly that part of a shared mapping of `file`; nobody
/// relies on its pages staying mapped (they are read back when touched).
pub unsafe fn unload(
    ptr: *mut u8,
    len: usize,
    file: &File,
    offset: usize,
    write: WriteBack,
) -> io::Result<()> {
    // SAFETY: dropping the pages of a shared file mapping keeps their contents in the file
    // (a modified page's dirty bit passes to the page cache, which keeps it until written).
    unsafe { libc::madvise(ptr.cast(), len, libc::MADV_DONTNEED) };
    let flags = match write {
        WriteBack::None => return Ok(()),
        WriteBack::Start => libc::SYNC_FILE_RANGE_WRITE,
        WriteBack::Wait => {
            libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER
        }
    };
    // SAFETY: plain sync_file_range on our own descriptor.
    let rc = unsafe { libc::sync_file_range(file.as_raw_fd(), offset as i64, len as i64, flags) };
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Drops bytes `[offset, offset + len)` of `file` from the page cache (pages being written
/// back stay, for the kernel to reclaim).
pub fn drop_cache(file: &File, offset: usize, len: usize) {
    // SAFETY: advice on our own open descriptor; it changes no data.
    unsafe {
        libc::posix_fadvise(
            file.as_raw_fd(),
            offset as i64,
            len as i64,
            libc::POSIX_FADV_DONTNEED,
        );
    }
}

/// Forgets the contents of `[ptr, ptr + len)`, a mapping of bytes `[offset, offset + len)` of
/// `file`, without writing them: the range reads as zeros afterwards, and its blocks are
/// allocated again.
///
/// # Errors
/// The blocks cannot be allocated again (no space).
///
/// # Safety
/// As [`unload`]; the contents are not needed any more.
pub unsafe fn discard(ptr: *mut u8, len: usize, file: &File, offset: usize) -> io::Result<()> {
    // The mapping sees zeros where the hole is.
    punch_hole(file, offset, len);
    // SAFETY: dropping the caller's pages of its own mapping; their contents are not needed.
    unsafe { libc::madvise(ptr.cast(), len, libc::MADV_DONTNEED) };
    reserve(file, offset, offset + len)
}

/// Frees the blocks of bytes `[offset, offset + len)` of `file`, which read as zeros
/// afterwards (the file keeps its length). A failure (a file system without hole punching)
/// only keeps the blocks.
pub fn punch_hole(file: &File, offset: usize, len: usize) {
    // SAFETY: plain fallocate on our own open descriptor; it changes only that range's
    // contents, which the caller no longer needs.
    unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset as i64,
            len as i64,
        )
    };
}

/// Pages of `[ptr, ptr + len)` resident in memory (all of them if it cannot be told).
///
/// # Safety
/// The range is page-aligned and lies inside one mapping of the caller's.
pub unsafe fn resident_pages(ptr: *mut u8, len: usize) -> usize {
    let pages = len.div_ceil(page_size());
    let mut vec = vec![0u8; pages];
    // SAFETY: the caller's range; `vec` has one byte per page.
    let rc = unsafe { libc::mincore(ptr.cast(), len, vec.as_mut_ptr().cast()) };
    if rc != 0 {
        return pages;
    }
    vec.iter().filter(|&&b| b & 1 == 1).count()
}

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096).max(4096)
}
