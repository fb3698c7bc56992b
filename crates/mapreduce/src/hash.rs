//! Hashing keys, hash ranges and the radix sort of (hash, index) pairs.

use spillway_comm::radix;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Seed of the partitioning hash (which rank owns a key).
pub(crate) const PARTITION_SEED: u64 = 0x5eed_0f5b_111a_7a11;
/// The partitioning hash of an encoded key.
#[inline]
pub(crate) fn partition_hash(key: &[u8]) -> u64 {
    xxh3_64_with_seed(key, PARTITION_SEED)
}

/// Which rank owns each hash: the 64-bit hash space cut into intervals, each owned by one
/// rank, owners increasing with the hash (so a run sorted by hash is sorted by destination).
///
/// The initial split follows the thesis: with `w = floor(2^64 / p)`, rank `l` owns
/// `[l * w, (l + 1) * w)` and the last rank also takes the remainder. After a failure the
/// lost ranks' ranges are split evenly among the survivors
/// ([`split_lost`](HashRanges::split_lost)), which gives a rank several intervals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashRanges {
    /// `starts[i]` is the first hash of interval `i`; `starts[0] == 0`, increasing.
    starts: Vec<u64>,
    /// The owner of each interval, non-decreasing.
    owners: Vec<usize>,
    /// Number of ranks.
    ranks: usize,
}

impl HashRanges {
    /// The even split of the hash space over `p` ranks.
    ///
    /// # Panics
    /// If `p == 0`.
    pub fn even(p: usize) -> HashRanges {
        assert!(p > 0, "hash ranges need at least one rank");
        let w = ((1u128 << 64) / p as u128) as u64;
        HashRanges {
            starts: (0..p as u64).map(|l| l * w).collect(),
            owners: (0..p).collect(),
            ranks: p,
        }
    }

    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.ranks
    }

    /// Always false: there is at least one rank.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The rank that owns hash `h`.
    #[inline]
    pub fn owner(&self, h: u64) -> usize {
        self.owners[self.starts.partition_point(|&s| s <= h) - 1]
    }

    /// The intervals of rank `l` as `(first, last)` pairs (both inclusive), in hash order.
    pub fn intervals(&self, l: usize) -> Vec<(u64, u64)> {
        (0..self.starts.len())
            .filter(|&i| self.owners[i] == l)
            .map(|i| {
                let last = self.starts.get(i + 1).map_or(u64::MAX, |&s| s - 1);
                (self.starts[i], last)
            })
            .collect()
    }

    /// The first interval of rank `l` as `(first, last)` (both inclusive): its whole range
    /// in an even split.
    pub fn range(&self, l: usize) -> (u64, u64) {
        self.intervals(l)[0]
    }

    /// The hashes owned by the ranks in `lost` (sorted, indices of `self`) split evenly
    /// over the `p - lost.len()` survivors, numbered in rank order without the lost ones:
    /// the lost hashes taken in order are cut into equal shares, survivor `j` getting
    /// share `j`. Hashes of survivors keep no owner in the result (they are given the
    /// owner of the preceding interval only to keep owners increasing); use it only to
    /// route data that belonged to the lost ranks.
    ///
    /// # Panics
    /// If no rank survives.
    pub fn split_lost(&self, lost: &[usize]) -> HashRanges {
        let survivors = self.ranks - lost.len();
        assert!(survivors > 0, "no rank survives");
        // The lost intervals, in hash order, with their widths.
        let mut pieces: Vec<(u64, u128)> = Vec::new();
        for i in 0..self.starts.len() {
            if lost.binary_search(&self.owners[i]).is_ok() {
                let end = self
                    .starts
                    .get(i + 1)
                    .map_or(1u128 << 64, |&s| u128::from(s));
                pieces.push((self.starts[i], end - u128::from(self.starts[i])));
            }
        }
        let total: u128 = pieces.iter().map(|&(_, w)| w).sum();
        let mut starts = vec![0u64];
        let mut owners = vec![0usize];
        // Survivor j starts at lost-offset ceil(j * total / survivors).
        let mut before = 0u128; // lost width before the current piece
        for &(a, w) in &pieces {
            let first_j = (before * survivors as u128)
                .div_ceil(total)
                .min(survivors as u128);
            let mut j = first_j as usize;
            // The owner at the piece's start is the survivor whose share contains it.
            let owner_at_start = if before == 0 {
                0
            } else {
                ((before * survivors as u128) / total).min(survivors as u128 - 1) as usize
            };
            push_interval(&mut starts, &mut owners, a, owner_at_start);
            while j < survivors {
                let off = (j as u128 * total).div_ceil(survivors as u128);
                if off >= before + w {
                    break;
                }
                if off > before {
                    push_interval(&mut starts, &mut owners, a + (off - before) as u64, j);
                }
                j += 1;
            }
            before += w;
        }
        HashRanges {
            starts,
            owners,
            ranks: survivors,
        }
    }
}

