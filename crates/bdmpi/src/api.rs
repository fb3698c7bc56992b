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
    let c = tri!(handles::comm(call, comm));
    let bytes = tri!(bytes_of(call, count, datatype));
    tri!(check_buffer(call, buf, bytes));
    tri!(check_peer(call, "destination", dest, &c, false));
    tri!(check_tag(call, tag, false));
    if dest == proto::PROC_NULL {
        return proto::SUCCESS;
    }
    let m = msg(
        op::SEND,
        &c,
        &[
            addr(buf),
            count as u64,
            datatype as u64,
            dest as u64,
            tag as u64,
        ],
    );
    tri!(node(call, m)).code
}

fn new_request(kind: c_int, buf: *mut c_void, status: BDMPI_Status, id: c_int) -> BDMPI_Request {
    Box::into_raw(Box::new(bdrequest_t {
        kind,
        state: 0,
        buf,
        status,
        copid: id,
    }))
}

fn empty_status(comm: BDMPI_Comm, datatype: c_int, count: usize) -> BDMPI_Status {
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
unsafe fn status_from(
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
    let c = tri!(handles::comm(call, comm));
    let bytes = tri!(bytes_of(call, count, datatype));
    tri!(check_buffer(call, buf, bytes));
    tri!(check_peer(call, "source", source, &c, true));
    tri!(check_tag(call, tag, true));
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
    let m = msg(
        op::RECV,
        &c,
        &[
            addr(buf),
            count as u64,
            datatype as u64,
            source as i64 as u64,
            tag as i64 as u64,
        ],
    );
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
    let c = tri!(handles::comm(call, comm));
    let bytes = tri!(bytes_of(call, count, datatype));
    tri!(check_buffer(call, buf, bytes));
    tri!(check_peer(call, "source", source, &c, true));
    tri!(check_tag(call, tag, true));
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
    let m = msg(
        op::IRECV,
        &c,
        &[
            addr(buf),
            count as u64,
            datatype as u64,
            source as i64 as u64,
            tag as i64 as u64,
        ],
    );
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
unsafe fn complete(
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
unsafe fn copy_status(out: *mut BDMPI_Status, s: &BDMPI_Status) {
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

/// `BDMPI_Get_count`: the elements of `datatype` in the message `status` describes.
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
        Ok(n) => {
            // SAFETY: the caller's contract (checked non-null).
            if !count.is_null() {
                unsafe { *count = n };
            }
            proto::SUCCESS
        }
        Err(code) => code,
    }
}

/// # Safety
/// `status` is readable (or null / ignore, which are errors).
pub(crate) unsafe fn get_count(
    call: &str,
    status: *mut BDMPI_Status,
    datatype: c_int,
) -> Res<usize> {
    let size = type_size(call, datatype)?;
    if status.is_null() || status == STATUS_IGNORE {
        report(call, format_args!("no status to count from"));
        return Err(proto::ERR_ARG);
    }
    // SAFETY: the caller's contract.
    let s = unsafe { *status };
    let bytes = s.count * types::size(s.datatype).unwrap_or(1);
    Ok(bytes / size)
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
unsafe fn probe_status(status: *mut BDMPI_Status, r: &Msg, c: &bdscomm_t, comm: BDMPI_Comm) {
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

/// `BDMPI_Barrier`.
///
/// # Safety
/// None beyond BDMPI's contract.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Barrier(comm: BDMPI_Comm) -> c_int {
    let c = tri!(handles::comm("BDMPI_Barrier", comm));
    tri!(node("BDMPI_Barrier", msg(op::BARRIER, &c, &[]))).code
}

/// `BDMPI_Bcast`.
///
/// # Safety
/// `buf` holds `count` elements of `datatype`.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Bcast(
    buf: *mut c_void,
    count: usize,
    datatype: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    bcast("BDMPI_Bcast", buf, count, datatype, root, comm)
}

pub(crate) fn bcast(
    call: &str,
    buf: *mut c_void,
    count: usize,
    datatype: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let c = tri!(handles::comm(call, comm));
    let bytes = tri!(bytes_of(call, count, datatype));
    tri!(check_buffer(call, buf, bytes));
    tri!(check_root(call, root, &c));
    let m = msg(
        op::BCAST,
        &c,
        &[addr(buf), count as u64, datatype as u64, root as u64],
    );
    tri!(node(call, m)).code
}

/// A reduction of kind `o` (`REDUCE` with a root, `ALLREDUCE`, `SCAN`, `EXSCAN`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduction(
    call: &str,
    o: u32,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    datatype: c_int,
    opn: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let c = tri!(handles::comm(call, comm));
    let bytes = tri!(bytes_of(call, count, datatype));
    tri!(check_op(call, opn, datatype));
    tri!(check_buffer(call, sendbuf, bytes));
    if o == op::REDUCE {
        tri!(check_root(call, root, &c));
        if c.rank == root {
            tri!(check_buffer(call, recvbuf, bytes));
        }
    } else {
        tri!(check_buffer(call, recvbuf, bytes));
    }
    let m = msg(
        o,
        &c,
        &[
            addr(sendbuf),
            addr(recvbuf),
            count as u64,
            datatype as u64,
            opn as u64,
            root as i64 as u64,
        ],
    );
    tri!(node(call, m)).code
}

/// `BDMPI_Reduce`: `sendbuf` may equal `recvbuf`.
///
/// # Safety
/// The buffers hold `count` elements of `datatype` (`recvbuf` at the root only).
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Reduce(
    sendbuf: *mut c_void,
    recvbuf: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    reduction(
        "BDMPI_Reduce",
        op::REDUCE,
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        root,
        comm,
    )
}

/// `BDMPI_Allreduce`: `sendbuf` may equal `recvbuf`.
///
/// # Safety
/// The buffers hold `count` elements of `datatype`.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Allreduce(
    sendbuf: *mut c_void,
    recvbuf: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    reduction(
        "BDMPI_Allreduce",
        op::ALLREDUCE,
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        0,
        comm,
    )
}

