//! Storage-backed vectors under every memory policy, with a budget small enough that they are
//! unloaded and loaded again: each rank applies random writes, pushes, extensions, resizes,
//! ranged writes, explicit unloads and discards to an `SbVec` and to a plain `Vec` alike, blocks
//! between steps (node barriers, a ring of messages), and compares the two after every
//! blocking call, in full and by ranges. The node's counters must show that the budget was
//! kept (no overcommit, peak resident bytes within the budget) and that memory was unloaded
//! whenever the data did not fit.

mod support;

use std::time::Duration;

use spillway_runtime::{
    run, Config, MemoryStats, Pattern, Payload, Policy, Rank, ResumePolicy, SbVec, WaitKind,
};
use support::{node_barrier, with_deadline, Mix};

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Every policy, by name (the enum is non-exhaustive; a new policy must be added here).
const POLICIES: [&str; 3] = ["araw", "arlw", "lrlw"];
const STEPS: u32 = 20;
/// The most elements a rank's vector holds.
const MAX_LEN: usize = 12_000;
/// The most bytes one vector maps: growth at most doubles a capacity below `MAX_LEN`, in
/// whole pages.
const MAX_MAP: u64 = (2 * MAX_LEN as u64 * 8).div_ceil(4096) * 4096;
const RING: u64 = 0x2196;
const BARRIER: u64 = 0xba00;

/// (ranks, nodes, running, resume policy, dynamic running)
const LAYOUTS: [(u32, u32, u32, ResumePolicy, bool); 3] = [
    (8, 2, 1, ResumePolicy::Fifo, false),
    (10, 2, 2, ResumePolicy::MostResident, false),
    (5, 1, 2, ResumePolicy::Fifo, true),
];

/// The budget: room for the largest vectors of the ranks running at once, and some for
/// messages; less than the ranks of a node hold together.
fn budget(running: u32) -> u64 {
    u64::from(running) * MAX_MAP + (64 << 10)
}

fn differ(v: &[u64], model: &[u64]) -> Option<String> {
    if v.len() != model.len() {
        return Some(format!("{} elements, the Vec has {}", v.len(), model.len()));
    }
    let i = v.iter().zip(model).position(|(a, b)| a != b)?;
    Some(format!(
        "element {i} is {:#x}, the Vec has {:#x}",
        v[i], model[i]
    ))
}

/// One rank's random life with its vector; returns its node and the node's counters.
fn rank_main(rank: &Rank, seed: u64) -> TestResult<(u32, MemoryStats)> {
    let mut g = Mix::new(seed, u64::from(rank.rank()));
    let fresh = |g: &mut Mix, n: usize| -> Vec<u64> { (0..n).map(|_| g.next()).collect() };
    // A quarter start on the heap (below a page), the others mapped.
    let len = if g.one_in(4) {
        g.below(400) as usize
    } else {
        8000 + g.below(4000) as usize
    };
    let (mut v, mut model): (SbVec<u64>, Vec<u64>) = match g.below(3) {
        0 => (SbVec::zeroed(rank, len)?, vec![0; len]),
        1 => {
            let data = fresh(&mut g, len);
            (SbVec::from_slice(rank, &data)?, data)
        }
        _ => {
            let data = fresh(&mut g, len);
            let mut v = SbVec::with_capacity(rank, len)?;
            v.extend_from_slice(&data)?;
            (v, data)
        }
    };
    let (r, n) = (rank.rank(), rank.size());
    let budget = rank.mem_budget().ok_or("the job has a budget")?;
    for step in 0..STEPS {
        let mut done = Vec::new();
        for _ in 0..1 + g.below(4) {
            let len = model.len();
            match g.below(12) {
                0..=2 if len > 0 => {
                    let s = v.as_mut_slice();
                    for _ in 0..16 {
                        let (i, x) = (g.below(len as u64) as usize, g.next());
                        s[i] = x;
                        model[i] = x;
                    }
                    done.push("write");
                }
                3 if len < MAX_LEN => {
                    let x = g.next();
                    v.push(x)?;
                    model.push(x);
                    done.push("push");
                }
                4 => {
                    let k = g.below((MAX_LEN - len) as u64 / 2 + 1) as usize;
                    let data = fresh(&mut g, k);
                    v.extend_from_slice(&data)?;
                    model.extend_from_slice(&data);
                    done.push("extend");
                }
                5 => {
                    let to = g.below(MAX_LEN as u64 + 1) as usize;
                    v.resize(to)?;
                    model.resize(to, 0);
                    done.push("resize");
                }
                6 | 7 if len > 0 => {
                    let a = g.below(len as u64) as usize;
                    let b = a + g.below((len - a) as u64 + 1) as usize;
                    let x = g.next();
                    v.range_mut(a..b).fill(x);
                    model[a..b].fill(x);
                    done.push("range_mut");
                }
                8 => {
                    v.unload();
                    done.push("unload");
                }
                9 if g.one_in(3) => {
                    v.discard();
                    model.fill(0);
                    done.push("discard");
                }
                10 | 11 if len > 0 => {
                    let a = g.below(len as u64) as usize;
                    let b = a + g.below((len - a) as u64 + 1) as usize;
                    if let Some(d) = differ(v.range(a..b), &model[a..b]) {
                        return Err(format!("rank {r} step {step}: range {a}..{b}: {d}").into());
                    }
                    done.push("range");
                }
                _ => {}
            }
        }
        // Block: the other ranks of the node run, and memory is unloaded or evicted.
        if step % 2 == 0 {
            node_barrier(rank, BARRIER + u64::from(step))?;
        } else {
            rank.post((r + 1) % n, RING, step as i32, Payload::copy_of(&[1; 8]))?;
            let from = Pattern {
                context: RING,
                source: Some((r + n - 1) % n),
                tag: Some(step as i32),
            };
            rank.recv(from, WaitKind::Recv)?;
        }
        // Compare: in full, or in pieces (which loads only their pages).
        let bad = if g.one_in(2) {
            differ(v.as_slice(), &model)
        } else {
            let mut at = 0;
            let mut bad = None;
            while at < model.len() && bad.is_none() {
                let end = (at + 1 + g.below(3000) as usize).min(model.len());
                bad = differ(v.range(at..end), &model[at..end]).map(|d| format!("{at}..: {d}"));
                at = end;
            }
            bad.or_else(|| (v.len() != model.len()).then(|| "length".to_string()))
        };
        if let Some(d) = bad {
            return Err(format!("rank {r} after step {step} ({done:?}): {d}").into());
        }
        let s = rank.node_memory_stats();
        if s.overcommits > 0 || s.peak_resident > budget {
            return Err(format!("rank {r} step {step}: budget {budget} not kept: {s:?}").into());
        }
    }
    node_barrier(rank, BARRIER + u64::from(STEPS))?;
    Ok((rank.node(), rank.node_memory_stats()))
}

