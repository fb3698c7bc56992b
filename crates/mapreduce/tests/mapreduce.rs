//! MapReduce operations against sequential references, at several rank counts and node
//! layouts, in memory and with an allowance small enough that every phase spills.

use std::collections::BTreeMap;
use std::io::Write;

use spillway_comm::{Collectives, Comm, Sum};
use spillway_mapreduce::{Dataset, MapReduce, NodeAggregation, Serde, TextFiles};
use spillway_runtime::{run, Config};

/// (ranks, nodes, running per node).
const LAYOUTS: [(u32, u32, u32); 5] = [(1, 1, 1), (2, 1, 2), (3, 1, 2), (5, 2, 2), (7, 3, 1)];

/// A deterministic pseudo-random text: `words` words from a Zipf-like vocabulary with
/// non-ASCII bytes, tabs, CRs and blank runs.
fn text(seed: u64, words: usize) -> Vec<u8> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::new();
    for _ in 0..words {
        let r = next();
        let id = (r % 1000) * (r >> 20) % 5000 / (1 + (r >> 40) % 50);
        write!(out, "w{id}").unwrap();
        if r % 11 == 0 {
            out.extend_from_slice(&[0xc3, 0xa9, 0xff]);
        }
        out.extend_from_slice(match r % 13 {
            0 => b"\n",
            1 => b"\t",
            2 => b"  \r\n",
            _ => b" ",
        });
    }
    out
}

fn reference_counts(text: &[u8]) -> BTreeMap<Vec<u8>, u64> {
    let mut m = BTreeMap::new();
    for w in text
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
    {
        *m.entry(w.to_vec()).or_insert(0) += 1;
    }
    m
}

/// Word count of `files` with the given allowance and combiner choice; returns the counts
/// and the operation's total statistics, from rank 0.
fn word_count(
    layout: (u32, u32, u32),
    files: &[std::path::PathBuf],
    memory: Option<usize>,
    combine: bool,
    chunk: usize,
) -> (BTreeMap<Vec<u8>, u64>, spillway_mapreduce::OpStats) {
    word_count_with(layout, files, memory, combine, chunk, false)
}

/// [`word_count`], where with `distinct` the map counts each chunk's words itself and emits
/// each word once per chunk with [`Emitter::emit_distinct_raw_key`] (words of the same
/// chunk are still emitted one by one when they start with "w1", to mix both kinds).
fn word_count_with(
    layout: (u32, u32, u32),
    files: &[std::path::PathBuf],
    memory: Option<usize>,
    combine: bool,
    chunk: usize,
    distinct: bool,
) -> (BTreeMap<Vec<u8>, u64>, spillway_mapreduce::OpStats) {
    let (ranks, nodes, running) = layout;
    let config = Config::new(ranks).nodes(nodes).running(running);
    let out = run(&config, |rank| {
        let world = Comm::world(rank);
        let mut mr = MapReduce::new(&world).node_aggregation(NodeAggregation::Auto);
        if let Some(m) = memory {
            mr = mr.memory(m);
        }
        let input = TextFiles::open(&world, files, chunk)?;
        let map =
            |_: u64, chunk: Vec<u8>, emit: &mut spillway_mapreduce::Emitter<'_, Vec<u8>, u64>| {
                let mut own: BTreeMap<&[u8], u64> = BTreeMap::new();
                for w in chunk
                    .split(|b| b.is_ascii_whitespace())
                    .filter(|w| !w.is_empty())
                {
                    if distinct && !w.starts_with(b"w1") {
                        *own.entry(w).or_default() += 1;
                    } else {
                        emit.emit_raw_key(w, 1);
                    }
                }
                for (w, n) in own {
                    emit.emit_distinct_raw_key(w, n);
                }
            };
        let reduce = |w: Vec<u8>,
                      c: spillway_mapreduce::Values<'_, u64>,
                      out: &mut spillway_mapreduce::Output<Vec<u8>, u64>| {
            out.emit(&w, &c.sum())
        };
        let counts = if combine {
            mr.map_combine_reduce(input, map, |a, b| *a += b, reduce)?
        } else {
            mr.map_reduce(input, map, reduce)?
        };
        let stats = mr.stats()[0].total(&world)?;
        let all = counts.gather(&world, 0)?;
        Ok::<_, spillway_mapreduce::Error>((all, stats))
    })
    .unwrap();
    let (all, stats) = out.into_iter().next().unwrap();
    let all = all.unwrap();
    let n = all.len();
    let map: BTreeMap<Vec<u8>, u64> = all.into_iter().collect();
    assert_eq!(map.len(), n, "a key was reduced on two ranks");
    (map, stats)
}

