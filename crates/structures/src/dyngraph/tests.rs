//! Every structure against a reference (a `BTreeSet` per vertex) under random streams.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

/// The reference: a sorted set per vertex.
#[derive(Default)]
struct Reference {
    lists: Vec<BTreeSet<u32>>,
}

impl Reference {
    fn insert(&mut self, u: u32, v: u32) -> bool {
        let n = u.max(v) as usize + 1;
        if self.lists.len() < n {
            self.lists.resize_with(n, BTreeSet::new);
        }
        self.lists[u as usize].insert(v)
    }

    fn delete(&mut self, u: u32, v: u32) -> bool {
        self.lists.get_mut(u as usize).is_some_and(|l| l.remove(&v))
    }

    fn arcs(&self) -> u64 {
        self.lists.iter().map(|l| l.len() as u64).sum()
    }
}

/// One update of a stream.
#[derive(Debug, Clone, Copy)]
enum Op {
    Insert(u32, u32),
    Delete(u32, u32),
    Fold,
}

fn all_structures() -> Vec<Box<dyn DynGraph + Send>> {
    vec![
        Box::new(LinkedLists::new()),
        Box::new(Bcsr::with_vertices(0, FoldPolicy::Every(7))),
        Box::new(Bcsr::with_vertices(3, FoldPolicy::Manual)),
        Box::new(Daa::new()),
        Box::new(Diaa::new()),
        Box::new(Dcaa::new()),
    ]
}

fn check_vertex(g: &dyn DynGraph, r: &Reference, v: u32) {
    let want: Vec<u32> = r
        .lists
        .get(v as usize)
        .map(|l| l.iter().copied().collect())
        .unwrap_or_default();
    assert_eq!(g.neighbours(v), want, "{}: neighbours of {v}", g.name());
    assert_eq!(g.degree(v), want.len(), "{}: degree of {v}", g.name());
}

fn check_all(g: &dyn DynGraph, r: &Reference) {
    assert_eq!(g.num_arcs(), r.arcs(), "{}: arc count", g.name());
    assert!(
        g.num_vertices() >= r.lists.len(),
        "{}: vertex range",
        g.name()
    );
    for v in 0..g.num_vertices().max(r.lists.len()) as u32 + 2 {
        check_vertex(g, r, v);
    }
}

fn run(ops: &[Op]) {
    for mut g in all_structures() {
        let mut r = Reference::default();
        for &op in ops {
            match op {
                Op::Insert(u, v) => {
                    assert_eq!(g.insert(u, v), r.insert(u, v), "{}: insert", g.name());
                    assert!(g.contains(u, v));
                    check_vertex(g.as_ref(), &r, u);
                }
                Op::Delete(u, v) => {
                    assert_eq!(g.delete(u, v), r.delete(u, v), "{}: delete", g.name());
                    assert!(!g.contains(u, v));
                    check_vertex(g.as_ref(), &r, u);
                }
                Op::Fold => {}
            }
        }
        check_all(g.as_ref(), &r);
    }
}

/// Streams over a few vertices with neighbours drawn from a small range, so that runs of
/// consecutive ids (intervals), duplicates and deletes of present arcs are all common.
fn ops(max_vertex: u32, max_id: u32, len: usize) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        5 => (0..max_vertex, 0..max_id).prop_map(|(u, v)| Op::Insert(u, v)),
        3 => (0..max_vertex, 0..max_id).prop_map(|(u, v)| Op::Delete(u, v)),
        1 => Just(Op::Fold),
    ];
    proptest::collection::vec(op, 0..len)
}

/// A batch of inserts, then single deletes.
type Step = (Vec<(u32, u32)>, Vec<(u32, u32)>);

/// Batches of inserts (with repeats within and across batches) and single deletes in turn,
/// on every structure and on BCSR under each fold policy, against the reference.
fn run_batches(batches: &[Step]) {
    let mut graphs = all_structures();
    graphs.push(Box::new(Bcsr::with_vertices(0, FoldPolicy::Fraction(0.25))));
    graphs.push(Box::new(Bcsr::with_vertices(0, FoldPolicy::Every(30))));
    for mut g in graphs {
        let mut r = Reference::default();
        for (inserts, deletes) in batches {
            let want = inserts.iter().filter(|&&(u, v)| r.insert(u, v)).count() as u64;
            assert_eq!(
                g.insert_batch(inserts),
                want,
                "{}: new arcs of a batch",
                g.name()
            );
            for &(u, v) in deletes {
                assert_eq!(g.delete(u, v), r.delete(u, v), "{}: delete", g.name());
            }
            check_all(g.as_ref(), &r);
        }
    }
}

