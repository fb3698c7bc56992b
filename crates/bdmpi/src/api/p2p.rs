//! Point-to-point: sends, receives, requests, probes.

#![allow(non_snake_case)]

use super::*;

/// `BDMPI_Send`: buffered; returns once the data is copied, whether or not a receive is posted.
///
/// # Safety
/// `buf` holds `count` elements of `datatype`.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Send(
    buf: *mut c_void,
    count: usize,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    send("BDMPI_Send", buf, count, datatype, dest, tag, comm)
}

pub(crate) fn send(
    call: &str,
    buf: *const c_void,
    count: usize,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let (c, args) = tri!(check_transfer(
        call, buf, count, datatype, dest, tag, comm, false
    ));
    if dest == proto::PROC_NULL {
        return proto::SUCCESS;
    }
    tri!(node(call, msg(op::SEND, &c, &args))).code
}

/// Checks the arguments of a send (`receive` false) or a receive (true: the source and the
/// tag may be wildcards); returns the communicator and the node message's arguments
/// `[buf, count, datatype, peer, tag]`.
#[allow(clippy::too_many_arguments)]
fn check_transfer(
    call: &str,
    buf: *const c_void,
    count: usize,
    datatype: c_int,
    peer: c_int,
    tag: c_int,
    comm: BDMPI_Comm,
    receive: bool,
) -> Res<(bdscomm_t, [u64; 5])> {
    let c = handles::comm(call, comm)?;
    let bytes = bytes_of(call, count, datatype)?;
    check_buffer(call, buf, bytes)?;
    let what = if receive { "source" } else { "destination" };
    check_peer(call, what, peer, &c, receive)?;
    check_tag(call, tag, receive)?;
    let args = [
        addr(buf),
        count as u64,
        datatype as u64,
        peer as i64 as u64,
        tag as i64 as u64,
    ];
    Ok((c, args))
}

pub(super) fn new_request(
    kind: c_int,
    buf: *mut c_void,
    status: BDMPI_Status,
    id: c_int,
) -> BDMPI_Request {
    Box::into_raw(Box::new(bdrequest_t {
        kind,
        state: 0,
        buf,
        status,
        copid: id,
    }))
}

pub(super) fn empty_status(comm: BDMPI_Comm, datatype: c_int, count: usize) -> BDMPI_Status {
    BDMPI_Status {
        MPI_SOURCE: proto::PROC_NULL,
        MPI_TAG: proto::ANY_TAG,
        MPI_ERROR: proto::SUCCESS,
        BDMPI_SOURCE: proto::PROC_NULL,
        BDMPI_TAG: proto::ANY_TAG,
        BDMPI_ERROR: proto::SUCCESS,
        dest: 0,
        datatype,
        count,
        comm,
    }
}

/// `BDMPI_Isend`: as `BDMPI_Send` (buffered); the request is complete at once.
///
/// # Safety
/// As `BDMPI_Send`; `request` is writable.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Isend(
    buf: *mut c_void,
    count: usize,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: BDMPI_Comm,
    request: *mut BDMPI_Request,
) -> c_int {
    isend(
        "BDMPI_Isend",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        request,
    )
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn isend(
    call: &str,
    buf: *const c_void,
    count: usize,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: BDMPI_Comm,
    request: *mut BDMPI_Request,
) -> c_int {
    if request.is_null() {
        report(call, format_args!("the request pointer is NULL"));
        return proto::ERR_ARG;
    }
    let code = send(call, buf, count, datatype, dest, tag, comm);
    if code == proto::SUCCESS {
        let r = new_request(
            REQUEST_ISEND,
            std::ptr::null_mut(),
            empty_status(comm, datatype, count),
            -1,
        );
        // SAFETY: the request pointer was checked non-null; the caller's contract.
        unsafe {
            (*r).state = 1;
            *request = r;
        }
    }
    code
}

/// Fills `status` from a receive's answer (`a0` source, `a1` tag, `a2` bytes received).
///
/// # Safety
/// As [`fill_status`].
pub(super) unsafe fn status_from(
    status: *mut BDMPI_Status,
    r: &Msg,
    c: &bdscomm_t,
    comm: BDMPI_Comm,
    datatype: c_int,
) {
    let size = types::size(datatype).unwrap_or(1).max(1);
    // SAFETY: the caller's contract.
    unsafe {
        fill_status(
            status,
            r.a[0] as i64 as c_int,
            r.a[1] as i64 as c_int,
            r.code,
            c.rank,
            datatype,
            r.a[2] as usize / size,
            comm,
        );
    }
}

/// `BDMPI_Recv`: blocks (giving up the rank's slot) until a matching message has arrived.
///
/// # Safety
/// `buf` holds `count` elements of `datatype`; `status` is writable or ignored.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Recv(
    buf: *mut c_void,
    count: usize,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: BDMPI_Comm,
    status: *mut BDMPI_Status,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        recv(
            "BDMPI_Recv",
            buf,
            count,
            datatype,
            source,
            tag,
            comm,
            status,
        )
    }
}

