//! The BSP context of one rank ([`Bsp`]): its state, the requests of the superstep, the
//! capacities in force. Registration is in `register.rs`, put and get in `rma.rs`, sync in
//! `sync/`.

use std::panic::Location;
use std::sync::Arc;

use spillway_comm::Comm;

use crate::error::{Error, Result};
use crate::machine::Machine;
use crate::memory::Area;
use crate::sync::published::NodeState;
use crate::sync::published::Published;
use crate::sync::scratch::Scratch;

/// Options of a BSP context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Checked mode: every sync first verifies that all ranks are at the same superstep with
    /// the same global registrations (one extra allgather per sync), and local calls verify
    /// their arguments at once. On by default in debug builds.
    pub checked: bool,
}

// Derivable only in release builds, where `debug_assertions` is off.
#[allow(clippy::derivable_impls)]
impl Default for Options {
    fn default() -> Options {
        Options {
            checked: cfg!(debug_assertions),
        }
    }
}

impl Options {
    /// Options with checked mode on or off.
    pub fn checked(checked: bool) -> Options {
        Options { checked }
    }
}

/// Where the source of a put is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PutSource {
    /// A registered area of this rank: (slot index, global?, byte offset).
    Slot {
        index: u32,
        global: bool,
        off: usize,
    },
    /// The context's buffer of copied sources, at a byte offset.
    Buffer(usize),
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct PutReq {
    pub(crate) src: PutSource,
    pub(crate) dst_pid: usize,
    pub(crate) dst_slot: u32,
    pub(crate) dst_off: usize,
    pub(crate) len: usize,
    pub(crate) loc: &'static Location<'static>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct GetReq {
    pub(crate) src_pid: usize,
    pub(crate) src_slot: u32,
    pub(crate) src_off: usize,
    /// Destination: (slot index, global?, byte offset) on this rank.
    pub(crate) dst_index: u32,
    pub(crate) dst_global: bool,
    pub(crate) dst_off: usize,
    pub(crate) len: usize,
    pub(crate) loc: &'static Location<'static>,
}

/// The BSP context of one rank (LPF's `lpf_t`): registered memory, the requests of the
/// current superstep, and the capacities in force.
///
/// Made by [`exec`](crate::exec), [`hook`](crate::hook) or [`Bsp::rehook`]; lives on its
/// rank's thread.
pub struct Bsp<'r> {
    pub(crate) comm: Comm<'r>,
    pub(crate) node_comm: Comm<'r>,
    pub(crate) node: Arc<NodeState>,
    /// For every rank of the context: (node-local index, or `None` when on another node).
    pub(crate) local_index: Vec<Option<usize>>,
    /// Context rank of every node-local index.
    pub(crate) node_members: Vec<usize>,
    /// Node index of every rank of the context.
    pub(crate) node_of: Vec<usize>,
    /// Context ranks of every node, in node-local order.
    pub(crate) node_ranks: Vec<Vec<usize>>,
    pub(crate) options: Options,
    pub(crate) superstep: u64,
    pub(crate) globals: Vec<Option<Area>>,
    pub(crate) locals: Vec<Option<Area>>,
    pub(crate) free_globals: Vec<u32>,
    pub(crate) free_locals: Vec<u32>,
    pub(crate) generation: u32,
    /// Global registrations and deregistrations so far (compared across ranks when checked).
    pub(crate) global_ops: u64,
    pub(crate) registered: usize,
    pub(crate) reg_capacity: usize,
    pub(crate) reg_pending: Option<usize>,
    pub(crate) queue_capacity: usize,
    pub(crate) queue_pending: Option<usize>,
    pub(crate) puts: Vec<PutReq>,
    pub(crate) gets: Vec<GetReq>,
    pub(crate) buffer: Vec<u8>,
    /// The machine parameters, read from the probe cache at the first `probe`.
    pub(crate) machine: std::cell::OnceCell<Machine>,
    /// Last sync's publication, reused by the next.
    pub(crate) spare: Option<Box<Published>>,
    /// Lists reused from sync to sync.
    pub(crate) scratch: Scratch,
}

impl<'r> Bsp<'r> {
    /// This rank's number in the context, `0..nprocs()` (LPF's `pid`).
    pub fn pid(&self) -> usize {
        self.comm.rank()
    }

    /// Number of ranks in the context (LPF's `nprocs`).
    pub fn nprocs(&self) -> usize {
        self.comm.size()
    }

    /// The communicator the context runs on (a private duplicate of the one it was made
    /// from); for mixing BSP supersteps with collectives of `spillway-comm` between syncs.
    pub fn comm(&self) -> &Comm<'r> {
        &self.comm
    }

    /// The options in force.
    pub fn options(&self) -> Options {
        self.options
    }

    /// Number of syncs completed so far.
    pub fn superstep(&self) -> u64 {
        self.superstep
    }

    /// Reserves room for `slots` registered slots (LPF's `lpf_resize_memory_register`),
    /// effective after the next sync; until then the old capacity stays in force.
    ///
    /// # Cost
    /// Local, `O(slots)` memory.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the tables cannot grow (nothing changes).
    #[track_caller]
    pub fn resize_memory_register(&mut self, slots: usize) -> Result<()> {
        let location = Location::caller();
        let grow = |t: &mut Vec<Option<Area>>| {
            t.try_reserve(slots.saturating_sub(t.len()))
                .map_err(|_| Error::OutOfMemory {
                    bytes: slots.saturating_mul(std::mem::size_of::<Option<Area>>()),
                    location,
                })
        };
        grow(&mut self.globals)?;
        grow(&mut self.locals)?;
        self.reg_pending = Some(slots);
        Ok(())
    }

    /// Reserves room for `requests` puts and gets per superstep issued by this rank (LPF's
    /// `lpf_resize_message_queue`), effective after the next sync.
    ///
    /// # Cost
    /// Local, `O(requests)` memory.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the queues cannot grow (nothing changes).
    #[track_caller]
    pub fn resize_message_queue(&mut self, requests: usize) -> Result<()> {
        let location = Location::caller();
        let oom = |bytes: usize| Error::OutOfMemory { bytes, location };
        self.puts
            .try_reserve(requests.saturating_sub(self.puts.len()))
            .map_err(|_| oom(requests.saturating_mul(std::mem::size_of::<PutReq>())))?;
        self.gets
            .try_reserve(requests.saturating_sub(self.gets.len()))
            .map_err(|_| oom(requests.saturating_mul(std::mem::size_of::<GetReq>())))?;
        self.queue_pending = Some(requests);
        Ok(())
    }

    /// The area of a slot of this rank, by raw parts.
    pub(crate) fn area(&self, index: u32, global: bool) -> &Area {
        let table = if global { &self.globals } else { &self.locals };
        table[index as usize]
            .as_ref()
            .expect("requests name registered slots")
    }

    /// The published (global) area table: address and bytes per global slot index, `(0, 0)`
    /// for slots not usable remotely in this superstep.
    pub(crate) fn global_table(&self, table: &mut Vec<(usize, usize)>) {
        table.clear();
        table.extend(self.globals.iter().map(|a| match a {
            Some(a) if a.active_from <= self.superstep => (a.addr(), a.bytes),
            _ => (0, 0),
        }));
    }
}
