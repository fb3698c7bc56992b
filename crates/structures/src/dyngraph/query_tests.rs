//! The query kernels of every structure and of the CSR against a plain adjacency-set
//! reference: graphs of several sizes, empty ones, self-loops and repeated edges.

use std::collections::{BTreeSet, VecDeque};

use proptest::prelude::*;

use super::*;

/// The reference: a set of neighbours per vertex.
struct Sets {
    adj: Vec<BTreeSet<u32>>,
}

impl Sets {
    fn new(n: usize, edges: &[(u32, u32)]) -> Sets {
        let mut adj = vec![BTreeSet::new(); n];
        for &(u, v) in edges {
            adj[u as usize].insert(v);
            adj[v as usize].insert(u);
        }
        Sets { adj }
    }

    /// Levels as the kernel defines them: from `source`, then (with `whole`) from the
    /// smallest unvisited id; and the number of roots.
    fn bfs(&self, source: u32, whole: bool) -> (Vec<u32>, u64) {
        let n = self.adj.len();
        let mut level = vec![UNREACHED; n];
        let mut roots = 0;
        let from = |r: usize, level: &mut Vec<u32>| {
            let mut q = VecDeque::from([r]);
            level[r] = 0;
            while let Some(u) = q.pop_front() {
                for &w in &self.adj[u] {
                    if level[w as usize] == UNREACHED {
                        level[w as usize] = level[u] + 1;
                        q.push_back(w as usize);
                    }
                }
            }
        };
        if (source as usize) < n {
            from(source as usize, &mut level);
            roots += 1;
        }
        for r in 0..n {
            if whole && level[r] == UNREACHED {
                from(r, &mut level);
                roots += 1;
            }
        }
        (level, roots)
    }

    fn common(&self, u: u32, v: u32) -> u64 {
        match (self.adj.get(u as usize), self.adj.get(v as usize)) {
            (Some(a), Some(b)) => a.intersection(b).count() as u64,
            _ => 0,
        }
    }

    fn has(&self, u: u32, v: u32) -> bool {
        self.adj.get(u as usize).is_some_and(|a| a.contains(&v))
    }
}

/// Every structure (BCSR folded, unfolded and folding often), loaded with `edges` as both
/// arcs, one at a time or in batches.
fn loaded(n: usize, edges: &[(u32, u32)], batched: bool) -> Vec<Box<dyn DynGraph + Send>> {
    let mut graphs = Vec::new();
    for s in Structure::ALL {
        graphs.push(s.create(n, FoldPolicy::Manual));
    }
    graphs.push(Box::new(Bcsr::with_vertices(n, FoldPolicy::Every(5))));
    for g in &mut graphs {
        if batched {
            for b in edges.chunks(97) {
                g.insert_batch_undirected(b);
            }
        } else {
            for &(u, v) in edges {
                g.insert_undirected(u, v);
            }
        }
    }
    // A BCSR with half its arcs folded into the CSR and half in the overflow.
    let mut half = Bcsr::with_vertices(n, FoldPolicy::Manual);
    let (a, b) = edges.split_at(edges.len() / 2);
    half.insert_batch_undirected(a);
    half.fold();
    half.insert_batch_undirected(b);
    graphs.push(Box::new(half));
    graphs
}

