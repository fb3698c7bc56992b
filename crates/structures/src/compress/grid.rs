//! Grids: structured (1-D to 3-D arrays) and unstructured (a graph of points).

use std::fmt;
use std::sync::Arc;

use xxhash_rust::xxh3::xxh3_64;

/// The grid the values live on; it defines which points are neighbours.
///
/// # Semantics
/// - `Structured`: an array of 1 to 3 dimensions `[nx, ny, nz]`, `x` varying fastest in
///   memory (point `x + nx * (y + ny * z)`; a C-order NumPy array of shape `(nz, ny, nx)`).
///   Neighbours are the points one step away along one axis (4 in 2-D, 6 in 3-D).
/// - `Unstructured`: any undirected graph of points ([`PointGraph`]), e.g. the nodes of a
///   mesh with an edge between nodes that share a cell.
#[derive(Clone, PartialEq, Eq)]
pub enum Grid {
    /// A 1-D, 2-D or 3-D array; the extents of its axes, fastest first.
    Structured(Vec<usize>),
    /// A graph of points.
    Unstructured(Arc<PointGraph>),
}

impl fmt::Debug for Grid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grid::Structured(d) => write!(f, "Structured({d:?})"),
            Grid::Unstructured(g) => write!(
                f,
                "Unstructured({} points, {} edges)",
                g.num_points(),
                g.num_edges()
            ),
        }
    }
}

impl Grid {
    /// A structured grid with the given extents (fastest axis first).
    pub fn structured(dims: &[usize]) -> Grid {
        Grid::Structured(dims.to_vec())
    }

    /// Parses `NX`, `NXxNY` or `NXxNYxNZ` (each at least 1).
    ///
    /// # Errors
    /// A message naming the problem, for an empty extent, a non-number, zero, more than three
    /// axes, or a point count that overflows.
    pub fn parse(text: &str) -> Result<Grid, String> {
        let parts: Vec<&str> = text.split(['x', 'X']).collect();
        if parts.is_empty() || parts.len() > 3 {
            return Err(format!(
                "invalid grid '{text}': expected NX, NXxNY or NXxNYxNZ"
            ));
        }
        let mut dims = Vec::new();
        for p in parts {
            let d: usize = p.trim().parse().map_err(|_| {
                format!("invalid grid '{text}': '{p}' is not a positive whole number")
            })?;
            if d == 0 {
                return Err(format!("invalid grid '{text}': extents must be at least 1"));
            }
            dims.push(d);
        }
        let g = Grid::Structured(dims);
        g.checked_points()
            .ok_or_else(|| format!("invalid grid '{text}': too many points"))?;
        Ok(g)
    }

    /// Number of points, `None` on overflow.
    pub(crate) fn checked_points(&self) -> Option<usize> {
        match self {
            Grid::Structured(d) => d.iter().try_fold(1usize, |a, &b| a.checked_mul(b)),
            Grid::Unstructured(g) => Some(g.num_points()),
        }
    }

    /// Number of points.
    pub fn num_points(&self) -> usize {
        self.checked_points().unwrap_or(usize::MAX)
    }

    /// Calls `f` with every neighbour of point `p`.
    #[inline]
    pub(crate) fn for_each_neighbour(&self, p: usize, mut f: impl FnMut(usize)) {
        match self {
            Grid::Structured(d) => {
                let mut stride = 1;
                let mut rest = p;
                for &extent in d {
                    let c = rest % extent;
                    rest /= extent;
                    if c > 0 {
                        f(p - stride);
                    }
                    if c + 1 < extent {
                        f(p + stride);
                    }
                    stride *= extent;
                }
            }
            Grid::Unstructured(g) => {
                for &q in g.neighbours(p) {
                    f(q as usize);
                }
            }
        }
    }
}

/// An undirected graph of points (an unstructured grid), in compressed sparse row form.
#[derive(Clone, PartialEq, Eq)]
pub struct PointGraph {
    offsets: Vec<usize>,
    adjacency: Vec<u32>,
}

