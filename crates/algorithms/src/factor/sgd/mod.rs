//! Matrix factorisation by stochastic gradient descent on a sqrt(p) x sqrt(p) grid of blocks
//! (BDMPI's SGD benchmark, after Gemulla et al. and Recht and Ré).
//!
//! # Semantics
//! The ratings `R` (users x items) are approximated by `U V^T` with `factors` columns. With
//! `p = q * q` ranks, users are cut into `q` ranges (`users * b / q .. users * (b + 1) / q`),
//! items likewise, and rank `bi * q + bj` holds the ratings of block `(bi, bj)`. One iteration
//! has `q` steps; in step `s` the ranks of the `s`-th diagonal, blocks `(bi, (bi + s) mod q)`,
//! update their blocks, so no two ranks touch the same rows of `U` or `V`; the factor blocks
//! then move on (`U_bi` to the next block of its row, `V_bj` to the previous block of its
//! column). The result is therefore the same as that of a sequential loop over the same
//! schedule ([`update_order`]), bit for bit.
//!
//! Inside a block, the ratings are put in canonical order (by user, item, then position in the
//! file) and shuffled once, before the first iteration, by [`shuffle`] with
//! [`BlockStream`]`::new(seed, SHUFFLE, bi * q + bj)`. The shuffled block is cut into pieces of
//! [`PIECE`] ratings (the last may be shorter); iteration `it` visits the pieces in the order
//! [`update_order`]`(seed, it, bi * q + bj, pieces)` and each piece's ratings in order. (A
//! fresh order of single ratings every iteration cost a random read per rating and a
//! permutation of the block: about half of an iteration in memory, profiled.) Each
//! rating `(u, i, r)` makes the update, with `e = r - dot(U[u], V[i])`, for every `f` in order:
//! `U[u][f] += lr (e V[i][f] - reg U[u][f])`, `V[i][f] += lr (e U[u][f] - reg V[i][f])`, both
//! from the values before this `f`'s update. The initial factors are
//! [`initial_factor`]`(seed, 1, u, f, factors)` for `U` and `(seed, 2, i, f, factors)` for `V`.
//! The dot product sums in four lanes, `s_l = sum of x[f] y[f]` over `f = l mod 4` in order of
//! `f`, then `(s_0 + s_2) + (s_1 + s_3)` (one chain of ten additions was the longest path of an
//! update; four lanes are two SSE2 registers).
//!
//! # Cost per iteration (z local ratings, m users, n items)
//! O(z factors) work; `q` steps, each sending `(m + n) factors / q` values per active rank;
//! measuring the RMSE passes the final factor blocks along rows and columns once more and reads
//! the ratings a second time.

use std::sync::Arc;
use std::time::{Duration, Instant};

// `fin(x)`: one splitmix64 step from state `x`, `mix64(x + 0x9E3779B97F4A7C15)`.
use spillway_comm::splitmix::{splitmix64 as fin, SplitMix64, GOLDEN_GAMMA as GOLDEN};
use spillway_comm::{Collectives, Comm, Sum};
use spillway_runtime::AlignedBuf;

use super::block::{BlockRatings, Decoded};

mod load;
use crate::error::AlgoError;
use crate::state::{check_state, Origin};
use crate::Progress;
pub use load::{
    block_of, block_owner, block_range, generate_ratings, grid_side, load_ratings, rating, Rating,
    RatingBlock,
};

/// The random stream that orders the updates of one block in one iteration.
#[derive(Debug, Clone)]
pub struct BlockStream {
    rng: SplitMix64,
}

impl BlockStream {
    /// The stream of `block` (`bi * q + bj`) in `iteration` (0-based): splitmix64 from the
    /// state `fin(fin(fin(seed) ^ iteration) ^ block)`, where `fin(x)` is one splitmix64 step.
    pub fn new(seed: u64, iteration: u64, block: u64) -> BlockStream {
        BlockStream {
            rng: SplitMix64::new(fin(fin(fin(seed) ^ iteration) ^ block)),
        }
    }

    /// The next value (splitmix64: add 0x9E3779B97F4A7C15, then the output function).
    pub fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }
}