impl HashRanges {
    /// Every hash's owner after losing the ranks in `lost` (sorted): a survivor keeps its
    /// intervals (renumbered without the lost ranks), the lost hashes are owned as in
    /// [`split_lost`](HashRanges::split_lost). Owners need not increase with the hash.
    pub(crate) fn after_loss(&self, lost: &[usize]) -> HashRanges {
        let split = self.split_lost(lost);
        let renumber = |o: usize| o - lost.partition_point(|&l| l < o);
        let mut starts = Vec::new();
        let mut owners = Vec::new();
        let mut add = |at: u64, owner: usize| {
            if owners.last() != Some(&owner) {
                starts.push(at);
                owners.push(owner);
            }
        };
        for i in 0..self.starts.len() {
            let (a, o) = (self.starts[i], self.owners[i]);
            if lost.binary_search(&o).is_err() {
                add(a, renumber(o));
            } else {
                let end = self.starts.get(i + 1).copied();
                add(a, split.owner(a));
                for j in 0..split.starts.len() {
                    let s = split.starts[j];
                    if s > a && end.is_none_or(|e| s < e) {
                        add(s, split.owners[j]);
                    }
                }
            }
        }
        HashRanges {
            starts,
            owners,
            ranks: split.ranks,
        }
    }
}

fn push_interval(starts: &mut Vec<u64>, owners: &mut Vec<usize>, at: u64, owner: usize) {
    if *starts.last().expect("one interval") == at {
        *owners.last_mut().expect("one interval") = owner;
    } else if *owners.last().expect("one interval") != owner {
        starts.push(at);
        owners.push(owner);
    }
}

/// Sorts `(hash, index)` pairs by hash: a least-significant-digit radix sort with 8-bit
/// digits (the pairs are 16 bytes: 256 write streams beat 2,048) that skips the digits in
/// which all hashes agree. Stable, so equal hashes keep their order of emission.
pub(crate) fn radix_sort(pairs: &mut Vec<(u64, u64)>) {
    let mut other: Vec<(u64, u64)> = vec![(0, 0); pairs.len()];
    if radix::sort_by_key(pairs, &mut other, u64::MAX, 8, |&(h, _)| h) {
        std::mem::swap(pairs, &mut other);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_hash_space_in_order() {
        for p in [1usize, 2, 3, 7, 64] {
            let r = HashRanges::even(p);
            assert_eq!(r.owner(0), 0);
            assert_eq!(r.owner(u64::MAX), p - 1);
            for l in 0..p {
                let (a, b) = r.range(l);
                assert_eq!(r.owner(a), l);
                assert_eq!(r.owner(b), l);
                if l + 1 < p {
                    assert_eq!(r.owner(b + 1), l + 1);
                }
            }
        }
    }

    #[test]
    fn lost_ranges_are_split_evenly_over_the_survivors() {
        for (p, lost) in [
            (4usize, vec![1usize]),
            (6, vec![2, 3]),
            (5, vec![0, 4]),
            (3, vec![0, 1]),
            (8, vec![1, 5, 6]),
        ] {
            let r = HashRanges::even(p);
            let s = r.split_lost(&lost);
            assert_eq!(s.len(), p - lost.len());
            // Sample every lost range: owners increase with the hash, every survivor gets
            // about the same share.
            let mut share = vec![0u64; s.len()];
            let mut last = 0;
            for &l in &lost {
                let (a, b) = r.range(l);
                let step = (b - a) / 1000;
                for k in 0..1000u64 {
                    let o = s.owner(a + k * step);
                    assert!(o >= last, "owners must not decrease");
                    last = o;
                    share[o] += 1;
                }
            }
            let n = 1000 * lost.len() as u64;
            for (j, &c) in share.iter().enumerate() {
                let expect = n / s.len() as u64;
                assert!(
                    c.abs_diff(expect) <= 2,
                    "survivor {j}: {c} of {n} (p {p}, lost {lost:?})"
                );
            }
        }
    }

    #[test]
    fn radix_sort_equals_a_stable_sort() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut pairs: Vec<(u64, u64)> = (0..5000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Few distinct high bytes, many equal hashes.
                ((x % 97) << 40 | (x % 3), i)
            })
            .collect();
        let mut expected = pairs.clone();
        expected.sort_by_key(|&(h, _)| h);
        radix_sort(&mut pairs);
        assert_eq!(pairs, expected);
    }
}
