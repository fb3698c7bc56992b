//! Registered memory: what a slot owns, and the handles to it.

use std::any::Any;
use std::marker::PhantomData;

use bytemuck::Pod;
use spillway_runtime::SbVec;

/// Memory handed to a BSP context for registration: ordinary heap memory, or a storage-backed
/// array ([`SbVec`]) that the node's memory policy may keep out of core between accesses.
///
/// The context owns registered memory until [`deregister`](crate::Bsp::deregister) hands it
/// back, so no reference to it can be alive while other ranks read or write it at a sync.
#[derive(Debug)]
pub enum Memory<T: Pod> {
    /// Heap memory.
    Heap(Vec<T>),
    /// Storage-backed memory.
    Storage(SbVec<T>),
}

impl<T: Pod> From<Vec<T>> for Memory<T> {
    fn from(v: Vec<T>) -> Memory<T> {
        Memory::Heap(v)
    }
}

impl<T: Pod> From<SbVec<T>> for Memory<T> {
    fn from(v: SbVec<T>) -> Memory<T> {
        Memory::Storage(v)
    }
}

impl<T: Pod> Memory<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Memory::Heap(v) => v.len(),
            Memory::Storage(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The contents (loads storage-backed memory).
    pub fn as_slice(&self) -> &[T] {
        match self {
            Memory::Heap(v) => v,
            Memory::Storage(v) => v.as_slice(),
        }
    }

    /// The contents, for writing (loads storage-backed memory).
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Memory::Heap(v) => v,
            Memory::Storage(v) => v.as_mut_slice(),
        }
    }

    /// The contents as a vector (copies storage-backed memory to the heap).
    pub fn into_vec(self) -> Vec<T> {
        match self {
            Memory::Heap(v) => v,
            Memory::Storage(v) => v.as_slice().to_vec(),
        }
    }

    /// Loads the memory for writing and returns its start (stable while the memory is owned
    /// by a context: neither a `Vec` nor an `SbVec` moves its elements unless it grows).
    fn base_for_write(&mut self) -> *mut u8 {
        match self {
            Memory::Heap(v) => v.as_mut_ptr().cast(),
            Memory::Storage(v) => v.as_mut_slice().as_mut_ptr().cast(),
        }
    }
}

/// A handle to registered memory holding elements of type `T` (LPF's `lpf_memslot_t`).
///
/// Global slots are registered by every rank in the same order, so slot `s` names the
/// corresponding area on every rank; local slots name memory of the registering rank only
/// (the source of a put or the destination of a get). Offsets and lengths in puts and gets
/// count elements of `T`.
pub struct Slot<T> {
    pub(crate) index: u32,
    pub(crate) generation: u32,
    pub(crate) global: bool,
    _t: PhantomData<fn() -> T>,
}

impl<T> Slot<T> {
    pub(crate) fn new(index: u32, generation: u32, global: bool) -> Slot<T> {
        Slot {
            index,
            generation,
            global,
            _t: PhantomData,
        }
    }

    /// Whether this is a global slot.
    pub fn is_global(&self) -> bool {
        self.global
    }

    /// The slot as one integer (for handles that cross a C interface, such as LPF's
    /// `lpf_memslot_t`): the index in the low 32 bits, the generation above, the global flag in
    /// the top bit. Never `u64::MAX`.
    pub fn to_bits(self) -> u64 {
        (u64::from(self.global) << 63) | (u64::from(self.generation) << 32) | u64::from(self.index)
    }

    /// The slot of [`to_bits`](Self::to_bits). Any integer is accepted: one that names no
    /// registered slot is reported as [`Misuse::UnknownSlot`](crate::Misuse::UnknownSlot) by
    /// the call that uses it.
    pub fn from_bits(bits: u64) -> Slot<T> {
        Slot::new(
            bits as u32,
            ((bits >> 32) as u32) & GENERATION_MASK,
            bits >> 63 == 1,
        )
    }
}

/// Generations of slots fit in 31 bits (see [`Slot::to_bits`]).
pub(crate) const GENERATION_MASK: u32 = 0x7fff_ffff;

/// Memory registered by address ([`Bsp::register_global_raw`](crate::Bsp::register_global_raw)):
/// owned by the caller, not by the context.
struct Raw;

impl<T> Clone for Slot<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Slot<T> {}

impl<T> PartialEq for Slot<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.index, self.generation, self.global) == (o.index, o.generation, o.global)
    }
}

impl<T> Eq for Slot<T> {}

impl<T> std::fmt::Debug for Slot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.global { "global" } else { "local" };
        write!(f, "Slot({kind} {}#{})", self.index, self.generation)
    }
}

/// A registered area with its element type erased.
pub(crate) struct Area {
    /// The owned memory: a `Memory<T>`.
    owner: Box<dyn Any>,
    /// Start of the elements. All accesses while the area is registered go through this
    /// pointer (never through `owner`), so that slices handed to the user and copies done at
    /// sync derive from one pointer.
    pub(crate) base: *mut u8,
    pub(crate) bytes: usize,
    pub(crate) type_name: &'static str,
    /// Loads storage-backed memory before the owner writes it (a no-op for heap memory).
    touch: fn(&mut dyn Any),
    /// Whether the area is storage-backed.
    pub(crate) storage: bool,
    /// Whether the area is memory registered by address (elements are bytes).
    raw: bool,
    /// First superstep in which other ranks may name the area (global slots).
    pub(crate) active_from: u64,
    pub(crate) generation: u32,
}

fn touch_memory<T: Pod>(owner: &mut dyn Any) {
    if let Some(Memory::Storage(v)) = owner.downcast_mut::<Memory<T>>() {
        // Loading for writing; the pointer stays the one recorded at registration.
        let _ = v.as_mut_slice();
    }
}

impl Area {
    pub(crate) fn new<T: Pod>(mut memory: Memory<T>, active_from: u64, generation: u32) -> Area {
        let base = memory.base_for_write();
        let bytes = std::mem::size_of_val(memory.as_slice());
        let storage = matches!(memory, Memory::Storage(_));
        Area {
            owner: Box::new(memory),
            base,
            bytes,
            type_name: std::any::type_name::<T>(),
            touch: touch_memory::<T>,
            storage,
            raw: false,
            active_from,
            generation,
        }
    }

    /// An area of `bytes` bytes at `base`, owned by the caller (see `register_global_raw`).
    pub(crate) fn raw(
        base: *mut u8,
        bytes: usize,
        storage: bool,
        active_from: u64,
        generation: u32,
    ) -> Area {
        Area {
            owner: Box::new(Raw),
            base,
            bytes,
            type_name: "u8 (registered by address)",
            touch: |_| {},
            storage,
            raw: true,
            active_from,
            generation,
        }
    }

    /// Whether the area was registered by address.
    pub(crate) fn is_raw(&self) -> bool {
        self.raw
    }

    /// Loads the area for writing by its owner (storage-backed memory).
    pub(crate) fn touch(&mut self) {
        if self.storage {
            (self.touch)(&mut *self.owner);
        }
    }

    pub(crate) fn into_memory<T: Pod>(self) -> Memory<T> {
        *self
            .owner
            .downcast::<Memory<T>>()
            .expect("the slot's element type is checked before")
    }

    pub(crate) fn is<T: Pod>(&self) -> bool {
        if self.raw {
            std::any::TypeId::of::<T>() == std::any::TypeId::of::<u8>()
        } else {
            self.owner.is::<Memory<T>>()
        }
    }

    pub(crate) fn addr(&self) -> usize {
        self.base as usize
    }
}