/// Initial value of factor `f` of row `index` of `U` (`which` = 1) or `V` (`which` = 2):
/// `(h >> 11) * 2^-53 / sqrt(factors)` with `h = fin(fin(fin(seed ^ which * 0x9E3779B97F4A7C15)
/// ^ index) ^ f)`, uniform in `[0, 1 / sqrt(factors))`.
pub fn initial_factor(seed: u64, which: u64, index: u64, f: u64, factors: usize) -> f64 {
    let h = fin(fin(fin(seed ^ which.wrapping_mul(GOLDEN)) ^ index) ^ f);
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64) * (1.0 / (factors as f64).sqrt())
}

/// Permutes `items` by Fisher-Yates with `rng`: position `i`, from the last down to 1, swaps
/// with `next() % (i + 1)`.
pub fn shuffle<T>(items: &mut [T], rng: &mut BlockStream) {
    for i in (1..items.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

/// The iteration number of the stream that shuffles a block once, before the first iteration.
pub const SHUFFLE: u64 = u64::MAX;

/// Ratings of a block visited in order, one piece at a time.
pub const PIECE: usize = 1024;

/// The order in which block `block` visits its `pieces` pieces in `iteration`:
/// `0..pieces` shuffled with [`BlockStream`]`::new(seed, iteration, block)`.
pub fn update_order(seed: u64, iteration: u64, block: u64, pieces: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..pieces as u32).collect();
    shuffle(&mut order, &mut BlockStream::new(seed, iteration, block));
    order
}

/// SGD parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct SgdOptions {
    /// Columns of `U` and `V`.
    pub factors: usize,
    /// Learning rate.
    pub learning_rate: f64,
    /// Regularisation.
    pub regularisation: f64,
    /// Iterations (each a pass over all ratings).
    pub iterations: usize,
    /// Seed of the initial factors and the update order.
    pub seed: u64,
    /// Measure the RMSE after every this many iterations, and after the last; 0 measures it
    /// after the last only. Each measure reads all the ratings once more.
    pub error_every: usize,
}

/// The factors and the error history; `u` and `v` are held by the diagonal ranks only.
#[derive(Debug)]
pub struct SgdResult {
    /// First user of `u` (rank `(b, b)` holds users block `b`).
    pub u_lo: u64,
    /// `U` rows of this rank's block, row-major (empty off the diagonal).
    pub u: Vec<f64>,
    /// First item of `v`.
    pub v_lo: u64,
    /// `V` rows of this rank's block, row-major (empty off the diagonal).
    pub v: Vec<f64>,
    /// Training RMSE after each iteration measured ([`SgdOptions::error_every`]).
    pub train_rmse: Vec<f64>,
    /// Held-out RMSE after each iteration measured (empty without held-out ratings).
    pub test_rmse: Vec<f64>,
    /// Wall time of each iteration on this rank (without the RMSE).
    pub iteration_times: Vec<Duration>,
}

fn factor_block(seed: u64, which: u64, lo: u64, hi: u64, factors: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity((hi - lo) as usize * factors);
    for x in lo..hi {
        for f in 0..factors {
            out.push(initial_factor(seed, which, x, f as u64, factors));
        }
    }
    out
}

/// Squared error sum of `ratings` with the factor blocks `u` (from `u_lo`) and `v`.
fn squared_error(ratings: &BlockRatings, u: &[f64], v: &[f64], k: usize) -> f64 {
    let mut sse = 0.0;
    let mut piece = Vec::with_capacity(PIECE);
    for at in (0..ratings.len()).step_by(PIECE) {
        ratings.decode(at..(at + PIECE).min(ratings.len()), &mut piece);
        for &(a, b, x) in &piece {
            let (a, b) = (a as usize * k, b as usize * k);
            let err = x - dot(&u[a..a + k], &v[b..b + k]);
            sse += err * err;
        }
    }
    sse
}

/// Ratings ahead whose factor rows are prefetched.
const AHEAD: usize = 16;

