//! Set-based decompositions (thesis section 3.2.1): SBD1 and SBD2.
//!
//! Both work on the points sorted by value and cut that sequence into contiguous runs; a
//! run becomes a set, stored as one representative value. Sets are numbered in value order
//! (set 0 holds the smallest values), so that neighbouring grid points of a smooth field get
//! equal or nearby set ids, which is what the id encodings exploit.

use super::float::{self, Sample};
use super::sort::Sorted;
use super::SetRule;

/// An epsilon-bounded set decomposition: a set id per point and a representative per set.
pub(crate) struct Sets<T> {
    /// Set of each point (in grid order).
    pub(crate) ids: Vec<u32>,
    /// Representative of each set, increasing with the set id.
    pub(crate) reps: Vec<T>,
}

/// The last rank `j >= i` with `values[j] <= limit` (`values[i] <= limit`), by galloping.
fn last_within(values: &[f64], i: usize, limit: f64) -> usize {
    let n = values.len();
    let mut lo = i; // known to satisfy
    let mut step = 1;
    let mut hi = loop {
        let probe = lo + step;
        if probe >= n {
            break n;
        }
        if values[probe] <= limit {
            lo = probe;
            step *= 2;
        } else {
            break probe;
        }
    };
    // values[lo] <= limit, values[hi] > limit (or hi == n).
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if values[mid] <= limit {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The largest value a run starting at `lo` may contain under `rule`.
fn run_limit<T: Sample>(lo: f64, eps: f64, rule: SetRule) -> f64 {
    match rule {
        SetRule::Ball => {
            // The highest representative that still covers `lo`, and how far above it a
            // value may lie.
            let top: T = float::hi_bound(lo, eps);
            float::reach_above(top.to_f64(), eps)
        }
        SetRule::Range => float::reach_above(lo, eps),
    }
}

/// The representative of the run `values[a..=b]` under `rule`.
fn run_value<T: Sample>(values: &[f64], a: usize, b: usize, eps: f64, rule: SetRule) -> T {
    let (lo, hi) = (values[a], values[b]);
    let target = match rule {
        SetRule::Ball => float::midpoint(lo, hi),
        SetRule::Range => {
            // The mean, accumulated relative to `lo` so that huge magnitudes do not overflow.
            let sum: f64 = values[a..=b].iter().map(|&v| v - lo).sum();
            lo + sum / (b - a + 1) as f64
        }
    };
    // Every run is feasible by construction (`run_limit`); the fallback keeps a run of one
    // distinct value exact should that ever not hold.
    float::representative::<T>(lo, hi, eps, target).unwrap_or_else(|| T::round_from(lo))
}

/// SBD1: greedy runs from the smallest value, each as long as the rule allows. The result has
/// the fewest sets of any decomposition into runs that obey the rule.
///
/// Cost: O(k log(n/k)) comparisons for k sets after the sort, plus O(n) to write the ids.
pub(crate) fn sbd1<T: Sample>(sorted: &Sorted, eps: f64, rule: SetRule) -> Sets<T> {
    let values = &sorted.values;
    let n = values.len();
    let mut ids = vec![0u32; n];
    let mut reps = Vec::new();
    let mut i = 0;
    while i < n {
        let limit = run_limit::<T>(values[i], eps, rule);
        let j = last_within(values, i, limit);
        let set = reps.len() as u32;
        reps.push(run_value::<T>(values, i, j, eps, rule));
        for &p in &sorted.order[i..=j] {
            ids[p as usize] = set;
        }
        i = j + 1;
    }
    Sets { ids, reps }
}

/// SBD2: repeatedly take the longest run that obeys the rule anywhere in what is left, then
/// recurse on the parts before and after it (thesis: "maximise r - q").
///
/// Cost: O(n) for the longest run starting at every rank, then O(log n) per set with a
/// segment tree of run lengths; O(n) extra memory.
pub(crate) fn sbd2<T: Sample>(sorted: &Sorted, eps: f64, rule: SetRule) -> Sets<T> {
    let values = &sorted.values;
    let n = values.len();
    if n == 0 {
        return Sets {
            ids: Vec::new(),
            reps: Vec::new(),
        };
    }
    // reach[i]: the last rank a run starting at i may extend to (non-decreasing in i).
    let mut reach = vec![0u32; n];
    let mut j = 0usize;
    for i in 0..n {
        let limit = run_limit::<T>(values[i], eps, rule);
        j = j.max(i);
        while j + 1 < n && values[j + 1] <= limit {
            j += 1;
        }
        reach[i] = j as u32;
    }
    let tree = MaxTree::new(
        &reach
            .iter()
            .enumerate()
            .map(|(i, &r)| r - i as u32)
            .collect::<Vec<u32>>(),
    );
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut stack = vec![(0usize, n - 1)];
    while let Some((a, b)) = stack.pop() {
        // Starts whose run reaches past b are cut at b; the longest of those starts first.
        let first_cut = a + reach[a..=b].partition_point(|&r| (r as usize) < b);
        let mut best = (b - first_cut, first_cut);
        if first_cut > a {
            let (len, at) = tree.argmax(a, first_cut);
            if len as usize > best.0 || (len as usize == best.0 && at < best.1) {
                best = (len as usize, at);
            }
        }
        let (q, r) = (best.1, best.1 + best.0);
        runs.push((q, r));
        if q > a {
            stack.push((a, q - 1));
        }
        if r < b {
            stack.push((r + 1, b));
        }
    }
    runs.sort_unstable();
    let mut ids = vec![0u32; n];
    let mut reps = Vec::with_capacity(runs.len());
    for (set, &(q, r)) in runs.iter().enumerate() {
        reps.push(run_value::<T>(values, q, r, eps, rule));
        for &p in &sorted.order[q..=r] {
            ids[p as usize] = set as u32;
        }
    }
    Sets { ids, reps }
}

/// A segment tree answering "largest value and its first position" over ranges.
struct MaxTree {
    n: usize,
    /// Leaves at `n..2n`; each entry packs `(value << 32) | !position`.
    nodes: Vec<u64>,
}

impl MaxTree {
    fn new(values: &[u32]) -> MaxTree {
        let n = values.len();
        let mut nodes = vec![0u64; 2 * n];
        for (i, &v) in values.iter().enumerate() {
            nodes[n + i] = (u64::from(v) << 32) | u64::from(!(i as u32));
        }
        for i in (1..n).rev() {
            nodes[i] = nodes[2 * i].max(nodes[2 * i + 1]);
        }
        MaxTree { n, nodes }
    }

    /// `(value, position)` of the largest value in `[l, r)` (the first one on ties); `l < r`.
    fn argmax(&self, l: usize, r: usize) -> (u32, usize) {
        let (mut l, mut r) = (l + self.n, r + self.n);
        let mut best = 0u64;
        while l < r {
            if l & 1 == 1 {
                best = best.max(self.nodes[l]);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                best = best.max(self.nodes[r]);
            }
            l /= 2;
            r /= 2;
        }
        ((best >> 32) as u32, !(best as u32) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::super::sort::sort_by_value;
    use super::*;

    fn check<T: Sample>(data: &[T], sets: &Sets<T>, eps: f64) {
        for (i, &v) in data.iter().enumerate() {
            let q = sets.reps[sets.ids[i] as usize];
            assert!(float::within(v.to_f64(), q.to_f64(), eps), "point {i}");
        }
        for w in sets.reps.windows(2) {
            assert!(w[0] < w[1], "representatives increase with the set id");
        }
    }

    #[test]
    fn sbd1_is_minimal_on_a_ramp() {
        let data: Vec<f64> = (0..100).map(f64::from).collect();
        let s = sort_by_value(&data);
        // Ball rule, eps = 1: each set spans 3 consecutive integers.
        let sets = sbd1::<f64>(&s, 1.0, SetRule::Ball);
        check(&data, &sets, 1.0);
        assert_eq!(sets.reps.len(), 34);
        // Thesis rule: range <= 1, so pairs.
        let sets = sbd1::<f64>(&s, 1.0, SetRule::Range);
        check(&data, &sets, 1.0);
        assert_eq!(sets.reps.len(), 50);
    }

    #[test]
    fn sbd2_takes_the_largest_run_first() {
        // A dense cluster in the middle: SBD1 starting from the left splits it, SBD2 keeps it
        // whole.
        let mut data = vec![0.0, 1.5];
        data.extend(std::iter::repeat_n(2.6, 10));
        data.extend([3.4, 3.5, 10.0]);
        let s = sort_by_value(&data);
        let sets = sbd2::<f64>(&s, 0.5, SetRule::Ball);
        check(&data, &sets, 0.5);
        let big = sets.ids[2];
        assert!(sets.ids[2..12].iter().all(|&i| i == big));
        assert_eq!(
            sets.ids[12], big,
            "3.4 joins the cluster (range 0.8 <= 2 eps)"
        );
        let sets1 = sbd1::<f64>(&s, 0.5, SetRule::Ball);
        check(&data, &sets1, 0.5);
    }

    #[test]
    fn max_tree_finds_first_maximum() {
        let t = MaxTree::new(&[3, 7, 7, 1, 9, 9, 2]);
        assert_eq!(t.argmax(0, 7), (9, 4));
        assert_eq!(t.argmax(0, 4), (7, 1));
        assert_eq!(t.argmax(2, 4), (7, 2));
        assert_eq!(t.argmax(6, 7), (2, 6));
    }
}
