//! Least-significant-digit radix sort on integer keys: linear time, stable, no comparisons.

/// Sorts `a` by `key` (stable), where every key is below `bound`, using `b` (as long as `a`)
/// as the second buffer. 8-bit digits, as many passes as `bound` needs. Returns whether the
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
    let passes = bits.div_ceil(8);
    let mut in_b = false;
    if a.len() < 2 {
        return false;
    }
    for pass in 0..passes {
        let shift = pass * 8;
        let (src, dst): (&[T], &mut [T]) = if in_b { (&*b, &mut *a) } else { (&*a, &mut *b) };
        let mut counts = [0usize; 257];
        for it in src {
            counts[((key(it) >> shift) & 0xff) as usize + 1] += 1;
        }
        if counts.contains(&src.len()) {
            // Every key has the same digit: this pass would not move anything.
            continue;
        }
        for d in 0..256 {
            counts[d + 1] += counts[d];
        }
        for it in src {
            let d = ((key(it) >> shift) & 0xff) as usize;
            dst[counts[d]] = *it;
            counts[d] += 1;
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
