//! The broadcast cores: from the root's buffer into a sink on every member (through the
//! node's shared buffer and the leaders' tree or chain), and the direct broadcast into the
//! members' own buffers that skips intermediate copies for large data between nodes.

use std::sync::Arc;

use bytemuck::Pod;
use spillway_transport::copy::copy;
use spillway_transport::AlignedBuf;

use super::choose;
use super::leaders::length_mismatch;
use super::node::{lock, Entered, ZERO_COPY_MIN};
use crate::codec::view;
use crate::comm::Comm;
use crate::{Error, Result};

/// Broadcasts into the members' buffers of at least this many bytes between nodes go the
/// direct way (no intermediate buffers; see `bcast_into_direct`).
const DIRECT_BCAST_MIN: usize = 256 << 10;

impl Comm<'_> {
    /// The broadcast: the root passes `src`; every other member's `sink` gets the bytes once.
    pub(crate) fn bcast_core(
        &self,
        root: usize,
        src: Option<&[u8]>,
        name: &'static str,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        self.check_root(root)?;
        let tag = self.next_coll_tag();
        self.bcast_core_tagged(root, src, name, sink, tag)
    }

    /// [`bcast_core`](Self::bcast_core) with its collective tag already taken.
    fn bcast_core_tagged(
        &self,
        root: usize,
        src: Option<&[u8]>,
        name: &'static str,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
        tag: i32,
    ) -> Result<()> {
        let shape = self.shape();
        let me = self.rank();
        let my_g = self.inner.my_group;
        let root_g = shape.group_of(root);
        let multi = shape.groups() > 1;
        let e = Entered::join(self, name, false)?;
        if my_g != root_g {
            if self.is_leader() {
                let buf = self.leaders_bcast(root_g, None, tag, name)?;
                *lock(&e.rv.shared) = Some(Arc::clone(&buf));
                e.set_stage(1);
                return sink(buf.as_bytes());
            }
            e.wait(|| e.stage() >= 1)?;
            return self.take_published(&e, sink);
        }
        if me == root {
            let Some(src) = src else {
                return Err(self.misuse(name, "the root supplied no data"));
            };
            let zero_copy = src.len() >= ZERO_COPY_MIN && e.rv.size > 1;
            let shared = if zero_copy {
                e.rv.src
                    .ptr
                    .store(src.as_ptr() as usize, std::sync::atomic::Ordering::Relaxed);
                e.rv.src
                    .len
                    .store(src.len(), std::sync::atomic::Ordering::Relaxed);
                None
            } else {
                let buf = Arc::new(AlignedBuf::from_bytes(src));
                *lock(&e.rv.shared) = Some(Arc::clone(&buf));
                Some(buf)
            };
            e.set_stage(1);
            if multi && self.is_leader() {
                let buf = shared.unwrap_or_else(|| Arc::new(AlignedBuf::from_bytes(src)));
                self.leaders_bcast(root_g, Some(buf), tag, name)?;
            }
            if zero_copy {
                // The others read straight from `src`: stay until they are done.
                e.wait(|| e.done() + 1 == e.rv.size)?;
            }
            return Ok(());
        }
        e.wait(|| e.stage() >= 1)?;
        let shared = lock(&e.rv.shared).clone();
        let forward = multi && self.is_leader();
        let outcome = match shared {
            Some(buf) => {
                e.mark_done();
                let out = sink(buf.as_bytes());
                if forward {
                    self.leaders_bcast(root_g, Some(buf), tag, name)?;
                }
                out
            }
            None => {
                let ptr = e.rv.src.ptr::<u8>();
                let len = e.rv.src.len();
                // SAFETY: the root published `len` readable bytes at `ptr` and does not return
                // (nor touch them) before every member has marked itself done, or before the
                // reads under way end if it leaves early (`reading`).
                let bytes = || unsafe { std::slice::from_raw_parts(ptr, len) };
                if forward {
                    let buf = Arc::new(e.reading(|| AlignedBuf::from_bytes(bytes()))?);
                    e.mark_done();
                    let out = sink(buf.as_bytes());
                    self.leaders_bcast(root_g, Some(buf), tag, name)?;
                    out
                } else {
                    let out = e.reading(|| {
                        let out = sink(bytes());
                        self.rank.release_read(bytes());
                        out
                    });
                    e.mark_done();
                    out?
                }
            }
        };
        outcome
    }

    /// A member of a group whose leader received a broadcast takes it: from the leader's
    /// shared buffer, or read in place from the leader's own buffer (see
    /// [`bcast_into_direct`](Self::bcast_into_direct)), which the leader keeps until every
    /// member is done.
    fn take_published(
        &self,
        e: &Entered<'_, '_>,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        if let Some(buf) = lock(&e.rv.shared).clone() {
            return sink(buf.as_bytes());
        }
        let ptr = e.rv.src.ptr::<u8>();
        let len = e.rv.src.len();
        let out = e.reading(|| {
            // SAFETY: the leader published `len` readable bytes at `ptr` and does not return
            // (nor write them) before every member has marked itself done, or before the reads
            // under way end if it leaves early (`reading`).
            let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
            let out = sink(bytes);
            self.rank.release_read(bytes);
            out
        });
        e.mark_done();
        out?
    }

    /// Whether a broadcast of `len` bytes into the members' own buffers goes the direct way:
    /// between nodes, large, and over the binomial tree (every member decides alike from the
    /// length, which [`bcast_into`](Collectives::bcast_into) requires to be the same).
    pub(super) fn bcast_direct(&self, len: usize) -> bool {
        let groups = self.shape().groups();
        groups > 1
            && len >= DIRECT_BCAST_MIN
            && choose::chain_chunk(self.rank.link_model(), groups, len).is_none()
    }

    /// The broadcast into the members' own buffers (`data` is the root's input and every other
    /// member's output) without intermediate copies: the root's leader sends from the root's
    /// buffer, another leader receives from its tree parent straight into its buffer and
    /// forwards from there, and the members of each node copy once from their leader's buffer.
    /// The messages are those of the tree broadcast, so members that broadcast into fresh
    /// vectors take part unchanged.
    pub(super) fn bcast_into_direct(
        &self,
        root: usize,
        data: &mut [u8],
        name: &'static str,
    ) -> Result<()> {
        let tag = self.next_coll_tag();
        let shape = self.shape();
        let l = shape.groups();
        let my_g = self.inner.my_group;
        let root_g = shape.group_of(root);
        let me = self.rank();
        let leader = self.is_leader();
        if my_g == root_g && root != self.leader_of(root_g) {
            // The root is not its node's leader: that node goes the usual way (its leader
            // forwards a copy of the root's data; the members copy from the root).
            return if me == root {
                self.bcast_core_tagged(root, Some(data), name, &mut |_| Ok(()), tag)
            } else {
                self.bcast_core_tagged(root, None, name, &mut sink_exact(data), tag)
            };
        }
        let e = Entered::join(self, name, false)?;
        if !leader {
            e.wait(|| e.stage() >= 1)?;
            return self.take_published(&e, &mut sink_exact(data));
        }
        let rel = (my_g + l - root_g) % l;
        if me != root {
            let parent = ((rel & (rel - 1)) + root_g) % l;
            let pattern = self.coll_pattern(self.leader_of(parent), tag);
            let info =
                self.rank
                    .recv_into(pattern, spillway_runtime::WaitKind::Collective(name), data)?;
            if info.bytes != data.len() {
                return Err(length_mismatch());
            }
        }
        // Publish to this node's members, forward to the children, then stay until the
        // members have read.
        let members = e.rv.size;
        if members > 1 {
            e.rv.src
                .ptr
                .store(data.as_ptr() as usize, std::sync::atomic::Ordering::Relaxed);
            e.rv.src
                .len
                .store(data.len(), std::sync::atomic::Ordering::Relaxed);
            e.set_stage(1);
        }
        let data: &[u8] = data;
        let mut mask = 1;
        while mask < l && rel & mask == 0 {
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if rel + mask < l {
                let child = (rel + mask + root_g) % l;
                self.csend_while(self.leader_of(child), tag, data, || Ok(()))?;
            }
            mask >>= 1;
        }
        if members > 1 {
            e.wait(|| e.done() + 1 == members)?;
        }
        Ok(())
    }
}

/// A sink that copies a broadcast into `dst`, which must be exactly as long.
pub(super) fn sink_exact<T: Pod>(dst: &mut [T]) -> impl FnMut(&[u8]) -> Result<()> + '_ {
    move |bytes| {
        let v = view::<T>(bytes)?;
        if v.len() != dst.len() {
            return Err(Error::Truncated {
                message_bytes: bytes.len(),
                buffer_bytes: std::mem::size_of_val(dst),
            });
        }
        copy(bytemuck::cast_slice_mut(dst), bytemuck::cast_slice(v));
        Ok(())
    }
}
