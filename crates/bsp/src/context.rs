//! The BSP context of one rank and its local primitives: registration, put, get, resizing.

use std::panic::Location;
use std::sync::Arc;

use bytemuck::Pod;
use spillway_comm::Comm;

use crate::error::{Capacity, Error, Misuse, Result};
use crate::memory::{Area, Memory, Slot, GENERATION_MASK};
use crate::probe::Machine;
use crate::sync::NodeState;

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

    /// The machine parameters (LPF's `lpf_probe`): `p`, `g` in seconds per byte and `l` in
    /// seconds per sync, as measured by `spillway probe` for this machine and layout (cached),
    /// or an estimate when nothing was measured yet.
    ///
    /// # Cost
    /// Local, no communication: the cache is read at the first call.
    pub fn probe(&self) -> Machine {
        self.machine
            .get_or_init(|| crate::probe::cached(self.comm.runtime(), self.nprocs()))
            .clone()
    }

    fn take_slot_index(&mut self, global: bool) -> u32 {
        let (free, table) = if global {
            (&mut self.free_globals, &mut self.globals)
        } else {
            (&mut self.free_locals, &mut self.locals)
        };
        match free.pop() {
            Some(i) => i,
            None => {
                table.push(None);
                (table.len() - 1) as u32
            }
        }
    }

    #[track_caller]
    fn register<T: Pod>(&mut self, memory: Memory<T>, global: bool) -> Result<Slot<T>> {
        self.register_area(global, |active_from, generation| {
            Area::new(memory, active_from, generation)
        })
    }

    #[track_caller]
    fn register_area<T: Pod>(
        &mut self,
        global: bool,
        make: impl FnOnce(u64, u32) -> Area,
    ) -> Result<Slot<T>> {
        let location = Location::caller();
        if self.registered >= self.reg_capacity {
            return Err(Error::CapacityExceeded {
                what: Capacity::MemoryRegister,
                capacity: self.reg_capacity,
                location,
            });
        }
        let index = self.take_slot_index(global);
        self.generation = self.generation.wrapping_add(1) & GENERATION_MASK;
        let generation = self.generation;
        // A global registration may be named by other ranks from the next superstep on.
        let active_from = if global {
            self.superstep + 1
        } else {
            self.superstep
        };
        let area = make(active_from, generation);
        let table = if global {
            self.global_ops += 1;
            &mut self.globals
        } else {
            &mut self.locals
        };
        table[index as usize] = Some(area);
        self.registered += 1;
        Ok(Slot::new(index, generation, global))
    }

    /// Registers `bytes` bytes at `ptr`, memory the caller keeps owning, as a global slot of
    /// bytes (LPF's `lpf_register_global` exactly: for a C interface, or memory that cannot
    /// move into the context). As [`register_global`](Self::register_global) otherwise;
    /// storage-backed memory (the pages of an [`SbVec`](spillway_runtime::SbVec) of this
    /// rank) is recognised and read in place by other ranks.
    ///
    /// # Safety
    /// Until [`deregister_raw`](Self::deregister_raw) (or the end of the context), `ptr` must
    /// be valid for reads and writes of `bytes` bytes, and nothing else may read or write those
    /// bytes while this rank is inside [`sync`](Self::sync) (other ranks' syncs read and write
    /// them then). `bytes == 0` allows any `ptr`.
    ///
    /// # Errors
    /// As [`register_global`](Self::register_global).
    #[track_caller]
    pub unsafe fn register_global_raw(&mut self, ptr: *mut u8, bytes: usize) -> Result<Slot<u8>> {
        self.register_raw(ptr, bytes, true)
    }

    /// Registers `bytes` bytes at `ptr` as a local slot of bytes (LPF's `lpf_register_local`).
    ///
    /// # Safety
    /// As [`register_global_raw`](Self::register_global_raw).
    ///
    /// # Errors
    /// As [`register_local`](Self::register_local).
    #[track_caller]
    pub unsafe fn register_local_raw(&mut self, ptr: *mut u8, bytes: usize) -> Result<Slot<u8>> {
        self.register_raw(ptr, bytes, false)
    }

    #[track_caller]
    fn register_raw(&mut self, ptr: *mut u8, bytes: usize, global: bool) -> Result<Slot<u8>> {
        let storage = bytes > 0 && {
            // SAFETY: the caller guarantees `ptr` is valid for `bytes` bytes; the slice only
            // tells the runtime which address range to look up, and is dropped at once.
            let range = unsafe { std::slice::from_raw_parts(ptr.cast_const(), bytes) };
            self.comm.runtime().is_storage_backed(range)
        };
        self.register_area(global, |active_from, generation| {
            Area::raw(ptr, bytes, storage, active_from, generation)
        })
    }

    /// Registers `memory` as a global slot: every rank registers its corresponding area, in
    /// the same order (LPF's `lpf_register_global`).
    ///
    /// # Semantics
    /// The context owns the memory until [`deregister`](Self::deregister) returns it; read and
    /// write it between syncs with [`slice`](Self::slice) and [`slice_mut`](Self::slice_mut).
    /// This rank may use the slot locally at once; other ranks may name it in puts and gets
    /// from the next superstep on (after the next sync).
    ///
    /// # Cost
    /// Local, `O(1)`; no communication.
    ///
    /// # Errors
    /// [`Error::CapacityExceeded`] when the memory register is full (nothing is registered and
    /// the memory is dropped: register again after resizing).
    #[track_caller]
    pub fn register_global<T: Pod>(&mut self, memory: impl Into<Memory<T>>) -> Result<Slot<T>> {
        self.register(memory.into(), true)
    }

    /// Registers `memory` as a local slot, usable only by this rank as the source of puts and
    /// the destination of gets (LPF's `lpf_register_local`); effective at once.
    ///
    /// # Cost
    /// Local, `O(1)`.
    ///
    /// # Errors
    /// [`Error::CapacityExceeded`] when the memory register is full.
    #[track_caller]
    pub fn register_local<T: Pod>(&mut self, memory: impl Into<Memory<T>>) -> Result<Slot<T>> {
        self.register(memory.into(), false)
    }

    #[track_caller]
    fn area_index<T: Pod>(&self, slot: Slot<T>) -> Result<&Area> {
        let table = if slot.global {
            &self.globals
        } else {
            &self.locals
        };
        match table.get(slot.index as usize).and_then(Option::as_ref) {
            Some(a) if a.generation == slot.generation && a.is::<T>() => Ok(a),
            Some(a) if a.generation == slot.generation => Err(Error::misuse(
                Misuse::UnknownSlot,
                format!(
                    "{slot:?} holds {}, not {}",
                    a.type_name,
                    std::any::type_name::<T>()
                ),
                Some(Location::caller()),
            )),
            _ => Err(Error::misuse(
                Misuse::UnknownSlot,
                format!("{slot:?} is not registered (never, or deregistered)"),
                Some(Location::caller()),
            )),
        }
    }

    /// Deregisters `slot` and hands its memory back (LPF's `lpf_deregister`); a global slot
    /// is deregistered by every rank in the same order. Effective at once.
    ///
    /// # Cost
    /// Local, `O(requests of the current superstep)`.
    ///
    /// # Errors
    /// [`Misuse::UnknownSlot`] for a slot not registered; [`Misuse::PendingRequests`] when a
    /// put or get of the current superstep uses it (the slot stays registered).
    #[track_caller]
    pub fn deregister<T: Pod>(&mut self, slot: Slot<T>) -> Result<Memory<T>> {
        if self.area_index(slot)?.is_raw() {
            return Err(Error::misuse(
                Misuse::UnknownSlot,
                format!("{slot:?} was registered by address: use deregister_raw"),
                Some(Location::caller()),
            ));
        }
        Ok(self.deregister_area(slot)?.into_memory())
    }

    /// Deregisters a slot registered by address
    /// ([`register_global_raw`](Self::register_global_raw),
    /// [`register_local_raw`](Self::register_local_raw)); the memory is the caller's again.
    ///
    /// # Errors
    /// As [`deregister`](Self::deregister).
    #[track_caller]
    pub fn deregister_raw(&mut self, slot: Slot<u8>) -> Result<()> {
        if !self.area_index(slot)?.is_raw() {
            return Err(Error::misuse(
                Misuse::UnknownSlot,
                format!("{slot:?} owns its memory: use deregister"),
                Some(Location::caller()),
            ));
        }
        self.deregister_area(slot).map(drop)
    }

    #[track_caller]
    fn deregister_area<T: Pod>(&mut self, slot: Slot<T>) -> Result<Area> {
        let used_locally = self.puts.iter().any(|p| match p.src {
            PutSource::Slot { index, global, .. } => index == slot.index && global == slot.global,
            PutSource::Buffer(_) => false,
        }) || self
            .gets
            .iter()
            .any(|g| g.dst_index == slot.index && g.dst_global == slot.global);
        if used_locally {
            return Err(Error::misuse(
                Misuse::PendingRequests,
                format!("{slot:?} is used by a put or get of this superstep"),
                Some(Location::caller()),
            ));
        }
        let table = if slot.global {
            self.global_ops += 1;
            self.free_globals.push(slot.index);
            &mut self.globals
        } else {
            self.free_locals.push(slot.index);
            &mut self.locals
        };
        let area = table[slot.index as usize].take().expect("checked above");
        self.registered -= 1;
        Ok(area)
    }

    /// The contents of a slot, for reading between syncs.
    ///
    /// # Panics
    /// For a slot not registered by this context (or of another element type).
    #[track_caller]
    pub fn slice<T: Pod>(&self, slot: Slot<T>) -> &[T] {
        let area = self.area_index(slot).unwrap_or_else(|e| panic!("{e}"));
        let n = area.bytes / std::mem::size_of::<T>().max(1);
        if n == 0 {
            return &[];
        }
        // SAFETY: `base` points to `n` initialised elements of `T` owned by the area (it was
        // taken from the registered `Vec<T>`/`SbVec<T>`, which neither moves nor shrinks while
        // registered). Other ranks access this memory only inside `sync`, which takes
        // `&mut self`, so no write can happen while the returned borrow of `self` lives.
        // Storage-backed memory is readable whether loaded or not (a shared file mapping).
        unsafe { std::slice::from_raw_parts(area.base.cast::<T>(), n) }
    }

    /// The contents of a slot, for writing between syncs.
    ///
    /// # Panics
    /// For a slot not registered by this context (or of another element type).
    #[track_caller]
    pub fn slice_mut<T: Pod>(&mut self, slot: Slot<T>) -> &mut [T] {
        self.area_index(slot).unwrap_or_else(|e| panic!("{e}"));
        let table = if slot.global {
            &mut self.globals
        } else {
            &mut self.locals
        };
        let area = table[slot.index as usize].as_mut().expect("checked above");
        area.touch();
        let n = area.bytes / std::mem::size_of::<T>().max(1);
        if n == 0 {
            return &mut [];
        }
        // SAFETY: as in `slice`; `&mut self` makes this the only access to the area until the
        // borrow ends (sync, the only place other ranks touch it, needs `&mut self` too).
        unsafe { std::slice::from_raw_parts_mut(area.base.cast::<T>(), n) }
    }

    #[track_caller]
    fn check_pid(&self, pid: usize) -> Result<()> {
        if pid >= self.nprocs() {
            return Err(Error::misuse(
                Misuse::InvalidPid,
                format!("pid {pid} outside 0..{}", self.nprocs()),
                Some(Location::caller()),
            ));
        }
        Ok(())
    }

    #[track_caller]
    fn check_queue(&self) -> Result<()> {
        if self.puts.len() + self.gets.len() >= self.queue_capacity {
            return Err(Error::CapacityExceeded {
                what: Capacity::MessageQueue,
                capacity: self.queue_capacity,
                location: Location::caller(),
            });
        }
        Ok(())
    }

    /// Bounds of `len` elements at `off` in a local area, in bytes.
    #[track_caller]
    fn local_range<T: Pod>(&self, slot: Slot<T>, off: usize, len: usize) -> Result<usize> {
        let area = self.area_index(slot)?;
        let size = std::mem::size_of::<T>();
        let end = off.checked_add(len).and_then(|e| e.checked_mul(size));
        match end {
            Some(e) if e <= area.bytes => Ok(off * size),
            _ => Err(Error::misuse(
                Misuse::OutOfBounds,
                format!(
                    "{len} elements at offset {off} of {slot:?}, which holds {}",
                    area.bytes / size.max(1)
                ),
                Some(Location::caller()),
            )),
        }
    }

    /// Remote slots must be global and registered before the last sync (checked locally: the
    /// corresponding area on the other rank was registered in the same order).
    #[track_caller]
    fn check_remote_slot<T: Pod>(&self, slot: Slot<T>) -> Result<()> {
        let area = self.area_index(slot)?;
        if !slot.global || area.active_from > self.superstep {
            return Err(Error::misuse(
                Misuse::UnknownSlot,
                format!(
                    "{slot:?} cannot be named on another rank {}",
                    if slot.global {
                        "before the sync after its registration"
                    } else {
                        "(it is local)"
                    }
                ),
                Some(Location::caller()),
            ));
        }
        Ok(())
    }

    /// Copies `len` elements from offset `src_off` of this rank's `src` to offset `dst_off`
    /// of rank `dst_pid`'s area of the global slot `dst` (LPF's `lpf_put`).
    ///
    /// # Semantics
    /// Nothing moves now: the source is read and the destination written during the next
    /// [`sync`](Self::sync), so the source must hold the data to send at the sync. Writes of
    /// several puts (and gets) to the same place land in some sequential order, element by
    /// element whole (CRCW); reading and writing the same place in one superstep is illegal.
    /// The destination's bounds are checked at the sync, the source's now.
    ///
    /// # Cost
    /// `O(1)` now; at the sync it adds `len * size_of::<T>()` bytes to this rank's outgoing and
    /// the destination's incoming h-relation.
    ///
    /// # Errors
    /// [`Error::CapacityExceeded`] when the message queue is full; [`Misuse`] for a source out
    /// of bounds, an unknown slot or an invalid pid. On error nothing is queued.
    #[track_caller]
    pub fn put<T: Pod>(
        &mut self,
        src: Slot<T>,
        src_off: usize,
        dst_pid: usize,
        dst: Slot<T>,
        dst_off: usize,
        len: usize,
    ) -> Result<()> {
        self.check_queue()?;
        self.check_pid(dst_pid)?;
        let off = self.local_range(src, src_off, len)?;
        self.check_remote_slot(dst)?;
        let size = std::mem::size_of::<T>();
        self.puts.push(PutReq {
            src: PutSource::Slot {
                index: src.index,
                global: src.global,
                off,
            },
            dst_pid,
            dst_slot: dst.index,
            dst_off: dst_off.saturating_mul(size),
            len: len * size,
            loc: Location::caller(),
        });
        Ok(())
    }

    /// Like [`put`](Self::put) from unregistered memory: `data` is copied into the context
    /// now (BSPlib's buffered `bsp_put`), so the caller may reuse it at once.
    ///
    /// # Cost
    /// A local copy of `data` now, and as [`put`](Self::put) at the sync.
    ///
    /// # Errors
    /// As [`put`](Self::put), and [`Error::OutOfMemory`] when the copy cannot be made.
    #[track_caller]
    pub fn put_from<T: Pod>(
        &mut self,
        data: &[T],
        dst_pid: usize,
        dst: Slot<T>,
        dst_off: usize,
    ) -> Result<()> {
        self.check_queue()?;
        self.check_pid(dst_pid)?;
        self.check_remote_slot(dst)?;
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let at = self.buffer.len();
        if self.buffer.try_reserve(bytes.len()).is_err() {
            return Err(Error::OutOfMemory {
                bytes: bytes.len(),
                location: Location::caller(),
            });
        }
        self.buffer.extend_from_slice(bytes);
        self.puts.push(PutReq {
            src: PutSource::Buffer(at),
            dst_pid,
            dst_slot: dst.index,
            dst_off: dst_off.saturating_mul(std::mem::size_of::<T>()),
            len: bytes.len(),
            loc: Location::caller(),
        });
        Ok(())
    }

    /// Copies `len` elements from offset `src_off` of rank `src_pid`'s area of the global
    /// slot `src` to offset `dst_off` of this rank's `dst` (LPF's `lpf_get`).
    ///
    /// # Semantics
    /// Nothing moves now: the remote area is read and `dst` written during the next
    /// [`sync`](Self::sync), with the same rules as [`put`](Self::put).
    ///
    /// # Cost
    /// `O(1)` now; at the sync `len * size_of::<T>()` bytes in the source's outgoing and this
    /// rank's incoming h-relation.
    ///
    /// # Errors
    /// As [`put`](Self::put): the destination's bounds are checked now, the source's at the
    /// sync.
    #[track_caller]
    pub fn get<T: Pod>(
        &mut self,
        src_pid: usize,
        src: Slot<T>,
        src_off: usize,
        dst: Slot<T>,
        dst_off: usize,
        len: usize,
    ) -> Result<()> {
        self.check_queue()?;
        self.check_pid(src_pid)?;
        self.check_remote_slot(src)?;
        let off = self.local_range(dst, dst_off, len)?;
        let size = std::mem::size_of::<T>();
        self.gets.push(GetReq {
            src_pid,
            src_slot: src.index,
            src_off: src_off.saturating_mul(size),
            dst_index: dst.index,
            dst_global: dst.global,
            dst_off: off,
            len: len * size,
            loc: Location::caller(),
        });
        Ok(())
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
    pub(crate) fn global_table(&self) -> Vec<(usize, usize)> {
        self.globals
            .iter()
            .map(|a| match a {
                Some(a) if a.active_from <= self.superstep => (a.addr(), a.bytes),
                _ => (0, 0),
            })
            .collect()
    }
}