/// Asks for the cache lines of `row` (a hint: no effect on results).
#[inline(always)]
fn prefetch(row: &[f64]) {
    #[cfg(target_arch = "x86_64")]
    for line in row.chunks(8) {
        // SAFETY: prefetching is a hint that never faults; the address is in `row`.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast::<i8>(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

/// The dot product of `x` and `y` in four lanes, as the module says.
#[inline(always)]
fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut s = [0.0f64; 4];
    let (xs, ys) = (x.chunks_exact(4), y.chunks_exact(4));
    let (xr, yr) = (xs.remainder(), ys.remainder());
    for (a, b) in xs.zip(ys) {
        for l in 0..4 {
            s[l] += a[l] * b[l];
        }
    }
    for (l, (a, b)) in xr.iter().zip(yr).enumerate() {
        s[l] += a * b;
    }
    (s[0] + s[2]) + (s[1] + s[3])
}

/// One SGD step on a rating `r` of the user row `ur` and item row `vr`.
#[inline(always)]
fn update(ur: &mut [f64], vr: &mut [f64], r: f64, lr: f64, reg: f64) {
    let err = r - dot(ur, vr);
    for (uf, vf) in ur.iter_mut().zip(vr.iter_mut()) {
        let (a, b) = (*uf, *vf);
        *uf = a + lr * (err * b - reg * a);
        *vf = b + lr * (err * a - reg * b);
    }
}

const TAG_U: i32 = 0x5344_0001;
const TAG_V: i32 = 0x5344_0002;
const TAG_ERR_U: i32 = 0x5344_0003;
const TAG_ERR_V: i32 = 0x5344_0004;

/// Where a rank sits on the grid and what it needs to index its factor blocks.
struct Grid {
    q: usize,
    bi: usize,
    bj: usize,
    u_lo: u64,
    v_lo: u64,
    k: usize,
}

impl Grid {
    fn of(block: &RatingBlock, k: usize) -> Grid {
        Grid {
            q: block.q,
            bi: block.bi,
            bj: block.bj,
            u_lo: block_range(block.users, block.q, block.bi).0,
            v_lo: block_range(block.items, block.q, block.bj).0,
            k,
        }
    }

    fn diagonal(&self) -> bool {
        self.bi == self.bj
    }

    /// Rank of block `(i, j)`, both taken modulo `q`.
    fn at(&self, i: usize, j: usize) -> usize {
        (i % self.q) * self.q + (j % self.q)
    }

    /// Where `U_bi` comes from (the previous block of the row) and goes to (the next).
    fn u_from(&self) -> usize {
        self.at(self.bi, self.bj + self.q - 1)
    }
    fn u_to(&self) -> usize {
        self.at(self.bi, self.bj + 1)
    }
    /// Where `V_bj` comes from (the next block of the column) and goes to (the previous).
    fn v_from(&self) -> usize {
        self.at(self.bi + 1, self.bj)
    }
    fn v_to(&self) -> usize {
        self.at(self.bi + self.q - 1, self.bj)
    }

    /// Whether the blocks sent on from here would reach the diagonal again (end of the ring).
    fn last_of_ring(&self) -> bool {
        (self.bj + 1) % self.q == self.bi
    }
}

/// Updates `u` and `v` with this rank's ratings in the iteration's order.
fn update_pass(
    block: &RatingBlock,
    g: &Grid,
    u: &mut [f64],
    v: &mut [f64],
    it: usize,
    o: &SgdOptions,
) {
    // The ratings are decoded a piece at a time from slices taken then: under a budget they
    // may have left memory while this rank waited, and reading them through a slice taken
    // before would fault them in a page at a time, unaccounted (900 GB read in 17 minutes,
    // 200M ratings).
    let ratings = &block.train;
    let order = update_order(
        o.seed,
        it as u64,
        (g.bi * g.q + g.bj) as u64,
        ratings.len().div_ceil(PIECE),
    );
    let pass = Pass {
        ratings,
        order: &order,
        k: g.k,
        lr: o.learning_rate,
        reg: o.regularisation,
    };
    // The usual factor counts get a loop of known length (unrolled, the factor rows in
    // registers), and AVX2 where the machine has it: the same operations in the same order,
    // so the same bits (Rust never fuses a multiply and an add on its own).
    match g.k {
        4 => pass.dispatch::<4>(u, v),
        8 => pass.dispatch::<8>(u, v),
        10 => pass.dispatch::<10>(u, v),
        16 => pass.dispatch::<16>(u, v),
        20 => pass.dispatch::<20>(u, v),
        32 => pass.dispatch::<32>(u, v),
        _ => pass.dispatch::<0>(u, v),
    }
}

/// One block's update pass: its ratings, the order of their pieces, and the parameters.
struct Pass<'a> {
    ratings: &'a BlockRatings,
    order: &'a [u32],
    k: usize,
    lr: f64,
    reg: f64,
}

