//! Region-based decompositions (thesis section 3.2.2): RBD1, RBD2, RBD3, and their encoding
//! as boundaries plus seeds.
//!
//! A region is a set whose points are connected in the grid graph. Only its boundary points
//! (those with a neighbour in another region) and a few interior seeds are stored; decoding
//! floods from the seeds and stops at boundaries. A region's boundary is left out when every
//! neighbouring region keeps its own: the regions that drop their boundary form a maximal
//! independent set of the region adjacency graph, chosen greedily by boundary size
//! ([`streams`]).

use std::collections::VecDeque;

mod streams;

pub(crate) use streams::{decode_regions, encode_regions};

use super::float::{self, Sample};
use super::grid::Grid;
use super::sbd::Sets;
use super::sort::Sorted;
use super::SetRule;

/// "No region yet".
const NONE: u32 = u32::MAX;

/// A region decomposition: the region of every point and the value of every region.
pub(crate) struct Regions<T> {
    /// Region of each point; regions are numbered by their first point in grid order.
    pub(crate) region: Vec<u32>,
    /// Index into `values` of each region.
    pub(crate) value_of: Vec<u32>,
    /// The distinct stored values (per region for RBD1/RBD3, per set for RBD2).
    pub(crate) values: Vec<T>,
}

/// Running extent of a region under construction.
#[derive(Clone, Copy)]
struct Extent {
    lo: f64,
    hi: f64,
    /// Sum of `value - lo0` over the members, with `lo0` the first member's value.
    sum: f64,
    base: f64,
    count: u64,
}

impl Extent {
    fn new(v: f64) -> Extent {
        Extent {
            lo: v,
            hi: v,
            sum: 0.0,
            base: v,
            count: 1,
        }
    }

    fn add(&mut self, v: f64) {
        self.lo = self.lo.min(v);
        self.hi = self.hi.max(v);
        self.sum += v - self.base;
        self.count += 1;
    }

    fn with(&self, lo: f64, hi: f64) -> (f64, f64) {
        (self.lo.min(lo), self.hi.max(hi))
    }

    fn value<T: Sample>(&self, eps: f64, rule: SetRule) -> T {
        let target = match rule {
            SetRule::Ball => float::midpoint(self.lo, self.hi),
            SetRule::Range => self.base + self.sum / self.count as f64,
        };
        float::representative::<T>(self.lo, self.hi, eps, target)
            .unwrap_or_else(|| T::round_from(self.lo))
    }
}

/// Whether values spanning `[lo, hi]` may form one set under `rule`.
fn feasible<T: Sample>(lo: f64, hi: f64, eps: f64, rule: SetRule) -> bool {
    let limit = match rule {
        SetRule::Ball => {
            let top: T = float::hi_bound(lo, eps);
            float::reach_above(top.to_f64(), eps)
        }
        SetRule::Range => float::reach_above(lo, eps),
    };
    hi <= limit
}

/// Renumbers regions by their first point and returns the decomposition.
fn finish<T: Sample>(
    mut region: Vec<u32>,
    extents: &[Extent],
    eps: f64,
    rule: SetRule,
) -> Regions<T> {
    let mut renumber = vec![NONE; extents.len()];
    let mut next = 0u32;
    for r in region.iter_mut() {
        if renumber[*r as usize] == NONE {
            renumber[*r as usize] = next;
            next += 1;
        }
        *r = renumber[*r as usize];
    }
    let mut values = vec![T::round_from(0.0); extents.len()];
    for (old, e) in extents.iter().enumerate() {
        values[renumber[old] as usize] = e.value::<T>(eps, rule);
    }
    Regions {
        region,
        value_of: (0..extents.len() as u32).collect(),
        values,
    }
}

/// Grows RBD1 regions over the points still unassigned in `region`, taking seeds in value
/// order: each region starts at the lowest unassigned point and floods to every unassigned
/// neighbour whose value keeps the region feasible.
///
/// No priority queue is needed: the seed is the lowest unassigned value, so whether a point
/// may join depends only on its own value (at most the seed's limit), not on the region grown
/// so far. The region is therefore the connected component of admissible unassigned points
/// around the seed, whatever the visiting order, and a breadth-first flood finds it in time
/// proportional to the region and its boundary.
fn rbd1_fill<T: Sample>(
    data: &[T],
    grid: &Grid,
    sorted: &Sorted,
    eps: f64,
    rule: SetRule,
    region: &mut [u32],
    extents: &mut Vec<Extent>,
) {
    let mut queue = VecDeque::new();
    for (rank, &seed) in sorted.order.iter().enumerate() {
        let seed = seed as usize;
        if region[seed] != NONE {
            continue;
        }
        let lo = sorted.values[rank];
        let limit = match rule {
            SetRule::Ball => {
                let top: T = float::hi_bound(lo, eps);
                float::reach_above(top.to_f64(), eps)
            }
            SetRule::Range => float::reach_above(lo, eps),
        };
        let id = extents.len() as u32;
        let mut ext = Extent::new(lo);
        region[seed] = id;
        queue.push_back(seed);
        while let Some(u) = queue.pop_front() {
            grid.for_each_neighbour(u, |w| {
                if region[w] == NONE {
                    let v = data[w].to_f64();
                    // Unassigned points are not below `lo` (seeds come in value order).
                    if v <= limit {
                        region[w] = id;
                        ext.add(v);
                        queue.push_back(w);
                    }
                }
            });
        }
        extents.push(ext);
    }
}

