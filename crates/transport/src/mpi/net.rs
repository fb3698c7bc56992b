//! The engine's communicators and the MPI calls it makes on them, with their errors sorted:
//! a failed process (ULFM) is noted for the loss handling, anything else is a transport
//! failure.

use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void};

use mpi::ffi;

use super::{empty_request, mpi_error, ulfm};

/// Where messages travel: headers and control messages on `comm`, message data on `data`
/// (a duplicate, so that probing for headers never sees data whose receive is not posted).
/// Process `i` of both is node `i`.
pub(super) struct Net {
    pub(super) comm: ffi::MPI_Comm,
    pub(super) data: ffi::MPI_Comm,
    pub(super) me: c_int,
    pub(super) size: c_int,
    /// Set when a call reported a failed process (ULFM): the engine then finds out which
    /// ones, with the other survivors.
    peer_failed: Cell<bool>,
    /// The last call that reported a failed process (for reports when the reports do not
    /// stop).
    last_failed_call: RefCell<String>,
}

impl Net {
    pub(super) fn new(comm: ffi::MPI_Comm, data: ffi::MPI_Comm, me: c_int, size: c_int) -> Net {
        Net {
            comm,
            data,
            me,
            size,
            peer_failed: Cell::new(false),
            last_failed_call: RefCell::new(String::new()),
        }
    }

    /// Sorts the result of an MPI call: `Ok(true)` on success, `Ok(false)` when it failed
    /// because a process failed (noted), `Err` otherwise.
    pub(super) fn check(&self, call: &str, code: c_int) -> Result<bool, String> {
        if code == 0 {
            Ok(true)
        } else if ulfm::is_process_failure(code) {
            self.peer_failed.set(true);
            let mut last = self.last_failed_call.borrow_mut();
            last.clear();
            last.push_str(call);
            Ok(false)
        } else {
            Err(mpi_error(call, code))
        }
    }

    /// Whether a call reported a failed process since the last [`take_peer_failed`].
    ///
    /// [`take_peer_failed`]: Self::take_peer_failed
    pub(super) fn peer_failed(&self) -> bool {
        self.peer_failed.get()
    }

    /// Reads and clears the failed-process note.
    pub(super) fn take_peer_failed(&self) -> bool {
        self.peer_failed.replace(false)
    }

    /// Notes a failed process found otherwise (e.g. by another process) by `call`.
    pub(super) fn note_peer_failed(&self, call: &str) {
        self.peer_failed.set(true);
        let mut last = self.last_failed_call.borrow_mut();
        last.clear();
        last.push_str(call);
    }

    /// The last call that reported a failed process.
    pub(super) fn last_failed_call(&self) -> String {
        self.last_failed_call.borrow().clone()
    }

    /// Tests `request`; returns whether it is complete. A request that failed because its
    /// peer failed is complete (and the failure noted).
    pub(super) fn test(&self, request: &mut ffi::MPI_Request, call: &str) -> Result<bool, String> {
        let mut flag: c_int = 0;
        // SAFETY: `request` is an active or null request of this process; the buffers it
        // refers to are kept alive by the caller until it completes.
        let code = unsafe { ffi::MPI_Test(request, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
        if !self.check(call, code)? {
            // A failed operation is complete: MPI freed the request.
            *request = empty_request();
            return Ok(true);
        }
        Ok(flag != 0)
    }

    /// Starts a non-blocking send of `len` bytes at `ptr` on `comm`. `None` when the
    /// destination failed (noted).
    ///
    /// # Safety
    /// The bytes must stay valid and unchanged until the returned request completes.
    pub(super) unsafe fn isend(
        &self,
        comm: ffi::MPI_Comm,
        ptr: *const u8,
        len: usize,
        dest: c_int,
        tag: c_int,
    ) -> Result<Option<ffi::MPI_Request>, String> {
        let mut request = empty_request();
        // SAFETY: the caller keeps the buffer alive; `len` fits in an int (at most CHUNK or a
        // header plus INLINE bytes).
        let code = unsafe {
            ffi::MPI_Isend(
                ptr.cast::<c_void>(),
                len as c_int,
                ffi::RSMPI_UINT8_T,
                dest,
                tag,
                comm,
                &mut request,
            )
        };
        Ok(self.check("MPI_Isend", code)?.then_some(request))
    }
}
