//! Tests of `serial-ooc`: the CSR file against spillway's graph, the ranks against spillway's
//! and a sequential reference in every I/O mode, edge lists, bad input.

use super::*;
use crate::pagerank::{sequential_pagerank, Csr};
use spillway::algorithms::graph::pagerank::{pagerank as spillway_pagerank, PageRankOptions};
use spillway::algorithms::graph::{load_graph, GraphSource};
use spillway::{run, Comm, Config};

fn run_args(graph: &Path, io: Mode, out: &Path) -> RunArgs {
    RunArgs {
        graph: graph.to_path_buf(),
        iterations: 6,
        damping: 0.85,
        io,
        chunk: ByteSize(8 << 10),
        buffers: 2,
        out: Some(out.to_path_buf()),
        json: true,
    }
}

#[test]
fn the_csr_file_of_rmat_is_spillways_graph_and_the_ranks_agree() {
    let spec = RmatSpec {
        scale: 10,
        edge_factor: 8,
        seed: 1,
    };
    let dir = tempfile::tempdir().unwrap();
    let csr = dir.path().join("g.csr");
    build(BuildArgs {
        generate: Some("rmat:10:8".into()),
        edge_list: None,
        out: csr.clone(),
    })
    .unwrap();
    let header = Header::read(&csr).unwrap();
    assert_eq!((header.n, header.m), (1024, 8192));
    assert_eq!(
        std::fs::metadata(&csr).unwrap().len(),
        header.file_len(),
        "padded to a whole block"
    );

    // The same CSR as the sequential baseline of `spillway-bench pagerank` builds.
    let mut edges = Vec::new();
    spec.edges(0..spec.num_edges(), &mut edges);
    let reference = Csr::from_edges(1024, &edges);
    let bytes = std::fs::read(&csr).unwrap();
    let offsets: &[u64] = bytemuck::cast_slice(
        &bytes[header.offsets().start as usize..header.offsets().end as usize],
    );
    let targets: &[u32] = bytemuck::cast_slice(
        &bytes[header.targets().start as usize..header.targets().end as usize],
    );
    assert!(offsets
        .iter()
        .zip(&reference.offsets)
        .all(|(&a, &b)| a as usize == b));
    assert_eq!(targets, &reference.targets[..]);

    // spillway's own PageRank on 3 ranks.
    let options = PageRankOptions {
        iterations: 6,
        tolerance: 0.0,
        damping: 0.85,
    };
    let parts = run(&Config::new(3), |rank| {
        let world = Comm::world(rank);
        let graph = load_graph(&world, &GraphSource::Rmat(spec))?;
        let result = spillway_pagerank(&world, &graph, &options, &mut |_| {})?;
        Ok::<_, BoxError>(result.ranks.as_slice().to_vec())
    })
    .unwrap();
    let spillway: Vec<f64> = parts.concat();
    let sequential = sequential_pagerank(&reference, 6, 0.85);
    let spill_file = dir.path().join("spillway.f64");
    std::fs::write(
        &spill_file,
        spillway
            .iter()
            .flat_map(|r| r.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    for io in [Mode::Direct, Mode::Buffered, Mode::Memory] {
        let out = dir.path().join(format!("{io:?}.txt"));
        pagerank(run_args(&csr, io, &out)).unwrap();
        let x = read_ranks(&out).unwrap();
        let l1 = |y: &[f64]| -> f64 { x.iter().zip(y).map(|(a, b)| (a - b).abs()).sum() };
        assert!(l1(&spillway) < 1e-12, "{io:?}: L1 {}", l1(&spillway));
        assert!(l1(&sequential) < 1e-12, "{io:?}: L1 {}", l1(&sequential));
        compare(CompareArgs {
            a: out,
            b: spill_file.clone(),
            tolerance: 1e-12,
        })
        .unwrap();
    }
}

#[test]
fn an_edge_list_builds_with_n_one_above_the_largest_id() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("g.txt");
    std::fs::write(&list, "# a comment\n0 1\n0 2\n1 2\n2 0\n0 5\n").unwrap();
    let csr = dir.path().join("g.csr");
    build(BuildArgs {
        generate: None,
        edge_list: Some(list),
        out: csr.clone(),
    })
    .unwrap();
    let header = Header::read(&csr).unwrap();
    assert_eq!((header.n, header.m), (6, 5));
    let out = dir.path().join("r.txt");
    pagerank(run_args(&csr, Mode::Buffered, &out)).unwrap();
    let x = read_ranks(&out).unwrap();
    let reference = sequential_pagerank(
        &Csr::from_edges(6, &[(0, 1), (0, 2), (1, 2), (2, 0), (0, 5)]),
        6,
        0.85,
    );
    let l1: f64 = x.iter().zip(&reference).map(|(a, b)| (a - b).abs()).sum();
    assert!(l1 < 1e-15, "L1 {l1}");
}

#[test]
fn a_bad_edge_list_or_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("g.txt");
    std::fs::write(&list, "0 1\nx 2\n").unwrap();
    let err = build(BuildArgs {
        generate: None,
        edge_list: Some(list.clone()),
        out: dir.path().join("g.csr"),
    })
    .unwrap_err();
    assert!(err.to_string().contains("line 2"), "{err}");
    assert!(!dir.path().join("g.csr").exists());
    assert!(Header::read(&list).is_err());
}
