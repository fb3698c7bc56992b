//! The `MPI_*` names of `bdmpi.h`: counts as `int`, as in the MPI standard, otherwise the
//! `BDMPI_*` functions. Negative counts are `MPI_ERR_COUNT`; arrays of counts and
//! displacements are passed on as `int` arrays (the node reads them as such).

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_void};

use crate::api::{self, *};
use crate::handles::{BDMPI_Comm, BDMPI_Request, BDMPI_Status};
use crate::link::report;
use crate::proto::{self, op};

fn count(call: &str, n: c_int) -> Result<usize, c_int> {
    usize::try_from(n).map_err(|_| {
        report(call, format_args!("count {n} is negative"));
        proto::ERR_COUNT
    })
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(code) => return code,
        }
    };
}

fn addr<T>(p: *const T) -> u64 {
    p as usize as u64
}

/// `MPI_Init`.
///
/// # Safety
/// As `BDMPI_Init`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { BDMPI_Init(argc, argv) }
}

/// `MPI_Finalize`.
///
/// # Safety
/// As `BDMPI_Finalize`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Finalize() -> c_int {
    // SAFETY: forwarded contract.
    unsafe { BDMPI_Finalize() }
}

macro_rules! forward_query {
    ($mpi:ident, $bd:ident) => {
        #[doc = concat!("`", stringify!($mpi), "`.")]
        ///
        /// # Safety
        /// `out` is writable.
        #[no_mangle]
        pub unsafe extern "C" fn $mpi(comm: BDMPI_Comm, out: *mut c_int) -> c_int {
            // SAFETY: forwarded contract.
            unsafe { $bd(comm, out) }
        }
    };
}

forward_query!(MPI_Comm_size, BDMPI_Comm_size);
forward_query!(MPI_Comm_rank, BDMPI_Comm_rank);
forward_query!(MPI_Comm_lsize, BDMPI_Comm_lsize);
forward_query!(MPI_Comm_lrank, BDMPI_Comm_lrank);
forward_query!(MPI_Comm_nsize, BDMPI_Comm_nsize);
forward_query!(MPI_Comm_nrank, BDMPI_Comm_nrank);
forward_query!(MPI_Comm_rrank, BDMPI_Comm_rrank);

/// `MPI_Comm_dup`.
///
/// # Safety
/// As `BDMPI_Comm_dup`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_dup(comm: BDMPI_Comm, newcomm: *mut BDMPI_Comm) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { BDMPI_Comm_dup(comm, newcomm) }
}

/// `MPI_Comm_free`.
///
/// # Safety
/// As `BDMPI_Comm_free`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_free(comm: *mut BDMPI_Comm) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { BDMPI_Comm_free(comm) }
}

/// `MPI_Comm_split`.
///
/// # Safety
/// As `BDMPI_Comm_split`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_split(
    comm: BDMPI_Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut BDMPI_Comm,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { BDMPI_Comm_split(comm, color, key, newcomm) }
}

/// The point-to-point calls: `MPI_<name>(buf, count, datatype, dest|source, tag, comm,
/// [status|request])`, `safe` or `unsafe` as the `api` function they call.
macro_rules! p2p {
    (@call safe $e:expr) => {
        $e
    };
    (@call unsafe $e:expr) => {
        // SAFETY: forwarded contract.
        unsafe { $e }
    };
    ($kind:tt $name:ident($buf:ty, $peer:ident $(, $last:ident: $last_ty:ty)?) => $api:ident) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        ///
        /// # Safety
        #[doc = concat!("As `BD", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            buf: $buf,
            n: c_int,
            datatype: c_int,
            $peer: c_int,
            tag: c_int,
            comm: BDMPI_Comm,
            $($last: $last_ty,)?
        ) -> c_int {
            let call = stringify!($name);
            let n = tri!(count(call, n));
            p2p!(@call $kind api::$api(call, buf, n, datatype, $peer, tag, comm $(, $last)?))
        }
    };
}

p2p!(safe MPI_Send(*const c_void, dest) => send);
p2p!(safe MPI_Isend(*const c_void, dest, request: *mut BDMPI_Request) => isend);
p2p!(unsafe MPI_Recv(*mut c_void, source, status: *mut BDMPI_Status) => recv);
p2p!(safe MPI_Irecv(*mut c_void, source, request: *mut BDMPI_Request) => irecv);

/// `MPI_Sendrecv`.
///
/// # Safety
/// As `BDMPI_Sendrecv`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Sendrecv(
    sendbuf: *mut c_void,
    sendcount: c_int,
    sendtype: c_int,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    source: c_int,
    recvtag: c_int,
    comm: BDMPI_Comm,
    status: *mut BDMPI_Status,
) -> c_int {
    let call = "MPI_Sendrecv";
    let sc = tri!(count(call, sendcount));
    let rc = tri!(count(call, recvcount));
    let code = api::send(call, sendbuf, sc, sendtype, dest, sendtag, comm);
    if code != proto::SUCCESS {
        return code;
    }
    // SAFETY: forwarded contract.
    unsafe { api::recv(call, recvbuf, rc, recvtype, source, recvtag, comm, status) }
}

