//! The `BDMPI_*` functions (counts as `size_t`).
//!
//! Arguments are checked here (a wrong communicator, datatype, operation, count, rank, root or
//! tag is answered with BDMPI's code and a message naming the rank and the call); what only
//! the node can check (truncation, counts that disagree between ranks) is checked there.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_void};

use crate::handles::{
    self, bdrequest_t, bdscomm_t, fill_status, BDMPI_Comm, BDMPI_Request, BDMPI_Status,
    REQUEST_IRECV, REQUEST_ISEND, REQUEST_REDUCEI, STATUS_IGNORE,
};
use crate::link::{self, report};
use crate::proto::{self, op, ops, types, CommInfo, Msg};

/// Returns the error code of a failed check from the enclosing function.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(code) => return code,
        }
    };
}

pub(crate) type Res<T> = Result<T, c_int>;

pub(crate) fn type_size(call: &str, datatype: c_int) -> Res<usize> {
    types::size(datatype).ok_or_else(|| {
        report(call, format_args!("{datatype} is not a BDMPI datatype"));
        proto::ERR_TYPE
    })
}

/// Bytes of `count` elements of `datatype`.
pub(crate) fn bytes_of(call: &str, count: usize, datatype: c_int) -> Res<usize> {
    let size = type_size(call, datatype)?;
    count.checked_mul(size).ok_or_else(|| {
        report(
            call,
            format_args!("a count of {count} elements of {size} bytes overflows"),
        );
        proto::ERR_COUNT
    })
}

fn check_buffer(call: &str, buf: *const c_void, bytes: usize) -> Res<()> {
    if buf.is_null() && bytes > 0 {
        report(call, format_args!("the buffer is NULL for {bytes} bytes"));
        return Err(proto::ERR_BUFFER);
    }
    Ok(())
}

fn check_peer(call: &str, what: &str, r: c_int, c: &bdscomm_t, any: bool) -> Res<()> {
    if (any && r == proto::ANY_SOURCE) || r == proto::PROC_NULL || (0..c.size).contains(&r) {
        return Ok(());
    }
    report(
        call,
        format_args!(
            "{what} rank {r} is outside the communicator of size {}",
            c.size
        ),
    );
    Err(proto::ERR_RANK)
}

fn check_tag(call: &str, tag: c_int, any: bool) -> Res<()> {
    if tag >= 0 || (any && tag == proto::ANY_TAG) {
        return Ok(());
    }
    report(call, format_args!("tag {tag} is negative"));
    Err(proto::ERR_TAG)
}

pub(crate) fn check_root(call: &str, root: c_int, c: &bdscomm_t) -> Res<()> {
    if (0..c.size).contains(&root) {
        return Ok(());
    }
    report(
        call,
        format_args!("root {root} is outside the communicator of size {}", c.size),
    );
    Err(proto::ERR_ROOT)
}

/// Whether `op` applies to `datatype` (MPI's rules: MAXLOC/MINLOC only on the pair types,
/// which take nothing else; logical and bitwise operations only on integers).
pub(crate) fn check_op(call: &str, op: c_int, datatype: c_int) -> Res<()> {
    type_size(call, datatype)?;
    if !ops::valid(op) {
        report(call, format_args!("{op} is not a BDMPI operation"));
        return Err(proto::ERR_OP);
    }
    let loc = op == ops::MAXLOC || op == ops::MINLOC;
    let ok = if types::is_pair(datatype) {
        loc
    } else if loc {
        false
    } else if types::is_float(datatype) {
        matches!(op, ops::MAX | ops::MIN | ops::SUM | ops::PROD)
    } else {
        true
    };
    if !ok {
        report(
            call,
            format_args!("operation {op} does not apply to datatype {datatype}"),
        );
        return Err(proto::ERR_OP);
    }
    Ok(())
}

/// Sends a call to the node and returns its answer (whatever its code).
pub(crate) fn node(call: &str, msg: Msg) -> Res<Msg> {
    let fd = link::socket(call)?;
    Ok(link::call(fd, msg))
}

fn addr<T>(p: *const T) -> u64 {
    p as usize as u64
}

/// A call of `op` on the communicator `c` (already checked).
fn msg(o: u32, c: &bdscomm_t, args: &[u64]) -> Msg {
    let mut m = Msg::call(o, c.mcomm);
    m.a[..args.len()].copy_from_slice(args);
    m
}

/// `BDMPI_Init`: connects the rank to its node and sets the predefined communicators. A
/// program not started by `bdmprun` ends here with a message.
///
/// # Safety
/// `argc` and `argv` are ignored (may be null).
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    if link::socket_if_connected().is_some() {
        report("BDMPI_Init", format_args!("called a second time"));
        return proto::ERR_UNKNOWN;
    }
    let fd = match link::connect() {
        Ok(fd) => fd,
        Err(why) => {
            eprintln!("bdmpi: BDMPI_Init: {why}");
            std::process::exit(1);
        }
    };
    crate::sb::configure();
    let mut infos = [CommInfo::default(); handles::PREDEFINED];
    let mut m = Msg::call(op::INIT, -1);
    m.a[0] = addr(infos.as_mut_ptr());
    let r = link::call(fd, m);
    if r.code != proto::SUCCESS {
        return r.code;
    }
    // SAFETY: the node wrote the array (in this process's memory, while the call waited);
    // a volatile read makes the compiler read what is there now.
    let infos = unsafe { std::ptr::read_volatile(&infos) };
    link::set_connected(fd, infos[0].rank);
    handles::set_predefined(&infos);
    proto::SUCCESS
}