fn batches(max_vertex: u32, max_id: u32) -> impl Strategy<Value = Vec<Step>> {
    let arc = (0..max_vertex, 0..max_id);
    proptest::collection::vec(
        (
            proptest::collection::vec(arc.clone(), 0..120),
            proptest::collection::vec(arc, 0..10),
        ),
        1..8,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn batched_inserts_match_the_reference(b in batches(12, 60)) {
        run_batches(&b);
    }

    #[test]
    fn wide_batched_inserts_match_the_reference(b in batches(300, 20_000)) {
        run_batches(&b);
    }

    #[test]
    fn dense_small_ranges_match_the_reference(stream in ops(6, 40, 400)) {
        run(&stream);
    }

    #[test]
    fn sparse_wide_ranges_match_the_reference(stream in ops(50, 5000, 300)) {
        run(&stream);
    }

    #[test]
    fn bcsr_folds_keep_every_arc(stream in ops(8, 60, 300), every in 1u64..20) {
        let mut g = Bcsr::with_vertices(0, FoldPolicy::Every(every));
        let mut m = Bcsr::with_vertices(0, FoldPolicy::Manual);
        let mut r = Reference::default();
        for &op in &stream {
            match op {
                Op::Insert(u, v) => {
                    prop_assert_eq!(g.insert(u, v), r.insert(u, v));
                    m.insert(u, v);
                }
                Op::Delete(u, v) => {
                    prop_assert_eq!(g.delete(u, v), r.delete(u, v));
                    m.delete(u, v);
                }
                Op::Fold => m.fold(),
            }
        }
        check_all(&g, &r);
        check_all(&m, &r);
        m.fold();
        prop_assert_eq!(m.overflow_arcs(), 0);
        check_all(&m, &r);
    }
}

#[test]
fn thesis_example_graph() {
    // Figure 4.1's adjacency lists, inserted in a shuffled order.
    let lists: [(u32, &[u32]); 6] = [
        (13, &[1, 2, 3, 8, 9, 10, 11, 14]),
        (14, &[13, 15, 17, 42]),
        (15, &[14, 32, 33, 34, 35]),
        (32, &[2, 3, 4, 5, 10, 11, 12, 15]),
        (33, &[1, 2, 3, 5, 15, 23]),
        (34, &[1, 2, 3, 5, 6, 8]),
    ];
    let mut arcs: Vec<(u32, u32)> = lists
        .iter()
        .flat_map(|(u, l)| l.iter().map(move |&v| (*u, v)))
        .collect();
    arcs.reverse();
    arcs.swap(3, 17);
    for mut g in all_structures() {
        for &(u, v) in &arcs {
            assert!(g.insert(u, v));
        }
        for (u, l) in &lists {
            assert_eq!(g.neighbours(*u), l.to_vec(), "{}", g.name());
        }
    }
    // DIAA's intervals are those of figure 4.2: [1,3],[8,4] for 13, [32,4] for 15, ...
    let mut d = Diaa::new();
    for &(u, v) in &arcs {
        d.insert(u, v);
    }
    assert_eq!(d.intervals(), 2 + 1 + 2 + 1 + 2);
}

#[test]
fn large_batches_equal_single_inserts_and_a_csr() {
    // 2^15 random arcs with hubs, in batches of several sizes, against a CSR built from scratch.
    let mut state = 99u64;
    let mut next = |m: u32| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % u64::from(m)) as u32
    };
    let arcs: Vec<(u32, u32)> = (0..1 << 15)
        .map(|_| {
            let u = if next(4) == 0 { next(8) } else { next(3000) };
            (u, next(3000))
        })
        .collect();
    let csr = Csr::from_arcs(3000, &arcs);
    for size in [1usize, 100, 5000, 1 << 15] {
        for mut g in all_structures() {
            let mut new = 0;
            for b in arcs.chunks(size) {
                new += g.insert_batch(b);
            }
            assert_eq!(new, csr.num_arcs(), "{} batches of {size}", g.name());
            for v in 0..3000 {
                assert_eq!(
                    g.neighbours(v),
                    csr.neighbours(v),
                    "{} {size} {v}",
                    g.name()
                );
            }
        }
    }
    let mut g = Daa::new();
    assert_eq!(g.insert_batch_undirected(&[(1, 2), (2, 1), (3, 3)]), 3);
    assert_eq!(g.neighbours(2), vec![1]);
    assert_eq!(g.insert_batch(&[]), 0);
}

