//! Ranks as fibers: user-level threads with stacks of their own, run by a node's workers.
//!
//! A fiber switch costs tens of nanoseconds where a hand-off between OS threads costs
//! microseconds, which is what lets a node run thousands of ranks. A fiber runs only on the
//! worker thread that created it (it is never sent to another thread), so thread-local data
//! seen by a rank stays the same, though ranks of one worker share it.
//!
//! A rank that overflows its stack runs into the stack's guard page; the fault handler
//! installed here recognises the guard page of the fiber running on the faulting thread,
//! prints which rank overflowed and how to give it more, and aborts. Other faults go to the
//! previous handler (Rust's own).

use std::cell::Cell;
use std::io;
use std::sync::OnceLock;

use corosensei::stack::{DefaultStack, Stack};
use corosensei::{Coroutine, CoroutineResult, Yielder};

/// What a fiber's body gets to suspend itself.
pub(crate) type FiberYielder = Yielder<(), ()>;

const PAGE: usize = 4096;

/// The fiber a worker is running: its guard page and its rank, for the fault handler.
#[derive(Clone, Copy)]
struct Running {
    guard_start: usize,
    guard_end: usize,
    rank: u32,
    stack_size: usize,
}

thread_local! {
    static RUNNING: Cell<Option<Running>> = const { Cell::new(None) };
}

pub(crate) struct Fiber {
    co: Coroutine<(), (), (), DefaultStack>,
    running: Running,
}

impl Fiber {
    /// A fiber of `rank` with a stack of `stack_size` bytes (plus a guard page) that runs
    /// `body`.
    ///
    /// # Safety
    /// Everything `body` borrows must stay valid until the fiber has completed or been
    /// dropped (the job's workers run inside a thread scope that outlives their fibers).
    pub(crate) unsafe fn new<F>(rank: u32, stack_size: usize, body: F) -> io::Result<Fiber>
    where
        F: FnOnce(&FiberYielder),
    {
        install_overflow_handler();
        let stack = DefaultStack::new(stack_size)?;
        let limit = stack.limit().get();
        let running = Running {
            guard_start: limit,
            guard_end: limit + PAGE,
            rank,
            stack_size,
        };
        // SAFETY: the caller guarantees that the data `body` borrows outlives the fiber.
        let co = unsafe { Coroutine::with_stack_unchecked(stack, move |y, ()| body(y)) };
        Ok(Fiber { co, running })
    }

    /// Runs the fiber until it suspends (false) or completes (true).
    pub(crate) fn resume(&mut self) -> bool {
        RUNNING.with(|r| r.set(Some(self.running)));
        let done = matches!(self.co.resume(()), CoroutineResult::Return(()));
        RUNNING.with(|r| r.set(None));
        done
    }
}

/// The handlers that were installed before ours (SIGSEGV, SIGBUS), set once.
struct Previous([Option<libc::sigaction>; 2]);

// SAFETY: `sigaction` is plain data (a handler address, flags and a signal mask); it is written
// once before it is shared and only read afterwards.
unsafe impl Sync for Previous {}
// SAFETY: as above.
unsafe impl Send for Previous {}

static PREVIOUS: OnceLock<Previous> = OnceLock::new();

fn install_overflow_handler() {
    PREVIOUS.get_or_init(|| {
        let mut previous = [None, None];
        for (i, signal) in [libc::SIGSEGV, libc::SIGBUS].into_iter().enumerate() {
            // SAFETY: sigaction with a zeroed struct filled in here, for a handler that only
            // reads `PREVIOUS` (set right after, before any fiber runs) and its own thread's
            // `RUNNING`.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_fault as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, &action, &mut old) == 0 {
                    previous[i] = Some(old);
                }
            }
        }
        Previous(previous)
    });
}

/// Writes `bytes` to stderr with the async-signal-safe `write`.
fn write_stderr(bytes: &[u8]) {
    // SAFETY: write(2) on fd 2 with a valid buffer; async-signal-safe.
    unsafe {
        libc::write(2, bytes.as_ptr().cast(), bytes.len());
    }
}

/// Formats `n` in decimal into `buf`, returning the digits (no allocation: signal context).
fn decimal(mut n: usize, buf: &mut [u8; 24]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

extern "C" fn on_fault(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    // A const-initialised thread local without destructor: a plain load of this thread's
    // static TLS, safe in a signal handler.
    let running = RUNNING.with(Cell::get);
    if let Some(r) = running {
        if addr >= r.guard_start.saturating_sub(PAGE) && addr < r.guard_end {
            let mut a = [0u8; 24];
            let mut b = [0u8; 24];
            write_stderr(b"spillway: rank ");
            write_stderr(decimal(r.rank as usize, &mut a));
            write_stderr(b" overflowed its stack of ");
            write_stderr(decimal(r.stack_size >> 10, &mut b));
            write_stderr(b" KiB: give ranks more with Config::stack_size (--stack-size)\n");
            // SAFETY: abort is async-signal-safe.
            unsafe { libc::abort() };
        }
    }
    // Not a fiber's guard page: hand the fault to the handler that was there before.
    let previous = PREVIOUS
        .get()
        .and_then(|p| p.0[usize::from(signal == libc::SIGBUS)]);
    // SAFETY: re-installing or calling the previous action as the kernel would have; a
    // default action is restored so that returning re-raises the fault with it.
    unsafe {
        match previous {
            Some(old) if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN => {
                if old.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(old.sa_sigaction);
                    f(signal, info, context);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(old.sa_sigaction);
                    f(signal);
                }
            }
            _ => {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fibers_suspend_and_resume_in_order() {
        let log = std::cell::RefCell::new(Vec::new());
        let log_ref = &log;
        // SAFETY: `log` outlives both fibers, which complete in this test.
        let mut a = unsafe {
            Fiber::new(0, 64 << 10, move |y| {
                log_ref.borrow_mut().push("a1");
                y.suspend(());
                log_ref.borrow_mut().push("a2");
            })
        }
        .unwrap();
        // SAFETY: as above.
        let mut b = unsafe {
            Fiber::new(1, 64 << 10, move |_| {
                log_ref.borrow_mut().push("b");
            })
        }
        .unwrap();
        assert!(!a.resume());
        assert!(b.resume());
        assert!(a.resume());
        assert_eq!(*log.borrow(), ["a1", "b", "a2"]);
    }

    #[test]
    fn decimal_formats_without_allocating() {
        let mut buf = [0u8; 24];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(40_960, &mut buf), b"40960");
    }
}
