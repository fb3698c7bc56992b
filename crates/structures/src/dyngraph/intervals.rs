//! The intervalised adjacency list shared by DIAA and DCAA (thesis figure 4.2).
//!
//! One flat array per vertex: `[i, E1, L1, ..., Ei, Li, R1, ..., Rk]`, with `i` intervals
//! `[Ej, Ej + Lj)` sorted by start and `k` residual ids sorted, and an empty array for a
//! vertex without neighbours. The form is canonical: the intervals are exactly the maximal
//! runs of two or more consecutive ids (the thesis's figures use runs of length 2 as
//! intervals), so residuals are never adjacent to each other or to an interval.
//!
//! Inserting `x` joins whatever holds `x - 1` and `x + 1`: nothing (a new residual), a
//! residual (a new interval), an interval (the thesis's *int-new*), an interval and a
//! residual (*int-new-res*) or two intervals (*int-int*). Deleting splits an interval into
//! up to two pieces, each an interval or a residual.

/// Number of intervals of a non-empty array.
#[inline]
fn count(a: &[u32]) -> usize {
    a.first().map_or(0, |&c| c as usize)
}

/// `(index of the last interval starting at or below x, if any)`.
#[inline]
fn last_start_at_or_below(a: &[u32], i: usize, x: u32) -> Option<usize> {
    // Starts are at a[1 + 2j], increasing. A binary search without a data-dependent branch
    // (the halving compiles to a conditional move), as the standard library's.
    if i == 0 {
        return None;
    }
    let (mut base, mut size) = (0usize, i);
    while size > 1 {
        let half = size / 2;
        let mid = base + half;
        base = if a[1 + 2 * mid] <= x { mid } else { base };
        size -= half;
    }
    (a[1 + 2 * base] <= x).then_some(base)
}

/// Whether `x` is in the list.
pub(crate) fn contains(a: &[u32], x: u32) -> bool {
    let i = count(a);
    if a.is_empty() {
        return false;
    }
    if let Some(j) = last_start_at_or_below(a, i, x) {
        if x - a[1 + 2 * j] < a[2 + 2 * j] {
            return true;
        }
    }
    a[1 + 2 * i..].binary_search(&x).is_ok()
}

/// Number of ids in the list.
#[cfg(test)]
fn degree(a: &[u32]) -> usize {
    let i = count(a);
    if a.is_empty() {
        return 0;
    }
    let in_intervals: usize = (0..i).map(|j| a[2 + 2 * j] as usize).sum();
    in_intervals + a.len() - 1 - 2 * i
}

/// Calls `f` with every id in increasing order (merging intervals and residuals).
#[inline]
pub(crate) fn for_each(a: &[u32], mut f: impl FnMut(u32)) {
    if a.is_empty() {
        return;
    }
    let i = count(a);
    let res = &a[1 + 2 * i..];
    let mut r = 0;
    for j in 0..i {
        let (s, l) = (a[1 + 2 * j], a[2 + 2 * j]);
        while r < res.len() && res[r] < s {
            f(res[r]);
            r += 1;
        }
        for x in s..s + l {
            f(x);
        }
    }
    for &x in &res[r..] {
        f(x);
    }
}

/// Calls `f` with every id, intervals first and then residuals (not in increasing order).
#[inline]
pub(crate) fn visit(a: &[u32], mut f: impl FnMut(u32)) {
    if a.is_empty() {
        return;
    }
    let i = count(a);
    for j in 0..i {
        let (s, l) = (a[1 + 2 * j], a[2 + 2 * j]);
        (s..s + l).for_each(&mut f);
    }
    a[1 + 2 * i..].iter().for_each(|&x| f(x));
}

