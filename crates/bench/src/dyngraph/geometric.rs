//! A random geometric graph with locality-ordered ids: the stream "with locality" of
//! `dyngraph --mode query` (web graphs in the thesis; ours is synthetic and seeded).

use super::splitmix;

/// A uniform draw in `[0, 1)`.
fn unit(state: &mut u64) -> f64 {
    (splitmix(state) >> 11) as f64 / (1u64 << 53) as f64
}

/// The edges of a random geometric graph on `n` points, in a random order.
///
/// # Semantics
/// `n` points uniform in the unit square (seeded); an edge joins every two points closer
/// than `r = sqrt(2 edge_factor / (pi n))`, which gives about `edge_factor * n` edges (fewer
/// near the border). Ids follow the points' order in horizontal strips of height `r / 2`,
/// by `x` within a strip, so that a vertex's neighbours are a few runs of nearby ids (the
/// locality that intervals exploit; the thesis orders web pages by URL for the same reason).
/// The stream is the edges shuffled, each with a random orientation; no repeats or loops.
///
/// # Cost
/// O(n log n + n d) for average degree `d`.
pub(super) fn rgg(n: usize, edge_factor: u32, seed: u64) -> Vec<(u32, u32)> {
    let mut state = seed ^ 0x05ee_d6e0_u64;
    let r = (2.0 * f64::from(edge_factor) / (std::f64::consts::PI * n as f64)).sqrt();
    let mut pts: Vec<(f64, f64)> = (0..n)
        .map(|_| (unit(&mut state), unit(&mut state)))
        .collect();
    let strip = |p: &(f64, f64)| (p.1 / (r / 2.0)) as u64;
    pts.sort_by(|a, b| strip(a).cmp(&strip(b)).then(a.0.total_cmp(&b.0)));
    let mut edges = close_pairs(&pts, r);
    shuffle(&mut edges, &mut state);
    edges
}

/// Every pair `(i, j)`, `i < j`, of points closer than `r`, found through a grid of cells of
/// side `r` (each point checks the 3 x 3 cells around its own).
fn close_pairs(pts: &[(f64, f64)], r: f64) -> Vec<(u32, u32)> {
    let g = ((1.0 / r) as usize).max(1);
    let cell = |p: &(f64, f64)| {
        let cx = ((p.0 * g as f64) as usize).min(g - 1);
        let cy = ((p.1 * g as f64) as usize).min(g - 1);
        (cx, cy)
    };
    // Counting sort of the point ids by cell.
    let mut start = vec![0usize; g * g + 1];
    for p in pts {
        let (cx, cy) = cell(p);
        start[cy * g + cx + 1] += 1;
    }
    for i in 0..g * g {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut ids = vec![0u32; pts.len()];
    for (i, p) in pts.iter().enumerate() {
        let (cx, cy) = cell(p);
        ids[fill[cy * g + cx]] = i as u32;
        fill[cy * g + cx] += 1;
    }
    let mut edges = Vec::new();
    for (i, p) in pts.iter().enumerate() {
        let (cx, cy) = cell(p);
        for y in cy.saturating_sub(1)..(cy + 2).min(g) {
            for x in cx.saturating_sub(1)..(cx + 2).min(g) {
                for &j in &ids[start[y * g + x]..start[y * g + x + 1]] {
                    let q = pts[j as usize];
                    let (dx, dy) = (q.0 - p.0, q.1 - p.1);
                    if (j as usize) > i && dx * dx + dy * dy < r * r {
                        edges.push((i as u32, j));
                    }
                }
            }
        }
    }
    edges
}

/// Fisher-Yates shuffle; each edge also gets a random orientation.
fn shuffle(edges: &mut [(u32, u32)], state: &mut u64) {
    for i in (1..edges.len()).rev() {
        let j = (splitmix(state) % (i as u64 + 1)) as usize;
        edges.swap(i, j);
    }
    for e in edges.iter_mut() {
        if splitmix(state) & 1 == 1 {
            *e = (e.1, e.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_are_close_distinct_and_about_as_many_as_asked() {
        let e = rgg(4000, 8, 3);
        let m = e.len() as f64;
        assert!(
            (0.8 * 8.0 * 4000.0..1.05 * 8.0 * 4000.0).contains(&m),
            "{m} edges"
        );
        let mut seen: Vec<(u32, u32)> = e.iter().map(|&(u, v)| (u.min(v), u.max(v))).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), e.len());
        assert!(e.iter().all(|&(u, v)| u != v && u < 4000 && v < 4000));
        // Locality: most edges join ids that are close.
        let near = e.iter().filter(|&&(u, v)| u.abs_diff(v) < 200).count() as f64;
        assert!(near > 0.3 * m, "{near} of {m} edges are near");
        assert_eq!(rgg(4000, 8, 3), e);
    }
}
