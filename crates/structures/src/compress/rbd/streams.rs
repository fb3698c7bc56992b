//! The stored form of a region decomposition: boundaries plus seeds (thesis section 3.2.2).

use std::collections::VecDeque;

use super::super::encodings::{put_varint, unzigzag, zigzag, VarintReader};
use super::super::grid::Grid;
use super::NONE;

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