/// # Safety
/// As [`BDMPI_Recv`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn recv(
    call: &str,
    buf: *mut c_void,
    count: usize,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: BDMPI_Comm,
    status: *mut BDMPI_Status,
) -> c_int {
    let (c, args) = tri!(check_transfer(
        call, buf, count, datatype, source, tag, comm, true
    ));
    if source == proto::PROC_NULL {
        // SAFETY: the caller's contract.
        unsafe {
            fill_status(
                status,
                proto::PROC_NULL,
                proto::ANY_TAG,
                proto::SUCCESS,
                c.rank,
                datatype,
                0,
                comm,
            )
        };
        return proto::SUCCESS;
    }
    let m = msg(op::RECV, &c, &args);
    let r = tri!(node(call, m));
    // SAFETY: the caller's contract.
    unsafe { status_from(status, &r, &c, comm, datatype) };
    r.code
}

/// `BDMPI_Irecv`: posts the receive (it matches messages in posting order, as MPI says);
/// `BDMPI_Wait` or `BDMPI_Test` completes it.
///
/// # Safety
/// As `BDMPI_Recv`, and `buf` stays valid until the request completes; `request` is writable.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Irecv(
    buf: *mut c_void,
    count: usize,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: BDMPI_Comm,
    request: *mut BDMPI_Request,
) -> c_int {
    irecv(
        "BDMPI_Irecv",
        buf,
        count,
        datatype,
        source,
        tag,
        comm,
        request,
    )
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn irecv(
    call: &str,
    buf: *mut c_void,
    count: usize,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: BDMPI_Comm,
    request: *mut BDMPI_Request,
) -> c_int {
    let (c, args) = tri!(check_transfer(
        call, buf, count, datatype, source, tag, comm, true
    ));
    if request.is_null() {
        report(call, format_args!("the request pointer is NULL"));
        return proto::ERR_ARG;
    }
    let mut status = empty_status(comm, datatype, count);
    status.dest = c.rank;
    if source == proto::PROC_NULL {
        let r = new_request(REQUEST_IRECV, buf, status, -1);
        // SAFETY: checked non-null; the caller's contract.
        unsafe {
            (*r).state = 1;
            (*r).status.count = 0;
            *request = r;
        }
        return proto::SUCCESS;
    }
    let m = msg(op::IRECV, &c, &args);
    let r = tri!(node(call, m));
    if r.code != proto::SUCCESS {
        return r.code;
    }
    let req = new_request(REQUEST_IRECV, buf, status, r.a[0] as c_int);
    // SAFETY: checked non-null; the caller's contract.
    unsafe { *request = req };
    proto::SUCCESS
}

/// Completes (`wait`) or tests a request; returns the code and whether it completed.
///
/// # Safety
/// `request` points to a handle; `status` is writable or ignored.
pub(super) unsafe fn complete(
    call: &str,
    request: *mut BDMPI_Request,
    status: *mut BDMPI_Status,
    wait: bool,
) -> (c_int, bool) {
    if request.is_null() {
        report(call, format_args!("the request pointer is NULL"));
        return (proto::ERR_ARG, false);
    }
    // SAFETY: the caller's contract.
    let req = unsafe { *request };
    if req.is_null() {
        // MPI: a null request is complete, with an empty status.
        // SAFETY: the caller's contract.
        unsafe {
            fill_status(
                status,
                proto::ANY_SOURCE,
                proto::ANY_TAG,
                proto::SUCCESS,
                0,
                proto::types::BYTE,
                0,
                std::ptr::null_mut(),
            )
        };
        return (proto::SUCCESS, true);
    }
    // SAFETY: a request made by this library (BDMPI's contract), not yet freed.
    let r = unsafe { &mut *req };
    let code = match r.kind {
        REQUEST_ISEND => proto::SUCCESS,
        REQUEST_IRECV if r.state == 1 => {
            // SAFETY: the caller's contract.
            unsafe { copy_status(status, &r.status) };
            proto::SUCCESS
        }
        REQUEST_IRECV => {
            let c = match handles::comm(call, r.status.comm) {
                Ok(c) => c,
                Err(code) => return (code, false),
            };
            let o = if wait { op::WAIT } else { op::TEST };
            let answer = match node(call, msg(o, &c, &[r.copid as u32 as u64])) {
                Ok(m) => m,
                Err(code) => return (code, false),
            };
            if !wait && answer.a[4] == 0 && answer.code == proto::SUCCESS {
                return (proto::SUCCESS, false);
            }
            let datatype = r.status.datatype;
            // SAFETY: the caller's contract.
            unsafe { status_from(status, &answer, &c, r.status.comm, datatype) };
            answer.code
        }
        REQUEST_REDUCEI => {
            report(
                call,
                format_args!("a request of BDMPI_Reduce_init completes with BDMPI_Reduce_fine"),
            );
            return (proto::ERR_ARG, false);
        }
        other => {
            report(
                call,
                format_args!("{req:p} is not a request (kind {other})"),
            );
            return (proto::ERR_ARG, false);
        }
    };
    // SAFETY: made by Box::into_raw in `new_request`; the handle is cleared with it.
    unsafe {
        drop(Box::from_raw(req));
        *request = std::ptr::null_mut();
    }
    (code, true)
}

/// # Safety
/// `out` is writable or ignored.
pub(super) unsafe fn copy_status(out: *mut BDMPI_Status, s: &BDMPI_Status) {
    if !out.is_null() && out != STATUS_IGNORE {
        // SAFETY: the caller's contract.
        unsafe { *out = *s };
    }
}

/// `BDMPI_Wait`: completes the request and frees it (`*request` becomes
/// `BDMPI_REQUEST_NULL`).
///
/// # Safety
/// `request` points to a handle; `status` is writable or ignored.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Wait(
    request: *mut BDMPI_Request,
    status: *mut BDMPI_Status,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { complete("BDMPI_Wait", request, status, true).0 }
}

