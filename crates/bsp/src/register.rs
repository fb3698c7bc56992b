//! Registering memory in a BSP context (LPF's `lpf_register_global`, `_local`,
//! `lpf_deregister`) and reading registered memory between syncs.

use std::panic::Location;

use bytemuck::Pod;

use crate::context::{Bsp, PutSource};
use crate::error::{Capacity, Error, Misuse, Result};
use crate::memory::{Area, Memory, Slot, GENERATION_MASK};

impl<'r> Bsp<'r> {
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
    pub(crate) fn area_index<T: Pod>(&self, slot: Slot<T>) -> Result<&Area> {
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
}
