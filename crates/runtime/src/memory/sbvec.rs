//! [`SbVec`]: a growable array of plain data in storage-backed memory.

use std::marker::PhantomData;
use std::sync::Arc;

use bytemuck::Pod;

use super::region::{Owner, Region, PAGE};
use super::NodeMem;

enum Storage<T> {
    /// Below one page: ordinary heap memory (a mapping would waste a page and a memory map).
    Heap(Vec<T>),
    Mapped(Arc<Region>),
}

/// A growable array of plain data whose pages live in a spill file and are kept in memory only
/// as the node's memory policy allows (SBMA's storage-backed allocation). On a node without a
/// memory budget it is plain anonymous memory (huge pages when large) that is never unloaded.
///
/// # Semantics
/// Accessing the contents ([`as_slice`](Self::as_slice), [`as_mut_slice`](Self::as_mut_slice),
/// or through `Deref`) loads the allocation under the node budget; blocking calls may unload it
/// (see [`Policy`]). Unloading never changes the contents and never invalidates a slice. New
/// elements are zero. As in SBMA, allocations smaller than one page stay on the ordinary heap
/// (they are too small to be worth a mapping) and count as always resident.
///
/// # Errors
/// Creation and growth fail with an I/O error naming the spill directory when it cannot hold
/// the data.
pub struct SbVec<T: Pod> {
    storage: Storage<T>,
    len: usize,
    node: Arc<NodeMem>,
    owner: usize,
    _t: PhantomData<T>,
}

fn bytes_of<T>(len: usize) -> Result<usize, crate::Error> {
    len.checked_mul(std::mem::size_of::<T>())
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or(crate::Error::InvalidArgument(
            "storage-backed array too large",
        ))
}

impl<T: Pod> SbVec<T> {
    /// An empty array owned by `rank` with room for `capacity` elements.
    ///
    /// # Errors
    /// An I/O error when the spill directory cannot hold the allocation.
    pub fn with_capacity(rank: &crate::Rank, capacity: usize) -> Result<SbVec<T>, crate::Error> {
        let (node, local) = rank.node_memory();
        let bytes = bytes_of::<T>(capacity)?;
        let storage = if bytes < PAGE {
            Storage::Heap(Vec::with_capacity(capacity))
        } else {
            Storage::Mapped(Region::new(node, Owner::Rank(local), bytes)?)
        };
        Ok(SbVec {
            storage,
            len: 0,
            node: Arc::clone(node),
            owner: local,
            _t: PhantomData,
        })
    }

    /// A zero-filled array of `len` elements owned by `rank`.
    ///
    /// # Errors
    /// An I/O error when the spill directory cannot hold the allocation.
    pub fn zeroed(rank: &crate::Rank, len: usize) -> Result<SbVec<T>, crate::Error> {
        let mut v = SbVec::with_capacity(rank, len)?;
        match &mut v.storage {
            Storage::Heap(h) => h.resize(len, T::zeroed()),
            Storage::Mapped(_) => {}
        }
        v.set_len(len);
        Ok(v)
    }

