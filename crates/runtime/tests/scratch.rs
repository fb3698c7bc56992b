//! Scratch memory: every buffer a rank takes is zero-filled even when an earlier rank's pages
//! are reused, two live buffers never overlap, a buffer kept across blocking calls keeps its
//! contents, and scratch is counted within the node's budget (storage-backed memory of
//! blocked ranks makes room), at several layouts, with and without a budget.

mod support;

use std::time::Duration;

use spillway_runtime::{run, Config, MemoryStats, Rank, SbVec};
use support::{node_barrier, with_deadline, Mix};

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const ROUNDS: u64 = 12;

/// What rank `r` writes at element `i` of its buffer `b` in round `k`.
fn mark(r: u32, k: u64, b: u64, i: usize) -> u64 {
    (u64::from(r) << 48) ^ (k << 32) ^ (b << 24) ^ i as u64 ^ 0x5a5a
}

fn rank_main(rank: &Rank) -> TestResult<MemoryStats> {
    let me = rank.rank();
    let mut g = Mix::new(0x5c7a, u64::from(me));
    // Storage-backed data of the rank, which the budget must make room for.
    let mut data: SbVec<u64> = SbVec::zeroed(rank, 40_000)?;
    data.as_mut_slice().fill(u64::from(me));
    for k in 0..ROUNDS {
        // Sizes from a page to a few MiB, so that blocks are reused for other sizes.
        let lens = [
            1 + g.below(600) as usize,
            1 + g.below(100_000) as usize,
            1 + g.below(40_000) as usize,
        ];
        let mut bufs = Vec::new();
        for (b, &len) in lens.iter().enumerate() {
            let mut s = rank.scratch::<u64>(len)?;
            if let Some(i) = s.iter().position(|&v| v != 0) {
                return Err(format!("rank {me} round {k}: scratch[{i}] of {len} not zero").into());
            }
            for (i, v) in s.iter_mut().enumerate() {
                *v = mark(me, k, b as u64, i);
            }
            bufs.push(s);
        }
        // Blocking with the buffers held: other ranks take and fill their own meanwhile.
        node_barrier(rank, 0x5c00 + k)?;
        for (b, s) in bufs.iter().enumerate() {
            if let Some(i) = (0..s.len()).find(|&i| s[i] != mark(me, k, b as u64, i)) {
                return Err(format!("rank {me} round {k}: buffer {b} changed at {i}").into());
            }
        }
        if data.as_slice().iter().any(|&v| v != u64::from(me)) {
            return Err(format!("rank {me} round {k}: its storage-backed data changed").into());
        }
        drop(bufs);
        node_barrier(rank, 0x5d00 + k)?;
    }
    Ok(rank.node_memory_stats())
}

#[test]
fn scratch_is_zeroed_private_and_kept_within_the_budget() {
    // (ranks, nodes, running, budget)
    let layouts = [
        (1, 1, 1, None),
        (6, 2, 2, None),
        (8, 1, 2, Some(24u64 << 20)),
        (9, 3, 3, Some(12u64 << 20)),
    ];
    for (ranks, nodes, running, budget) in layouts {
        let mut config = Config::new(ranks).nodes(nodes).running(running);
        if let Some(b) = budget {
            config = config.mem_budget(b);
        }
        let what = format!("ranks {ranks} nodes {nodes} running {running} budget {budget:?}");
        let stats = with_deadline(&what, Duration::from_secs(120), String::new, move || {
            run(&config, rank_main)
        })
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        if let Some(b) = budget {
            for s in stats {
                // Every rank holds up to 1.1 MiB of scratch across the barriers, which the
                // budget holds for all ranks of a node, besides the pool's free blocks.
                assert_eq!(s.overcommits, 0, "{what}: {s:?}");
                assert!(s.peak_resident <= b, "{what}: over the budget: {s:?}");
            }
        }
    }
}
