//! ULFM (User-Level Failure Mitigation, Open MPI 5's `mpi-ext.h`): the few `MPIX_*`
//! functions the engine uses, declared here (the `mpi` crate's bindings do not cover them)
//! behind safe functions. Built with ULFM when the build script found it (cfg
//! `spillway_ulfm`); otherwise every function says so and nothing is called.
//!
//! Nothing above the engine sees these: a lost process reaches the job as a
//! [`Lost`](crate::Lost) event.

use std::ffi::c_int;

use mpi::ffi;

#[cfg(spillway_ulfm)]
mod sys {
    use mpi::ffi;
    use std::ffi::c_int;

    include!(concat!(env!("OUT_DIR"), "/ulfm.rs"));

    extern "C" {
        pub(super) fn MPIX_Comm_revoke(comm: ffi::MPI_Comm) -> c_int;
        pub(super) fn MPIX_Comm_shrink(comm: ffi::MPI_Comm, newcomm: *mut ffi::MPI_Comm) -> c_int;
        pub(super) fn MPIX_Comm_iagree(
            comm: ffi::MPI_Comm,
            flag: *mut c_int,
            request: *mut ffi::MPI_Request,
        ) -> c_int;
        pub(super) fn MPIX_Comm_failure_ack(comm: ffi::MPI_Comm) -> c_int;
        pub(super) fn MPIX_Comm_failure_get_acked(
            comm: ffi::MPI_Comm,
            failed: *mut ffi::MPI_Group,
        ) -> c_int;
    }
}

/// Whether this build can survive lost processes (the MPI library has ULFM).
pub(crate) const AVAILABLE: bool = cfg!(spillway_ulfm);

/// The MPI library the engine was built against, as its headers name it (with ULFM).
pub(crate) fn built_with() -> Option<&'static str> {
    #[cfg(spillway_ulfm)]
    {
        Some(sys::BUILT_WITH)
    }
    #[cfg(not(spillway_ulfm))]
    {
        None
    }
}

/// Whether the error `code` of an MPI call means that a process failed (or that another
/// process revoked the communicator because one did): `MPIX_ERR_PROC_FAILED`,
/// `MPIX_ERR_PROC_FAILED_PENDING` or `MPIX_ERR_REVOKED`. Always false without ULFM.
pub(crate) fn is_process_failure(code: c_int) -> bool {
    failure_class(code).is_some()
}

/// Whether the error `code` of an MPI call means that the communicator was revoked
/// (`MPIX_ERR_REVOKED`: another process started to shrink it). Always false without ULFM.
pub(crate) fn is_revoked(code: c_int) -> bool {
    matches!(failure_class(code), Some(FailureClass::Revoked))
}

/// ULFM's error classes.
#[cfg_attr(not(spillway_ulfm), allow(dead_code))]
enum FailureClass {
    /// `MPIX_ERR_PROC_FAILED` or `MPIX_ERR_PROC_FAILED_PENDING`.
    Failed,
    /// `MPIX_ERR_REVOKED`.
    Revoked,
}

/// The ULFM error class of the error `code` (0: success), if it has one.
fn failure_class(code: c_int) -> Option<FailureClass> {
    #[cfg(spillway_ulfm)]
    {
        if code == 0 {
            return None;
        }
        let mut class: c_int = 0;
        // SAFETY: MPI_Error_class may be called with any error code; it writes `class`.
        unsafe { ffi::MPI_Error_class(code, &mut class) };
        if class == sys::ERR_REVOKED {
            Some(FailureClass::Revoked)
        } else if class == sys::ERR_PROC_FAILED || class == sys::ERR_PROC_FAILED_PENDING {
            Some(FailureClass::Failed)
        } else {
            None
        }
    }
    #[cfg(not(spillway_ulfm))]
    {
        let _ = code;
        None
    }
}

#[cfg(not(spillway_ulfm))]
const NO_ULFM: &str = "this MPI library has no ULFM";

/// Acknowledges the failures known to this process on `comm`, so that receives and probes
/// from any source work again there; returns the ranks of `comm` acknowledged as failed.
pub(crate) fn acknowledge(comm: ffi::MPI_Comm) -> Result<Vec<c_int>, String> {
    #[cfg(spillway_ulfm)]
    {
        // SAFETY: `comm` is a valid communicator of this process.
        let code = unsafe { sys::MPIX_Comm_failure_ack(comm) };
        if code != 0 {
            return Err(super::mpi_error("MPIX_Comm_failure_ack", code));
        }
        // SAFETY: reads an immutable handle constant exported by the MPI library.
        let mut failed = unsafe { ffi::RSMPI_GROUP_NULL };
        // SAFETY: `comm` is a valid communicator; the call makes a group (written to
        // `failed`) that is freed below.
        let code = unsafe { sys::MPIX_Comm_failure_get_acked(comm, &mut failed) };
        if code != 0 {
            return Err(super::mpi_error("MPIX_Comm_failure_get_acked", code));
        }
        let ranks = ranks_in(failed, comm);
        // SAFETY: `failed` was made by the call above and is not used again.
        unsafe { ffi::MPI_Group_free(&mut failed) };
        Ok(ranks)
    }
    #[cfg(not(spillway_ulfm))]
    {
        let _ = comm;
        Err(NO_ULFM.into())
    }
}