/// `BDMPI_Test`: completes the request if it can without waiting (`*flag` = 1).
///
/// # Safety
/// As `BDMPI_Wait`; `flag` is writable.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Test(
    request: *mut BDMPI_Request,
    flag: *mut c_int,
    status: *mut BDMPI_Status,
) -> c_int {
    if flag.is_null() {
        report("BDMPI_Test", format_args!("the flag pointer is NULL"));
        return proto::ERR_ARG;
    }
    // SAFETY: forwarded contract.
    let (code, done) = unsafe { complete("BDMPI_Test", request, status, false) };
    // SAFETY: checked non-null; the caller's contract.
    unsafe { *flag = c_int::from(done) };
    code
}

/// `BDMPI_Waitall`: waits for each of `count` requests; `statuses` is an array of `count`
/// statuses or `BDMPI_STATUS_IGNORE`.
///
/// # Safety
/// `requests` holds `count` handles; `statuses` as said.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Waitall(
    count: c_int,
    requests: *mut BDMPI_Request,
    statuses: *mut BDMPI_Status,
) -> c_int {
    let call = "BDMPI_Waitall";
    if count < 0 || (count > 0 && requests.is_null()) {
        report(call, format_args!("{count} requests at {requests:p}"));
        return proto::ERR_ARG;
    }
    let mut first = proto::SUCCESS;
    for i in 0..count as usize {
        let s = if statuses.is_null() || statuses == STATUS_IGNORE {
            STATUS_IGNORE
        } else {
            // SAFETY: an array of `count` statuses (the caller's contract).
            unsafe { statuses.add(i) }
        };
        // SAFETY: an array of `count` handles (the caller's contract).
        let (code, _) = unsafe { complete(call, requests.add(i), s, true) };
        if code != proto::SUCCESS && first == proto::SUCCESS {
            first = code;
        }
    }
    first
}

/// `BDMPI_Get_count`: the whole elements of `datatype` in the message `status` describes.
///
/// # Safety
/// `status` is readable, `count` writable.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Get_count(
    status: *mut BDMPI_Status,
    datatype: c_int,
    count: *mut usize,
) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { get_count("BDMPI_Get_count", status, datatype) } {
        Ok((bytes, size)) => {
            let n = bytes / size;
            // SAFETY: the caller's contract (checked non-null).
            if !count.is_null() {
                unsafe { *count = n };
            }
            proto::SUCCESS
        }
        Err(code) => code,
    }
}