/// Every kernel of every structure and of the CSR against the reference.
fn check(n: usize, edges: &[(u32, u32)], batched: bool) {
    let r = Sets::new(n, edges);
    let mut arcs = Vec::new();
    for &(u, v) in edges {
        arcs.extend([(u, v), (v, u)]);
    }
    let csr = Csr::from_arcs(n, &arcs);
    let mut s = QueryScratch::new();
    let sources = [0, n as u32 / 2, n.saturating_sub(1) as u32, n as u32 + 3];
    let mut pairs: Vec<(u32, u32)> = edges.iter().take(200).copied().collect();
    for k in 0..200u32 {
        let m = n as u32 + 2;
        pairs.push((k.wrapping_mul(7919) % m, k.wrapping_mul(104_729) % m));
    }
    for (whole, &src) in [false, true]
        .iter()
        .flat_map(|w| sources.iter().map(move |s| (*w, s)))
    {
        let (want, roots) = r.bfs(src, whole);
        let t = csr.bft(src, whole, &mut s);
        assert_eq!(s.levels(), want, "csr: bft from {src} (whole {whole})");
        assert_eq!(t.components, roots);
        for g in loaded(n, edges, batched) {
            let t = g.bft(src, whole, &mut s);
            assert_eq!(
                s.levels(),
                want,
                "{}: bft from {src} (whole {whole})",
                g.name()
            );
            assert_eq!(t.components, roots, "{}: roots", g.name());
            let reached = want.iter().filter(|&&l| l != UNREACHED).count() as u64;
            assert_eq!(t.reached, reached, "{}: reached", g.name());
            assert_eq!(
                t.depth,
                want.iter()
                    .filter(|&&l| l != UNREACHED)
                    .max()
                    .copied()
                    .unwrap_or(0)
            );
        }
    }
    for g in loaded(n, edges, batched) {
        for &(u, v) in &pairs {
            for (a, b) in [(u, v), (v, u), (u, u)] {
                let want = r.common(a, b);
                assert_eq!(
                    g.common_neighbours(a, b, &mut s),
                    want,
                    "{}: N({a}) ∩ N({b})",
                    g.name()
                );
                assert_eq!(csr.common_neighbours(a, b), want, "csr: N({a}) ∩ N({b})");
                assert_eq!(
                    g.contains(a, b),
                    r.has(a, b),
                    "{}: has_edge({a}, {b})",
                    g.name()
                );
                assert_eq!(csr.contains(a, b), r.has(a, b), "csr: has_edge({a}, {b})");
            }
        }
    }
}

/// `m` edges on `n` vertices, a quarter of them touching one of 8 hubs; with `local`, the
/// other end is within 6 ids of the first (runs of consecutive ids: intervals); repeats,
/// reversed repeats and self-loops included.
fn graph(n: u32, m: usize, local: bool, seed: u64) -> Vec<(u32, u32)> {
    let mut state = seed;
    let mut next = |k: u32| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % u64::from(k.max(1))) as u32
    };
    let mut edges = Vec::with_capacity(m + m / 8);
    for _ in 0..m {
        let u = if next(4) == 0 {
            next(8.min(n))
        } else {
            next(n)
        };
        let v = if local {
            (u + next(13)).saturating_sub(6).min(n - 1)
        } else {
            next(n)
        };
        edges.push((u, v));
    }
    for k in 0..m / 8 {
        let (u, v) = edges[k * 5 % m];
        edges.push(if k % 2 == 0 { (v, u) } else { (u, u) });
    }
    edges
}

#[test]
fn kernels_on_empty_graphs() {
    check(0, &[], false);
    check(1, &[], false);
    check(7, &[], true);
    check(1, &[(0, 0), (0, 0)], false);
    check(3, &[(1, 1), (2, 2), (1, 2), (2, 1)], true);
}

#[test]
fn kernels_at_several_sizes() {
    for (n, m) in [(10u32, 30usize), (300, 2000), (3000, 30_000)] {
        for local in [false, true] {
            let edges = graph(n, m, local, u64::from(n) + u64::from(local));
            check(n as usize, &edges, false);
            check(n as usize, &edges, true);
        }
    }
}

#[test]
fn intervals_intersect_whole() {
    // Long runs in both lists, offset so that they overlap partly, plus residuals.
    let mut edges = Vec::new();
    for x in (100..400).chain(1000..1003).chain([2000, 2002, 2004]) {
        edges.push((0, x));
    }
    for x in (250..600).chain(1001..1010).chain([2002, 2005]) {
        edges.push((1, x));
    }
    check(2100, &edges, false);
    let want = 150 + 2 + 1;
    for g in loaded(2100, &edges, true) {
        assert_eq!(
            g.common_neighbours(0, 1, &mut QueryScratch::new()),
            want,
            "{}",
            g.name()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn kernels_match_the_reference(
        n in 1u32..60,
        raw in proptest::collection::vec((0u32..60, 0u32..60), 0..150),
        batched in any::<bool>(),
    ) {
        let edges: Vec<(u32, u32)> = raw.iter().map(|&(u, v)| (u % n, v % n)).collect();
        check(n as usize, &edges, batched);
    }
}
