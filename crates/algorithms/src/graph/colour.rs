//! Greedy graph colouring in a priority order, distributed as Jones-Plassmann (the colouring
//! benchmark of Iverson's chapter 6).
//!
//! # Semantics
//! The graph is undirected: an edge `u -> v` of the input joins `u` and `v` both ways; self
//! loops and repeated edges are ignored. The vertices are ranked by an [`Order`]:
//! - [`Order::LargestFirst`] (the default of `run colour`): by degree, larger first, ties to
//!   the smaller vertex id: the order of networkx's `greedy_color(strategy="largest_first")`
//!   on a graph whose vertices were added by increasing id;
//! - [`Order::Random`]: by [`priority`]`(seed, v)`, a 64-bit hash, ties to the larger id
//!   (Jones and Plassmann's random priorities).
//!
//! Every vertex takes the smallest colour that none of its neighbours ranked before it has.
//! This is the sequential greedy colouring in that order, whatever the number of ranks or
//! nodes; it uses at most (maximum degree + 1) colours, numbered from 0. Then each of
//! `passes` recolouring passes (Culberson's iterated greedy) colours the vertices again, the
//! classes of the last colouring taken as blocks in reverse order (the highest colour first,
//! each block in the first order): a greedy pass over an order that keeps each colour class
//! together never needs more colours than there are classes, and often needs fewer.
//!
//! # Data
//! The rows of [`load_graph`](crate::graph::load_graph)'s 1-D decomposition, made symmetric by
//! sending every edge's reverse to the owner of its target; neighbours owned by other ranks are
//! ghosts, whose colours arrive at the end of the round in which they are coloured. The
//! symmetric adjacency is kept in storage-backed memory; building it, and the per-vertex
//! ranks, counters and colours, take heap memory proportional to the rank's edges and
//! vertices.
//!
//! # Rounds
//! Each vertex counts its neighbours ranked before it that are not coloured yet. A round
//! colours every local vertex whose count falls to zero, following chains of local vertices
//! within the round (a work list, as in the asynchronous variants of Jones-Plassmann), then
//! sends the new colours to the ranks that hold those vertices as ghosts, which count them
//! down in turn; one allreduce tells whether vertices are left. On one rank a pass is one
//! round, linear in the edges; on several, the rounds are the number of times the chains of
//! the order cross between ranks.

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

/// The order in which the greedy colouring takes the vertices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Larger degree first, ties to the smaller vertex id.
    LargestFirst,
    /// By [`priority`]`(seed, v)`, larger first, ties to the larger vertex id.
    Random {
        /// The seed of the priorities.
        seed: u64,
    },
}

/// A vertex's place in the order: the larger key goes first (a recolouring pass's class,
/// then the first order's two keys).
type Key = (u64, u64, u64);

/// Per-vertex keys (local vertices, then ghosts) for `order`.
fn keys_of(
    comm: &Comm,
    adj: &Adjacency,
    rows: usize,
    lo: u64,
    order: Order,
) -> Result<Vec<Key>, AlgoError> {
    let global = |i: usize| -> u64 {
        if i < rows {
            lo + i as u64
        } else {
            adj.ghosts[i - rows]
        }
    };
    let n = rows + adj.ghosts.len();
    match order {
        Order::Random { seed } => Ok((0..n)
            .map(|i| (0, priority(seed, global(i)), global(i)))
            .collect()),
        Order::LargestFirst => {
            let off = adj.offsets.as_slice();
            let mut degree: Vec<u64> = (0..rows).map(|i| off[i + 1] - off[i]).collect();
            degree.resize(n, 0);
            // The ghosts' degrees come from their owners.
            let sent: Vec<(u32, u32)> = (0..rows)
                .map(|v| (v as u32, degree[v].min(u64::from(u32::MAX)) as u32))
                .collect();
            for (i, d) in share_with_ghost_holders(comm, adj, rows, lo, &sent)? {
                degree[i] = u64::from(d);
            }
            Ok((0..n)
                .map(|i| (0, degree[i], u64::MAX - global(i)))
                .collect())
        }
    }
}