/// RBD1: regions grown from the lowest unassigned value (fewest regions, greedily).
pub(crate) fn rbd1<T: Sample>(
    data: &[T],
    grid: &Grid,
    sorted: &Sorted,
    eps: f64,
    rule: SetRule,
) -> Regions<T> {
    let mut region = vec![NONE; data.len()];
    let mut extents = Vec::new();
    rbd1_fill(data, grid, sorted, eps, rule, &mut region, &mut extents);
    finish(region, &extents, eps, rule)
}

/// RBD2: the connected components of each SBD1 set; a region keeps its set's value.
pub(crate) fn rbd2<T: Sample>(grid: &Grid, sets: &Sets<T>) -> Regions<T> {
    let n = sets.ids.len();
    let mut region = vec![NONE; n];
    let mut value_of = Vec::new();
    let mut queue = VecDeque::new();
    for p in 0..n {
        if region[p] != NONE {
            continue;
        }
        let id = value_of.len() as u32;
        let set = sets.ids[p];
        value_of.push(set);
        region[p] = id;
        queue.push_back(p);
        while let Some(u) = queue.pop_front() {
            grid.for_each_neighbour(u, |w| {
                if region[w] == NONE && sets.ids[w] == set {
                    region[w] = id;
                    queue.push_back(w);
                }
            });
        }
    }
    // Regions are numbered in scan order of their first point already.
    Regions {
        region,
        value_of,
        values: sets.reps.clone(),
    }
}

/// RBD3: core regions whose members include interior points, then expansion by single
/// points, then RBD1 on what is left.
///
/// Phase 1 visits candidate centres in grid order (the thesis picks them at random): a point
/// whose closed neighbourhood is feasible and unassigned starts a region with that
/// neighbourhood; the region then absorbs any adjacent unassigned point `u` of the same kind
/// together with `u`'s unassigned neighbours, so that `u` becomes interior. Phase 2 lets
/// every unassigned point join an adjacent region that stays feasible; phase 3 is RBD1.
pub(crate) fn rbd3<T: Sample>(
    data: &[T],
    grid: &Grid,
    sorted: &Sorted,
    eps: f64,
    rule: SetRule,
) -> Regions<T> {
    let n = data.len();
    let val = |p: usize| data[p].to_f64();
    // Closed-neighbourhood extents and core eligibility.
    let mut core = vec![false; n];
    let mut nb_lo = vec![0f64; n];
    let mut nb_hi = vec![0f64; n];
    for p in 0..n {
        let (mut lo, mut hi) = (val(p), val(p));
        grid.for_each_neighbour(p, |w| {
            lo = lo.min(val(w));
            hi = hi.max(val(w));
        });
        nb_lo[p] = lo;
        nb_hi[p] = hi;
        core[p] = feasible::<T>(lo, hi, eps, rule);
    }
    let mut region = vec![NONE; n];
    let mut extents: Vec<Extent> = Vec::new();
    let mut queue = VecDeque::new();
    let mut nbrs: Vec<usize> = Vec::new();
    for c in 0..n {
        if !core[c] || region[c] != NONE {
            continue;
        }
        let mut free = true;
        grid.for_each_neighbour(c, |w| free &= region[w] == NONE);
        if !free {
            continue;
        }
        let id = extents.len() as u32;
        let mut ext = Extent::new(val(c));
        region[c] = id;
        queue.clear();
        nbrs.clear();
        grid.for_each_neighbour(c, |w| nbrs.push(w));
        for &w in &nbrs {
            region[w] = id;
            ext.add(val(w));
        }
        for &w in &nbrs {
            grid.for_each_neighbour(w, |u| {
                if region[u] == NONE && core[u] {
                    queue.push_back(u);
                }
            });
        }
        while let Some(u) = queue.pop_front() {
            if region[u] != NONE || !core[u] {
                continue;
            }
            // u's neighbours must be in this region or unassigned.
            let mut ok = true;
            grid.for_each_neighbour(u, |w| ok &= region[w] == NONE || region[w] == id);
            if !ok {
                continue;
            }
            let (lo, hi) = ext.with(nb_lo[u], nb_hi[u]);
            if !feasible::<T>(lo, hi, eps, rule) {
                continue;
            }
            nbrs.clear();
            nbrs.push(u);
            grid.for_each_neighbour(u, |w| {
                if region[w] == NONE {
                    nbrs.push(w);
                }
            });
            for &w in &nbrs {
                region[w] = id;
                ext.add(val(w));
            }
            for &w in &nbrs {
                grid.for_each_neighbour(w, |x| {
                    if region[x] == NONE && core[x] {
                        queue.push_back(x);
                    }
                });
            }
        }
        extents.push(ext);
    }
    // Phase 2: single points join an adjacent region that stays feasible.
    for p in 0..n {
        if region[p] != NONE {
            continue;
        }
        let v = val(p);
        let mut join = NONE;
        grid.for_each_neighbour(p, |w| {
            let r = region[w];
            if join == NONE && r != NONE {
                let (lo, hi) = extents[r as usize].with(v, v);
                if feasible::<T>(lo, hi, eps, rule) {
                    join = r;
                }
            }
        });
        if join != NONE {
            region[p] = join;
            extents[join as usize].add(v);
        }
    }
    // Phase 3: RBD1 on the rest.
    rbd1_fill(data, grid, sorted, eps, rule, &mut region, &mut extents);
    finish(region, &extents, eps, rule)
}

