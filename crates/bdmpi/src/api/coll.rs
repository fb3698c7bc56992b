//! Collectives: barrier, broadcast, reductions, scans, gathers, scatters, all-to-all.

#![allow(non_snake_case)]

use super::*;

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
