//! Least-significant-digit radix sort on integer keys: linear time, stable, no comparisons.

/// Sorts `a` by `key` (stable), where every key is below `bound`, using `b` (as long as `a`)
/// as the second buffer. Digits of up to 11 bits, as few passes as `bound` allows. Returns whether the
/// sorted items ended up in `b` (else in `a`).
pub(crate) fn sort_by_key<T: Copy>(
    a: &mut [T],
    b: &mut [T],
    bound: u64,
    key: impl Fn(&T) -> u64,
) -> bool {
    assert_eq!(
        a.len(),
        b.len(),
        "radix sort needs a scratch buffer as long as the input"
    );
    let bits = 64 - bound.saturating_sub(1).leading_zeros();
    if a.len() < 2 || bits == 0 {
        return false;
    }
    // Digits of at most 11 bits (2048 buckets: the scatter's write streams still fit the
    // caches), as few passes as that allows, and every pass's histogram from one read.
    let passes = bits.div_ceil(11);
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
        if sort_by_key(&mut items, &mut scratch, bound, |&(k, _)| k as u64) {
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
}
