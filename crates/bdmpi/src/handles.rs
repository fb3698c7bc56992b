//! BDMPI's C types (with the layouts of `bdmpi.h`), the exported communicator globals, and the
//! registry of the communicators this rank holds.

#![allow(non_camel_case_types, non_snake_case)]

use std::collections::HashSet;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use crate::link::report;
use crate::proto::{self, CommInfo};

/// `bdscomm_t`: a communicator as its member sees it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct bdscomm_t {
    /// The node's id of the communicator.
    pub mcomm: c_int,
    /// Members.
    pub size: c_int,
    /// The caller's rank.
    pub rank: c_int,
    /// Members on the caller's node.
    pub lsize: c_int,
    /// The caller's rank among them.
    pub lrank: c_int,
    /// Nodes holding members.
    pub nsize: c_int,
    /// The caller's node among them.
    pub nrank: c_int,
    /// The lowest rank on the caller's node.
    pub rrank: c_int,
    /// Collective operations so far.
    pub copid: c_int,
}

/// `BDMPI_Comm`.
pub type BDMPI_Comm = *mut bdscomm_t;

/// `BDMPI_Status`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct BDMPI_Status {
    /// The sender's rank.
    pub MPI_SOURCE: c_int,
    /// The message's tag.
    pub MPI_TAG: c_int,
    /// The operation's return code.
    pub MPI_ERROR: c_int,
    /// As `MPI_SOURCE`.
    pub BDMPI_SOURCE: c_int,
    /// As `MPI_TAG`.
    pub BDMPI_TAG: c_int,
    /// As `MPI_ERROR`.
    pub BDMPI_ERROR: c_int,
    /// The receiver's rank.
    pub dest: c_int,
    /// The datatype `count` is in.
    pub datatype: c_int,
    /// Elements received (or, for a probe, sent).
    pub count: usize,
    /// The communicator.
    pub comm: BDMPI_Comm,
}

/// `bdrequest_t`.
#[repr(C)]
#[derive(Debug)]
pub struct bdrequest_t {
    /// `bdmp_request_et`: 0 Isend, 1 Irecv, 2 Reduce_init.
    pub kind: c_int,
    /// 1 once complete.
    pub state: c_int,
    /// The receive buffer of an Irecv.
    pub buf: *mut c_void,
    /// The status of an Irecv (its datatype and capacity until it completes).
    pub status: BDMPI_Status,
    /// The node's id of the operation.
    pub copid: c_int,
}

/// `BDMPI_Request`.
pub type BDMPI_Request = *mut bdrequest_t;

/// `bdmp_request_et` values.
pub(crate) const REQUEST_ISEND: c_int = 0;
pub(crate) const REQUEST_IRECV: c_int = 1;
pub(crate) const REQUEST_REDUCEI: c_int = 2;

/// `BDMPI_STATUS_IGNORE`.
pub(crate) const STATUS_IGNORE: *mut BDMPI_Status =
    std::ptr::without_provenance_mut::<BDMPI_Status>(1);

/// Ids of the predefined communicators on the node.
pub(crate) const PREDEFINED: usize = 4;

/// `BDMPI_COMM_WORLD`: every rank.
#[no_mangle]
pub static mut BDMPI_COMM_WORLD: BDMPI_Comm = std::ptr::null_mut();
/// `BDMPI_COMM_SELF`: the calling rank alone.
#[no_mangle]
pub static mut BDMPI_COMM_SELF: BDMPI_Comm = std::ptr::null_mut();
/// `BDMPI_COMM_CWORLD`: every rank, numbered cyclically over the nodes.
#[no_mangle]
pub static mut BDMPI_COMM_CWORLD: BDMPI_Comm = std::ptr::null_mut();
/// `BDMPI_COMM_NODE`: the ranks of the caller's node.
#[no_mangle]
pub static mut BDMPI_COMM_NODE: BDMPI_Comm = std::ptr::null_mut();

/// The communicator handles this rank holds (addresses), to recognise invalid ones.
static LIVE: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

fn live() -> std::sync::MutexGuard<'static, Option<HashSet<usize>>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new handle for `info`.
pub(crate) fn new_comm(info: &CommInfo) -> BDMPI_Comm {
    let c = Box::into_raw(Box::new(bdscomm_t {
        mcomm: info.id,
        size: info.size,
        rank: info.rank,
        lsize: info.lsize,
        lrank: info.lrank,
        nsize: info.nsize,
        nrank: info.nrank,
        rrank: info.rrank,
        copid: 1,
    }));
    live().get_or_insert_with(HashSet::new).insert(c as usize);
    c
}