fn write_files(dir: &std::path::Path, parts: &[Vec<u8>]) -> Vec<std::path::PathBuf> {
    parts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let p = dir.join(format!("part{i}.txt"));
            std::fs::write(&p, t).unwrap();
            p
        })
        .collect()
}

#[test]
fn word_count_equals_a_sequential_count_at_every_layout() {
    let dir = tempfile::tempdir().unwrap();
    let parts = vec![text(1, 20_000), Vec::new(), text(2, 3_000), b"x".to_vec()];
    let files = write_files(dir.path(), &parts);
    // Files do not join: "x" at the start of a file is its own word.
    let mut expected_files = BTreeMap::new();
    for t in &parts {
        for (w, c) in reference_counts(t) {
            *expected_files.entry(w).or_insert(0) += c;
        }
    }
    assert!(expected_files.len() > 100);
    for layout in LAYOUTS {
        for combine in [true, false] {
            let (got, stats) = word_count(layout, &files, None, combine, 1 << 12);
            assert_eq!(got, expected_files, "layout {layout:?} combine {combine}");
            assert_eq!(stats.bytes_spilled, 0);
            assert_eq!(stats.rounds, 1);
            if combine {
                assert!(stats.records_combined < stats.records_emitted);
            } else {
                assert_eq!(stats.records_emitted, expected_files.values().sum::<u64>());
            }
        }
    }
}

/// Pairs the map combined itself skip the combiner's table but are still combined with
/// equal keys of other chunks and of the table, in memory and spilled.
#[test]
fn pairs_combined_by_the_map_are_combined_again_across_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let parts = vec![text(3, 30_000), text(4, 10_000)];
    let files = write_files(dir.path(), &parts);
    let mut expected = BTreeMap::new();
    for t in &parts {
        for (w, c) in reference_counts(t) {
            *expected.entry(w).or_insert(0) += c;
        }
    }
    for layout in [(1, 1, 1), (3, 1, 2), (4, 2, 1)] {
        for combine in [true, false] {
            for memory in [None, Some(16 << 10)] {
                let (got, stats) = word_count_with(layout, &files, memory, combine, 1 << 12, true);
                assert_eq!(
                    got, expected,
                    "layout {layout:?} combine {combine} {memory:?}"
                );
                assert_eq!(memory.is_some(), stats.bytes_spilled > 0, "{stats:?}");
            }
        }
    }
}

#[test]
fn spilled_word_count_equals_the_in_memory_one() {
    let dir = tempfile::tempdir().unwrap();
    let parts = vec![text(7, 60_000), text(8, 40_000)];
    let files = write_files(dir.path(), &parts);
    for layout in [(1, 1, 1), (3, 1, 2), (4, 2, 1)] {
        for combine in [true, false] {
            let (mem, mem_stats) = word_count(layout, &files, None, combine, 1 << 14);
            // An allowance far below the data: map runs, the send buffer and received
            // blocks all go to the spill directory, in several rounds.
            let (small, stats) = word_count(layout, &files, Some(16 << 10), combine, 1 << 14);
            assert_eq!(small, mem, "layout {layout:?} combine {combine}");
            assert!(stats.bytes_spilled > 0, "nothing spilled: {stats:?}");
            assert!(stats.rounds > 1 || layout.0 == 1, "one round: {stats:?}");
            assert_eq!(mem_stats.bytes_spilled, 0);
        }
    }
}

