//! Least-significant-digit radix sort on integer keys: linear time, stable, no comparisons
//! (MapReduce's sort of `(hash, index)` pairs and PageRank's grouping of remote edges).

/// Inputs shorter than this are sorted by the standard library's stable sort: the
/// histograms of a radix sort cost more than they save.
const SMALL: usize = 256;

/// Sorts `a` by `key` (stable), where every key is below `bound`, using `b` (as long as `a`)
/// as the second buffer. Digits of at most `digit_bits` bits (1 to 16), as few passes as
/// `bound` allows; a digit in which every key agrees costs its histogram and no pass.
/// Returns whether the sorted items ended up in `b` (else in `a`).
///
/// Narrow digits suit large items: with 16-byte items 8-bit digits (256 write streams) beat
/// 11-bit ones, with 8-byte items and keys of up to 33 bits 11-bit digits save a pass.
///
/// Cost: one read of `a` for all histograms, then one scatter of `n` items per digit.
///
/// # Panics
/// If `b` is not as long as `a`, or `digit_bits` is not between 1 and 16.
pub fn sort_by_key<T: Copy>(
    a: &mut [T],
    b: &mut [T],
    bound: u64,
    digit_bits: u32,
    key: impl Fn(&T) -> u64,
) -> bool {
    assert_eq!(
        a.len(),
        b.len(),
        "radix sort needs a scratch buffer as long as the input"
    );
    assert!(
        (1..=16).contains(&digit_bits),
        "radix sort digits of {digit_bits} bits"
    );
    let bits = 64 - bound.saturating_sub(1).leading_zeros();
    if a.len() < 2 || bits == 0 {
        return false;
    }
    if a.len() < SMALL {
        a.sort_by_key(&key);
        return false;
    }
    // As few passes as the digit width allows, and every pass's histogram from one read.
    let passes = bits.div_ceil(digit_bits);
    let width = bits.div_ceil(passes);
    let mask = (1u64 << width) - 1;
    let buckets = 1usize << width;
    let mut counts = vec![0usize; buckets * passes as usize];
    for it in a.iter() {
        let k = key(it);
        for (p, c) in counts.chunks_exact_mut(buckets).enumerate() {
            c[((k >> (p as u32 * width)) & mask) as usize] += 1;
        }
    }
    let mut in_b = false;
    for (pass, c) in counts.chunks_exact_mut(buckets).enumerate() {
        if c.contains(&a.len()) {
            continue;
        }
        // Exclusive prefix sums: where each digit's run starts.
        let mut at = 0;
        for n in c.iter_mut() {
            let here = *n;
            *n = at;
            at += here;
        }
        let shift = pass as u32 * width;
        let (src, dst): (&[T], &mut [T]) = if in_b { (&*b, &mut *a) } else { (&*a, &mut *b) };
        for it in src {
            let d = ((key(it) >> shift) & mask) as usize;
            dst[c[d]] = *it;
            c[d] += 1;
        }
        in_b = !in_b;
    }
    in_b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(mut items: Vec<(u32, u32)>, bound: u64) -> Vec<(u32, u32)> {
        let mut scratch = items.clone();
        if sort_by_key(&mut items, &mut scratch, bound, 11, |&(k, _)| k as u64) {
            scratch
        } else {
            items
        }
    }

    #[test]
    fn sorts_stably_like_the_standard_library() {
        let mut state = 12345u64;
        let items: Vec<(u32, u32)> = (0..5000)
            .map(|i| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                ((state >> 40) as u32 % 70_000, i)
            })
            .collect();
        let mut want = items.clone();
        want.sort_by_key(|&(k, _)| k);
        assert_eq!(sorted(items, 70_000), want);
    }

    #[test]
    fn small_and_constant_inputs() {
        assert_eq!(sorted(vec![(3, 0)], 4), [(3, 0)]);
        assert_eq!(
            sorted(vec![(7, 2), (7, 1), (7, 0)], 8),
            [(7, 2), (7, 1), (7, 0)]
        );
        assert_eq!(sorted(vec![(1, 0), (0, 1)], 1 << 40), [(0, 1), (1, 0)]);
    }

    #[test]
    fn every_digit_width_sorts_64_bit_keys_like_the_standard_library() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for n in [1usize, 2, 255, 256, 257, 4000] {
            let items: Vec<(u64, u64)> = (0..n as u64)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Many equal keys, and digits in which every key agrees.
                    (((x % 97) << 40) | (x % 5), i)
                })
                .collect();
            let mut want = items.clone();
            want.sort_by_key(|&(k, _)| k);
            for bits in [1, 3, 8, 11, 16] {
                let mut a = items.clone();
                let mut b = vec![(0, 0); n];
                let got = if sort_by_key(&mut a, &mut b, u64::MAX, bits, |&(k, _)| k) {
                    b
                } else {
                    a
                };
                assert_eq!(got, want, "{n} items, {bits}-bit digits");
            }
        }
    }
}
