//! Hashing keys, hash ranges and the radix sort of (hash, index) pairs.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Seed of the partitioning hash (which rank owns a key).
pub(crate) const PARTITION_SEED: u64 = 0x5eed_0f5b_111a_7a11;
/// Seed of the grouping hash inside a rank (a different seed, so that keys that collide in
/// a hash range do not also collide in the table).
pub(crate) const GROUP_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// The partitioning hash of an encoded key.
#[inline]
pub(crate) fn partition_hash(key: &[u8]) -> u64 {
    xxh3_64_with_seed(key, PARTITION_SEED)
}

/// The grouping hash of an encoded key.
#[inline]
pub(crate) fn group_hash(key: &[u8]) -> u64 {
    xxh3_64_with_seed(key, GROUP_SEED)
}

/// Contiguous ranges of the 64-bit hash space, one per rank: rank `l` owns
/// `[start(l), start(l + 1))`.
///
/// The initial split follows the thesis: with `w = floor(2^64 / p)`, rank `l` starts at
/// `l * w` and the last rank also takes the remainder. Ranges are explicit so that a lost
/// rank's range can later be split among the survivors without moving anybody else's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashRanges {
    /// `starts[l]` is the first hash of rank `l`; `starts[0] == 0`, increasing.
    starts: Vec<u64>,
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
        }
    }

    /// Number of ranges (ranks).
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Always false: there is at least one range.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The rank that owns hash `h`.
    #[inline]
    pub fn owner(&self, h: u64) -> usize {
        self.starts.partition_point(|&s| s <= h) - 1
    }

    /// The range of rank `l` as `(first, last)` (both inclusive).
    pub fn range(&self, l: usize) -> (u64, u64) {
        let last = self.starts.get(l + 1).map_or(u64::MAX, |&s| s - 1);
        (self.starts[l], last)
    }
}

/// Sorts `(hash, index)` pairs by hash: a least-significant-digit radix sort with 8-bit
/// digits that skips the digits in which all hashes agree. Stable, so equal hashes keep
/// their order of emission.
pub(crate) fn radix_sort(pairs: &mut Vec<(u64, u64)>) {
    let n = pairs.len();
    if n < 256 {
        pairs.sort_by_key(|&(h, _)| h);
        return;
    }
    let mut counts = vec![[0usize; 256]; 8];
    for &(h, _) in pairs.iter() {
        for (d, c) in counts.iter_mut().enumerate() {
            c[((h >> (8 * d)) & 0xff) as usize] += 1;
        }
    }
    let mut other: Vec<(u64, u64)> = vec![(0, 0); n];
    for (d, count) in counts.iter().enumerate() {
        if count.contains(&n) {
            continue; // every hash has the same digit here
        }
        let mut offsets = [0usize; 256];
        let mut sum = 0;
        for (o, &c) in offsets.iter_mut().zip(count) {
            *o = sum;
            sum += c;
        }
        for &(h, i) in pairs.iter() {
            let b = ((h >> (8 * d)) & 0xff) as usize;
            other[offsets[b]] = (h, i);
            offsets[b] += 1;
        }
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
