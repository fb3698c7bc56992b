//! Messages on standard error naming the rank, for the C API's errors.

use std::sync::atomic::{AtomicI32, Ordering};

use crate::proto;

/// This rank's global number (-1 before `BDMPI_Init` and outside `bdmprun`).
static RANK: AtomicI32 = AtomicI32::new(-1);

/// Records the rank number `BDMPI_Init` received.
pub(crate) fn set_rank(rank: i32) {
    RANK.store(rank, Ordering::Relaxed);
}

/// The rank for messages: the one `BDMPI_Init` received, or the one `bdmprun` put in the
/// environment.
pub(crate) fn rank() -> i32 {
    let r = RANK.load(Ordering::Relaxed);
    if r >= 0 {
        return r;
    }
    std::env::var(proto::ENV_RANK)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

/// Prints an error of `call` on standard error, naming the rank.
pub(crate) fn report(call: &str, what: std::fmt::Arguments<'_>) {
    // One write, so that the lines of ranks sharing standard error do not interleave.
    let line = format!("bdmpi: rank {}: {call}: {what}\n", rank());
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
}