/// The bytes of the message `status` describes and the size of an element of `datatype`.
///
/// # Safety
/// `status` is readable (or null / ignore, which are errors).
pub(crate) unsafe fn get_count(
    call: &str,
    status: *mut BDMPI_Status,
    datatype: c_int,
) -> Res<(usize, usize)> {
    let size = type_size(call, datatype)?;
    if status.is_null() || status == STATUS_IGNORE {
        report(call, format_args!("no status to count from"));
        return Err(proto::ERR_ARG);
    }
    // SAFETY: the caller's contract.
    let s = unsafe { *status };
    Ok((s.count * types::size(s.datatype).unwrap_or(1), size))
}

/// `BDMPI_Sendrecv`: a send, then a receive (sends are buffered: it cannot deadlock).
///
/// # Safety
/// As `BDMPI_Send` and `BDMPI_Recv`.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Sendrecv(
    sendbuf: *mut c_void,
    sendcount: usize,
    sendtype: c_int,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: usize,
    recvtype: c_int,
    source: c_int,
    recvtag: c_int,
    comm: BDMPI_Comm,
    status: *mut BDMPI_Status,
) -> c_int {
    let call = "BDMPI_Sendrecv";
    let code = send(call, sendbuf, sendcount, sendtype, dest, sendtag, comm);
    if code != proto::SUCCESS {
        return code;
    }
    // SAFETY: forwarded contract.
    unsafe {
        recv(
            call, recvbuf, recvcount, recvtype, source, recvtag, comm, status,
        )
    }
}

/// # Safety
/// `status` is writable or ignored.
pub(super) unsafe fn probe_status(
    status: *mut BDMPI_Status,
    r: &Msg,
    c: &bdscomm_t,
    comm: BDMPI_Comm,
) {
    let datatype = r.a[3] as c_int;
    let size = types::size(datatype).unwrap_or(1);
    // SAFETY: the caller's contract.
    unsafe {
        fill_status(
            status,
            r.a[0] as i64 as c_int,
            r.a[1] as i64 as c_int,
            proto::SUCCESS,
            c.rank,
            datatype,
            r.a[2] as usize / size,
            comm,
        )
    };
}

/// `BDMPI_Probe`: blocks until a matching message is there; the status counts it in the
/// sender's datatype.
///
/// # Safety
/// `status` is writable or ignored.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Probe(
    source: c_int,
    tag: c_int,
    comm: BDMPI_Comm,
    status: *mut BDMPI_Status,
) -> c_int {
    let call = "BDMPI_Probe";
    let c = tri!(handles::comm(call, comm));
    tri!(check_peer(call, "source", source, &c, true));
    tri!(check_tag(call, tag, true));
    if source == proto::PROC_NULL {
        // SAFETY: the caller's contract.
        unsafe { copy_status(status, &empty_status(comm, types::BYTE, 0)) };
        return proto::SUCCESS;
    }
    let r = tri!(node(
        call,
        msg(op::PROBE, &c, &[source as i64 as u64, tag as i64 as u64])
    ));
    if r.code == proto::SUCCESS {
        // SAFETY: the caller's contract.
        unsafe { probe_status(status, &r, &c, comm) };
    }
    r.code
}

/// `BDMPI_Iprobe`.
///
/// # Safety
/// `flag` is writable; `status` is writable or ignored.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: BDMPI_Comm,
    flag: *mut c_int,
    status: *mut BDMPI_Status,
) -> c_int {
    let call = "BDMPI_Iprobe";
    let c = tri!(handles::comm(call, comm));
    tri!(check_peer(call, "source", source, &c, true));
    tri!(check_tag(call, tag, true));
    if flag.is_null() {
        report(call, format_args!("the flag pointer is NULL"));
        return proto::ERR_ARG;
    }
    if source == proto::PROC_NULL {
        // SAFETY: the caller's contract.
        unsafe {
            *flag = 1;
            copy_status(status, &empty_status(comm, types::BYTE, 0));
        }
        return proto::SUCCESS;
    }
    let r = tri!(node(
        call,
        msg(op::IPROBE, &c, &[source as i64 as u64, tag as i64 as u64])
    ));
    let found = r.code == proto::SUCCESS && r.a[4] == 1;
    // SAFETY: the caller's contract.
    unsafe {
        *flag = c_int::from(found);
        if found {
            probe_status(status, &r, &c, comm);
        }
    }
    r.code
}
