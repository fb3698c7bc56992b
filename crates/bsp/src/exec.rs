//! Starting BSP contexts: exec (a new job), hook (ranks of a running job), rehook (a pristine
//! context inside a running one).

use std::panic::Location;
use std::sync::Arc;

use spillway_comm::{Collectives, Comm};
use spillway_runtime::{Config, JobError};

use crate::context::{Bsp, Options};
use crate::error::{Error, Result};
use crate::sync::published::NodeState;
use crate::sync::scratch::Scratch;

/// Runs `f` as an SPMD function on the `config.ranks_total()` ranks of a new job, each with a
/// fresh BSP context (LPF's `lpf_exec`); returns every rank's result in rank order.
///
/// # Semantics
/// The context starts with empty capacities, like LPF's: call
/// [`resize_memory_register`](Bsp::resize_memory_register) and
/// [`resize_message_queue`](Bsp::resize_message_queue), then [`sync`](Bsp::sync), before the
/// first registration or request. In checked mode every rank must do the same number of syncs.
///
/// # Cost
/// Starting the job, plus an allgather and a split of the world communicator (`O(p)` words).
///
/// # Errors
/// As [`spillway_runtime::run`]: the first rank that fails ends the job with its error.
///
/// # Example
/// ```
/// use spillway_bsp::{exec, Options};
/// use spillway_runtime::Config;
///
/// // Each rank puts its pid into the next rank's slot.
/// let got = exec(&Config::new(4).nodes(2), Options::default(), |bsp| {
///     bsp.resize_memory_register(1)?;
///     bsp.resize_message_queue(1)?;
///     bsp.sync()?;
///     let slot = bsp.register_global(vec![0u64; 1])?;
///     bsp.sync()?;
///     let next = (bsp.pid() + 1) % bsp.nprocs();
///     bsp.put_from(&[bsp.pid() as u64], next, slot, 0)?;
///     bsp.sync()?;
///     Ok(bsp.slice(slot)[0])
/// })
/// .unwrap();
/// assert_eq!(got, vec![3, 0, 1, 2]);
/// ```
#[track_caller]
pub fn exec<R, F>(config: &Config, options: Options, f: F) -> std::result::Result<Vec<R>, JobError>
where
    F: Fn(&mut Bsp<'_>) -> Result<R> + Sync,
    R: Send,
{
    let location = Location::caller();
    spillway_runtime::run(config, |rank| {
        let world = Comm::world(rank);
        hook_at(&world, options, location, |bsp| f(bsp))
    })
}

/// Runs `f` with a BSP context on the members of `comm`, a communicator of a running job
/// (LPF's `lpf_hook`): every member calls it. `f` may return any error type that a BSP
/// [`Error`] converts into (an application's own error type). Over the MPI backend this is how the processes
/// of an MPI program become a BSP machine (see `spillway::mpi::hook`).
///
/// # Semantics
/// As [`exec`]; the context communicates in a private duplicate of `comm`.
///
/// # Cost
/// An allgather and a split of `comm`, and a node barrier at the end.
///
/// # Errors
/// Fatal errors of `f`'s syncs, or [`Error::Runtime`] when the job ends (converted into `f`'s
/// error type), and `f`'s own errors.
#[track_caller]
pub fn hook<'r, R, E: From<Error>>(
    comm: &Comm<'r>,
    options: Options,
    f: impl FnOnce(&mut Bsp<'r>) -> std::result::Result<R, E>,
) -> std::result::Result<R, E> {
    hook_at(comm, options, Location::caller(), f)
}

fn hook_at<'r, R, E: From<Error>>(
    comm: &Comm<'r>,
    options: Options,
    location: &'static Location<'static>,
    f: impl FnOnce(&mut Bsp<'r>) -> std::result::Result<R, E>,
) -> std::result::Result<R, E> {
    let mut ctx = Bsp::new(comm, options)?;
    let out = f(&mut ctx)?;
    ctx.finish(location)?;
    ctx.close()?;
    Ok(out)
}

impl<'r> Bsp<'r> {
    fn new(comm: &Comm<'r>, options: Options) -> Result<Bsp<'r>> {
        let comm = comm.dup();
        let rank = comm.runtime();
        let node_comm = comm
            .split(Some(comm.node_index() as u32), comm.rank() as i64)?
            .expect("every rank has a colour");
        let info = comm.allgather(&[comm.node_index() as u64, node_comm.rank() as u64])?;
        let mine = comm.node_index() as u64;
        let local_index: Vec<Option<usize>> = info
            .chunks_exact(2)
            .map(|c| (c[0] == mine).then_some(c[1] as usize))
            .collect();
        let mut node_members = vec![0; node_comm.size()];
        for (q, l) in local_index.iter().enumerate() {
            if let Some(l) = l {
                node_members[*l] = q;
            }
        }
        let node_of: Vec<usize> = info.chunks_exact(2).map(|c| c[0] as usize).collect();
        let mut node_ranks: Vec<Vec<usize>> = vec![Vec::new(); comm.node_count()];
        for (q, c) in info.chunks_exact(2).enumerate() {
            let members = &mut node_ranks[c[0] as usize];
            let l = c[1] as usize;
            if members.len() <= l {
                members.resize(l + 1, usize::MAX);
            }
            members[l] = q;
        }
        let key = node_key(&comm);
        let local = node_comm.size();
        let node: Arc<NodeState> = rank
            .node_table()
            .get_or_insert_with(key, || NodeState::new(local));
        Ok(Bsp {
            comm,
            node_comm,
            node,
            local_index,
            node_members,
            node_of,
            node_ranks,
            options,
            superstep: 0,
            globals: Vec::new(),
            locals: Vec::new(),
            free_globals: Vec::new(),
            free_locals: Vec::new(),
            generation: 0,
            global_ops: 0,
            registered: 0,
            reg_capacity: 0,
            reg_pending: None,
            queue_capacity: 0,
            queue_pending: None,
            puts: Vec::new(),
            gets: Vec::new(),
            buffer: Vec::new(),
            machine: std::cell::OnceCell::new(),
            spare: None,
            scratch: Scratch::default(),
        })
    }

    fn close(self) -> Result<()> {
        self.node_comm.barrier()?;
        if self.node_comm.rank() == 0 {
            self.comm
                .runtime()
                .node_table()
                .remove(node_key(&self.comm));
        }
        Ok(())
    }

    /// Runs `f` with a pristine BSP context on the same ranks (LPF's `lpf_rehook`): for a
    /// library that runs BSP code inside a BSP program without seeing its slots or requests.
    /// Every rank calls it, between syncs of this context.
    ///
    /// # Cost
    /// As [`hook`].
    ///
    /// # Errors
    /// As [`hook`].
    #[track_caller]
    pub fn rehook<R>(
        &self,
        options: Options,
        f: impl FnOnce(&mut Bsp<'r>) -> Result<R>,
    ) -> Result<R> {
        hook_at(&self.comm, options, Location::caller(), f)
    }
}

fn node_key(comm: &Comm<'_>) -> u64 {
    spillway_comm::splitmix::mix64(comm.context_id() ^ 0x4253_504e_4f44_4531) // "BSPNODE1"
}