#[test]
fn edge_cases_of_the_semantics() {
    for mut g in all_structures() {
        assert_eq!(g.degree(1_000_000), 0);
        assert!(g.neighbours(1_000_000).is_empty());
        assert!(!g.delete(5, 6), "{}: deleting a missing arc", g.name());
        assert!(g.insert(5, 5), "{}: self loop", g.name());
        assert!(!g.insert(5, 5));
        assert!(g.insert(0, 200_000), "{}: a large id", g.name());
        assert_eq!(g.num_vertices(), 200_001);
        assert!(g.insert_undirected(7, 8));
        assert!(!g.insert_undirected(8, 7));
        assert_eq!(g.num_arcs(), 4);
        assert!(g.delete_undirected(8, 7));
        assert_eq!(g.num_arcs(), 2);
        assert_eq!(g.neighbours(0), vec![200_000]);
    }
}

#[test]
#[should_panic(expected = "above the largest id")]
fn ids_above_the_limit_panic() {
    Daa::new().insert(u32::MAX, 0);
}

#[test]
fn bcsr_fraction_policy_folds_geometrically() {
    let mut g = Bcsr::with_vertices(1000, FoldPolicy::Fraction(0.5));
    let mut r = Reference::default();
    let mut state = 12345u64;
    for _ in 0..60_000 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let u = (state >> 33) as u32 % 1000;
        let v = (state >> 13) as u32 % 5000;
        assert_eq!(g.insert(u, v), r.insert(u, v));
    }
    check_all(&g, &r);
    // Folds happen when the overflow passes half the CSR: a handful, not one per update.
    assert!(g.folds() >= 2 && g.folds() <= 10, "{} folds", g.folds());
    assert!(g.peak_bytes() >= g.bytes_used());
}

#[test]
fn csr_matches_reference() {
    let arcs = [(2u32, 1u32), (0, 3), (2, 1), (2, 0), (3, 3)];
    let c = Csr::from_arcs(4, &arcs);
    assert_eq!(c.neighbours(2), &[0, 1]);
    assert_eq!(c.neighbours(0), &[3]);
    assert_eq!(c.neighbours(1), &[] as &[u32]);
    assert_eq!(c.num_arcs(), 4);
    assert_eq!(c.neighbours(99), &[] as &[u32]);
}

proptest! {
    /// A fold policy prints as text that parses back to it.
    #[test]
    fn fold_policy_display_parses_back(
        f in prop_oneof![1e-300f64..1e300, Just(0.25)],
        k in 1u64..,
        which in 0..3u8,
    ) {
        let policy = match which {
            0 => FoldPolicy::Fraction(f),
            1 => FoldPolicy::Every(k),
            _ => FoldPolicy::Manual,
        };
        prop_assert_eq!(policy.to_string().parse::<FoldPolicy>(), Ok(policy));
    }

    /// Parsing never panics, and what it accepts is valid.
    #[test]
    fn fold_policy_parse_refuses_invalid(text in "(fraction:|every:|manual|)[-0-9.eEinfNa]{0,12}") {
        match text.parse::<FoldPolicy>() {
            Ok(FoldPolicy::Fraction(f)) => prop_assert!(f.is_finite() && f > 0.0),
            Ok(FoldPolicy::Every(k)) => prop_assert!(k >= 1),
            Ok(FoldPolicy::Manual) => prop_assert_eq!(text.as_str(), "manual"),
            Err(e) => prop_assert!(e.contains("fold policy")),
        }
    }
}

#[test]
fn fold_policy_refuses_degenerate_values() {
    for text in [
        "fraction:0",
        "fraction:-1",
        "fraction:NaN",
        "fraction:inf",
        "every:0",
        "sometimes",
        "",
    ] {
        assert!(text.parse::<FoldPolicy>().is_err(), "{text}");
    }
}
