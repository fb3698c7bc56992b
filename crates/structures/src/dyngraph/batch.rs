//! Batches of arcs: sorted by source then target without repeats, and walked as runs of one
//! source, for the structures' batched insertion.

/// The arcs of `batch` sorted by `(source, target)` with repeats removed, as `source << 32 |
/// target` keys: an LSD radix sort by 16-bit digits (digits that are the same in every key
/// are skipped), O(m) for `m` arcs.
pub(crate) fn sorted_keys(batch: &[(u32, u32)]) -> Vec<u64> {
    let mut keys: Vec<u64> = batch
        .iter()
        .map(|&(u, v)| (u64::from(u) << 32) | u64::from(v))
        .collect();
    if keys.len() < 256 {
        keys.sort_unstable();
    } else {
        radix_sort(&mut keys);
    }
    keys.dedup();
    keys
}

fn radix_sort(keys: &mut Vec<u64>) {
    let (mut or, mut and) = (0u64, u64::MAX);
    for &k in keys.iter() {
        or |= k;
        and &= k;
    }
    let differ = or ^ and;
    let mut other = vec![0u64; keys.len()];
    for shift in (0..64).step_by(16) {
        if (differ >> shift) & 0xffff == 0 {
            continue;
        }
        let mut count = vec![0usize; 1 << 16];
        for &k in keys.iter() {
            count[((k >> shift) & 0xffff) as usize] += 1;
        }
        let mut sum = 0;
        for c in count.iter_mut() {
            let n = *c;
            *c = sum;
            sum += n;
        }
        for &k in keys.iter() {
            let d = ((k >> shift) & 0xffff) as usize;
            other[count[d]] = k;
            count[d] += 1;
        }
        std::mem::swap(keys, &mut other);
    }
}

/// Calls `f(source, targets)` for every run of one source in sorted keys (targets increasing).
pub(crate) fn for_each_run(keys: &[u64], targets: &mut Vec<u32>, mut f: impl FnMut(u32, &[u32])) {
    let mut i = 0;
    while i < keys.len() {
        let u = (keys[i] >> 32) as u32;
        targets.clear();
        while i < keys.len() && (keys[i] >> 32) as u32 == u {
            targets.push(keys[i] as u32);
            i += 1;
        }
        f(u, targets);
    }
}

/// The largest id in sorted keys (sources and targets), if any.
pub(crate) fn max_id(keys: &[u64]) -> Option<u32> {
    let last_source = (*keys.last()? >> 32) as u32;
    let max_target = keys.iter().map(|&k| k as u32).max().unwrap_or(0);
    Some(last_source.max(max_target))
}

/// Merges the sorted targets `add` into the sorted list `old`, writing the union to `out`
/// (cleared first); returns how many of `add` were new. Each target of `add` is found by a
/// galloping search from the previous one, and the stretches of `old` between them are
/// copied whole, so a short batch costs O(k log Δ) searches plus one copy of the list.
pub(crate) fn merge_into(old: &[u32], add: &[u32], out: &mut Vec<u32>) -> usize {
    out.clear();
    out.reserve(old.len() + add.len());
    let mut from = 0;
    let mut new = 0;
    for &x in add {
        let rest = &old[from..];
        // Gallop to a window holding x's position, then search it.
        let mut hi = 1;
        while hi < rest.len() && rest[hi - 1] < x {
            hi *= 2;
        }
        let hi = hi.min(rest.len());
        let lo = hi / 2;
        let pos = from + lo + rest[lo..hi].partition_point(|&y| y < x);
        out.extend_from_slice(&old[from..pos]);
        from = pos;
        if old.get(pos) == Some(&x) {
            continue;
        }
        out.push(x);
        new += 1;
    }
    out.extend_from_slice(&old[from..]);
    new
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn keys_are_sorted_without_repeats() {
        let mut x = 5u64;
        let mut arcs = Vec::new();
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            arcs.push(((x >> 40) as u32 % 300, (x >> 20) as u32 % 70_000));
        }
        arcs.extend_from_slice(&arcs.clone()[..100]);
        let want: Vec<u64> = arcs
            .iter()
            .map(|&(u, v)| (u64::from(u) << 32) | u64::from(v))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(sorted_keys(&arcs), want);
        assert_eq!(max_id(&want), arcs.iter().map(|&(u, v)| u.max(v)).max());
    }

    #[test]
    fn merge_equals_a_set_union() {
        let mut x = 9u64;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) % m) as u32
        };
        let mut out = Vec::new();
        for _ in 0..300 {
            let a: BTreeSet<u32> = (0..next(200)).map(|_| next(500)).collect();
            let b: BTreeSet<u32> = (0..next(20)).map(|_| next(500)).collect();
            let old: Vec<u32> = a.iter().copied().collect();
            let add: Vec<u32> = b.iter().copied().collect();
            let new = merge_into(&old, &add, &mut out);
            let union: Vec<u32> = a.union(&b).copied().collect();
            assert_eq!(out, union);
            assert_eq!(new, b.difference(&a).count());
        }
    }
}