    /// A copy of `data` owned by `rank`.
    ///
    /// # Errors
    /// An I/O error when the spill directory cannot hold the allocation.
    pub fn from_slice(rank: &crate::Rank, data: &[T]) -> Result<SbVec<T>, crate::Error> {
        let mut v = SbVec::zeroed(rank, data.len())?;
        v.as_mut_slice().copy_from_slice(data);
        Ok(v)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements the array holds without growing.
    pub fn capacity(&self) -> usize {
        match &self.storage {
            Storage::Heap(h) => h.capacity(),
            Storage::Mapped(r) => r.map_len() / std::mem::size_of::<T>().max(1),
        }
    }

    /// The contents, loaded for reading.
    pub fn as_slice(&self) -> &[T] {
        match &self.storage {
            Storage::Heap(h) => h,
            Storage::Mapped(r) => {
                r.ensure_loaded(false);
                // SAFETY: the mapping is at least `len * size_of::<T>()` bytes, page-aligned
                // (so aligned for any Pod type up to 4096), zero-initialised or written through
                // typed slices, and every bit pattern is a valid `T: Pod`. The borrow of `self`
                // keeps the mapping alive and unmoved (it moves only in `reserve`, which takes
                // `&mut self`).
                unsafe { std::slice::from_raw_parts(r.ptr().cast::<T>(), self.len) }
            }
        }
    }

    /// The contents, loaded for writing.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match &mut self.storage {
            Storage::Heap(h) => h,
            Storage::Mapped(r) => {
                r.ensure_loaded(true);
                // SAFETY: as in `as_slice`; `&mut self` makes this the only live slice of the
                // mapping (eviction by another rank changes residency only, never contents).
                unsafe { std::slice::from_raw_parts_mut(r.ptr().cast::<T>(), self.len) }
            }
        }
    }

    /// Elements `range` for reading, loading only their pages (not the whole allocation, as
    /// [`as_slice`](Self::as_slice) does under the aggressive policies): for code that walks a
    /// large array in pieces, one piece per blocking call.
    ///
    /// # Panics
    /// If `range` is out of bounds.
    pub fn range(&self, range: std::ops::Range<usize>) -> &[T] {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "range {range:?} out of bounds of {} elements",
            self.len
        );
        match &self.storage {
            Storage::Heap(h) => &h[range],
            Storage::Mapped(r) => {
                let size = std::mem::size_of::<T>();
                r.ensure_range_loaded(range.start * size, range.len() * size, false);
                // SAFETY: as in `as_slice`, for a part of the elements.
                unsafe {
                    std::slice::from_raw_parts(r.ptr().cast::<T>().add(range.start), range.len())
                }
            }
        }
    }

    /// Elements `range` for writing, loading only their pages (see [`range`](Self::range)).
    ///
    /// # Panics
    /// If `range` is out of bounds.
    pub fn range_mut(&mut self, range: std::ops::Range<usize>) -> &mut [T] {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "range {range:?} out of bounds of {} elements",
            self.len
        );
        match &mut self.storage {
            Storage::Heap(h) => &mut h[range],
            Storage::Mapped(r) => {
                let size = std::mem::size_of::<T>();
                r.ensure_range_loaded(range.start * size, range.len() * size, true);
                // SAFETY: as in `as_mut_slice`, for a part of the elements.
                unsafe {
                    std::slice::from_raw_parts_mut(
                        r.ptr().cast::<T>().add(range.start),
                        range.len(),
                    )
                }
            }
        }
    }

    /// Makes room for at least `additional` more elements (growing geometrically).
    ///
    /// # Errors
    /// An I/O error when the spill directory cannot hold the larger allocation.
    pub fn reserve(&mut self, additional: usize) -> Result<(), crate::Error> {
        let needed = self
            .len
            .checked_add(additional)
            .ok_or(crate::Error::InvalidArgument(
                "storage-backed array too large",
            ))?;
        if needed <= self.capacity() {
            return Ok(());
        }
        let target = needed.max(self.capacity().saturating_mul(2)).max(8);
        let bytes = bytes_of::<T>(target)?;
        match &mut self.storage {
            Storage::Heap(h) if bytes < PAGE => {
                h.reserve(target - h.len());
            }
            Storage::Heap(h) => {
                let region = Region::new(&self.node, Owner::Rank(self.owner), bytes)?;
                region.ensure_loaded(true);
                // SAFETY: the new mapping holds at least `bytes >= len * size_of::<T>()` bytes.
                let dst =
                    unsafe { std::slice::from_raw_parts_mut(region.ptr().cast::<T>(), h.len()) };
                dst.copy_from_slice(h);
                self.storage = Storage::Mapped(region);
                self.set_len(self.len);
            }
            Storage::Mapped(r) => r.grow(bytes)?,
        }
        Ok(())
    }

    /// Appends `data`.
    ///
    /// # Errors
    /// An I/O error when the spill directory cannot hold the larger allocation.
    pub fn extend_from_slice(&mut self, data: &[T]) -> Result<(), crate::Error> {
        self.reserve(data.len())?;
        let start = self.len;
        self.set_len(start + data.len());
        if let Storage::Heap(h) = &mut self.storage {
            h.extend_from_slice(data);
        } else {
            self.range_mut(start..start + data.len())
                .copy_from_slice(data);
        }
        Ok(())
    }

    /// Appends one element.
    ///
    /// # Errors
    /// As [`extend_from_slice`](Self::extend_from_slice).
    pub fn push(&mut self, value: T) -> Result<(), crate::Error> {
        self.extend_from_slice(std::slice::from_ref(&value))
    }

    /// Sets the length to `len`: shortens, or appends zeros.
    ///
    /// # Errors
    /// As [`extend_from_slice`](Self::extend_from_slice).
    pub fn resize(&mut self, len: usize) -> Result<(), crate::Error> {
        if len <= self.len {
            self.len = len;
            if let Storage::Heap(h) = &mut self.storage {
                h.truncate(len);
            }
            return Ok(());
        }
        self.reserve(len - self.len)?;
        let start = self.len;
        match &mut self.storage {
            Storage::Heap(h) => h.resize(len, T::zeroed()),
            Storage::Mapped(_) => {}
        }
        self.set_len(len);
        if let Storage::Mapped(_) = self.storage {
            // Contents beyond the old length may hold earlier data (after a shrink).
            self.range_mut(start..len).fill(T::zeroed());
        }
        Ok(())
    }

    /// Sets the length of the elements in use (the mapping's use follows it).
    fn set_len(&mut self, len: usize) {
        self.len = len;
        if let Storage::Mapped(r) = &self.storage {
            r.in_use(len * std::mem::size_of::<T>());
        }
    }

    /// Writes back and releases this allocation now, whatever the policy.
    pub fn unload(&self) {
        if let Storage::Mapped(r) = &self.storage {
            r.unload();
        }
    }

    /// Forgets the contents without writing them back (a buffer about to be overwritten);
    /// afterwards the array reads as zeros.
    pub fn discard(&mut self) {
        match &mut self.storage {
            Storage::Heap(h) => h.fill(T::zeroed()),
            Storage::Mapped(r) => r.discard(),
        }
    }
}

impl<T: Pod> std::ops::Deref for SbVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Pod> std::ops::DerefMut for SbVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: Pod> std::fmt::Debug for SbVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SbVec<{}>({} elements)",
            std::any::type_name::<T>(),
            self.len
        )
    }
}