/// `BDMPI_Finalize`: the rank leaves the node's scheduling and runs freely until it exits.
///
/// # Safety
/// None beyond BDMPI's contract.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Finalize() -> c_int {
    let r = tri!(node("BDMPI_Finalize", Msg::call(op::FINALIZE, -1)));
    link::set_finalized();
    r.code
}

macro_rules! comm_query {
    ($name:ident, $field:ident, $cname:literal) => {
        #[doc = concat!("`", $cname, "`.")]
        ///
        /// # Safety
        /// `out` is writable.
        #[no_mangle]
        pub unsafe extern "C" fn $name(comm: BDMPI_Comm, out: *mut c_int) -> c_int {
            let c = tri!(handles::comm($cname, comm));
            if out.is_null() {
                report($cname, format_args!("the output pointer is NULL"));
                return proto::ERR_ARG;
            }
            // SAFETY: the caller's contract.
            unsafe { *out = c.$field };
            proto::SUCCESS
        }
    };
}

comm_query!(BDMPI_Comm_size, size, "BDMPI_Comm_size");
comm_query!(BDMPI_Comm_rank, rank, "BDMPI_Comm_rank");
comm_query!(BDMPI_Comm_lsize, lsize, "BDMPI_Comm_lsize");
comm_query!(BDMPI_Comm_lrank, lrank, "BDMPI_Comm_lrank");
comm_query!(BDMPI_Comm_nsize, nsize, "BDMPI_Comm_nsize");
comm_query!(BDMPI_Comm_nrank, nrank, "BDMPI_Comm_nrank");
comm_query!(BDMPI_Comm_rrank, rrank, "BDMPI_Comm_rrank");

fn new_comm_call(call: &str, m: Msg, info: &mut CommInfo, newcomm: *mut BDMPI_Comm) -> c_int {
    let r = tri!(node(call, m));
    if r.code != proto::SUCCESS {
        return r.code;
    }
    // SAFETY: the node wrote `info` while the call waited (see BDMPI_Init).
    let info = unsafe { std::ptr::read_volatile(info) };
    let c = if info.id < 0 {
        std::ptr::null_mut()
    } else {
        handles::new_comm(&info)
    };
    // SAFETY: `newcomm` was checked non-null by the caller (BDMPI's contract: writable).
    unsafe { *newcomm = c };
    proto::SUCCESS
}

/// `BDMPI_Comm_dup`.
///
/// # Safety
/// `newcomm` is writable.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Comm_dup(comm: BDMPI_Comm, newcomm: *mut BDMPI_Comm) -> c_int {
    let call = "BDMPI_Comm_dup";
    let c = tri!(handles::comm(call, comm));
    if newcomm.is_null() {
        report(call, format_args!("the output pointer is NULL"));
        return proto::ERR_ARG;
    }
    let mut info = CommInfo::default();
    let m = msg(op::COMM_DUP, &c, &[addr(&info)]);
    new_comm_call(call, m, &mut info, newcomm)
}

/// `BDMPI_Comm_split`: ranks with the same `color` form a communicator, ordered by `key` and
/// then by rank; `MPI_UNDEFINED` joins none (`*newcomm` becomes `BDMPI_COMM_NULL`).
///
/// # Safety
/// `newcomm` is writable.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Comm_split(
    comm: BDMPI_Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut BDMPI_Comm,
) -> c_int {
    let call = "BDMPI_Comm_split";
    let c = tri!(handles::comm(call, comm));
    if newcomm.is_null() {
        report(call, format_args!("the output pointer is NULL"));
        return proto::ERR_ARG;
    }
    if color < 0 && color != proto::UNDEFINED {
        report(
            call,
            format_args!("color {color} is negative (and not MPI_UNDEFINED)"),
        );
        return proto::ERR_ARG;
    }
    let mut info = CommInfo::default();
    let m = msg(
        op::COMM_SPLIT,
        &c,
        &[color as i64 as u64, key as i64 as u64, addr(&info)],
    );
    new_comm_call(call, m, &mut info, newcomm)
}

/// `BDMPI_Comm_free`.
///
/// # Safety
/// `comm` points to a handle.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Comm_free(comm: *mut BDMPI_Comm) -> c_int {
    let call = "BDMPI_Comm_free";
    if comm.is_null() {
        report(call, format_args!("the handle pointer is NULL"));
        return proto::ERR_ARG;
    }
    // SAFETY: the caller's contract.
    let h = unsafe { *comm };
    let c = tri!(handles::comm(call, h));
    if handles::is_predefined(h) {
        report(
            call,
            format_args!("a predefined communicator cannot be freed"),
        );
        return proto::ERR_COMM;
    }
    let r = tri!(node(call, msg(op::COMM_FREE, &c, &[])));
    // SAFETY: `h` is a live handle of this rank; the caller's handle is cleared below.
    unsafe {
        handles::free_comm(h);
        *comm = std::ptr::null_mut();
    }
    r.code
}

mod coll;
mod fine;
mod p2p;

pub(crate) use coll::*;
pub(crate) use fine::*;
pub(crate) use p2p::*;