/// The canonical array of the increasing, repeat-free ids `ids` into `out` (cleared first;
/// empty for no ids); `residuals` is scratch space.
pub(crate) fn from_sorted(ids: &[u32], out: &mut Vec<u32>, residuals: &mut Vec<u32>) {
    out.clear();
    residuals.clear();
    if ids.is_empty() {
        return;
    }
    out.push(0);
    let mut i = 0;
    while i < ids.len() {
        let mut j = i + 1;
        while j < ids.len() && ids[j] == ids[j - 1] + 1 {
            j += 1;
        }
        if j - i >= 2 {
            out.push(ids[i]);
            out.push((j - i) as u32);
            out[0] += 1;
        } else {
            residuals.push(ids[i]);
        }
        i = j;
    }
    out.extend_from_slice(residuals);
}

/// Inserts `x`; `false` if present. Grows the array by at most one word.
pub(crate) fn insert(a: &mut Vec<u32>, x: u32) -> bool {
    if a.is_empty() {
        a.push(0);
    }
    let i = count(a);
    let jl = last_start_at_or_below(a, i, x);
    if let Some(j) = jl {
        if x - a[1 + 2 * j] < a[2 + 2 * j] {
            return false;
        }
    }
    let rbase = 1 + 2 * i;
    let pos = a[rbase..].partition_point(|&r| r < x);
    let k = a.len() - rbase;
    if pos < k && a[rbase + pos] == x {
        return false;
    }
    // What holds x - 1 and x + 1.
    let left_ivl = jl.filter(|&j| x > 0 && a[1 + 2 * j] + a[2 + 2 * j] == x);
    let left_res = x > 0 && pos > 0 && a[rbase + pos - 1] == x - 1;
    let next = jl.map_or(0, |j| j + 1);
    let right_ivl = (next < i && a[1 + 2 * next] == x + 1).then_some(next);
    let right_res = pos < k && a[rbase + pos] == x + 1;
    // Where a new interval goes: after every interval starting below x.
    let new_at = 1 + 2 * next;
    match (left_ivl, left_res, right_ivl, right_res) {
        (Some(j), _, Some(j2), _) => {
            // int-int: join the two intervals.
            a[2 + 2 * j] += 1 + a[2 + 2 * j2];
            a.drain(1 + 2 * j2..3 + 2 * j2);
            a[0] -= 1;
        }
        (Some(j), _, None, true) => {
            // int-new-res: extend over x and the residual x + 1.
            a[2 + 2 * j] += 2;
            a.remove(rbase + pos);
        }
        (Some(j), _, None, false) => {
            a[2 + 2 * j] += 1;
        }
        (None, true, Some(j2), _) => {
            a[1 + 2 * j2] = x - 1;
            a[2 + 2 * j2] += 2;
            a.remove(rbase + pos - 1);
        }
        (None, false, Some(j2), _) => {
            a[1 + 2 * j2] = x;
            a[2 + 2 * j2] += 1;
        }
        (None, true, None, true) => {
            a.drain(rbase + pos - 1..rbase + pos + 1);
            a.splice(new_at..new_at, [x - 1, 3]);
            a[0] += 1;
        }
        (None, true, None, false) => {
            a.remove(rbase + pos - 1);
            a.splice(new_at..new_at, [x - 1, 2]);
            a[0] += 1;
        }
        (None, false, None, true) => {
            a.remove(rbase + pos);
            a.splice(new_at..new_at, [x, 2]);
            a[0] += 1;
        }
        (None, false, None, false) => {
            a.insert(rbase + pos, x);
        }
    }
    true
}