impl Pass<'_> {
    /// Runs [`Self::run`] with `K` factors (0: `self.k`), built for AVX2 when there is AVX2.
    fn dispatch<const K: usize>(&self, u: &mut [f64], v: &mut [f64]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the machine has AVX2 (checked just above), all `run_avx2` requires.
            unsafe { self.run_avx2::<K>(u, v) };
            return;
        }
        self.run::<K>(u, v);
    }

    /// [`Self::run`] compiled with AVX2.
    ///
    /// # Safety
    /// The machine must have AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2<const K: usize>(&self, u: &mut [f64], v: &mut [f64]) {
        self.run::<K>(u, v);
    }

    #[inline(always)]
    fn run<const K: usize>(&self, u: &mut [f64], v: &mut [f64]) {
        let k = if K == 0 { self.k } else { K };
        let rows = |e: &Decoded| (e.0 as usize * k, e.1 as usize * k);
        let mut piece = Vec::with_capacity(PIECE);
        for &p in self.order {
            let at = p as usize * PIECE;
            self.ratings
                .decode(at..(at + PIECE).min(self.ratings.len()), &mut piece);
            for (i, e) in piece.iter().enumerate() {
                // The factor rows are in cache by the time their rating comes (they miss it
                // otherwise: U's block is megabytes at a million users).
                if let Some(ahead) = piece.get(i + AHEAD) {
                    let (a, b) = rows(ahead);
                    prefetch(&u[a..a + k]);
                    prefetch(&v[b..b + k]);
                }
                let (a, b) = rows(e);
                update(&mut u[a..a + k], &mut v[b..b + k], e.2, self.lr, self.reg);
            }
        }
    }
}

/// The squared errors of this rank's training and held-out ratings with the factors as they
/// are after the iteration. The diagonal rank sends its final `U_b` along its row and `V_b` up
/// its column; every other rank receives them, passes them on and uses them, in the order of
/// the update pass. A broadcast would leave every rank holding copies while it waits for the
/// sum, memory that no budget sees (64 ranks x 10 MB of `U` at a million users).
fn error_pass(
    comm: &Comm,
    g: &Grid,
    block: &RatingBlock,
    u: &AlignedBuf,
    v: &AlignedBuf,
) -> Result<[f64; 2], AlgoError> {
    // Shared along the ring, not copied: the diagonal's copy is the only one.
    let (ub, vb) = if g.diagonal() {
        (Arc::new(u.clone()), Arc::new(v.clone()))
    } else {
        (
            comm.recv_shared(g.u_from(), TAG_ERR_U)?.0,
            comm.recv_shared(g.v_from(), TAG_ERR_V)?.0,
        )
    };
    if g.q > 1 && !g.last_of_ring() {
        comm.send_shared(g.u_to(), TAG_ERR_U, Arc::clone(&ub))?;
        comm.send_shared(g.v_to(), TAG_ERR_V, Arc::clone(&vb))?;
    }
    let (ub, vb) = (
        bytemuck::cast_slice::<u8, f64>(ub.as_bytes()),
        bytemuck::cast_slice::<u8, f64>(vb.as_bytes()),
    );
    let errors = |ratings: &BlockRatings| squared_error(ratings, ub, vb, g.k);
    Ok([errors(&block.train), errors(&block.test)])
}

/// A buffer holding `x`.
fn buf_of(x: &[f64]) -> AlignedBuf {
    AlignedBuf::from_bytes(bytemuck::cast_slice(x))
}

/// The values of a factor block (an [`AlignedBuf`] is aligned to 16 bytes).
fn f64s(buf: &mut AlignedBuf) -> &mut [f64] {
    bytemuck::cast_slice_mut(buf.as_bytes_mut())
}

/// Receives a factor block as the message's own buffer (a copy only if it is shared).
fn recv_buf(comm: &Comm, from: usize, tag: i32) -> Result<AlignedBuf, AlgoError> {
    let (buf, _) = comm.recv_shared(from, tag)?;
    Ok(Arc::try_unwrap(buf).unwrap_or_else(|shared| (*shared).clone()))
}