/// Revokes `comm`: every pending and later operation on it fails in every process, which
/// thereby learns of the failure.
pub(crate) fn revoke(comm: ffi::MPI_Comm) {
    #[cfg(spillway_ulfm)]
    {
        // SAFETY: `comm` is a valid communicator; revoking one that is already revoked is
        // allowed.
        unsafe { sys::MPIX_Comm_revoke(comm) };
    }
    #[cfg(not(spillway_ulfm))]
    {
        let _ = comm;
    }
}

/// The survivors of `comm` (a collective of the survivors, which agree on who failed),
/// returning errors to the caller like `comm`.
pub(crate) fn shrink(comm: ffi::MPI_Comm) -> Result<ffi::MPI_Comm, String> {
    #[cfg(spillway_ulfm)]
    {
        // SAFETY: reads an immutable handle constant exported by the MPI library.
        let mut shrunk = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: `comm` is a valid communicator; the new one is written to `shrunk`.
        let code = unsafe { sys::MPIX_Comm_shrink(comm, &mut shrunk) };
        if code != 0 {
            return Err(super::mpi_error("MPIX_Comm_shrink", code));
        }
        // SAFETY: `shrunk` is the valid communicator just made.
        unsafe { ffi::MPI_Comm_set_errhandler(shrunk, ffi::RSMPI_ERRORS_RETURN) };
        Ok(shrunk)
    }
    #[cfg(not(spillway_ulfm))]
    {
        let _ = comm;
        Err(NO_ULFM.into())
    }
}

/// Starts a non-blocking agreement among the survivors of `comm` (`MPIX_Comm_iagree`): the
/// logical and of every survivor's flag, the same in every survivor even if processes fail
/// meanwhile; an error (`MPIX_ERR_PROC_FAILED` when a process failed before it agreed) is
/// the same in every survivor too. `*flag` is read now and holds the result when `request`
/// completes. Returns the error code (0 on success).
///
/// # Safety
/// `flag` and `request` must stay valid until the request completes.
pub(crate) unsafe fn iagree(
    comm: ffi::MPI_Comm,
    flag: *mut c_int,
    request: *mut ffi::MPI_Request,
) -> c_int {
    #[cfg(spillway_ulfm)]
    {
        // SAFETY: guaranteed by the caller; `comm` is a valid communicator.
        unsafe { sys::MPIX_Comm_iagree(comm, flag, request) }
    }
    #[cfg(not(spillway_ulfm))]
    {
        let _ = (comm, flag, request);
        -1
    }
}

/// A blocking agreement among the survivors of `comm` on `flag` (see [`iagree`]): `*flag`
/// holds the logical and of every survivor's flag afterwards. Returns the error code (0 on
/// success; without ULFM always an error).
pub(crate) fn agree(comm: ffi::MPI_Comm, flag: &mut c_int) -> c_int {
    // SAFETY: reads an immutable handle constant exported by the MPI library.
    let mut request = unsafe { ffi::RSMPI_REQUEST_NULL };
    // SAFETY: `flag` and `request` outlive the request, which is completed below.
    let code = unsafe { iagree(comm, flag, &mut request) };
    if code != 0 {
        return code;
    }
    // SAFETY: `request` was started above; waiting completes and frees it.
    unsafe { ffi::MPI_Wait(&mut request, ffi::RSMPI_STATUS_IGNORE) }
}

/// The ranks in `reference` of the members of `group`.
pub(crate) fn ranks_in(group: ffi::MPI_Group, reference: ffi::MPI_Comm) -> Vec<c_int> {
    let mut size: c_int = 0;
    // SAFETY: `group` is a valid group; the call writes its size.
    unsafe { ffi::MPI_Group_size(group, &mut size) };
    if size <= 0 {
        return Vec::new();
    }
    // SAFETY: reads an immutable handle constant exported by the MPI library.
    let mut all = unsafe { ffi::RSMPI_GROUP_NULL };
    // SAFETY: `reference` is a valid communicator; its group is freed below.
    unsafe { ffi::MPI_Comm_group(reference, &mut all) };
    let from: Vec<c_int> = (0..size).collect();
    let mut to = vec![0 as c_int; size as usize];
    // SAFETY: both groups are valid and both arrays hold `size` ranks.
    unsafe {
        ffi::MPI_Group_translate_ranks(group, size, from.as_ptr(), all, to.as_mut_ptr());
        ffi::MPI_Group_free(&mut all);
    }
    to.retain(|&r| r >= 0);
    to
}

/// The ranks in `reference` of the processes of `comm` (e.g. the survivors after a shrink).
pub(crate) fn members_in(comm: ffi::MPI_Comm, reference: ffi::MPI_Comm) -> Vec<c_int> {
    // SAFETY: reads an immutable handle constant exported by the MPI library.
    let mut group = unsafe { ffi::RSMPI_GROUP_NULL };
    // SAFETY: `comm` is a valid communicator; its group is freed below.
    unsafe { ffi::MPI_Comm_group(comm, &mut group) };
    let ranks = ranks_in(group, reference);
    // SAFETY: made above, not used again.
    unsafe { ffi::MPI_Group_free(&mut group) };
    ranks
}