/// Forgets and frees a handle made by [`new_comm`].
///
/// # Safety
/// `c` came from [`new_comm`] and is not used afterwards.
pub(crate) unsafe fn free_comm(c: BDMPI_Comm) {
    if live()
        .get_or_insert_with(HashSet::new)
        .remove(&(c as usize))
    {
        // SAFETY: made by Box::into_raw in `new_comm` and removed from the registry just now,
        // so this is its only release.
        drop(unsafe { Box::from_raw(c) });
    }
}

/// The communicator behind a handle, or the error code after reporting `call`.
pub(crate) fn comm(call: &str, c: BDMPI_Comm) -> Result<bdscomm_t, c_int> {
    if c.is_null() {
        report(
            call,
            format_args!("the communicator is BDMPI_COMM_NULL (was BDMPI_Init called?)"),
        );
        return Err(proto::ERR_COMM);
    }
    let known = live().as_ref().is_some_and(|s| s.contains(&(c as usize)));
    if !known {
        report(
            call,
            format_args!("{c:p} is not a communicator of this rank (freed, or never made)"),
        );
        return Err(proto::ERR_COMM);
    }
    // SAFETY: a live handle made by `new_comm`.
    Ok(unsafe { *c })
}

/// Whether `c` is one of the predefined communicators (which cannot be freed).
pub(crate) fn is_predefined(c: BDMPI_Comm) -> bool {
    // SAFETY: reads of the exported globals, which only `set_predefined` writes (in
    // BDMPI_Init, before any other call).
    unsafe {
        [
            BDMPI_COMM_WORLD,
            BDMPI_COMM_SELF,
            BDMPI_COMM_CWORLD,
            BDMPI_COMM_NODE,
        ]
        .contains(&c)
    }
}

/// Sets the predefined communicators from the node's answer to `BDMPI_Init`.
///
/// The globals are written both here and where the dynamic linker resolved them for the
/// executable: a program linked with `libbdmpi.so` that names `BDMPI_COMM_WORLD` gets its own
/// copy of the variable (a copy relocation), which code of this library does not see by its
/// own (direct) accesses.
pub(crate) fn set_predefined(infos: &[CommInfo; PREDEFINED]) {
    let [world, node, me, cworld] = infos;
    let values = [
        (c"BDMPI_COMM_WORLD", new_comm(world)),
        (c"BDMPI_COMM_NODE", new_comm(node)),
        (c"BDMPI_COMM_SELF", new_comm(me)),
        (c"BDMPI_COMM_CWORLD", new_comm(cworld)),
    ];
    for (name, value) in values {
        // SAFETY: the library's own globals, written once, before any other call reads them.
        unsafe {
            match name.to_bytes() {
                b"BDMPI_COMM_WORLD" => BDMPI_COMM_WORLD = value,
                b"BDMPI_COMM_NODE" => BDMPI_COMM_NODE = value,
                b"BDMPI_COMM_SELF" => BDMPI_COMM_SELF = value,
                _ => BDMPI_COMM_CWORLD = value,
            }
        }
        // SAFETY: dlsym looks the name up in the global scope; the symbol it finds is a
        // `BDMPI_Comm` variable (the executable's copy of ours, or ours), which we set.
        unsafe {
            let p = libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()).cast::<BDMPI_Comm>();
            if !p.is_null() {
                *p = value;
            }
        }
    }
}

/// Writes a status unless `status` is null or `BDMPI_STATUS_IGNORE`.
///
/// # Safety
/// `status` is null, `BDMPI_STATUS_IGNORE`, or writable.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn fill_status(
    status: *mut BDMPI_Status,
    source: c_int,
    tag: c_int,
    error: c_int,
    dest: c_int,
    datatype: c_int,
    count: usize,
    comm: BDMPI_Comm,
) {
    if status.is_null() || status == STATUS_IGNORE {
        return;
    }
    // SAFETY: the caller's contract.
    unsafe {
        *status = BDMPI_Status {
            MPI_SOURCE: source,
            MPI_TAG: tag,
            MPI_ERROR: error,
            BDMPI_SOURCE: source,
            BDMPI_TAG: tag,
            BDMPI_ERROR: error,
            dest,
            datatype,
            count,
            comm,
        };
    }
}
