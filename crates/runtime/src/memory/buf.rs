//! Buffers owned by a node rather than a rank (the accumulators of collectives), counted
//! against the node's budget: on the heap while it has room, in a spill file beyond it.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use spillway_transport::AlignedBuf;

use super::{NodeMem, Owner, Region};

enum NodeBufInner {
    Heap(AlignedBuf),
    Mapped(Arc<Region>, usize),
}

/// A buffer owned by a node rather than a rank (the accumulator of a collective), counted
/// against the node's memory budget while it exists. Its contents are unspecified when made.
pub struct NodeBuf {
    inner: NodeBufInner,
    node: Arc<NodeMem>,
}

impl NodeBuf {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        match &self.inner {
            NodeBufInner::Heap(b) => b.len(),
            NodeBufInner::Mapped(_, len) => *len,
        }
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes (16-byte aligned). A spilled buffer that was unloaded is read back page by
    /// page as the bytes are touched.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.inner {
            NodeBufInner::Heap(b) => b.as_bytes(),
            // SAFETY: the region maps at least `len` bytes of a file that holds the contents
            // whether or not they are resident; node-owned regions never move; the borrow
            // keeps the mapping alive.
            NodeBufInner::Mapped(r, len) => unsafe { std::slice::from_raw_parts(r.ptr(), *len) },
        }
    }

    /// The bytes, mutable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.inner {
            NodeBufInner::Heap(b) => b.as_bytes_mut(),
            NodeBufInner::Mapped(r, len) => {
                r.ensure_loaded(true);
                // SAFETY: as in `as_bytes`; `&mut self` makes this the only live view.
                unsafe { std::slice::from_raw_parts_mut(r.ptr(), *len) }
            }
        }
    }

    /// Whether the buffer lives in a spill file (the budget had no room for it).
    pub fn is_spilled(&self) -> bool {
        matches!(self.inner, NodeBufInner::Mapped(..))
    }

    /// A buffer in a spill file writes its contents back and leaves memory: readers fault
    /// the pages back in and, reading through [`Rank::release_read`](crate::Rank), drop them
    /// again. A heap buffer stays as it is.
    pub fn unload(&self) {
        if let NodeBufInner::Mapped(r, _) = &self.inner {
            r.unload();
        }
    }
}

impl Drop for NodeBuf {
    fn drop(&mut self) {
        if let NodeBufInner::Heap(b) = &self.inner {
            self.node
                .message_bytes
                .fetch_sub(b.len() as u64, Ordering::Relaxed);
        }
    }
}

impl std::fmt::Debug for NodeBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeBuf({} bytes)", self.len())
    }
}

impl NodeMem {
    /// A buffer of `len` bytes owned by the node (collective buffers): heap memory counted
    /// with the node's messages, or, when it is large and the budget has no room, a
    /// storage-backed region whose pages the system can write out.
    pub(crate) fn buffer(self: &Arc<Self>, len: usize) -> io::Result<NodeBuf> {
        if self.should_spill(len) {
            let region = Region::new(self, Owner::Node, len)?;
            self.map_address(&region, None);
            region.ensure_loaded(true);
            self.count_spilled_message(len as u64);
            return Ok(NodeBuf {
                inner: NodeBufInner::Mapped(region, len),
                node: Arc::clone(self),
            });
        }
        self.message_bytes.fetch_add(len as u64, Ordering::Relaxed);
        Ok(NodeBuf {
            inner: NodeBufInner::Heap(AlignedBuf::for_overwrite(len)),
            node: Arc::clone(self),
        })
    }
}
