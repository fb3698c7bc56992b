//! What every context behind an `lpf_t` offers ([`Context`]: the one-process context of
//! `solo.rs` and the SPMD process context of `spmd.rs`), and how their results become LPF's
//! error codes.

use std::ffi::c_void;

use crate::ffi::{lpf_err_t, lpf_memslot_t, lpf_pid_t, ERR_FATAL, ERR_OUT_OF_MEMORY, SUCCESS};

/// What a call returns to C, before mapping to an `lpf_err_t`.
#[derive(Debug)]
pub(crate) enum Fail {
    /// A mitigable error (capacity or memory): nothing happened.
    Mitigable(String),
    /// A fatal error found by this call (a misuse, a failure of the runtime), not yet
    /// reported: the context reports it and enters LPF's failure state.
    Report(String),
    /// The context is in its failure state already (an earlier error, another process failed
    /// or left).
    Fatal,
}

pub(crate) type Res<T> = Result<T, Fail>;

/// Maps the result of `call` on `ctx` to LPF's error codes: mitigable errors are explained
/// once per context; a fatal error puts the context in LPF's failure state, in which every
/// later `lpf_sync`, `lpf_exec` and `lpf_rehook` of it returns `LPF_ERR_FATAL`.
pub(crate) fn code(r: Res<()>, ctx: &mut dyn Context, call: &str) -> lpf_err_t {
    match r {
        Ok(()) => SUCCESS,
        Err(Fail::Mitigable(m)) => {
            let warned = ctx.warned();
            if !*warned {
                *warned = true;
                eprintln!("spillway-lpf: {call}: {m} (the call had no effect)");
            }
            ERR_OUT_OF_MEMORY
        }
        Err(Fail::Report(m)) => {
            ctx.enter_failure(m);
            ERR_FATAL
        }
        Err(Fail::Fatal) => ERR_FATAL,
    }
}

/// The operations every context offers.
pub(crate) trait Context {
    /// (processors of the machine, processors free for this process).
    fn processors(&self) -> (u32, u32);
    fn resize_memory_register(&mut self, n: usize) -> Res<()>;
    fn resize_message_queue(&mut self, n: usize) -> Res<()>;
    /// # Safety
    /// `ptr` valid for `size` bytes until deregistered (LPF's contract).
    unsafe fn register(&mut self, global: bool, ptr: *mut u8, size: usize) -> Res<lpf_memslot_t>;
    fn deregister(&mut self, slot: lpf_memslot_t) -> Res<()>;
    #[allow(clippy::too_many_arguments)]
    fn put(
        &mut self,
        src: lpf_memslot_t,
        src_off: usize,
        pid: lpf_pid_t,
        dst: lpf_memslot_t,
        dst_off: usize,
        size: usize,
    ) -> Res<()>;
    #[allow(clippy::too_many_arguments)]
    fn get(
        &mut self,
        pid: lpf_pid_t,
        src: lpf_memslot_t,
        src_off: usize,
        dst: lpf_memslot_t,
        dst_off: usize,
        size: usize,
    ) -> Res<()>;
    fn sync(&mut self) -> Res<()>;
    fn alloc(&mut self, size: usize) -> Res<*mut c_void>;
    fn free(&mut self, ptr: *mut c_void) -> Res<()>;
    /// Whether a mitigable error was reported already (reports go once per context).
    fn warned(&mut self) -> &mut bool;
    /// Reports `message` (unless the context failed already) and enters LPF's failure state.
    fn enter_failure(&mut self, message: String);
    /// Whether the context is in LPF's failure state.
    fn failed(&self) -> bool;
}

/// A misuse of the API by `call` (LPF leaves its behaviour undefined; spillway reports it and
/// the context enters its failure state).
pub(crate) fn misuse(call: &str, what: impl std::fmt::Display) -> Fail {
    Fail::Report(format!("{call}: {what}"))
}
