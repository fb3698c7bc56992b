//! Jones-Plassmann graph colouring (the colouring benchmark of Iverson's chapter 6).
//!
//! # Semantics
//! The graph is undirected: an edge `u -> v` of the input joins `u` and `v` both ways; self
//! loops and repeated edges are ignored. Every vertex `v` gets the priority
//! [`priority`]`(seed, v)`, a 64-bit hash, ties broken by the larger vertex id. In every round,
//! each uncoloured vertex whose priority exceeds that of all its uncoloured neighbours (these
//! vertices form an independent set) takes the smallest colour that none of its neighbours
//! has; rounds repeat until every vertex is coloured. The result depends only on the graph and
//! the seed, not on the number of ranks or nodes, and uses at most (maximum degree + 1) colours,
//! numbered from 0.
//!
//! # Data
//! The rows of [`load_graph`](crate::graph::load_graph)'s 1-D decomposition, made symmetric by
//! sending every edge's reverse to the owner of its target; neighbours owned by other ranks are
//! ghosts, whose colours arrive at the end of the round in which they are coloured. The
//! symmetric adjacency is kept in storage-backed memory; building it, and the per-vertex
//! priorities and colours, take heap memory proportional to the rank's edges and vertices.
//!
//! # Cost per round
//! Work proportional to the local edges of uncoloured vertices; one sparse exchange carrying the
//! new colours to the ranks that hold the coloured vertices as ghosts; one allreduce of a count.

use std::time::{Duration, Instant};

use spillway_comm::splitmix::{splitmix64, GOLDEN_GAMMA};
use spillway_comm::{Collectives, Comm, Max, Sum};
use spillway_runtime::SbVec;

use crate::error::AlgoError;
use crate::graph::DistGraph;
use crate::Progress;

const UNCOLOURED: u32 = u32::MAX;

/// The priority of vertex `v` with `seed`: the splitmix64 finaliser of
/// `seed * 0x9E3779B97F4A7C15 + v` (wrapping). Vertex `u` beats `v` when its priority is larger,
/// or equal with `u > v`.
pub fn priority(seed: u64, v: u64) -> u64 {
    splitmix64(seed.wrapping_mul(GOLDEN_GAMMA).wrapping_add(v))
}

/// A colouring of this rank's vertices.
#[derive(Debug)]
pub struct Colouring {
    /// First vertex of this rank.
    pub lo: u64,
    /// Colour of each local vertex `lo + i`.
    pub colours: SbVec<u32>,
    /// Number of colours used by the whole graph.
    pub colours_used: u32,
    /// Largest degree of the undirected graph (without loops and repeated edges).
    pub max_degree: u64,
    /// Rounds performed.
    pub rounds: usize,
    /// Wall time of each round on this rank.
    pub round_times: Vec<Duration>,
}

/// The symmetric adjacency of the local vertices: neighbours as local indices, ghosts after the
/// local vertices (`rows + g` for ghost `g`).
struct Adjacency {
    offsets: SbVec<u64>,
    targets: SbVec<u32>,
    /// Global ids of the ghosts, increasing.
    ghosts: Vec<u64>,
    /// Owner rank of each ghost.
    ghost_owner: Vec<u32>,
}

fn symmetric_adjacency(comm: &Comm, graph: &DistGraph) -> Result<Adjacency, AlgoError> {
    let rows = graph.local_rows();
    let lo = graph.lo;
    // Every edge u -> v as both (u, v) and (v, u); reverses go to v's owner.
    let mut pairs: Vec<[u32; 2]> = Vec::new();
    let mut by_dest: Vec<Vec<[u32; 2]>> = vec![Vec::new(); comm.size()];
    for u in 0..rows {
        let gu = (lo + u as u64) as u32;
        for &v in graph.row(u) {
            if v == gu {
                continue;
            }
            pairs.push([gu, v]);
            let q = graph.owner(u64::from(v));
            if q == comm.rank() {
                pairs.push([v, gu]);
            } else {
                by_dest[q].push([v, gu]);
            }
        }
    }
    let blocks: Vec<(usize, &[[u32; 2]])> = by_dest
        .iter()
        .enumerate()
        .filter(|(_, b)| !b.is_empty())
        .map(|(q, b)| (q, b.as_slice()))
        .collect();
    let (got, _) = comm.exchange(&blocks)?;
    drop(by_dest);
    pairs.extend_from_slice(&got);
    drop(got);
    pairs.sort_unstable();
    pairs.dedup();
    let mut ghosts: Vec<u64> = pairs
        .iter()
        .map(|p| u64::from(p[1]))
        .filter(|&v| v < lo || v >= graph.hi)
        .collect();
    ghosts.sort_unstable();
    ghosts.dedup();
    let ghost_owner = ghosts.iter().map(|&g| graph.owner(g) as u32).collect();
    let mut offsets: SbVec<u64> = SbVec::zeroed(comm.runtime(), rows + 1)?;
    let mut targets: SbVec<u32> = SbVec::zeroed(comm.runtime(), pairs.len())?;
    {
        let off = offsets.as_mut_slice();
        let t = targets.as_mut_slice();
        for (slot, p) in t.iter_mut().zip(&pairs) {
            off[(u64::from(p[0]) - lo) as usize + 1] += 1;
            let v = u64::from(p[1]);
            *slot = if v >= lo && v < graph.hi {
                (v - lo) as u32
            } else {
                (rows + ghosts.binary_search(&v).expect("ghost listed")) as u32
            };
        }
        for i in 0..rows {
            off[i + 1] += off[i];
        }
    }
    Ok(Adjacency {
        offsets,
        targets,
        ghosts,
        ghost_owner,
    })
}

