//! The direct connected components against a sequential union-find written here, at several
//! rank counts and node layouts, with and without a memory budget small enough that the edge
//! partitions and the parent arrays are unloaded; and loading an edge list file.

use std::collections::BTreeMap;

use spillway_algorithms::graph::cc_direct::{components, load_edge_list, EdgeList};
use spillway_algorithms::AlgoError;
use spillway_comm::Comm;
use spillway_runtime::{run, Config};

/// (ranks, nodes, running per node).
const LAYOUTS: [(u32, u32, u32); 5] = [(1, 1, 1), (2, 1, 2), (3, 1, 1), (5, 2, 1), (8, 3, 2)];

fn xorshift(seed: u64) -> impl FnMut(u32) -> u32 {
    let mut x = seed | 1;
    move |k: u32| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % u64::from(k)) as u32
    }
}

/// Random edges over `n` ids, a long path through every 97th id, a few self loops on ids
/// in no other edge, and ids that appear in no edge at all.
fn edges(seed: u64, n: u32, m: usize) -> Vec<(u32, u32)> {
    let mut next = xorshift(seed);
    let mut e: Vec<(u32, u32)> = (0..m).map(|_| (next(n / 2) * 2, next(n / 2) * 2)).collect();
    e.extend((0..n / 194).map(|i| (i * 194, (i + 1) * 194 % n)));
    e.extend([
        (n + 3, n + 3),
        (n + 7, n + 5),
        (n + 5, n + 7),
        (n + 9, n + 9),
    ]);
    e
}

/// Label = smallest vertex of the component, for the vertices of edges: a textbook
/// union-find with path halving, linking the larger root under the smaller.
fn reference(edges: &[(u32, u32)]) -> BTreeMap<u32, u32> {
    let n = edges.iter().map(|&(u, v)| u.max(v) + 1).max().unwrap_or(0) as usize;
    let mut parent: Vec<u32> = (0..n as u32).collect();
    fn find(p: &mut [u32], mut v: u32) -> u32 {
        while p[v as usize] != v {
            p[v as usize] = p[p[v as usize] as usize];
            v = p[v as usize];
        }
        v
    }
    for &(u, v) in edges {
        let (a, b) = (find(&mut parent, u), find(&mut parent, v));
        parent[a.max(b) as usize] = a.min(b);
    }
    edges
        .iter()
        .flat_map(|&(u, v)| [u, v])
        .map(|v| (v, find(&mut parent, v)))
        .collect()
}

fn run_direct(config: &Config, all: &[(u32, u32)]) -> (BTreeMap<u32, u32>, u64, u64) {
    let out = run(config, |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let (p, r) = (world.size(), world.rank());
        let mine = &all[all.len() * r / p..all.len() * (r + 1) / p];
        let part = EdgeList::from_pairs(&world, mine)?;
        let cc = components(&world, &part)?;
        let mut labels = Vec::new();
        cc.for_each(|v, l| labels.push((v, l)));
        Ok((labels, cc.vertices, cc.components))
    })
    .unwrap();
    let (v, c) = (out[0].1, out[0].2);
    assert!(out.iter().all(|o| o.1 == v && o.2 == c), "ranks disagree");
    // Blocks in rank order, each in increasing id order: the concatenation is sorted.
    let flat: Vec<(u32, u32)> = out.into_iter().flat_map(|o| o.0).collect();
    assert!(
        flat.windows(2).all(|w| w[0].0 < w[1].0),
        "labels out of order"
    );
    (flat.into_iter().collect(), v, c)
}

#[test]
fn direct_components_equal_a_union_find_at_every_layout() {
    let n = 4000;
    let all = edges(7, n, 2500);
    let expected = reference(&all);
    let components = expected.iter().filter(|(v, l)| v == l).count() as u64;
    for (ranks, nodes, running) in LAYOUTS {
        for budget in [None, Some(64u64 << 10)] {
            let mut config = Config::new(ranks).nodes(nodes).running(running);
            if let Some(b) = budget {
                config = config.mem_budget(b);
            }
            let (got, vertices, comps) = run_direct(&config, &all);
            let at = format!("ranks {ranks} nodes {nodes} running {running} budget {budget:?}");
            assert_eq!(got, expected, "{at}");
            assert_eq!(vertices, expected.len() as u64, "{at}");
            assert_eq!(comps, components, "{at}");
        }
    }
}

#[test]
fn direct_components_of_a_large_graph_under_a_small_budget() {
    // 200k edges (1.6 MB) over 4 ranks with a 256 KiB budget: every partition is larger than
    // the budget, so pieces are released as they are streamed.
    let n = 300_000;
    let mut next = xorshift(99);
    let all: Vec<(u32, u32)> = (0..200_000).map(|_| (next(n), next(n))).collect();
    let expected = reference(&all);
    let config = Config::new(4).nodes(2).running(1).mem_budget(256 << 10);
    let (got, vertices, _) = run_direct(&config, &all);
    assert_eq!(vertices, expected.len() as u64);
    assert_eq!(got, expected);
}

#[test]
fn no_edges_on_some_ranks_and_one_edge_in_all() {
    let all = [(5u32, 2u32)];
    let expected = reference(&all);
    for ranks in [1, 2, 4] {
        let (got, vertices, comps) = run_direct(&Config::new(ranks), &all);
        assert_eq!(got, expected, "{ranks} ranks");
        assert_eq!((vertices, comps), (2, 1));
    }
}

#[test]
fn load_edge_list_reads_every_line_once_and_reports_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.txt");
    let all = edges(3, 2000, 3000);
    let mut text = String::from("# a comment\n");
    for (u, v) in &all {
        text.push_str(&format!("{u}\t{v}\n"));
    }
    std::fs::write(&path, &text).unwrap();
    let expected = reference(&all);
    for (ranks, nodes, running) in LAYOUTS {
        let config = Config::new(ranks).nodes(nodes).running(running);
        let path = &path;
        let out = run(&config, |rank| -> Result<_, AlgoError> {
            let world = Comm::world(rank);
            let part = load_edge_list(&world, path)?;
            let cc = components(&world, &part)?;
            let mut labels = Vec::new();
            cc.for_each(|v, l| labels.push((v, l)));
            Ok((part.edges.len(), labels))
        })
        .unwrap();
        assert_eq!(out.iter().map(|o| o.0).sum::<usize>(), all.len());
        let got: BTreeMap<u32, u32> = out.into_iter().flat_map(|o| o.1).collect();
        assert_eq!(got, expected, "{ranks} ranks");
    }
    std::fs::write(&path, format!("{text}1 2 3\n")).unwrap();
    let path = &path;
    let err = run(&Config::new(3), |rank| {
        load_edge_list(&Comm::world(rank), path).map(|_| ())
    })
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&format!(":{}", all.len() + 2)) && msg.contains("expected 2 fields"),
        "{msg}"
    );
}