/// Sends `(local vertex, value)` to every rank holding the vertex as a ghost; returns the
/// `(ghost index + rows, value)` pairs received. A collective.
fn share_with_ghost_holders(
    comm: &Comm,
    adj: &Adjacency,
    rows: usize,
    lo: u64,
    items: &[(u32, u32)],
) -> Result<Vec<(usize, u32)>, AlgoError> {
    let off = adj.offsets.as_slice();
    let tgt = adj.targets.as_slice();
    let mut by_dest: Vec<Vec<[u32; 2]>> = vec![Vec::new(); comm.size()];
    let mut sent_to: Vec<u32> = Vec::new();
    for &(v, x) in items {
        let nb = &tgt[off[v as usize] as usize..off[v as usize + 1] as usize];
        sent_to.clear();
        for &u in nb {
            if (u as usize) >= rows {
                let q = adj.ghost_owner[u as usize - rows];
                if !sent_to.contains(&q) {
                    sent_to.push(q);
                    by_dest[q as usize].push([(lo + u64::from(v)) as u32, x]);
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
    Ok(got
        .iter()
        .filter_map(|&[g, x]| {
            adj.ghosts
                .binary_search(&u64::from(g))
                .ok()
                .map(|i| (rows + i, x))
        })
        .collect())
}

/// For each ghost, the local vertices adjacent to it (offsets, then the vertices).
fn ghost_neighbours(adj: &Adjacency, rows: usize) -> (Vec<u32>, Vec<u32>) {
    let off = adj.offsets.as_slice();
    let tgt = adj.targets.as_slice();
    let g = adj.ghosts.len();
    let mut start = vec![0u32; g + 1];
    for &u in tgt {
        if (u as usize) >= rows {
            start[u as usize - rows + 1] += 1;
        }
    }
    for i in 0..g {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut list = vec![0u32; start[g] as usize];
    for v in 0..rows {
        for &u in &tgt[off[v] as usize..off[v + 1] as usize] {
            if (u as usize) >= rows {
                let slot = &mut fill[u as usize - rows];
                list[*slot as usize] = v as u32;
                *slot += 1;
            }
        }
    }
    (start, list)
}

/// One greedy pass in the order of `keys`: the colours of the local vertices and ghosts, the
/// rounds and their times.
fn greedy_pass(
    comm: &Comm,
    adj: &Adjacency,
    rows: usize,
    lo: u64,
    keys: &[Key],
    ghost_nb: &(Vec<u32>, Vec<u32>),
    progress: &mut dyn FnMut(&Progress),
) -> Result<(Vec<u32>, Vec<Duration>), AlgoError> {
    let off = adj.offsets.as_slice();
    let tgt = adj.targets.as_slice();
    let mut colour = vec![UNCOLOURED; keys.len()];
    // Neighbours ranked before each local vertex and not coloured yet.
    let mut waiting: Vec<u32> = (0..rows)
        .map(|v| {
            tgt[off[v] as usize..off[v + 1] as usize]
                .iter()
                .filter(|&&u| keys[u as usize] > keys[v])
                .count() as u32
        })
        .collect();
    let mut ready: Vec<u32> = (0..rows as u32)
        .filter(|&v| waiting[v as usize] == 0)
        .collect();
    let mut left = rows as u64;
    // `seen[c] == stamp` marks colour c as taken by a neighbour of the vertex being coloured.
    let mut seen: Vec<u32> = Vec::new();
    let mut stamp = 0u32;
    let mut times = Vec::new();
    let mut news: Vec<(u32, u32)> = Vec::new();
    loop {
        let start = Instant::now();
        news.clear();
        while let Some(v) = ready.pop() {
            let v = v as usize;
            let nb = &tgt[off[v] as usize..off[v + 1] as usize];
            stamp = stamp.wrapping_add(1);
            if stamp == 0 {
                seen.fill(0);
                stamp = 1;
            }
            if seen.len() < nb.len() + 1 {
                seen.resize(nb.len() + 1, 0);
            }
            for &u in nb {
                let c = colour[u as usize] as usize;
                if c < seen.len() {
                    seen[c] = stamp;
                }
            }
            let c = seen
                .iter()
                .position(|&s| s != stamp)
                .expect("deg + 1 slots") as u32;
            colour[v] = c;
            left -= 1;
            news.push((v as u32, c));
            for &u in nb {
                let u = u as usize;
                if u < rows && keys[u] < keys[v] {
                    waiting[u] -= 1;
                    if waiting[u] == 0 {
                        ready.push(u as u32);
                    }
                }
            }
        }
        // The new colours go to the ranks holding these vertices as ghosts.
        for (i, c) in share_with_ghost_holders(comm, adj, rows, lo, &news)? {
            colour[i] = c;
            let g = i - rows;
            let (startg, list) = ghost_nb;
            for &u in &list[startg[g] as usize..startg[g + 1] as usize] {
                let u = u as usize;
                if keys[u] < keys[i] {
                    waiting[u] -= 1;
                    if waiting[u] == 0 {
                        ready.push(u as u32);
                    }
                }
            }
        }
        let [all_left, coloured] = comm.allreduce(&[left, news.len() as u64], Sum)?[..] else {
            unreachable!("two sums")
        };
        times.push(start.elapsed());
        progress(&Progress {
            iteration: times.len(),
            max_iterations: 0,
            delta: all_left as f64,
        });
        if all_left == 0 {
            return Ok((colour, times));
        }
        if coloured == 0 {
            // Nothing was ready anywhere and nothing arrived: the ranks' adjacencies disagree.
            return Err(AlgoError::BadParameter {
                name: "graph",
                reason: format!(
                    "colouring made no progress with {all_left} vertices left (the ranks' \
                     adjacencies disagree)"
                ),
            });
        }
    }
}

/// Colours the graph: a greedy colouring in `order`, then `passes` recolouring passes (see the
/// module). `progress` is called on every rank after each round with the number of vertices
/// still uncoloured in the current pass (`max_iterations` is 0: the number of rounds is not
/// known ahead).
///
/// # Errors
/// Communication errors.
pub fn colour(
    comm: &Comm,
    graph: &DistGraph,
    order: Order,
    passes: usize,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Colouring, AlgoError> {
    let adj = symmetric_adjacency(comm, graph)?;
    let rows = graph.local_rows();
    let lo = graph.lo;
    let off = adj.offsets.as_slice();
    let max_degree = (0..rows).map(|i| off[i + 1] - off[i]).max().unwrap_or(0);
    let max_degree = comm.allreduce(&[max_degree], Max)?[0];
    let first = keys_of(comm, &adj, rows, lo, order)?;
    let ghost_nb = ghost_neighbours(&adj, rows);
    let (mut colour, mut times) = greedy_pass(comm, &adj, rows, lo, &first, &ghost_nb, progress)?;
    let used = |colour: &[u32]| -> Result<u32, AlgoError> {
        let local_max = colour[..rows].iter().copied().max().map_or(0, |c| c + 1);
        Ok(comm.allreduce(&[local_max], Max)?[0])
    };
    let mut colours_used = used(&colour)?;
    for _ in 0..passes {
        // The classes in reverse order, each in the first order (the ghosts' colours are
        // known: every ghost was coloured and sent during the pass).
        let keys: Vec<Key> = colour
            .iter()
            .zip(&first)
            .map(|(&c, &(_, a, b))| (u64::from(c), a, b))
            .collect();
        let (again, more) = greedy_pass(comm, &adj, rows, lo, &keys, &ghost_nb, progress)?;
        times.extend(more);
        let fewer = used(&again)?;
        debug_assert!(fewer <= colours_used, "iterated greedy never adds colours");
        colour = again;
        colours_used = fewer;
    }
    let colours = SbVec::from_slice(comm.runtime(), &colour[..rows])?;
    Ok(Colouring {
        lo,
        colours,
        colours_used,
        max_degree,
        rounds: times.len(),
        round_times: times,
    })
}