/// `MPI_Test`.
///
/// # Safety
/// As `BDMPI_Test`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Test(
    request: *mut BDMPI_Request,
    flag: *mut c_int,
    status: *mut BDMPI_Status,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { BDMPI_Test(request, flag, status) }
}

/// `MPI_Wait`.
///
/// # Safety
/// As `BDMPI_Wait`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Wait(request: *mut BDMPI_Request, status: *mut BDMPI_Status) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { BDMPI_Wait(request, status) }
}

/// `MPI_Waitall`.
///
/// # Safety
/// As `BDMPI_Waitall`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Waitall(
    n: c_int,
    requests: *mut BDMPI_Request,
    statuses: *mut BDMPI_Status,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { BDMPI_Waitall(n, requests, statuses) }
}

/// `MPI_Get_count`: as `BDMPI_Get_count`, but `MPI_UNDEFINED` when the message is not a
/// whole number of elements of `datatype` (or more than an `int` counts), as MPI says.
///
/// # Safety
/// As `BDMPI_Get_count`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_count(
    status: *mut BDMPI_Status,
    datatype: c_int,
    out: *mut c_int,
) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { api::get_count("MPI_Get_count", status, datatype) } {
        Ok((bytes, size)) => {
            let n = if bytes % size == 0 {
                c_int::try_from(bytes / size).unwrap_or(proto::UNDEFINED)
            } else {
                proto::UNDEFINED
            };
            if !out.is_null() {
                // SAFETY: the caller's contract.
                unsafe { *out = n };
            }
            proto::SUCCESS
        }
        Err(code) => code,
    }
}

/// `MPI_Reduce_init`.
///
/// # Safety
/// As `BDMPI_Reduce_init`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_init(
    sendbuf: *mut c_void,
    recvbuf: *mut c_void,
    n: c_int,
    datatype: c_int,
    opn: c_int,
    root: c_int,
    comm: BDMPI_Comm,
    request: *mut BDMPI_Request,
) -> c_int {
    let call = "MPI_Reduce_init";
    let n = tri!(count(call, n));
    api::reduce_init(
        call, sendbuf, recvbuf, n, datatype, opn, root, comm, request,
    )
}

/// `MPI_Reduce_fine`.
///
/// # Safety
/// As `BDMPI_Reduce_fine`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_fine(
    recvbuf: *mut c_void,
    n: c_int,
    datatype: c_int,
    opn: c_int,
    root: c_int,
    comm: BDMPI_Comm,
    request: *mut BDMPI_Request,
) -> c_int {
    let call = "MPI_Reduce_fine";
    let n = tri!(count(call, n));
    api::reduce_fine(call, recvbuf, n, datatype, opn, root, comm, request)
}

/// `MPI_Merge` (the count is an `int`).
///
/// # Safety
/// As `BDMPI_Merge`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Merge(
    sendbuf: *mut c_void,
    sendids: *mut c_int,
    sendcount: c_int,
    recvbuf: *mut c_void,
    recvids: *mut c_int,
    r_recvcount: *mut c_int,
    datatype: c_int,
    opn: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let call = "MPI_Merge";
    let sc = tri!(count(call, sendcount));
    api::merge(
        call,
        sendbuf,
        sendids,
        sc,
        recvbuf,
        recvids,
        addr(r_recvcount),
        datatype,
        opn,
        root,
        comm,
        proto::FLAG_INT_ARRAYS,
    )
}

/// `MPI_Probe`.
///
/// # Safety
/// As `BDMPI_Probe`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Probe(
    source: c_int,
    tag: c_int,
    comm: BDMPI_Comm,
    status: *mut BDMPI_Status,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { BDMPI_Probe(source, tag, comm, status) }
}

/// `MPI_Iprobe`.
///
/// # Safety
/// As `BDMPI_Iprobe`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: BDMPI_Comm,
    flag: *mut c_int,
    status: *mut BDMPI_Status,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { BDMPI_Iprobe(source, tag, comm, flag, status) }
}

/// `MPI_Wtime`.
#[no_mangle]
pub extern "C" fn MPI_Wtime() -> f64 {
    BDMPI_Wtime()
}

/// `MPI_Print_vm_info`.
///
/// # Safety
/// As `BDMPI_Print_vm_info`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Print_vm_info(hdr: *mut c_char) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { BDMPI_Print_vm_info(hdr) }
}

mod coll;