#[cfg(test)]
mod tests {
    use super::super::sbd::sbd1;
    use super::super::sort::sort_by_value;
    use super::*;

    fn field(nx: usize, ny: usize) -> Vec<f64> {
        (0..nx * ny)
            .map(|p| {
                let (x, y) = ((p % nx) as f64, (p / nx) as f64);
                (x * 0.3).sin() * 3.0 + (y * 0.2).cos() * 2.0
            })
            .collect()
    }

    fn connected(grid: &Grid, region: &[u32]) -> bool {
        // Each region is one connected component.
        let n = region.len();
        let mut seen = vec![false; n];
        let mut comps = std::collections::HashMap::new();
        for p in 0..n {
            if seen[p] {
                continue;
            }
            *comps.entry(region[p]).or_insert(0) += 1;
            let mut q = vec![p];
            seen[p] = true;
            while let Some(u) = q.pop() {
                grid.for_each_neighbour(u, |w| {
                    if !seen[w] && region[w] == region[u] {
                        seen[w] = true;
                        q.push(w);
                    }
                });
            }
        }
        comps.values().all(|&c| c == 1)
    }

    #[test]
    fn regions_are_connected_bounded_and_round_trip() {
        let (nx, ny) = (40, 30);
        let data = field(nx, ny);
        let grid = Grid::structured(&[nx, ny]);
        let sorted = sort_by_value(&data);
        let eps = 0.4;
        for rule in [SetRule::Ball, SetRule::Range] {
            let sets = sbd1::<f64>(&sorted, eps, rule);
            for regions in [
                rbd1::<f64>(&data, &grid, &sorted, eps, rule),
                rbd2::<f64>(&grid, &sets),
                rbd3::<f64>(&data, &grid, &sorted, eps, rule),
            ] {
                assert!(connected(&grid, &regions.region));
                for (p, &x) in data.iter().enumerate() {
                    let q = regions.values[regions.value_of[regions.region[p] as usize] as usize];
                    assert!(float::within(x, q, eps), "point {p}");
                }
                let s = encode_regions(&grid, &regions.region, &regions.value_of);
                let got = decode_regions(
                    &grid,
                    data.len(),
                    regions.value_of.len(),
                    regions.values.len(),
                    &s.n_seeds,
                    &s.n_boundary,
                    &s.seeds,
                    &s.boundary,
                    &s.value_of,
                )
                .unwrap();
                let want: Vec<u32> = regions
                    .region
                    .iter()
                    .map(|&r| regions.value_of[r as usize])
                    .collect();
                assert_eq!(got, want);
                assert!(s.stored_boundary < data.len());
            }
        }
    }

    #[test]
    fn nested_regions_need_their_own_seeds() {
        // A ring of high values around a low pocket inside a low sea: the pocket and the sea
        // are separate regions with the same set.
        let (nx, ny) = (9, 9);
        let mut data = vec![0.0f64; nx * ny];
        for y in 2..7 {
            for x in 2..7 {
                if x == 2 || x == 6 || y == 2 || y == 6 {
                    data[x + nx * y] = 10.0;
                }
            }
        }
        let grid = Grid::structured(&[nx, ny]);
        let sorted = sort_by_value(&data);
        let sets = sbd1::<f64>(&sorted, 0.5, SetRule::Ball);
        let regions = rbd2::<f64>(&grid, &sets);
        assert_eq!(regions.value_of.len(), 3);
        let s = encode_regions(&grid, &regions.region, &regions.value_of);
        let got = decode_regions(
            &grid,
            nx * ny,
            3,
            regions.values.len(),
            &s.n_seeds,
            &s.n_boundary,
            &s.seeds,
            &s.boundary,
            &s.value_of,
        )
        .unwrap();
        assert_eq!(got, sets.ids);
    }
}
