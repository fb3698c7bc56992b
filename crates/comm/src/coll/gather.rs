//! Gathers and scatters: one bundle per node between the root and each node's leader.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytemuck::Pod;
use spillway_runtime::WaitKind;
use spillway_transport::{AlignedBuf, Payload};

use super::node::{lock, Entered};
use crate::codec::{bundle, bundle_items};
use crate::comm::Comm;
use crate::{Error, Result};

/// Splits `data` into consecutive parts of `counts[i]` elements, one per member.
pub(crate) fn split_by_counts<'a, T>(
    data: &'a [T],
    counts: &[usize],
    members: usize,
) -> Result<Vec<&'a [T]>> {
    if counts.len() != members || counts.iter().sum::<usize>() != data.len() {
        return Err(Error::InvalidArgument(
            "counts must have one entry per member and add up to the data length",
        ));
    }
    let mut at = 0;
    Ok(counts
        .iter()
        .map(|&c| {
            at += c;
            &data[at - c..at]
        })
        .collect())
}

/// Every member's bytes, in rank order, held in the bundles they came in (no copy per piece).
pub(crate) struct Gathered {
    bufs: Vec<Arc<AlignedBuf>>,
    /// Bundle, start and length of each member's piece.
    index: Vec<(u32, usize, usize)>,
}

impl Gathered {
    fn from_bundles(bufs: Vec<Arc<AlignedBuf>>, members: usize) -> Result<Gathered> {
        let mut index = vec![(u32::MAX, 0, 0); members];
        for (b, buf) in bufs.iter().enumerate() {
            let base = buf.as_bytes().as_ptr() as usize;
            for (r, bytes) in bundle_items(buf.as_bytes())? {
                let slot = index
                    .get_mut(r)
                    .ok_or(Error::InvalidArgument("bundle of another size"))?;
                *slot = (b as u32, bytes.as_ptr() as usize - base, bytes.len());
            }
        }
        if index.iter().any(|e| e.0 == u32::MAX) {
            return Err(Error::InvalidArgument("a gather lost a contribution"));
        }
        Ok(Gathered { bufs, index })
    }

    /// Member `r`'s bytes.
    pub(crate) fn get(&self, r: usize) -> &[u8] {
        let (b, start, len) = self.index[r];
        &self.bufs[b as usize].as_bytes()[start..start + len]
    }

    /// Every member's bytes in rank order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.index.len()).map(|r| self.get(r))
    }
}

/// Concatenates byte pieces as elements of `T`, with each piece's count.
pub(crate) fn concat<T: Pod>(pieces: &Gathered) -> Result<(Vec<T>, Vec<usize>)> {
    let mut counts = Vec::with_capacity(pieces.index.len());
    let mut total = 0;
    for p in pieces.iter() {
        let n = p.len() / std::mem::size_of::<T>();
        if n * std::mem::size_of::<T>() != p.len() {
            return Err(Error::TypeMismatch {
                expected: std::any::type_name::<T>(),
                message_bytes: p.len(),
            });
        }
        counts.push(n);
        total += n;
    }
    let mut out: Vec<T> = Vec::with_capacity(total);
    for p in pieces.iter() {
        let n = p.len() / std::mem::size_of::<T>();
        let start = out.len();
        out.resize(start + n, T::zeroed());
        bytemuck::cast_slice_mut::<T, u8>(&mut out[start..]).copy_from_slice(p);
    }
    Ok((out, counts))
}

