//! Whether standard output was closed when the program started (`>&-`).
//!
//! The standard library opens `/dev/null` on a closed descriptor 0, 1 or 2 before `main`
//! runs, so a report written to a closed standard output would vanish and the command would
//! end with exit 0. A function in `.init_array` runs before that (the C runtime calls it
//! before the standard library's start-up) and records which descriptors were closed.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether descriptor 1 was closed when the process started.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static RECORD_CLOSED_STDOUT: extern "C" fn() = record_closed_stdout;

#[cfg(target_os = "linux")]
extern "C" fn record_closed_stdout() {
    // SAFETY: F_GETFD only reads the descriptor table entry of descriptor 1 (EBADF when it
    // is closed); no memory is touched.
    let closed = unsafe { libc::fcntl(1, libc::F_GETFD) } == -1;
    STDOUT_CLOSED.store(closed, Ordering::Relaxed);
}

/// Whether standard output was closed when the program started: what goes there would be
/// lost (it is `/dev/null` now).
pub(crate) fn stdout_was_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}
