//! Launching SPMD sections (`lpf_exec`, `lpf_rehook`, `lpf_hook`): the SPMD function and its
//! arguments ([`Section`]), what an `lpf_t` points to ([`Ctx`]), and running a section on a new
//! job, on the calling thread, or on the processes of an existing context.

use spillway_bsp::{Bsp, Error, Options};
use spillway_comm::Comm;
use spillway_runtime::Config;

use crate::ctx::Context;
use crate::ffi::{lpf_args_t, lpf_err_t, lpf_pid_t, lpf_t, ERR_FATAL, SUCCESS};
use crate::solo::Solo;
use crate::spmd::Spmd;

/// The SPMD function of a section, with the arguments it gets.
#[derive(Clone, Copy)]
pub(crate) struct Section {
    pub(crate) spmd: unsafe extern "C" fn(lpf_t, lpf_pid_t, lpf_pid_t, lpf_args_t),
    pub(crate) args: lpf_args_t,
    /// Whether only process 0 gets input and output (`lpf_exec`), or every process its own
    /// (`lpf_hook`, `lpf_rehook`).
    pub(crate) args_to_first: bool,
}

// SAFETY: the arguments are pointers into the caller's memory that LPF hands to the SPMD
// function of every process (threads of this process): sharing them is what LPF specifies,
// and the C program is responsible for how its processes use them.
unsafe impl Sync for Section {}
// SAFETY: as above.
unsafe impl Send for Section {}

impl Section {
    fn args_for(&self, pid: usize) -> lpf_args_t {
        if pid == 0 || !self.args_to_first {
            self.args
        } else {
            lpf_args_t {
                input: std::ptr::null(),
                input_size: 0,
                output: std::ptr::null_mut(),
                output_size: 0,
                ..self.args
            }
        }
    }
}

/// What an `lpf_t` other than `LPF_ROOT` points to.
pub(crate) enum Ctx {
    Solo(Solo),
    Spmd(Spmd),
}

impl Ctx {
    pub(crate) fn as_dyn(&mut self) -> &mut dyn Context {
        match self {
            Ctx::Solo(s) => s,
            Ctx::Spmd(s) => s,
        }
    }
}

/// Runs `section` as process `bsp.pid()`; returns whether every process returned together.
fn run_process(
    bsp: &mut Bsp<'_>,
    processors: (u32, u32),
    checked: bool,
    section: &Section,
) -> bool {
    let pid = bsp.pid();
    let nprocs = bsp.nprocs();
    let mut ctx = Box::new(Ctx::Spmd(Spmd::new(bsp, processors, checked)));
    let handle: lpf_t = (&mut *ctx as *mut Ctx).cast();
    // SAFETY: calling the C program's SPMD function with LPF's arguments; `handle` stays
    // valid until it returns.
    unsafe {
        (section.spmd)(
            handle,
            pid as lpf_pid_t,
            nprocs as lpf_pid_t,
            section.args_for(pid),
        )
    };
    match &mut *ctx {
        Ctx::Spmd(s) => s.finish(),
        Ctx::Solo(_) => unreachable!("made as an SPMD context above"),
    }
}

/// The processors of process `i` of `n` that share `free` free processors.
fn share(free: u32, n: u32, i: u32) -> u32 {
    (free / n + u32::from(i < free % n)).max(1)
}

/// Runs `section` on a new job of `n` processes (`lpf_exec`).
pub(crate) fn exec_job(
    config: &Config,
    total: u32,
    free: u32,
    checked: bool,
    section: Section,
) -> lpf_err_t {
    let n = config.ranks_total();
    let result = spillway_runtime::run(config, |rank| {
        let world = Comm::world(rank);
        spillway_bsp::hook(&world, Options::checked(checked), |bsp| {
            let processors = (total, share(free, n, bsp.pid() as u32));
            Ok::<_, Error>(run_process(bsp, processors, checked, &section))
        })
    });
    report("lpf_exec", result)
}

/// Maps a job's outcome to LPF's error code, reporting failures.
pub(crate) fn report<E: std::fmt::Display>(call: &str, r: Result<Vec<bool>, E>) -> lpf_err_t {
    match r {
        Ok(all) if all.iter().all(|&ok| ok) => SUCCESS,
        Ok(_) => ERR_FATAL,
        Err(e) => {
            eprintln!("spillway-lpf: {call}: {e}");
            ERR_FATAL
        }
    }
}

/// Runs `section` in a one-process context on the calling thread; `LPF_ERR_FATAL` when the
/// context ended in LPF's failure state.
pub(crate) fn exec_solo(processors: (u32, u32), section: Section) -> lpf_err_t {
    let mut ctx = Box::new(Ctx::Solo(Solo::new(processors)));
    let handle: lpf_t = (&mut *ctx as *mut Ctx).cast();
    // SAFETY: as in `run_process`.
    unsafe { (section.spmd)(handle, 0, 1, section.args) };
    if ctx.as_dyn().failed() {
        ERR_FATAL
    } else {
        SUCCESS
    }
}

/// `lpf_rehook` on an SPMD context: the same processes, a pristine context.
pub(crate) fn rehook(ctx: &mut Spmd, section: Section) -> lpf_err_t {
    if ctx.dead {
        return ERR_FATAL;
    }
    let processors = ctx.processors;
    let checked = ctx.checked;
    let r = ctx.bsp().rehook(Options::checked(checked), |bsp| {
        Ok(run_process(bsp, processors, checked, &section))
    });
    match r {
        Ok(true) => SUCCESS,
        Ok(false) => ERR_FATAL,
        Err(e) => {
            eprintln!("spillway-lpf: lpf_rehook: {e}");
            ctx.dead = true;
            ERR_FATAL
        }
    }
}

/// Runs `section` with a BSP context on the members of `comm` (`lpf_hook` over MPI).
#[cfg(feature = "mpi")]
pub(crate) fn hook_comm(comm: &Comm<'_>, total: u32, checked: bool, section: &Section) -> bool {
    let r = spillway_bsp::hook(comm, Options::checked(checked), |bsp| {
        Ok::<_, Error>(run_process(bsp, (total, 1), checked, section))
    });
    r.unwrap_or(false)
}