fn policy_test(name: &str) {
    let policy: Policy = name.parse().expect("a policy name");
    let mut pressed = 0;
    for (i, &(ranks, nodes, running, resume, dynamic)) in LAYOUTS.iter().enumerate() {
        let budget = budget(running);
        let config = Config::new(ranks)
            .nodes(nodes)
            .running(running)
            .resume_policy(resume)
            .dynamic_running(dynamic)
            .mem_budget(budget)
            .policy(policy);
        let what = format!("{policy} ranks {ranks} nodes {nodes} running {running}");
        let seed = 0x5b7e_c000 + i as u64;
        let out = with_deadline(&what, Duration::from_secs(60), String::new, move || {
            run(&config, |rank| rank_main(rank, seed))
        })
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        // Per node, the counters as the last rank saw them (they only grow).
        let mut per_node: Vec<MemoryStats> = vec![MemoryStats::default(); nodes as usize];
        for (node, s) in out {
            let m = &mut per_node[node as usize];
            if s.loads >= m.loads {
                *m = s;
            }
        }
        for (node, m) in per_node.iter().enumerate() {
            eprintln!(
                "{what} node {node}: budget {budget}, peak allocated {}, peak resident {}, \
                 {} loads, {} unloads, {} bytes written, {} read",
                m.peak_allocated,
                m.peak_resident,
                m.loads,
                m.unloads,
                m.bytes_written,
                m.bytes_read
            );
            assert_eq!(m.overcommits, 0, "{what}: node {node}: {m:?}");
            assert!(
                m.peak_resident <= budget,
                "{what}: node {node} over budget: {m:?}"
            );
            assert!(m.loads > 0, "{what}: node {node} loaded nothing: {m:?}");
            if m.peak_allocated > budget {
                // The data did not fit: it must have been unloaded and read back.
                pressed += 1;
                assert!(m.unloads > 0, "{what}: node {node}: {m:?}");
                assert!(m.bytes_written > 0, "{what}: node {node}: {m:?}");
            }
            if policy == Policy::Araw {
                // Every rank blocks many times: each unloads what it has loaded.
                assert!(m.unloads >= m.loads / 2, "{what}: node {node}: {m:?}");
            }
        }
    }
    assert!(
        pressed > 0,
        "{name}: no node held more data than its budget: the test did not exercise unloading"
    );
}

#[test]
fn sbvec_matches_a_vec_under_araw() {
    policy_test(POLICIES[0]);
}

#[test]
fn sbvec_matches_a_vec_under_arlw() {
    policy_test(POLICIES[1]);
}

#[test]
fn sbvec_matches_a_vec_under_lrlw() {
    policy_test(POLICIES[2]);
}

/// The list above names every policy the runtime parses, and each name round-trips.
#[test]
fn the_policy_list_is_complete() {
    let parsed: Vec<Policy> = POLICIES.iter().map(|n| n.parse().unwrap()).collect();
    for (p, n) in parsed.iter().zip(POLICIES) {
        assert_eq!(p.name(), n);
    }
    // Policies the CLI's error message lists must all be covered.
    let err = "nope".parse::<Policy>().unwrap_err();
    let listed = err
        .split("available: ")
        .nth(1)
        .map(|s| s.trim_end_matches(')').split(", ").count());
    assert_eq!(listed, Some(POLICIES.len()), "{err}");
}