/// `BDMPI_Scan`: inclusive prefix reduction in rank order.
///
/// # Safety
/// The buffers hold `count` elements of `datatype`.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Scan(
    sendbuf: *mut c_void,
    recvbuf: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    reduction(
        "BDMPI_Scan",
        op::SCAN,
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        0,
        comm,
    )
}

/// `BDMPI_Exscan`: exclusive prefix reduction; rank 0's `recvbuf` is left as it is.
///
/// # Safety
/// The buffers hold `count` elements of `datatype`.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Exscan(
    sendbuf: *mut c_void,
    recvbuf: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    reduction(
        "BDMPI_Exscan",
        op::EXSCAN,
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        0,
        comm,
    )
}

/// The gather family: `o` is `GATHERV` (with a root) or `ALLGATHERV`; `counts` and `displs`
/// are addresses of arrays, or with `FLAG_UNIFORM` `counts` is the count.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather(
    call: &str,
    o: u32,
    sendbuf: *const c_void,
    sendcount: usize,
    sendtype: c_int,
    recvbuf: *mut c_void,
    counts: u64,
    displs: u64,
    recvtype: c_int,
    root: c_int,
    comm: BDMPI_Comm,
    flags: u64,
) -> c_int {
    let c = tri!(handles::comm(call, comm));
    let bytes = tri!(bytes_of(call, sendcount, sendtype));
    tri!(check_buffer(call, sendbuf, bytes));
    if o == op::GATHERV {
        tri!(check_root(call, root, &c));
    }
    let receives = o == op::ALLGATHERV || c.rank == root;
    if receives {
        tri!(type_size(call, recvtype));
        if flags & proto::FLAG_UNIFORM == 0 && (counts == 0 || displs == 0) {
            report(
                call,
                format_args!("the receive counts or displacements are NULL"),
            );
            return proto::ERR_ARG;
        }
    }
    let m = msg(
        o,
        &c,
        &[
            addr(sendbuf),
            sendcount as u64,
            sendtype as u64,
            addr(recvbuf),
            counts,
            displs,
            recvtype as u64,
            root as i64 as u64,
            flags,
        ],
    );
    tri!(node(call, m)).code
}

/// `BDMPI_Gather`.
///
/// # Safety
/// `sendbuf` holds `sendcount` elements; at the root `recvbuf` holds `size * recvcount`.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Gather(
    sendbuf: *mut c_void,
    sendcount: usize,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: usize,
    recvtype: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    gather(
        "BDMPI_Gather",
        op::GATHERV,
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount as u64,
        0,
        recvtype,
        root,
        comm,
        proto::FLAG_UNIFORM,
    )
}

/// `BDMPI_Gatherv`.
///
/// # Safety
/// `sendbuf` holds `sendcount` elements; at the root `recvcounts` and `displs` hold `size`
/// entries and `recvbuf` the places they describe.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Gatherv(
    sendbuf: *mut c_void,
    sendcount: usize,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *mut usize,
    displs: *mut usize,
    recvtype: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    gather(
        "BDMPI_Gatherv",
        op::GATHERV,
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        addr(recvcounts),
        addr(displs),
        recvtype,
        root,
        comm,
        0,
    )
}

/// `BDMPI_Allgather`.
///
/// # Safety
/// `sendbuf` holds `sendcount` elements, `recvbuf` `size * recvcount`.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Allgather(
    sendbuf: *mut c_void,
    sendcount: usize,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: usize,
    recvtype: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    gather(
        "BDMPI_Allgather",
        op::ALLGATHERV,
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount as u64,
        0,
        recvtype,
        0,
        comm,
        proto::FLAG_UNIFORM,
    )
}