/// Deletes `x`; `false` if absent. Grows the array by at most one word; empties it when the
/// last id goes.
pub(crate) fn delete(a: &mut Vec<u32>, x: u32) -> bool {
    if a.is_empty() {
        return false;
    }
    let i = count(a);
    let removed = match last_start_at_or_below(a, i, x) {
        Some(j) if x - a[1 + 2 * j] < a[2 + 2 * j] => {
            let (s, l) = (a[1 + 2 * j], a[2 + 2 * j]);
            let left = x - s; // ids s..x
            let right = s + l - 1 - x; // ids x+1..s+l
            let mut words: [u32; 4] = [0; 4];
            let mut nw = 0;
            let mut residuals: [u32; 2] = [0; 2];
            let mut nr = 0;
            if left >= 2 {
                words[nw] = s;
                words[nw + 1] = left;
                nw += 2;
            } else if left == 1 {
                residuals[nr] = s;
                nr += 1;
            }
            if right >= 2 {
                words[nw] = x + 1;
                words[nw + 1] = right;
                nw += 2;
            } else if right == 1 {
                residuals[nr] = x + 1;
                nr += 1;
            }
            a.splice(1 + 2 * j..3 + 2 * j, words[..nw].iter().copied());
            a[0] = (i - 1 + nw / 2) as u32;
            let rbase = 1 + 2 * count(a);
            for &r in &residuals[..nr] {
                let pos = a[rbase..].partition_point(|&y| y < r);
                a.insert(rbase + pos, r);
            }
            true
        }
        _ => {
            let rbase = 1 + 2 * i;
            match a[rbase..].binary_search(&x) {
                Ok(pos) => {
                    a.remove(rbase + pos);
                    true
                }
                Err(_) => false,
            }
        }
    };
    if removed && a.len() == 1 {
        a.clear();
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn check(a: &[u32], want: &BTreeSet<u32>) {
        let mut got = Vec::new();
        for_each(a, |x| got.push(x));
        assert_eq!(got, want.iter().copied().collect::<Vec<_>>(), "array {a:?}");
        assert_eq!(degree(a), want.len());
        if want.is_empty() {
            assert!(a.is_empty());
            return;
        }
        // Canonical: intervals are maximal runs of length >= 2, residuals isolated.
        let i = a[0] as usize;
        for j in 0..i {
            let (s, l) = (a[1 + 2 * j], a[2 + 2 * j]);
            assert!(l >= 2);
            assert!(s == 0 || !want.contains(&(s - 1)));
            assert!(!want.contains(&(s + l)));
        }
        for &r in &a[1 + 2 * i..] {
            assert!(r == 0 || !want.contains(&(r - 1)));
            assert!(!want.contains(&(r + 1)));
        }
    }

    #[test]
    fn thesis_figure_4_4() {
        // Vertex 33: [1, 3] + 5, 15, 23; inserting 4 gives [1, 5] + 15, 23 (int-new-res).
        let mut a = Vec::new();
        for x in [1, 2, 3, 5, 15, 23] {
            insert(&mut a, x);
        }
        assert_eq!(a, vec![1, 1, 3, 5, 15, 23]);
        insert(&mut a, 4);
        assert_eq!(a, vec![1, 1, 5, 15, 23]);
        // Vertex 34: [1, 3], [5, 2] + 8; inserting 4 joins the intervals (int-int).
        let mut b = Vec::new();
        for x in [1, 2, 3, 5, 6, 8] {
            insert(&mut b, x);
        }
        assert_eq!(b, vec![2, 1, 3, 5, 2, 8]);
        insert(&mut b, 4);
        assert_eq!(b, vec![1, 1, 6, 8]);
        // Vertex 15: [32, 4] + 14; inserting 31 extends the interval down (int-new).
        let mut c = Vec::new();
        for x in [14, 32, 33, 34, 35] {
            insert(&mut c, x);
        }
        insert(&mut c, 31);
        assert_eq!(c, vec![1, 31, 5, 14]);
    }

    #[test]
    fn exhaustive_small_sets() {
        // Every subset of 0..10 built by insertions in a scrambled order, then torn down.
        for mask in 0u32..1024 {
            let mut a = Vec::new();
            let mut want = BTreeSet::new();
            for k in 0..10u32 {
                let x = (k * 7) % 10;
                if mask & (1 << x) != 0 {
                    assert!(insert(&mut a, x));
                    assert!(!insert(&mut a, x));
                    want.insert(x);
                    check(&a, &want);
                }
            }
            for x in 0..12 {
                assert_eq!(contains(&a, x), want.contains(&x));
            }
            for k in 0..10u32 {
                let x = (k * 3) % 10;
                assert_eq!(delete(&mut a, x), want.remove(&x));
                check(&a, &want);
            }
            assert!(a.is_empty());
        }
    }
}
