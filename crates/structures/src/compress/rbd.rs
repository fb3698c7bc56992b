//! Region-based decompositions (thesis section 3.2.2): RBD1, RBD2, RBD3, and their encoding
//! as boundaries plus seeds.
//!
//! A region is a set whose points are connected in the grid graph. Only its boundary points
//! (those with a neighbour in another region) and a few interior seeds are stored; decoding
//! floods from the seeds and stops at boundaries. A region's boundary is left out when every
//! neighbouring region keeps its own: the regions that drop their boundary form a maximal
//! independent set of the region adjacency graph, chosen greedily by boundary size.

use std::collections::VecDeque;

use super::encodings::{put_varint, unzigzag, zigzag, VarintReader};
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

/// The stored form of a region decomposition: the thesis's arrays `N_I`, `N_B`, `I_I` and
/// `I_B` as varint streams, plus the value index of every region.
pub(crate) struct RegionStreams {
    /// Seeds per region.
    pub(crate) n_seeds: Vec<u8>,
    /// Stored boundary points per region (0 where the boundary is left out).
    pub(crate) n_boundary: Vec<u8>,
    /// Seeds, region after region, increasing within a region: the first as a zigzag
    /// difference to the first seed of the previous region that has one, the rest as gaps.
    pub(crate) seeds: Vec<u8>,
    /// Boundary points, coded like the seeds.
    pub(crate) boundary: Vec<u8>,
    /// Value index of every region as zigzag differences (empty when region i uses value i).
    pub(crate) value_of: Vec<u8>,
    /// Statistics: stored boundary points and seeds.
    pub(crate) stored_boundary: usize,
    pub(crate) stored_seeds: usize,
}

/// Appends an increasing list: the first element against `*first` (updated), the rest as gaps.
fn put_list(out: &mut Vec<u8>, list: &[u32], first: &mut i64) {
    if let Some((&head, rest)) = list.split_first() {
        put_varint(out, zigzag(i64::from(head) - *first));
        *first = i64::from(head);
        let mut prev = head;
        for &p in rest {
            put_varint(out, u64::from(p - prev - 1));
            prev = p;
        }
    }
}

/// Reads a list written by [`put_list`], checking every point against `n`.
fn get_list(
    r: &mut VarintReader<'_>,
    len: u64,
    first: &mut i64,
    n: usize,
    out: &mut Vec<u32>,
) -> Result<(), String> {
    out.clear();
    let mut prev: i64 = 0;
    for i in 0..len {
        let p = if i == 0 {
            let p = first.wrapping_add(unzigzag(r.next()?));
            *first = p;
            p
        } else {
            let g = r.next()?;
            prev.saturating_add(i64::try_from(g).unwrap_or(i64::MAX))
                .saturating_add(1)
        };
        if p < 0 || p >= n as i64 {
            return Err(format!("point {p} out of range (there are {n} points)"));
        }
        out.push(p as u32);
        prev = p;
    }
    Ok(())
}