/// Colours the graph; `progress` is called on every rank after each round with the number
/// of vertices still uncoloured (`max_iterations` is 0: the number of rounds is not known
/// ahead).
///
/// # Errors
/// Communication errors.
pub fn colour(
    comm: &Comm,
    graph: &DistGraph,
    seed: u64,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Colouring, AlgoError> {
    let adj = symmetric_adjacency(comm, graph)?;
    let rows = graph.local_rows();
    let lo = graph.lo;
    let global = |i: usize| -> u64 {
        if i < rows {
            lo + i as u64
        } else {
            adj.ghosts[i - rows]
        }
    };
    let prio: Vec<(u64, u64)> = (0..rows + adj.ghosts.len())
        .map(|i| (priority(seed, global(i)), global(i)))
        .collect();
    let off = adj.offsets.as_slice();
    let tgt = adj.targets.as_slice();
    let max_degree = (0..rows).map(|i| off[i + 1] - off[i]).max().unwrap_or(0);
    let max_degree = comm.allreduce(&[max_degree], Max)?[0];
    let mut colour = vec![UNCOLOURED; rows + adj.ghosts.len()];
    let mut remaining: Vec<u32> = (0..rows as u32).collect();
    let mut rounds = 0;
    let mut times = Vec::new();
    let mut used: Vec<bool> = Vec::new();
    loop {
        let start = Instant::now();
        // Choose the local maxima among the uncoloured vertices.
        let mut chosen: Vec<u32> = Vec::new();
        remaining.retain(|&v| {
            let v = v as usize;
            let nb = &tgt[off[v] as usize..off[v + 1] as usize];
            let wins = nb
                .iter()
                .all(|&u| colour[u as usize] != UNCOLOURED || prio[u as usize] < prio[v]);
            if wins {
                chosen.push(v as u32);
            }
            !wins
        });
        // They are independent: colour them with the smallest colour free among neighbours.
        let mut news: Vec<(u32, u32)> = Vec::with_capacity(chosen.len());
        for &v in &chosen {
            let v = v as usize;
            let nb = &tgt[off[v] as usize..off[v + 1] as usize];
            used.clear();
            used.resize(nb.len() + 1, false);
            for &u in nb {
                let c = colour[u as usize];
                if (c as usize) < used.len() {
                    used[c as usize] = true;
                }
            }
            let c = used.iter().position(|&b| !b).expect("deg + 1 slots") as u32;
            news.push((v as u32, c));
        }
        for &(v, c) in &news {
            colour[v as usize] = c;
        }
        // Send the new colours to the ranks holding these vertices as ghosts.
        let mut by_dest: Vec<Vec<[u32; 2]>> = vec![Vec::new(); comm.size()];
        let mut sent_to: Vec<u32> = Vec::new();
        for &(v, c) in &news {
            let nb = &tgt[off[v as usize] as usize..off[v as usize + 1] as usize];
            sent_to.clear();
            for &u in nb {
                if (u as usize) >= rows {
                    let q = adj.ghost_owner[u as usize - rows];
                    if !sent_to.contains(&q) {
                        sent_to.push(q);
                        by_dest[q as usize].push([(lo + u64::from(v)) as u32, c]);
                    }
                }
            }
        }
        let blocks: Vec<(usize, &[[u32; 2]])> = by_dest
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.is_empty())
            .map(|(q, b)| (q, b.as_slice()))
            .collect();
        let (got, _) = comm.exchange(&blocks)?;
        for &[g, c] in &got {
            if let Ok(i) = adj.ghosts.binary_search(&u64::from(g)) {
                colour[rows + i] = c;
            }
        }
        let left = comm.allreduce(&[remaining.len() as u64], Sum)?[0];
        rounds += 1;
        times.push(start.elapsed());
        progress(&Progress {
            iteration: rounds,
            max_iterations: 0,
            delta: left as f64,
        });
        if left == 0 {
            break;
        }
    }
    let local_max = colour[..rows].iter().copied().max().map_or(0, |c| c + 1);
    let colours_used = comm.allreduce(&[local_max], Max)?[0];
    let colours = SbVec::from_slice(comm.runtime(), &colour[..rows])?;
    Ok(Colouring {
        lo,
        colours,
        colours_used,
        max_degree,
        rounds,
        round_times: times,
    })
}
