//! The `MPI_*` names of the collectives.

#![allow(non_snake_case)]

use super::*;

/// `MPI_Barrier`.
///
/// # Safety
/// As `BDMPI_Barrier`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Barrier(comm: BDMPI_Comm) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { BDMPI_Barrier(comm) }
}

/// `MPI_Bcast`.
///
/// # Safety
/// As `BDMPI_Bcast`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Bcast(
    buf: *mut c_void,
    n: c_int,
    datatype: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let n = tri!(count("MPI_Bcast", n));
    api::bcast("MPI_Bcast", buf, n, datatype, root, comm)
}

/// `MPI_Gather`.
///
/// # Safety
/// As `BDMPI_Gather`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Gather(
    sendbuf: *mut c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let call = "MPI_Gather";
    let sc = tri!(count(call, sendcount));
    let rc = tri!(count(call, recvcount));
    api::gather(
        call,
        op::GATHERV,
        sendbuf,
        sc,
        sendtype,
        recvbuf,
        rc as u64,
        0,
        recvtype,
        root,
        comm,
        proto::FLAG_UNIFORM,
    )
}

/// `MPI_Gatherv`.
///
/// # Safety
/// As `BDMPI_Gatherv`, with `int` arrays.
#[no_mangle]
pub unsafe extern "C" fn MPI_Gatherv(
    sendbuf: *mut c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *mut c_int,
    displs: *mut c_int,
    recvtype: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let call = "MPI_Gatherv";
    let sc = tri!(count(call, sendcount));
    api::gather(
        call,
        op::GATHERV,
        sendbuf,
        sc,
        sendtype,
        recvbuf,
        addr(recvcounts),
        addr(displs),
        recvtype,
        root,
        comm,
        proto::FLAG_INT_ARRAYS,
    )
}

/// `MPI_Allgather`.
///
/// # Safety
/// As `BDMPI_Allgather`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Allgather(
    sendbuf: *mut c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let call = "MPI_Allgather";
    let sc = tri!(count(call, sendcount));
    let rc = tri!(count(call, recvcount));
    api::gather(
        call,
        op::ALLGATHERV,
        sendbuf,
        sc,
        sendtype,
        recvbuf,
        rc as u64,
        0,
        recvtype,
        0,
        comm,
        proto::FLAG_UNIFORM,
    )
}

/// `MPI_Allgatherv`.
///
/// # Safety
/// As `BDMPI_Allgatherv`, with `int` arrays.
#[no_mangle]
pub unsafe extern "C" fn MPI_Allgatherv(
    sendbuf: *mut c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *mut c_int,
    displs: *mut c_int,
    recvtype: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let call = "MPI_Allgatherv";
    let sc = tri!(count(call, sendcount));
    api::gather(
        call,
        op::ALLGATHERV,
        sendbuf,
        sc,
        sendtype,
        recvbuf,
        addr(recvcounts),
        addr(displs),
        recvtype,
        0,
        comm,
        proto::FLAG_INT_ARRAYS,
    )
}

/// `MPI_Scatter`.
///
/// # Safety
/// As `BDMPI_Scatter`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Scatter(
    sendbuf: *mut c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let call = "MPI_Scatter";
    let sc = tri!(count(call, sendcount));
    let rc = tri!(count(call, recvcount));
    api::scatter(
        call,
        sendbuf,
        sc as u64,
        0,
        sendtype,
        recvbuf,
        rc,
        recvtype,
        root,
        comm,
        proto::FLAG_UNIFORM,
    )
}

/// `MPI_Scatterv`.
///
/// # Safety
/// As `BDMPI_Scatterv`, with `int` arrays.
#[no_mangle]
pub unsafe extern "C" fn MPI_Scatterv(
    sendbuf: *mut c_void,
    sendcounts: *mut c_int,
    displs: *mut c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let call = "MPI_Scatterv";
    let rc = tri!(count(call, recvcount));
    api::scatter(
        call,
        sendbuf,
        addr(sendcounts),
        addr(displs),
        sendtype,
        recvbuf,
        rc,
        recvtype,
        root,
        comm,
        proto::FLAG_INT_ARRAYS,
    )
}

/// `MPI_Alltoall`.
///
/// # Safety
/// As `BDMPI_Alltoall`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Alltoall(
    sendbuf: *mut c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let call = "MPI_Alltoall";
    let sc = tri!(count(call, sendcount));
    let rc = tri!(count(call, recvcount));
    api::alltoall(
        call,
        sendbuf,
        sc as u64,
        0,
        sendtype,
        recvbuf,
        rc as u64,
        0,
        recvtype,
        comm,
        proto::FLAG_UNIFORM,
    )
}

/// `MPI_Alltoallv`.
///
/// # Safety
/// As `BDMPI_Alltoallv`, with `int` arrays.
#[no_mangle]
pub unsafe extern "C" fn MPI_Alltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    api::alltoall(
        "MPI_Alltoallv",
        sendbuf,
        addr(sendcounts),
        addr(sdispls),
        sendtype,
        recvbuf,
        addr(recvcounts),
        addr(rdispls),
        recvtype,
        comm,
        proto::FLAG_INT_ARRAYS,
    )
}

/// `MPI_Reduce`.
///
/// # Safety
/// As `BDMPI_Reduce`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    n: c_int,
    datatype: c_int,
    opn: c_int,
    root: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let call = "MPI_Reduce";
    let n = tri!(count(call, n));
    api::reduction(
        call,
        op::REDUCE,
        sendbuf,
        recvbuf,
        n,
        datatype,
        opn,
        root,
        comm,
    )
}

/// `MPI_Allreduce`.
///
/// # Safety
/// As `BDMPI_Allreduce`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Allreduce(
    sendbuf: *mut c_void,
    recvbuf: *mut c_void,
    n: c_int,
    datatype: c_int,
    opn: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let call = "MPI_Allreduce";
    let n = tri!(count(call, n));
    api::reduction(
        call,
        op::ALLREDUCE,
        sendbuf,
        recvbuf,
        n,
        datatype,
        opn,
        0,
        comm,
    )
}

/// `MPI_Scan`.
///
/// # Safety
/// As `BDMPI_Scan`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Scan(
    sendbuf: *mut c_void,
    recvbuf: *mut c_void,
    n: c_int,
    datatype: c_int,
    opn: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let call = "MPI_Scan";
    let n = tri!(count(call, n));
    api::reduction(call, op::SCAN, sendbuf, recvbuf, n, datatype, opn, 0, comm)
}

/// `MPI_Exscan`.
///
/// # Safety
/// As `BDMPI_Exscan`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Exscan(
    sendbuf: *mut c_void,
    recvbuf: *mut c_void,
    n: c_int,
    datatype: c_int,
    opn: c_int,
    comm: BDMPI_Comm,
) -> c_int {
    let call = "MPI_Exscan";
    let n = tri!(count(call, n));
    api::reduction(
        call,
        op::EXSCAN,
        sendbuf,
        recvbuf,
        n,
        datatype,
        opn,
        0,
        comm,
    )
}