/// Encodes a region decomposition as boundaries and seeds.
///
/// Cost: O(n + m) for the boundary, the region graph (plus sorting its edges) and the seed
/// traversals.
pub(crate) fn encode_regions(grid: &Grid, region: &[u32], value_of: &[u32]) -> RegionStreams {
    let n = region.len();
    let k = value_of.len();
    // Boundary points and the region adjacency graph.
    let mut boundary = vec![false; n];
    let mut count_b = vec![0u64; k];
    let mut pairs: Vec<u64> = Vec::new();
    for p in 0..n {
        let r = region[p];
        let mut on_boundary = false;
        grid.for_each_neighbour(p, |w| {
            let s = region[w];
            if s != r {
                on_boundary = true;
                if r < s {
                    pairs.push((u64::from(r) << 32) | u64::from(s));
                }
            }
        });
        if on_boundary {
            boundary[p] = true;
            count_b[r as usize] += 1;
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    let mut deg = vec![0usize; k + 1];
    for &e in &pairs {
        deg[(e >> 32) as usize + 1] += 1;
        deg[(e & 0xffff_ffff) as usize + 1] += 1;
    }
    for i in 0..k {
        deg[i + 1] += deg[i];
    }
    let mut adj = vec![0u32; deg[k]];
    let mut fill = deg.clone();
    for &e in &pairs {
        let (a, b) = ((e >> 32) as usize, (e & 0xffff_ffff) as usize);
        adj[fill[a]] = b as u32;
        fill[a] += 1;
        adj[fill[b]] = a as u32;
        fill[b] += 1;
    }
    drop(pairs);
    // Greedy maximal-weight independent set: these regions leave their boundary out.
    let mut by_weight: Vec<u32> = (0..k as u32).collect();
    by_weight.sort_unstable_by(|&a, &b| count_b[b as usize].cmp(&count_b[a as usize]));
    let mut omit = vec![false; k];
    let mut blocked = vec![false; k];
    for &r in &by_weight {
        let r = r as usize;
        if !blocked[r] {
            omit[r] = true;
            for &s in &adj[deg[r]..deg[r + 1]] {
                blocked[s as usize] = true;
            }
        }
    }
    // Seeds: one (the first point) for a region without stored boundary, one per interior
    // component otherwise.
    let mut seeds: Vec<Vec<u32>> = vec![Vec::new(); k];
    let mut visited = vec![false; n];
    let mut queue = VecDeque::new();
    for p in 0..n {
        let r = region[p] as usize;
        if omit[r] {
            if seeds[r].is_empty() {
                seeds[r].push(p as u32);
            }
            continue;
        }
        if boundary[p] || visited[p] {
            continue;
        }
        seeds[r].push(p as u32);
        visited[p] = true;
        queue.push_back(p);
        while let Some(u) = queue.pop_front() {
            grid.for_each_neighbour(u, |w| {
                if !boundary[w] && !visited[w] {
                    visited[w] = true;
                    queue.push_back(w);
                }
            });
        }
    }
    // Boundary lists per region, increasing (counting sort by region).
    let mut start = vec![0usize; k + 1];
    for r in 0..k {
        start[r + 1] = start[r] + if omit[r] { 0 } else { count_b[r] as usize };
    }
    let mut blist = vec![0u32; start[k]];
    let mut bfill = start.clone();
    for p in 0..n {
        let r = region[p] as usize;
        if boundary[p] && !omit[r] {
            blist[bfill[r]] = p as u32;
            bfill[r] += 1;
        }
    }
    let mut out = RegionStreams {
        n_seeds: Vec::new(),
        n_boundary: Vec::new(),
        seeds: Vec::new(),
        boundary: Vec::new(),
        value_of: Vec::new(),
        stored_boundary: blist.len(),
        stored_seeds: seeds.iter().map(Vec::len).sum(),
    };
    let (mut first_seed, mut first_b) = (0i64, 0i64);
    for r in 0..k {
        put_varint(&mut out.n_seeds, seeds[r].len() as u64);
        put_list(&mut out.seeds, &seeds[r], &mut first_seed);
        let b = &blist[start[r]..start[r + 1]];
        put_varint(&mut out.n_boundary, b.len() as u64);
        put_list(&mut out.boundary, b, &mut first_b);
    }
    if value_of.iter().enumerate().any(|(i, &v)| v as usize != i) {
        let mut prev = 0i64;
        for &v in value_of {
            put_varint(&mut out.value_of, zigzag(i64::from(v) - prev));
            prev = i64::from(v);
        }
    }
    out
}

/// Decodes the region of every point from the streams of [`encode_regions`] and returns the
/// value index of every point.
///
/// # Errors
/// A message if the streams are inconsistent: a point out of range or claimed twice, a
/// point that no region reaches, a value index out of range, or trailing bytes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_regions(
    grid: &Grid,
    n: usize,
    k: usize,
    t: usize,
    n_seeds: &[u8],
    n_boundary: &[u8],
    seeds: &[u8],
    boundary: &[u8],
    value_of: &[u8],
) -> Result<Vec<u32>, String> {
    let mut region = vec![NONE; n];
    let mut rs = VarintReader::new(n_seeds);
    let mut rb = VarintReader::new(n_boundary);
    let mut seed_r = VarintReader::new(seeds);
    let mut bound_r = VarintReader::new(boundary);
    let mut seed_lists: Vec<Vec<u32>> = Vec::with_capacity(k.min(n));
    let (mut first_seed, mut first_b) = (0i64, 0i64);
    let mut list = Vec::new();
    let mut total = 0u64;
    for r in 0..k {
        let ns = rs.next()?;
        let nb = rb.next()?;
        total = total.saturating_add(ns).saturating_add(nb);
        if total > n as u64 {
            return Err(format!("the regions list more than the {n} points"));
        }
        let mut s = Vec::new();
        get_list(&mut seed_r, ns, &mut first_seed, n, &mut s)?;
        seed_lists.push(s);
        get_list(&mut bound_r, nb, &mut first_b, n, &mut list)?;
        for &p in &list {
            if region[p as usize] != NONE {
                return Err(format!("point {p} is on two region boundaries"));
            }
            region[p as usize] = r as u32;
        }
    }
    if !rs.is_done() || !rb.is_done() || !seed_r.is_done() || !bound_r.is_done() {
        return Err("region streams have bytes after the last region".into());
    }
    let mut queue = VecDeque::new();
    for (r, s) in seed_lists.iter().enumerate() {
        let r = r as u32;
        for &p in s {
            let p = p as usize;
            if region[p] != NONE {
                return Err(format!("seed {p} of region {r} is already in a region"));
            }
            region[p] = r;
            queue.push_back(p);
        }
        while let Some(u) = queue.pop_front() {
            grid.for_each_neighbour(u, |w| {
                if region[w] == NONE {
                    region[w] = r;
                    queue.push_back(w);
                }
            });
        }
    }
    if let Some(p) = region.iter().position(|&r| r == NONE) {
        return Err(format!("no region reaches point {p}"));
    }
    // Value index per region.
    let map: Vec<u32> = if value_of.is_empty() {
        if k > t {
            return Err(format!("{k} regions but only {t} values"));
        }
        (0..k as u32).collect()
    } else {
        let mut r = VarintReader::new(value_of);
        let mut prev = 0i64;
        let mut map = Vec::with_capacity(k.min(n));
        for _ in 0..k {
            let v = prev.wrapping_add(unzigzag(r.next()?));
            if v < 0 || v >= t as i64 {
                return Err(format!("value index {v} out of range ({t} values)"));
            }
            map.push(v as u32);
            prev = v;
        }
        if !r.is_done() {
            return Err("value index stream has bytes after the last region".into());
        }
        map
    };
    for r in region.iter_mut() {
        *r = map[*r as usize];
    }
    Ok(region)
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