#[test]
fn node_aggregation_shrinks_what_crosses_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[text(3, 50_000)]);
    let layout = (6, 2, 3);
    let (ranks, nodes, running) = layout;
    let config = Config::new(ranks).nodes(nodes).running(running);
    let stats = run(&config, |rank| {
        let world = Comm::world(rank);
        let mut results = Vec::new();
        for mode in [NodeAggregation::Off, NodeAggregation::On] {
            let mut mr = MapReduce::new(&world).node_aggregation(mode);
            let input = TextFiles::open(&world, &files, 1 << 12)?;
            let counts = mr.map_combine_reduce(
                input,
                |_, chunk: Vec<u8>, emit| {
                    for w in chunk
                        .split(|b| b.is_ascii_whitespace())
                        .filter(|w| !w.is_empty())
                    {
                        emit.emit_raw_key(w, 1u64);
                    }
                },
                |a, b| *a += b,
                |w: Vec<u8>, c, out| out.emit(&w, &c.sum::<u64>()),
            )?;
            let mut local = counts.to_local_vec();
            local.sort();
            results.push((mr.stats()[0].total(&world)?, local));
        }
        Ok::<_, spillway_mapreduce::Error>(results)
    })
    .unwrap();
    for r in &stats {
        assert_eq!(r[0].1, r[1].1, "node aggregation changed the result");
    }
    let (off, on) = (&stats[0][0].0, &stats[0][1].0);
    assert!(on.bytes_node_shuffled > 0);
    assert!(
        on.bytes_combined < off.bytes_combined,
        "node aggregation did not combine: {off:?} {on:?}"
    );
}

#[test]
fn iterative_operations_with_serde_values_and_local_datasets() {
    // Two operations: group numbers by residue (serde value: a vector), then count the
    // groups by size; the second consumes the first's output in place.
    for (ranks, nodes, running) in [(1, 1, 1), (4, 2, 2), (7, 1, 3)] {
        let config = Config::new(ranks).nodes(nodes).running(running);
        let out = run(&config, |rank| {
            let world = Comm::world(rank);
            let me = world.rank() as u64;
            let p = world.size() as u64;
            let numbers =
                Dataset::from_local(rank, (0..1000u64).filter(|i| i % p == me).map(|i| (i, ())))?;
            assert_eq!(numbers.count(&world)?, 1000);
            let mut mr = MapReduce::new(&world).memory(4 << 10);
            let groups = mr.map_reduce(
                numbers,
                |i: u64, (), emit| emit.emit(&(i % 37), i),
                |r: u64, vals, out| {
                    let mut v: Vec<u64> = vals.collect();
                    v.sort_unstable();
                    out.emit(&r, &Serde(v));
                },
            )?;
            let sizes = mr.map_combine_reduce(
                groups,
                |_r: u64, v: Serde<Vec<u64>>, emit| emit.emit(&(v.0.len() as u32), 1u32),
                |a, b| *a += b,
                |len: u32, ones, out| out.emit(&len, &ones.sum::<u32>()),
            )?;
            let total = world.allreduce(&[sizes.local_len()], Sum)?[0];
            Ok::<_, spillway_mapreduce::Error>((sizes.gather(&world, 0)?, total))
        })
        .unwrap();
        let (sizes, total) = &out[0];
        let mut sizes = sizes.clone().unwrap();
        sizes.sort();
        // 1000 = 37 * 27 + 1: one residue has 28 numbers, 36 have 27.
        assert_eq!(sizes, [(27, 36), (28, 1)]);
        assert_eq!(*total, 2);
    }
}

#[test]
fn unreadable_files_are_reported_with_their_path() {
    let config = Config::new(2);
    let err = run(&config, |rank| {
        let world = Comm::world(rank);
        match TextFiles::open(&world, &["/nonexistent/words.txt".into()], 1024) {
            Ok(_) => Ok::<_, spillway_mapreduce::Error>(String::new()),
            Err(e) => Ok(e.to_string()),
        }
    })
    .unwrap();
    assert!(err[0].contains("/nonexistent/words.txt"), "{}", err[0]);
}
