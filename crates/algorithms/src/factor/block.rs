//! The ratings of one block of the grid as SGD keeps them: 12 bytes a rating when the block's
//! user and item offsets fit together in 32 bits (a million users and 100,000 items on 64
//! ranks: 17 + 14 bits), else 16. Out of core every iteration reads them all: the bytes are
//! the iteration's time.

use spillway_comm::Comm;
use spillway_runtime::SbVec;

use super::sgd::{BlockStream, Rating};
use crate::error::AlgoError;

/// A rating decoded: the user's and the item's offsets in the block, and the value.
pub(crate) type Decoded = (u32, u32, f64);

/// The ratings of a block, in the order SGD visits them once shuffled.
#[derive(Debug)]
pub struct BlockRatings {
    layout: Layout,
    u_lo: u64,
    v_lo: u64,
}

#[derive(Debug)]
enum Layout {
    /// `user offset << item_bits | item offset`, and the values.
    Packed {
        ids: SbVec<u32>,
        values: SbVec<f64>,
        item_bits: u32,
    },
    /// The ratings with the matrix's ids.
    Wide(SbVec<Rating>),
}

/// Bits that hold every offset below `n`.
fn bits(n: u64) -> u32 {
    u64::BITS - n.saturating_sub(1).leading_zeros()
}

/// Ratings moved at a time when packing.
const CHUNK: usize = 1 << 14;

impl BlockRatings {
    /// Keeps `ratings` (all inside users `u_lo..u_hi` and items `v_lo..v_hi`) in the smallest
    /// layout that holds them, in their order.
    pub(crate) fn pack(
        comm: &Comm,
        ratings: SbVec<Rating>,
        (u_lo, u_hi): (u64, u64),
        (v_lo, v_hi): (u64, u64),
    ) -> Result<BlockRatings, AlgoError> {
        let (user_bits, item_bits) = (bits(u_hi - u_lo), bits(v_hi - v_lo));
        if user_bits + item_bits > 32 {
            let layout = Layout::Wide(ratings);
            return Ok(BlockRatings { layout, u_lo, v_lo });
        }
        let n = ratings.len();
        let mut ids = SbVec::with_capacity(comm.runtime(), n)?;
        let mut values = SbVec::with_capacity(comm.runtime(), n)?;
        let (mut id, mut value) = (Vec::with_capacity(CHUNK), Vec::with_capacity(CHUNK));
        for at in (0..n).step_by(CHUNK) {
            let part = &ratings.as_slice()[at..(at + CHUNK).min(n)];
            id.clear();
            value.clear();
            for r in part {
                let (user, item) = (r[0] >> 32, r[0] & 0xffff_ffff);
                id.push((((user - u_lo) << item_bits) | (item - v_lo)) as u32);
                value.push(f64::from_bits(r[1]));
            }
            ids.extend_from_slice(&id)?;
            values.extend_from_slice(&value)?;
        }
        let layout = Layout::Packed {
            ids,
            values,
            item_bits,
        };
        Ok(BlockRatings { layout, u_lo, v_lo })
    }

    /// No ratings.
    pub(crate) fn empty(comm: &Comm) -> Result<BlockRatings, AlgoError> {
        let layout = Layout::Wide(SbVec::with_capacity(comm.runtime(), 0)?);
        Ok(BlockRatings {
            layout,
            u_lo: 0,
            v_lo: 0,
        })
    }

    /// How many ratings.
    pub fn len(&self) -> usize {
        match &self.layout {
            Layout::Packed { ids, .. } => ids.len(),
            Layout::Wide(r) => r.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes a rating takes (12 packed, 16 otherwise).
    pub fn bytes_per_rating(&self) -> usize {
        match &self.layout {
            Layout::Packed { .. } => 12,
            Layout::Wide(_) => 16,
        }
    }

    /// Permutes the ratings by Fisher-Yates with `rng` (as [`super::sgd::shuffle`]).
    pub(crate) fn shuffle(&mut self, rng: &mut BlockStream) {
        match &mut self.layout {
            Layout::Packed { ids, values, .. } => {
                let (ids, values) = (ids.as_mut_slice(), values.as_mut_slice());
                for i in (1..ids.len()).rev() {
                    let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                    ids.swap(i, j);
                    values.swap(i, j);
                }
            }
            Layout::Wide(r) => super::sgd::shuffle(r.as_mut_slice(), rng),
        }
    }

    /// Decodes ratings `range` into `out` (cleared first). Takes the slices anew: call it
    /// after any blocking call, never hold what it read across one.
    #[inline(always)]
    pub(crate) fn decode(&self, range: std::ops::Range<usize>, out: &mut Vec<Decoded>) {
        out.clear();
        match &self.layout {
            Layout::Packed {
                ids,
                values,
                item_bits,
            } => {
                let mask = (1u64 << item_bits) - 1;
                let (ids, values) = (&ids.as_slice()[range.clone()], &values.as_slice()[range]);
                out.extend(ids.iter().zip(values).map(|(&id, &x)| {
                    let id = u64::from(id);
                    ((id >> item_bits) as u32, (id & mask) as u32, x)
                }));
            }
            Layout::Wide(r) => out.extend(r.as_slice()[range].iter().map(|r| {
                let (user, item) = (r[0] >> 32, r[0] & 0xffff_ffff);
                (
                    (user - self.u_lo) as u32,
                    (item - self.v_lo) as u32,
                    f64::from_bits(r[1]),
                )
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::factor::sgd::rating;
    use spillway_runtime::{run, Config};

    /// Both layouts give back the ratings' offsets and values, in order and shuffled alike.
    #[test]
    fn both_layouts_decode_what_was_packed() {
        run(&Config::new(1), |rank| {
            let comm = Comm::world(rank);
            // 3 x 5 offsets from (10, 20) fit in 32 bits; 2^20 users x 2^13 items do not.
            for (users, items, packed) in [
                ((10, 13), (20, 25), true),
                ((0, 1 << 20), (0, 1 << 13), false),
            ] {
                let want: Vec<Decoded> = (0..40u32)
                    .map(|i| {
                        (
                            i % (users.1 - users.0) as u32,
                            (7 * i) % (items.1 - items.0) as u32,
                            f64::from(i) * 0.5 - 3.0,
                        )
                    })
                    .collect();
                let raw: Vec<Rating> = want
                    .iter()
                    .map(|&(u, i, x)| rating(u + users.0 as u32, i + items.0 as u32, x))
                    .collect();
                let mut block =
                    BlockRatings::pack(&comm, SbVec::from_slice(rank, &raw)?, users, items)?;
                assert_eq!(block.bytes_per_rating(), if packed { 12 } else { 16 });
                let mut got = Vec::new();
                block.decode(3..17, &mut got);
                assert_eq!(got, want[3..17]);
                let mut order: Vec<usize> = (0..want.len()).collect();
                super::super::sgd::shuffle(&mut order, &mut BlockStream::new(1, 2, 3));
                block.shuffle(&mut BlockStream::new(1, 2, 3));
                block.decode(0..want.len(), &mut got);
                let shuffled: Vec<Decoded> = order.iter().map(|&o| want[o]).collect();
                assert_eq!(got, shuffled);
            }
            Ok::<_, AlgoError>(())
        })
        .expect("the job runs");
    }
}
