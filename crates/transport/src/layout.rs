//! How ranks are placed on nodes.

use std::fmt;

/// Ranks split over nodes in contiguous blocks: node `n` holds ranks
/// `first_rank(n) .. first_rank(n) + local_size(n)`; the first `ranks % nodes` nodes hold one
/// rank more than the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    ranks: u32,
    nodes: u32,
}

/// Why a layout is impossible.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutError {
    /// No ranks were asked for.
    NoRanks,
    /// No nodes were asked for.
    NoNodes,
    /// More nodes than ranks: some node would be empty.
    MoreNodesThanRanks {
        /// Requested ranks.
        ranks: u32,
        /// Requested nodes.
        nodes: u32,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::NoRanks => write!(f, "the number of ranks must be at least 1"),
            LayoutError::NoNodes => write!(f, "the number of nodes must be at least 1"),
            LayoutError::MoreNodesThanRanks { ranks, nodes } => {
                write!(
                    f,
                    "{nodes} nodes cannot hold {ranks} ranks: every node needs a rank"
                )
            }
        }
    }
}

impl std::error::Error for LayoutError {}

impl Layout {
    /// `ranks` ranks over `nodes` nodes.
    pub fn new(ranks: u32, nodes: u32) -> Result<Layout, LayoutError> {
        if ranks == 0 {
            return Err(LayoutError::NoRanks);
        }
        if nodes == 0 {
            return Err(LayoutError::NoNodes);
        }
        if nodes > ranks {
            return Err(LayoutError::MoreNodesThanRanks { ranks, nodes });
        }
        Ok(Layout { ranks, nodes })
    }

    /// Total number of ranks.
    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    /// Number of nodes.
    pub fn nodes(&self) -> u32 {
        self.nodes
    }

    /// Number of ranks on `node`.
    pub fn local_size(&self, node: u32) -> u32 {
        let base = self.ranks / self.nodes;
        base + u32::from(node < self.ranks % self.nodes)
    }

    /// Lowest rank on `node`.
    pub fn first_rank(&self, node: u32) -> u32 {
        let base = self.ranks / self.nodes;
        let extra = self.ranks % self.nodes;
        node * base + node.min(extra)
    }

    /// The node holding `rank`.
    pub fn node_of(&self, rank: u32) -> u32 {
        let base = self.ranks / self.nodes;
        let extra = self.ranks % self.nodes;
        let big = extra * (base + 1);
        if rank < big {
            rank / (base + 1)
        } else {
            extra + (rank - big) / base
        }
    }

    /// Index of `rank` among the ranks of its node.
    pub fn local_rank(&self, rank: u32) -> u32 {
        rank - self.first_rank(self.node_of(rank))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_all_ranks_once() {
        for ranks in 1..40 {
            for nodes in 1..=ranks.min(7) {
                let l = Layout::new(ranks, nodes).unwrap();
                let mut next = 0;
                for n in 0..nodes {
                    assert_eq!(l.first_rank(n), next);
                    for r in next..next + l.local_size(n) {
                        assert_eq!(l.node_of(r), n);
                        assert_eq!(l.local_rank(r), r - next);
                    }
                    next += l.local_size(n);
                }
                assert_eq!(next, ranks);
            }
        }
    }

    #[test]
    fn rejects_impossible_layouts() {
        assert_eq!(Layout::new(0, 1), Err(LayoutError::NoRanks));
        assert_eq!(Layout::new(3, 0), Err(LayoutError::NoNodes));
        assert!(matches!(
            Layout::new(2, 3),
            Err(LayoutError::MoreNodesThanRanks { .. })
        ));
    }
}
