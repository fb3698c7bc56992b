//! What a fault-tolerant [`MapReduce`] keeps for a recovery: the fault-tolerance state, the
//! send buffer kept after each shuffle, the replicas of its node-local segments at the buddy,
//! and (when processes can be lost for real) the generation before, until an operation has
//! ended everywhere.

use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Weak;
use std::time::Instant;

use super::group::KeptReduce;
use super::MapReduce;
use crate::error::Error;
use crate::ft::{self, FtStats, Members, Store};
use crate::hash::HashRanges;
use crate::run::{Run, Spill, Store as RunStore};

/// Fault-tolerance state of a [`MapReduce`] object.
pub(super) struct FtState {
    pub(super) id: u64,
    pub(super) inject: Vec<crate::ft::Injection>,
    pub(super) members: Members,
    /// Runs this rank sent in the last shuffle (and runs adopted from lost ranks).
    pub(super) kept: Vec<Run>,
    /// Who owned each hash in the last shuffle (indices of the current communicator).
    pub(super) table: HashRanges,
    /// Replicas of the node-local segments of wards' kept runs: (ward index, run).
    pub(super) held: Vec<(usize, Run)>,
    /// The operation whose send buffers are kept, and its reduce.
    pub(super) prev: Option<(u64, KeptReduce)>,
    pub(super) stores: Vec<Weak<RefCell<Store>>>,
    pub(super) spill: Spill,
    pub(super) stats: FtStats,
    /// Whether processes can really be lost (MPI with ULFM): then the kept buffers, replicas
    /// and table of the operation before stay ([`prior`](Self::prior)) until an operation
    /// has ended everywhere, so that it can go back before its shuffle.
    pub(super) survivable: bool,
    /// The generation before the current one, while the current operation may go back.
    pub(super) prior: Option<Generation>,
    /// Buffers of released replicas, to receive the next ones into (their pages are mapped).
    pub(super) reuse: Vec<Vec<u8>>,
    /// This rank's position in the fault-tolerant collectives (see [`crate::lost`]).
    pub(super) pos: u64,
    /// The totals of the last detection after a reduce that completed here.
    pub(super) last_totals: Option<Vec<f64>>,
    /// Ranks lost for real whose own kept buffers the survivors lack, until the next shuffle
    /// has replaced the kept buffers.
    pub(super) kept_partial: Option<Vec<u32>>,
    /// A recovery from a real loss is under way.
    pub(super) recovering: bool,
}

/// What a shuffle leaves for a recovery: the send buffers kept, the replicas held and who
/// owned each hash.
pub(super) struct Generation {
    pub(super) kept: Vec<Run>,
    pub(super) held: Vec<(usize, Run)>,
    pub(super) table: HashRanges,
}

impl FtState {
    /// A run to keep across operations: as it is, or (under a memory budget) moved from
    /// `from`'s allowance to a file.
    pub(super) fn stash(&self, run: Run, from: &Spill, bounded: bool) -> Result<Run, Error> {
        if bounded {
            ft::run_to_file(run, from, &self.spill)
        } else {
            Ok(run)
        }
    }

    /// Releases the kept runs and the replicas held.
    pub(super) fn release_kept(&mut self) {
        for r in self.kept.drain(..) {
            r.release(&self.spill);
        }
        for (_, r) in self.held.drain(..) {
            r.release(&self.spill);
        }
    }

    /// Releases a generation; the buffers of its replicas are kept for receiving the next.
    fn release_generation(&mut self, g: Generation) {
        for r in g.kept {
            r.release(&self.spill);
        }
        for (_, r) in g.held {
            match r.store {
                RunStore::Mem(v) => {
                    self.spill.give_back(v.len());
                    self.reuse.push(v);
                }
                RunStore::File(_) => {}
            }
        }
    }

    /// The operation ended everywhere: the generation before it is not needed any more.
    pub(super) fn ended(&mut self, op: u64) {
        self.pos = crate::lost::at(op + 1, 0);
        self.recovering = false;
        if let Some(g) = self.prior.take() {
            self.release_generation(g);
        }
    }
}

impl<'c, 'r> MapReduce<'c, 'r> {
    /// Sends the node-local segments of this operation's send buffer to the buddy (a
    /// collective) and returns the segments the wards sent here. Without real losses
    /// possible the kept buffers and replicas of the operation before are released first
    /// (their buffers receive the new replicas); otherwise nothing changes until
    /// [`keep`](Self::keep), so that the operation can still go back before its shuffle.
    pub(super) fn keep_replicas(
        &mut self,
        send: &Run,
        spill: &Spill,
    ) -> Result<Vec<(usize, Vec<u8>)>, Error> {
        let t = Instant::now();
        let f = self.ft.as_mut().expect("fault tolerance");
        if !f.survivable {
            for r in f.kept.drain(..) {
                r.release(&f.spill);
            }
            for (_, r) in f.held.drain(..) {
                if let RunStore::Mem(v) = r.store {
                    f.spill.give_back(v.len());
                    f.reuse.push(v);
                }
            }
        }
        let reuse = std::mem::take(&mut f.reuse);
        let me = self.comm.rank();
        // The segments for this node's ranks: one range of the run when the node's ranks
        // are consecutive (as they are), sent from the run itself.
        let local_dests: Vec<usize> = (0..self.comm.size())
            .filter(|&d| f.members.same_node(me, d))
            .collect();
        let (a, b) = (local_dests[0], *local_dests.last().expect("this rank"));
        let local: Cow<'_, [u8]> = if b - a + 1 == local_dests.len() {
            send.read_block(send.offsets[a], send.offsets[b + 1], usize::MAX, spill)?
                .0
        } else {
            let mut v = Vec::new();
            for &d in &local_dests {
                let (b, _) =
                    send.read_block(send.offsets[d], send.offsets[d + 1], usize::MAX, spill)?;
                v.extend_from_slice(&b);
            }
            Cow::Owned(v)
        };
        let to = f.members.buddy(me);
        let got = ft::to_buddy_reusing(&self.comm, to, &local, reuse)?;
        if to.is_some() {
            f.stats.bytes_replicated += local.len() as u64;
        }
        f.stats.save += t.elapsed();
        Ok(got)
    }

    /// Keeps this operation's send buffer and the replicas its wards sent
    /// ([`keep_replicas`](Self::keep_replicas)); the generation before stays while real
    /// losses are possible, until the operation has ended everywhere.
    pub(super) fn keep(
        &mut self,
        send: Run,
        got: Vec<(usize, Vec<u8>)>,
        spill: &Spill,
    ) -> Result<(), Error> {
        let t = Instant::now();
        let f = self.ft.as_mut().expect("fault tolerance");
        if f.survivable {
            let g = Generation {
                kept: std::mem::take(&mut f.kept),
                held: std::mem::take(&mut f.held),
                table: f.table.clone(),
            };
            if let Some(older) = f.prior.replace(g) {
                f.release_generation(older);
            }
        }
        f.stats.bytes_kept += send.len;
        let bounded = self.memory != usize::MAX;
        f.kept = vec![f.stash(send, spill, bounded)?];
        f.table = self.ranges.clone();
        f.held = got
            .into_iter()
            .map(|(src, b)| Ok((src, f.stash(ft::bytes_run(b), &f.spill, bounded)?)))
            .collect::<Result<_, Error>>()?;
        // The kept buffers are whole again.
        f.kept_partial = None;
        f.stats.save += t.elapsed();
        Ok(())
    }
}
