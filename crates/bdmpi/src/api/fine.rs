//! BDMPI's own calls: fine-grained reductions, merges, critical sections, memory locking and
//! information.

#![allow(non_snake_case)]

use super::*;

/// `BDMPI_Reduce_init`: hands over this rank's contribution to a reduction and returns at once
/// (`sendbuf` may be reused); `BDMPI_Reduce_fine` completes it.
///
/// # Safety
/// `sendbuf` holds `count` elements of `datatype`; `request` is writable.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Reduce_init(
    sendbuf: *mut c_void,
    recvbuf: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
    root: c_int,
    comm: BDMPI_Comm,
    request: *mut BDMPI_Request,
) -> c_int {
    reduce_init(
        "BDMPI_Reduce_init",
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        root,
        comm,
        request,
    )
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_init(
    call: &str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    datatype: c_int,
    opn: c_int,
    root: c_int,
    comm: BDMPI_Comm,
    request: *mut BDMPI_Request,
) -> c_int {
    let c = tri!(handles::comm(call, comm));
    let bytes = tri!(bytes_of(call, count, datatype));
    tri!(check_op(call, opn, datatype));
    tri!(check_buffer(call, sendbuf, bytes));
    tri!(check_root(call, root, &c));
    if request.is_null() {
        report(call, format_args!("the request pointer is NULL"));
        return proto::ERR_ARG;
    }
    let m = msg(
        op::REDUCE_INIT,
        &c,
        &[
            addr(sendbuf),
            addr(recvbuf),
            count as u64,
            datatype as u64,
            opn as u64,
            root as u64,
        ],
    );
    let r = tri!(node(call, m));
    if r.code != proto::SUCCESS {
        return r.code;
    }
    let req = new_request(
        REQUEST_REDUCEI,
        recvbuf,
        empty_status(comm, datatype, count),
        r.a[0] as c_int,
    );
    // SAFETY: checked non-null; the caller's contract.
    unsafe { *request = req };
    proto::SUCCESS
}

/// `BDMPI_Reduce_fine`: waits until every rank has called `BDMPI_Reduce_init`; the root
/// receives the result in `recvbuf`. Frees the request.
///
/// # Safety
/// At the root `recvbuf` holds `count` elements; `request` points to the handle of
/// `BDMPI_Reduce_init`.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Reduce_fine(
    recvbuf: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
    root: c_int,
    comm: BDMPI_Comm,
    request: *mut BDMPI_Request,
) -> c_int {
    reduce_fine(
        "BDMPI_Reduce_fine",
        recvbuf,
        count,
        datatype,
        op,
        root,
        comm,
        request,
    )
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_fine(
    call: &str,
    recvbuf: *mut c_void,
    count: usize,
    datatype: c_int,
    opn: c_int,
    root: c_int,
    comm: BDMPI_Comm,
    request: *mut BDMPI_Request,
) -> c_int {
    let c = tri!(handles::comm(call, comm));
    let bytes = tri!(bytes_of(call, count, datatype));
    tri!(check_op(call, opn, datatype));
    tri!(check_root(call, root, &c));
    if c.rank == root {
        tri!(check_buffer(call, recvbuf, bytes));
    }
    if request.is_null() {
        report(call, format_args!("the request pointer is NULL"));
        return proto::ERR_ARG;
    }
    // SAFETY: the caller's contract.
    let req = unsafe { *request };
    // SAFETY: a non-null request was made by this library (the caller's contract).
    if req.is_null() || unsafe { (*req).kind } != REQUEST_REDUCEI {
        report(
            call,
            format_args!("the request is not one of BDMPI_Reduce_init"),
        );
        return proto::ERR_ARG;
    }
    // SAFETY: as above.
    let id = unsafe { (*req).copid };
    let m = msg(
        op::REDUCE_FINE,
        &c,
        &[
            addr(recvbuf),
            count as u64,
            datatype as u64,
            opn as u64,
            root as u64,
            id as u32 as u64,
        ],
    );
    let r = tri!(node(call, m));
    // SAFETY: made by Box::into_raw in `new_request`; the handle is cleared with it.
    unsafe {
        drop(Box::from_raw(req));
        *request = std::ptr::null_mut();
    }
    r.code
}

/// `BDMPI_Merge`: a sparse reduction; see `bdmpi.h`.
///
/// # Safety
/// `sendbuf`/`sendids` hold `sendcount` entries; at the root `recvbuf`/`recvids` hold
/// `*r_recvcount`, and `r_recvcount` is writable.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Merge(
    sendbuf: *mut c_void,
    sendids: *mut c_int,
    sendcount: usize,
    recvbuf: *mut c_void,
    recvids: *mut c_int,
    r_recvcount: *mut usize,
    datatype: c_int,
    op: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    merge(
        "BDMPI_Merge",
        sendbuf,
        sendids,
        sendcount,
        recvbuf,
        recvids,
        addr(r_recvcount),
        datatype,
        op,
        root,
        comm,
        0,
    )
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn merge(
    call: &str,
    sendbuf: *const c_void,
    sendids: *const c_int,
    sendcount: usize,
    recvbuf: *mut c_void,
    recvids: *mut c_int,
    r_recvcount: u64,
    datatype: c_int,
    opn: c_int,
    root: c_int,
    comm: BDMPI_Comm,
    flags: u64,
) -> c_int {
    let c = tri!(handles::comm(call, comm));
    let bytes = tri!(bytes_of(call, sendcount, datatype));
    tri!(check_op(call, opn, datatype));
    tri!(check_buffer(call, sendbuf, bytes));
    tri!(check_buffer(call, sendids.cast(), sendcount * 4));
    tri!(check_root(call, root, &c));
    if c.rank == root && r_recvcount == 0 {
        report(call, format_args!("the receive count pointer is NULL"));
        return proto::ERR_ARG;
    }
    let m = msg(
        op::MERGE,
        &c,
        &[
            addr(sendbuf),
            addr(sendids),
            sendcount as u64,
            addr(recvbuf),
            addr(recvids),
            r_recvcount,
            datatype as u64,
            opn as u64,
            root as u64,
            flags,
        ],
    );
    tri!(node(call, m)).code
}

/// `BDMPI_Entercritical`: at most `-nc` ranks of a node are inside a critical section at once;
/// a rank that waits for one gives up its slot meanwhile.
///
/// # Safety
/// None beyond BDMPI's contract.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Entercritical() -> c_int {
    tri!(node(
        "BDMPI_Entercritical",
        Msg::call(op::ENTER_CRITICAL, -1)
    ))
    .code
}