/// `BDMPI_Allgatherv`.
///
/// # Safety
/// `recvcounts` and `displs` hold `size` entries; the buffers the places they describe.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Allgatherv(
    sendbuf: *mut c_void,
    sendcount: usize,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *mut usize,
    displs: *mut usize,
    recvtype: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    gather(
        "BDMPI_Allgatherv",
        op::ALLGATHERV,
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        addr(recvcounts),
        addr(displs),
        recvtype,
        0,
        comm,
        0,
    )
}

/// The scatter: `counts` and `displs` as in [`gather`], on the root's side.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter(
    call: &str,
    sendbuf: *const c_void,
    counts: u64,
    displs: u64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: usize,
    recvtype: c_int,
    root: c_int,
    comm: BDMPI_Comm,
    flags: u64,
) -> c_int {
    let c = tri!(handles::comm(call, comm));
    let bytes = tri!(bytes_of(call, recvcount, recvtype));
    tri!(check_buffer(call, recvbuf, bytes));
    tri!(check_root(call, root, &c));
    if c.rank == root {
        tri!(type_size(call, sendtype));
        if flags & proto::FLAG_UNIFORM == 0 && (counts == 0 || displs == 0) {
            report(
                call,
                format_args!("the send counts or displacements are NULL"),
            );
            return proto::ERR_ARG;
        }
    }
    let m = msg(
        op::SCATTERV,
        &c,
        &[
            addr(sendbuf),
            counts,
            displs,
            sendtype as u64,
            addr(recvbuf),
            recvcount as u64,
            recvtype as u64,
            root as u64,
            flags,
        ],
    );
    tri!(node(call, m)).code
}

/// `BDMPI_Scatter`.
///
/// # Safety
/// At the root `sendbuf` holds `size * sendcount` elements; `recvbuf` holds `recvcount`.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Scatter(
    sendbuf: *mut c_void,
    sendcount: usize,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: usize,
    recvtype: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    scatter(
        "BDMPI_Scatter",
        sendbuf,
        sendcount as u64,
        0,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        root,
        comm,
        proto::FLAG_UNIFORM,
    )
}

/// `BDMPI_Scatterv`.
///
/// # Safety
/// At the root `sendcounts` and `displs` hold `size` entries and `sendbuf` the places they
/// describe; `recvbuf` holds `recvcount` elements.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Scatterv(
    sendbuf: *mut c_void,
    sendcounts: *mut usize,
    displs: *mut usize,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: usize,
    recvtype: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    scatter(
        "BDMPI_Scatterv",
        sendbuf,
        addr(sendcounts),
        addr(displs),
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        root,
        comm,
        0,
    )
}

/// The all-to-all: counts and displacements as in [`gather`], for both sides.
#[allow(clippy::too_many_arguments)]
pub(crate) fn alltoall(
    call: &str,
    sendbuf: *const c_void,
    sendcounts: u64,
    sdispls: u64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: u64,
    rdispls: u64,
    recvtype: c_int,
    comm: BDMPI_Comm,
    flags: u64,
) -> c_int {
    let c = tri!(handles::comm(call, comm));
    tri!(type_size(call, sendtype));
    tri!(type_size(call, recvtype));
    if flags & proto::FLAG_UNIFORM == 0
        && (sendcounts == 0 || sdispls == 0 || recvcounts == 0 || rdispls == 0)
    {
        report(call, format_args!("a count or displacement array is NULL"));
        return proto::ERR_ARG;
    }
    let m = msg(
        op::ALLTOALLV,
        &c,
        &[
            addr(sendbuf),
            sendcounts,
            sdispls,
            sendtype as u64,
            addr(recvbuf),
            recvcounts,
            rdispls,
            recvtype as u64,
            flags,
        ],
    );
    tri!(node(call, m)).code
}

/// `BDMPI_Alltoall`.
///
/// # Safety
/// The buffers hold `size * count` elements.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Alltoall(
    sendbuf: *mut c_void,
    sendcount: usize,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: usize,
    recvtype: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    alltoall(
        "BDMPI_Alltoall",
        sendbuf,
        sendcount as u64,
        0,
        sendtype,
        recvbuf,
        recvcount as u64,
        0,
        recvtype,
        comm,
        proto::FLAG_UNIFORM,
    )
}

/// `BDMPI_Alltoallv`.
///
/// # Safety
/// The arrays hold `size` entries; the buffers the places they describe.
#[no_mangle]
pub unsafe extern "C" fn BDMPI_Alltoallv(
    sendbuf: *mut c_void,
    sendcounts: *mut usize,
    sdispls: *mut usize,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *mut usize,
    rdispls: *mut usize,
    recvtype: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    alltoall(
        "BDMPI_Alltoallv",
        sendbuf,
        addr(sendcounts),
        addr(sdispls),
        sendtype,
        recvbuf,
        addr(recvcounts),
        addr(rdispls),
        recvtype,
        comm,
        0,
    )
}

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