/// Runs SGD on this rank's `block` (shuffled once, as the module says); `progress` is called
/// on every rank after each iteration with the last training RMSE measured (NaN before the
/// first).
///
/// # Errors
/// A factor count of 0; [`AlgoError::Diverged`] when the training error becomes non-finite
/// (the learning rate is too large for the data); communication errors.
pub fn sgd(
    comm: &Comm,
    mut block: RatingBlock,
    options: &SgdOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<SgdResult, AlgoError> {
    let k = options.factors;
    if k == 0 {
        return Err(AlgoError::BadParameter {
            name: "factors",
            reason: "at least 1".into(),
        });
    }
    // U and V on the diagonal, the blocks in flight.
    let factors = (block.users + block.items)
        .saturating_mul(k as u64)
        .saturating_mul(16);
    check_state(
        comm,
        factors,
        &format!("{} x {k} and {} x {k} factors", block.users, block.items),
        Origin::Parameter {
            name: "factors",
            what: "the factor matrices",
        },
    )?;
    let g = Grid::of(&block, k);
    let stream = (g.bi * g.q + g.bj) as u64;
    block
        .train
        .shuffle(&mut BlockStream::new(options.seed, SHUFFLE, stream));
    let block = block;
    // The factor blocks travel as the messages' own buffers, moved without a copy.
    let (mut u, mut v) = (AlignedBuf::zeroed(0), AlignedBuf::zeroed(0));
    if g.diagonal() {
        let (u_hi, v_hi) = (
            block_range(block.users, g.q, g.bi).1,
            block_range(block.items, g.q, g.bj).1,
        );
        u = buf_of(&factor_block(options.seed, 1, g.u_lo, u_hi, k));
        v = buf_of(&factor_block(options.seed, 2, g.v_lo, v_hi, k));
    }
    let mut train_rmse = Vec::new();
    let mut test_rmse = Vec::new();
    let mut times = Vec::new();
    for it in 0..options.iterations {
        let start = Instant::now();
        if !g.diagonal() {
            u = recv_buf(comm, g.u_from(), TAG_U)?;
            v = recv_buf(comm, g.v_from(), TAG_V)?;
        }
        update_pass(&block, &g, f64s(&mut u), f64s(&mut v), it, options);
        if g.q > 1 {
            comm.send_buf(
                g.u_to(),
                TAG_U,
                std::mem::replace(&mut u, AlignedBuf::zeroed(0)),
            )?;
            comm.send_buf(
                g.v_to(),
                TAG_V,
                std::mem::replace(&mut v, AlignedBuf::zeroed(0)),
            )?;
            if g.diagonal() {
                u = recv_buf(comm, g.u_from(), TAG_U)?;
                v = recv_buf(comm, g.v_from(), TAG_V)?;
            }
        }
        times.push(start.elapsed());
        let every = options.error_every;
        if it + 1 == options.iterations || (every > 0 && (it + 1) % every == 0) {
            let sse = error_pass(comm, &g, &block, &u, &v)?;
            let sums = comm.allreduce(&sse, Sum)?;
            let rmse = (sums[0] / block.train_total.max(1) as f64).sqrt();
            // The sums are the same on every rank: all stop together.
            if !rmse.is_finite() {
                return Err(AlgoError::Diverged {
                    iteration: it + 1,
                    what: format!("the training RMSE is {rmse}"),
                    hint: "lower the learning rate (or raise the regularisation)",
                });
            }
            train_rmse.push(rmse);
            if block.test_total > 0 {
                test_rmse.push((sums[1] / block.test_total as f64).sqrt());
            }
        }
        progress(&Progress {
            iteration: it + 1,
            max_iterations: options.iterations,
            delta: train_rmse.last().copied().unwrap_or(f64::NAN),
        });
    }
    Ok(SgdResult {
        u_lo: g.u_lo,
        u: f64s(&mut u).to_vec(),
        v_lo: g.v_lo,
        v: f64s(&mut v).to_vec(),
        train_rmse,
        test_rmse,
        iteration_times: times,
    })
}

#[cfg(test)]
mod tests;