/// `BDMPI_Exitcritical`.
///
/// # Safety
/// None beyond BDMPI's contract.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Exitcritical() -> c_int {
    tri!(node("BDMPI_Exitcritical", Msg::call(op::EXIT_CRITICAL, -1))).code
}

/// `BDMPI_Wtime`: seconds since an arbitrary moment, wall clock.
#[no_mangle]
pub extern "C" fn BDMPI_Wtime() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// `BDMPI_Print_vm_info`: prints the process's virtual and resident size.
///
/// # Safety
/// `hdr` is a C string or null.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Print_vm_info(hdr: *mut c_char) -> c_int {
    let hdr = if hdr.is_null() {
        String::new()
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::ffi::CStr::from_ptr(hdr) }
            .to_string_lossy()
            .into_owned()
    };
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    println!(
        "[{hdr}:{:06}] VmSize: {:10} VmRSS: {:10}",
        std::process::id(),
        field("VmSize:"),
        field("VmRSS:")
    );
    proto::SUCCESS
}

/// `BDMPI_mlock`: `mlock(2)`.
///
/// # Safety
/// As `mlock(2)`.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_mlock(addr: *const c_void, len: usize) -> c_int {
    // SAFETY: mlock only changes residency of the caller's range.
    unsafe { libc::mlock(addr, len) }
}

/// `BDMPI_munlock`: `munlock(2)`.
///
/// # Safety
/// As `munlock(2)`.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_munlock(addr: *const c_void, len: usize) -> c_int {
    // SAFETY: munlock only changes residency of the caller's range.
    unsafe { libc::munlock(addr, len) }
}

/// `BDMPI_mlockall`: `mlockall(2)`.
///
/// # Safety
/// As `mlockall(2)`.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_mlockall(flags: c_int) -> c_int {
    // SAFETY: mlockall only changes residency.
    unsafe { libc::mlockall(flags) }
}

/// `BDMPI_munlockall`: `munlockall(2)`.
///
/// # Safety
/// As `munlockall(2)`.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_munlockall() -> c_int {
    // SAFETY: munlockall only changes residency.
    unsafe { libc::munlockall() }
}