impl Comm<'_> {
    /// The published data of the node's members in one bundle, once every member has arrived
    /// (each keeps its data until stage 1, or until the reads under way end if it leaves
    /// early).
    fn local_bundle(&self, e: &Entered<'_, '_>) -> Result<Payload> {
        let shape = self.shape();
        let g = self.inner.my_group;
        e.reading(|| {
            let items = (0..shape.group_len(g)).map(|i| {
                let slot = &e.rv.slots()[i];
                // SAFETY: every member arrived with a pointer and byte length that stay valid
                // while the reads are open (see above).
                let bytes = unsafe { std::slice::from_raw_parts(slot.ptr::<u8>(), slot.len()) };
                (shape.group_member(g, i), bytes)
            });
            bundle(items)
        })
    }

    /// Gathers every member's bytes at the root, in rank order.
    pub(crate) fn gather_core(
        &self,
        root: usize,
        data: &[u8],
        name: &'static str,
    ) -> Result<Option<Gathered>> {
        self.check_root(root)?;
        let tag = self.next_coll_tag();
        let shape = self.shape();
        let root_g = shape.group_of(root);
        let my_g = self.inner.my_group;
        let e = Entered::join(self, name, true)?;
        e.arrive(data.as_ptr() as usize, data.len(), 0, 0);
        if my_g != root_g {
            if self.is_leader() {
                e.wait(|| e.all_arrived())?;
                let b = self.local_bundle(&e)?;
                e.set_stage(1);
                self.csend(root, tag, b)?;
            } else {
                e.wait(|| e.stage() >= 1)?;
            }
            return Ok(None);
        }
        if self.rank() != root {
            e.wait(|| e.stage() >= 1)?;
            return Ok(None);
        }
        let others: Vec<usize> = (0..shape.groups()).filter(|&h| h != my_g).collect();
        let ids: Vec<_> = others
            .iter()
            .map(|&h| self.rank.post_recv(self.coll_pattern(shape.leader(h), tag)))
            .collect();
        e.wait(|| e.all_arrived())?;
        let mut bufs = vec![self.local_bundle(&e)?.into_shared()];
        e.set_stage(1);
        self.rank.wait_recv_all(&ids, WaitKind::Collective(name))?;
        for id in ids {
            let env = self.rank.test_recv(id)?.expect("every bundle has arrived");
            bufs.push(env.payload.into_shared());
        }
        Ok(Some(Gathered::from_bundles(bufs, self.size())?))
    }

    /// Every member's bytes at every member, in rank order.
    pub(crate) fn allgather_core(&self, data: &[u8], name: &'static str) -> Result<Gathered> {
        let tag = self.next_coll_tag();
        let shape = self.shape();
        let my_g = self.inner.my_group;
        let e = Entered::join(self, name, true)?;
        e.arrive(data.as_ptr() as usize, data.len(), 0, 0);
        if self.is_leader() {
            e.wait(|| e.all_arrived())?;
            let mine = self.local_bundle(&e)?.into_shared();
            let others: Vec<usize> = (0..shape.groups()).filter(|&h| h != my_g).collect();
            let ids: Vec<_> = others
                .iter()
                .map(|&h| self.rank.post_recv(self.coll_pattern(shape.leader(h), tag)))
                .collect();
            for &h in &others {
                self.csend(
                    shape.leader(h),
                    tag,
                    spillway_transport::Payload::Shared(Arc::clone(&mine)),
                )?;
            }
            self.rank.wait_recv_all(&ids, WaitKind::Collective(name))?;
            let mut bundles = vec![(my_g, mine)];
            for (h, id) in others.into_iter().zip(ids) {
                let env = self.rank.test_recv(id)?.expect("every bundle has arrived");
                bundles.push((h, env.payload.into_shared()));
            }
            *lock(&e.rv.bundles) = bundles;
            e.set_stage(1);
        } else {
            e.wait(|| e.stage() >= 1)?;
        }
        let bundles = lock(&e.rv.bundles).clone();
        Gathered::from_bundles(bundles.into_iter().map(|(_, b)| b).collect(), self.size())
    }

    /// Scatters the root's `parts` (one per member); `sink` gets this member's part.
    pub(crate) fn scatter_core(
        &self,
        root: usize,
        parts: Option<Vec<&[u8]>>,
        name: &'static str,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        self.check_root(root)?;
        let tag = self.next_coll_tag();
        let shape = self.shape();
        let root_g = shape.group_of(root);
        let my_g = self.inner.my_group;
        let e = Entered::join(self, name, false)?;
        if self.rank() == root {
            let parts = match parts {
                Some(p) if p.len() == self.size() => p,
                _ => return Err(self.misuse(name, "the root needs one part per member")),
            };
            let table: Vec<[usize; 2]> = parts
                .iter()
                .map(|b| [b.as_ptr() as usize, b.len()])
                .collect();
            e.rv.src
                .ptr
                .store(table.as_ptr() as usize, Ordering::Relaxed);
            e.set_stage(1);
            for h in 0..shape.groups() {
                if h == root_g {
                    continue;
                }
                let items = (0..shape.group_len(h)).map(|i| {
                    let m = shape.group_member(h, i);
                    (m, parts[m])
                });
                self.csend(shape.leader(h), tag, bundle(items))?;
            }
            let out = sink(parts[root]);
            e.wait(|| e.done() + 1 == e.rv.size)?;
            drop(table);
            return out;
        }
        if my_g == root_g {
            e.wait(|| e.stage() >= 1)?;
            let table = e.rv.src.ptr::<[usize; 2]>();
            let out = e.reading(|| {
                // SAFETY: the root published a table of `size` entries and waits until every
                // member of its node is done, or until the reads under way end if it leaves
                // early.
                let part = unsafe {
                    let entry = *table.add(self.rank());
                    std::slice::from_raw_parts(entry[0] as *const u8, entry[1])
                };
                sink(part)
            });
            e.mark_done();
            return out?;
        }
        if self.is_leader() {
            let buf = self.crecv(root, tag, name)?.into_shared();
            *lock(&e.rv.shared) = Some(buf);
            e.set_stage(1);
        } else {
            e.wait(|| e.stage() >= 1)?;
        }
        let buf = lock(&e.rv.shared).clone().expect("the leader published");
        let me = self.rank();
        let part = bundle_items(buf.as_bytes())?
            .into_iter()
            .find(|&(r, _)| r == me)
            .map(|(_, b)| b)
            .ok_or(Error::InvalidArgument("scatter bundle without my part"))?;
        sink(part)
    }
}
