//! The `MPI_*` names of the collectives.

#![allow(non_snake_case)]

use super::*;

/// The root argument where a collective has one, 0 where it has none.
macro_rules! or_zero {
    () => {
        0
    };
    ($root:ident) => {
        $root
    };
}

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

/// The gathers: `MPI_<name>(sendbuf, sendcount, sendtype, recvbuf, <counts>, recvtype,
/// [root,] comm)`, with one `int` receive count (`uniform`) or `int` arrays of counts and
/// displacements (`arrays`).
macro_rules! gather {
    ($name:ident, $op:ident, uniform $(, $root:ident)?) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        ///
        /// # Safety
        #[doc = concat!("As `BD", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            sendbuf: *mut c_void,
            sendcount: c_int,
            sendtype: c_int,
            recvbuf: *mut c_void,
            recvcount: c_int,
            recvtype: c_int,
            $($root: c_int,)?
            comm: BDMPI_Comm,
        ) -> c_int {
            let call = stringify!($name);
            let sc = tri!(count(call, sendcount));
            let rc = tri!(count(call, recvcount));
            api::gather(
                call,
                op::$op,
                sendbuf,
                sc,
                sendtype,
                recvbuf,
                rc as u64,
                0,
                recvtype,
                or_zero!($($root)?),
                comm,
                proto::FLAG_UNIFORM,
            )
        }
    };
    ($name:ident, $op:ident, arrays $(, $root:ident)?) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        ///
        /// # Safety
        #[doc = concat!("As `BD", stringify!($name), "`, with `int` arrays.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            sendbuf: *mut c_void,
            sendcount: c_int,
            sendtype: c_int,
            recvbuf: *mut c_void,
            recvcounts: *mut c_int,
            displs: *mut c_int,
            recvtype: c_int,
            $($root: c_int,)?
            comm: BDMPI_Comm,
        ) -> c_int {
            let call = stringify!($name);
            let sc = tri!(count(call, sendcount));
            api::gather(
                call,
                op::$op,
                sendbuf,
                sc,
                sendtype,
                recvbuf,
                addr(recvcounts),
                addr(displs),
                recvtype,
                or_zero!($($root)?),
                comm,
                proto::FLAG_INT_ARRAYS,
            )
        }
    };
}

gather!(MPI_Gather, GATHERV, uniform, root);
gather!(MPI_Gatherv, GATHERV, arrays, root);
gather!(MPI_Allgather, ALLGATHERV, uniform);
gather!(MPI_Allgatherv, ALLGATHERV, arrays);

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

/// The reductions: `MPI_<name>(sendbuf, recvbuf, count, datatype, op, [root,] comm)`.
macro_rules! reduction {
    ($name:ident, $send:ty, $op:ident $(, $root:ident)?) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        ///
        /// # Safety
        #[doc = concat!("As `BD", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            sendbuf: $send,
            recvbuf: *mut c_void,
            n: c_int,
            datatype: c_int,
            opn: c_int,
            $($root: c_int,)?
            comm: BDMPI_Comm,
        ) -> c_int {
            let call = stringify!($name);
            let n = tri!(count(call, n));
            let root = or_zero!($($root)?);
            api::reduction(call, op::$op, sendbuf, recvbuf, n, datatype, opn, root, comm)
        }
    };
}

reduction!(MPI_Reduce, *const c_void, REDUCE, root);
reduction!(MPI_Allreduce, *mut c_void, ALLREDUCE);
reduction!(MPI_Scan, *mut c_void, SCAN);
reduction!(MPI_Exscan, *mut c_void, EXSCAN);