impl PointGraph {
    /// Builds the graph of `n` points from edges `(a, b)`; each edge joins both ways,
    /// duplicates and self-loops are dropped.
    ///
    /// # Errors
    /// A message if an endpoint is `>= n` or `n` does not fit in `u32`.
    pub fn from_edges(n: usize, edges: &[(u32, u32)]) -> Result<PointGraph, String> {
        if n > u32::MAX as usize {
            return Err(format!("{n} points: at most {} are supported", u32::MAX));
        }
        let mut degree = vec![0usize; n + 1];
        for &(a, b) in edges {
            for v in [a, b] {
                if v as usize >= n {
                    return Err(format!(
                        "edge ({a}, {b}) names point {v}, but the grid has {n} points"
                    ));
                }
            }
            if a != b {
                degree[a as usize] += 1;
                degree[b as usize] += 1;
            }
        }
        let mut offsets = vec![0usize; n + 1];
        for v in 0..n {
            offsets[v + 1] = offsets[v] + degree[v];
        }
        let mut fill = offsets.clone();
        let mut adjacency = vec![0u32; offsets[n]];
        for &(a, b) in edges {
            if a != b {
                adjacency[fill[a as usize]] = b;
                fill[a as usize] += 1;
                adjacency[fill[b as usize]] = a;
                fill[b as usize] += 1;
            }
        }
        // Sort and deduplicate each list, then compact.
        let mut out_offsets = vec![0usize; n + 1];
        let mut w = 0;
        for v in 0..n {
            let (s, e) = (offsets[v], offsets[v + 1]);
            adjacency[s..e].sort_unstable();
            let mut last = None;
            for r in s..e {
                let x = adjacency[r];
                if last != Some(x) {
                    adjacency[w] = x;
                    w += 1;
                    last = Some(x);
                }
            }
            out_offsets[v + 1] = w;
        }
        adjacency.truncate(w);
        adjacency.shrink_to_fit();
        Ok(PointGraph {
            offsets: out_offsets,
            adjacency,
        })
    }

    /// Number of points.
    pub fn num_points(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Number of undirected edges.
    pub fn num_edges(&self) -> usize {
        self.adjacency.len() / 2
    }

    /// The neighbours of point `p`, sorted.
    ///
    /// # Panics
    /// If `p >= num_points()`.
    pub fn neighbours(&self, p: usize) -> &[u32] {
        &self.adjacency[self.offsets[p]..self.offsets[p + 1]]
    }

    /// A 64-bit fingerprint of the graph, stored in compressed files so that decompression
    /// can tell whether it was given the same graph.
    pub fn fingerprint(&self) -> u64 {
        let mut bytes = Vec::with_capacity(8 * self.offsets.len() + 4 * self.adjacency.len());
        for &o in &self.offsets {
            bytes.extend_from_slice(&(o as u64).to_le_bytes());
        }
        for &a in &self.adjacency {
            bytes.extend_from_slice(&a.to_le_bytes());
        }
        xxh3_64(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_grids() {
        assert_eq!(Grid::parse("4x3").unwrap(), Grid::structured(&[4, 3]));
        assert_eq!(Grid::parse("4x3x2").unwrap(), Grid::structured(&[4, 3, 2]));
        assert_eq!(Grid::parse("7").unwrap(), Grid::structured(&[7]));
        assert!(Grid::parse("4x0").is_err());
        assert!(Grid::parse("4x3x2x1").is_err());
        assert!(Grid::parse("axb").is_err());
        assert!(Grid::parse("").is_err());
        assert!(Grid::parse("99999999999x99999999999x99999999999").is_err());
    }

    #[test]
    fn structured_neighbours() {
        let g = Grid::structured(&[4, 3]);
        let mut n = Vec::new();
        g.for_each_neighbour(5, |q| n.push(q)); // (1, 1)
        n.sort();
        assert_eq!(n, vec![1, 4, 6, 9]);
        n.clear();
        g.for_each_neighbour(0, |q| n.push(q));
        n.sort();
        assert_eq!(n, vec![1, 4]);
        let g = Grid::structured(&[2, 2, 2]);
        n.clear();
        g.for_each_neighbour(7, |q| n.push(q));
        n.sort();
        assert_eq!(n, vec![3, 5, 6]);
    }

    #[test]
    fn graph_from_edges() {
        let g = PointGraph::from_edges(4, &[(0, 1), (1, 0), (2, 1), (3, 3)]).unwrap();
        assert_eq!(g.neighbours(1), &[0, 2]);
        assert_eq!(g.neighbours(3), &[] as &[u32]);
        assert_eq!(g.num_edges(), 2);
        assert!(PointGraph::from_edges(2, &[(0, 2)]).is_err());
    }
}
