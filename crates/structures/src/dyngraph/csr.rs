//! A static compressed sparse row graph: the baseline that is rebuilt from scratch, and the
//! form BCSR folds into.

use super::vec_bytes;

/// A static graph in compressed sparse row form, lists sorted and free of duplicates.
///
/// # Cost
/// Building from `m` arcs: a counting sort by source (two passes), a sort of every list and
/// a compaction, O(n + m log Δ); memory 8 bytes per vertex + 4 per arc.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Csr {
    pub(crate) offsets: Vec<u64>,
    pub(crate) targets: Vec<u32>,
}

impl Csr {
    /// Builds the graph of `n` vertices from arcs `(u, v)`; duplicates are dropped.
    ///
    /// # Panics
    /// If an endpoint is `>= n`.
    pub fn from_arcs(n: usize, arcs: &[(u32, u32)]) -> Csr {
        let mut offsets = vec![0u64; n + 1];
        for &(u, v) in arcs {
            assert!((v as usize) < n, "arc ({u}, {v}) beyond {n} vertices");
            offsets[u as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut fill: Vec<u64> = offsets[..n].to_vec();
        let mut targets = vec![0u32; arcs.len()];
        for &(u, v) in arcs {
            let at = &mut fill[u as usize];
            targets[*at as usize] = v;
            *at += 1;
        }
        drop(fill);
        // Sort each list, drop duplicates and compact in place.
        let mut w = 0usize;
        let mut start = 0usize;
        for i in 0..n {
            let end = offsets[i + 1] as usize;
            let list = &mut targets[start..end];
            list.sort_unstable();
            let mut last = None;
            for r in start..end {
                let x = targets[r];
                if last != Some(x) {
                    targets[w] = x;
                    w += 1;
                    last = Some(x);
                }
            }
            start = end;
            offsets[i + 1] = w as u64;
        }
        targets.truncate(w);
        targets.shrink_to_fit();
        Csr { offsets, targets }
    }

    /// Builds from sorted, duplicate-free lists already laid out.
    pub(crate) fn from_parts(offsets: Vec<u64>, targets: Vec<u32>) -> Csr {
        Csr { offsets, targets }
    }

    /// Number of vertices.
    pub fn num_vertices(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Number of arcs.
    pub fn num_arcs(&self) -> u64 {
        self.targets.len() as u64
    }

    /// The neighbours of `v`, sorted (empty beyond the vertex range).
    pub fn neighbours(&self, v: u32) -> &[u32] {
        let v = v as usize;
        if v + 1 >= self.offsets.len() {
            return &[];
        }
        &self.targets[self.offsets[v] as usize..self.offsets[v + 1] as usize]
    }

    /// Heap bytes plus the structure itself.
    pub fn bytes_used(&self) -> usize {
        std::mem::size_of::<Self>() + vec_bytes(&self.offsets) + vec_bytes(&self.targets)
    }
}
