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

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

// `fin(x)`: one splitmix64 step from state `x`, `mix64(x + 0x9E3779B97F4A7C15)`.
use spillway_comm::splitmix::{splitmix64 as fin, SplitMix64, GOLDEN_GAMMA as GOLDEN};
use spillway_comm::{Collectives, Comm, Sum};
use spillway_runtime::{AlignedBuf, SbVec};

use super::block::{BlockRatings, Decoded};
use crate::error::AlgoError;
use crate::generate::{RatingsSpec, RATINGS_RANK};
use crate::io::InputError;
use crate::io::{distribute_entries, entry_col, entry_row, read_entries, Entry, SparseSource};
use crate::state::{check_state, Origin};
use crate::Progress;

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

/// A rating with the matrix's ids: `user << 32 | item` and the rating's bits, 16 bytes: the
/// form between reading (once the canonical order is set, the position that fixed it is
/// dropped) and [`BlockRatings`], which keeps 12 bytes a rating where the block allows.
pub type Rating = [u64; 2];

/// Packs a rating.
pub fn rating(user: u32, item: u32, value: f64) -> Rating {
    [(u64::from(user) << 32) | u64::from(item), value.to_bits()]
}

/// Sorts `entries` into canonical order and keeps them as [`Rating`]s.
fn canonical(comm: &Comm, mut entries: SbVec<Entry>) -> Result<SbVec<Rating>, AlgoError> {
    entries
        .as_mut_slice()
        .sort_unstable_by_key(|e| (e[0], e[2]));
    let mut out = SbVec::with_capacity(comm.runtime(), entries.len())?;
    let mut chunk: Vec<Rating> = Vec::with_capacity(CHUNK);
    for at in (0..entries.len()).step_by(CHUNK) {
        let part = &entries.as_slice()[at..(at + CHUNK).min(entries.len())];
        chunk.clear();
        chunk.extend(part.iter().map(|e| [e[0], e[1]]));
        out.extend_from_slice(&chunk)?;
    }
    Ok(out)
}

/// Ratings moved into storage-backed memory at a time.
const CHUNK: usize = 1 << 14;

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

/// `q` with `q * q = p`, or an error.
///
/// # Errors
/// `p` not a perfect square.
pub fn grid_side(p: usize) -> Result<usize, AlgoError> {
    let q = (p as f64).sqrt().round() as usize;
    if q * q != p {
        return Err(AlgoError::BadParameter {
            name: "ranks",
            reason: format!("SGD needs a square number of ranks (1, 4, 9, ...), found {p}"),
        });
    }
    Ok(q)
}

/// Range of block `b` of `n` rows cut into `q` blocks.
pub fn block_range(n: u64, q: usize, b: usize) -> (u64, u64) {
    (n * b as u64 / q as u64, n * (b as u64 + 1) / q as u64)
}

/// This rank's block of the ratings.
#[derive(Debug)]
pub struct RatingBlock {
    /// Users (rows of `R`).
    pub users: u64,
    /// Items (columns of `R`).
    pub items: u64,
    /// Grid side `q`.
    pub q: usize,
    /// Block row.
    pub bi: usize,
    /// Block column.
    pub bj: usize,
    /// Training ratings of the block, in canonical order (user, item, position in the file).
    pub train: BlockRatings,
    /// Training ratings of the whole matrix.
    pub train_total: u64,
    /// Held-out ratings of the block.
    pub test: BlockRatings,
    /// Held-out ratings of the whole matrix.
    pub test_total: u64,
}

/// Reads the training ratings (and optionally held-out ones) as Matrix Market coordinate files
/// `user item rating` and gives every rank its block.
///
/// # Errors
/// Malformed files as [`read_entries`]; a number of ranks that is not a square; a test file
/// larger than the training matrix.
pub fn load_ratings(
    comm: &Comm,
    train: &Path,
    test: Option<&Path>,
) -> Result<RatingBlock, AlgoError> {
    let q = grid_side(comm.size())?;
    let read = read_entries(comm, &SparseSource::MatrixMarket(train.to_path_buf()))?;
    let (users, items) = (read.rows, read.cols);
    let owner = |e: &Entry| {
        block_owner(
            users,
            items,
            q,
            u64::from(entry_row(e)),
            u64::from(entry_col(e)),
        )
    };
    let mine = distribute_entries(comm, &read.entries, &owner)?;
    drop(read.entries);
    let mine = canonical(comm, mine)?;
    let (test, test_total) = match test {
        Some(path) => {
            let t = read_entries(comm, &SparseSource::MatrixMarket(path.to_path_buf()))?;
            if t.rows > users || t.cols > items {
                return Err(InputError::new(
                    path,
                    None,
                    format!(
                        "the test matrix is {} x {}, larger than the training matrix ({users} x \
                         {items})",
                        t.rows, t.cols
                    ),
                )
                .into());
            }
            let got = distribute_entries(comm, &t.entries, &owner)?;
            (canonical(comm, got)?, t.total)
        }
        None => (SbVec::with_capacity(comm.runtime(), 0)?, 0),
    };
    RatingBlock::pack(comm, (users, items), (mine, read.total), (test, test_total))
}

impl RatingBlock {
    /// This rank's block of a `users` x `items` matrix whose ratings are held in memory:
    /// `train` holds the ratings of the block (those [`block_owner`] gives to this rank), each
    /// packed as [`entry`]`(user, item, rating, position)` with its position in the whole
    /// input (standing for its position in a file), in any order; `train_total` counts the
    /// ratings of the whole matrix. The ratings are put in canonical order, as
    /// [`load_ratings`] puts them; there are no held-out ratings.
    ///
    /// # Errors
    /// A number of ranks that is not a square; a rating outside this rank's block.
    pub fn from_entries(
        comm: &Comm,
        users: u64,
        items: u64,
        train: SbVec<Entry>,
        train_total: u64,
    ) -> Result<RatingBlock, AlgoError> {
        let q = grid_side(comm.size())?;
        let r = comm.rank();
        let foreign = train.as_slice().iter().find(|e| {
            let (u, i) = (u64::from(entry_row(e)), u64::from(entry_col(e)));
            u >= users || i >= items || block_owner(users, items, q, u, i) != r
        });
        if let Some(e) = foreign {
            return Err(AlgoError::BadParameter {
                name: "ratings",
                reason: format!(
                    "rank {r} was given the rating ({}, {}), not of its block of the {users} x \
                     {items} matrix",
                    entry_row(e),
                    entry_col(e)
                ),
            });
        }
        let train = canonical(comm, train)?;
        let none = SbVec::with_capacity(comm.runtime(), 0)?;
        RatingBlock::pack(comm, (users, items), (train, train_total), (none, 0))
    }

    /// This rank's block of a `users` x `items` matrix from its ratings in canonical order,
    /// kept as [`BlockRatings`], with the counts of the whole matrix.
    fn pack(
        comm: &Comm,
        (users, items): (u64, u64),
        (train, train_total): (SbVec<Rating>, u64),
        (test, test_total): (SbVec<Rating>, u64),
    ) -> Result<RatingBlock, AlgoError> {
        let q = grid_side(comm.size())?;
        let (bi, bj) = (comm.rank() / q, comm.rank() % q);
        let (u, v) = (block_range(users, q, bi), block_range(items, q, bj));
        Ok(RatingBlock {
            users,
            items,
            q,
            bi,
            bj,
            train: BlockRatings::pack(comm, train, u, v)?,
            train_total,
            test: if test.is_empty() {
                BlockRatings::empty(comm)?
            } else {
                BlockRatings::pack(comm, test, u, v)?
            },
            test_total,
        })
    }
}

/// The rank that holds rating `(user, item)` of a `users` x `items` matrix on a `q` x `q`
/// grid: `bi * q + bj`, with `bi` the block of `user` and `bj` that of `item` (as
/// [`block_range`] cuts them).
pub fn block_owner(users: u64, items: u64, q: usize, user: u64, item: u64) -> usize {
    block_of(users, q, user) * q + block_of(items, q, item)
}

/// Generates the ratings of a [`RatingsSpec`] and gives every rank its block: rank `(bi, bj)`
/// makes the ratings of block row `bi`'s users and keeps those of block column `bj`'s items
/// (each rating is made on `q` ranks, kept on one: no rating moves). A rating's position in
/// the input is its user's, then `j` for the user's `j`-th rating, as `gen ratings` writes them.
///
/// # Errors
/// A number of ranks that is not a square; blocks larger than the job can hold (checked on
/// every rank before any work); storage or communication errors.
pub fn generate_ratings(comm: &Comm, spec: &RatingsSpec) -> Result<RatingBlock, AlgoError> {
    let q = grid_side(comm.size())?;
    let (bi, bj) = (comm.rank() / q, comm.rank() % q);
    let (u_lo, u_hi) = block_range(spec.users, q, bi);
    let (v_lo, v_hi) = block_range(spec.items, q, bj);
    let share = (v_hi - v_lo) as f64 / spec.items as f64;
    let expected = (u_lo..u_hi).map(|u| spec.user_len(u)).sum::<u64>() as f64 * share;
    // The binomial count of this block's ratings, six standard deviations up.
    let capacity = (expected + 6.0 * expected.sqrt() + 16.0) as u64;
    check_state(
        comm,
        (spec.users.saturating_mul(spec.avg) / q as u64 + 1)
            .saturating_mul(24)
            .saturating_add((v_hi - v_lo).saturating_mul(32)),
        &format!(
            "{} ratings a block",
            spec.users.saturating_mul(spec.avg) / (q * q) as u64
        ),
        Origin::Parameter {
            name: "generate",
            what: "the ratings",
        },
    )?;
    let factors: Vec<[f64; RATINGS_RANK]> = (v_lo..v_hi).map(|i| spec.item_factors(i)).collect();
    let mut train: SbVec<Rating> = SbVec::with_capacity(comm.runtime(), capacity as usize)?;
    let mut chunk: Vec<Rating> = Vec::with_capacity(CHUNK);
    let keep = |i: u64| (v_lo..v_hi).contains(&i);
    let item_factors = |i: u64| factors[(i - v_lo) as usize];
    for u in u_lo..u_hi {
        let first = chunk.len();
        spec.user_ratings(u, &keep, &item_factors, &mut |i, _, r| {
            chunk.push(rating(u as u32, i as u32, r));
        });
        // Users come in order; inside one, a stable sort by item keeps a repeated item's
        // ratings in order of j: the canonical order without a sort of the block.
        chunk[first..].sort_by_key(|r| r[0]);
        if chunk.len() >= CHUNK || u + 1 == u_hi {
            train.extend_from_slice(&chunk)?;
            chunk.clear();
        }
    }
    drop(factors);
    let train_total = comm.allreduce(&[train.len() as u64], Sum)?[0];
    let none = SbVec::with_capacity(comm.runtime(), 0)?;
    RatingBlock::pack(
        comm,
        (spec.users, spec.items),
        (train, train_total),
        (none, 0),
    )
}

/// The block of `x` among `n` rows cut into `q` blocks (as [`block_range`]).
pub fn block_of(n: u64, q: usize, x: u64) -> usize {
    // The largest b with n * b / q <= x.
    let mut b = ((x * q as u64) / n.max(1)) as usize;
    while b + 1 < q && block_range(n, q, b + 1).0 <= x {
        b += 1;
    }
    while b > 0 && block_range(n, q, b).0 > x {
        b -= 1;
    }
    b
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
mod tests {
    use super::*;
    use crate::io::entry;
    use spillway_runtime::{run, Config};

    /// Ratings `(user, item, rating)` of a `users` x `items` matrix, some repeated.
    fn ratings(users: u32, items: u32, n: usize) -> Vec<(u32, u32, f64)> {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut out: Vec<(u32, u32, f64)> = (0..n)
            .map(|_| {
                let (u, i) = (
                    (next() % users as u64) as u32,
                    (next() % items as u64) as u32,
                );
                (u, i, (next() % 5 + 1) as f64)
            })
            .collect();
        out.extend_from_within(..n / 10);
        out
    }

    /// The documented schedule run sequentially: in step `s` of an iteration, the blocks
    /// `(bi, (bi + s) mod q)`, each applying its ratings (sorted by user, item, position, then
    /// shuffled once) a piece at a time in [`update_order`]. Returns `U`, `V` and the training RMSE after each iteration.
    fn sequential(
        r: &[(u32, u32, f64)],
        (users, items): (u64, u64),
        q: usize,
        o: &SgdOptions,
    ) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let k = o.factors;
        let init = |which, n: u64| -> Vec<f64> {
            (0..n)
                .flat_map(|x| (0..k).map(move |f| initial_factor(o.seed, which, x, f as u64, k)))
                .collect()
        };
        let (mut u, mut v) = (init(1, users), init(2, items));
        let mut blocks = vec![Vec::new(); q * q];
        for (j, &(a, b, _)) in r.iter().enumerate() {
            blocks[block_owner(users, items, q, a.into(), b.into())].push(j);
        }
        for (at, b) in blocks.iter_mut().enumerate() {
            b.sort_by_key(|&j| (r[j].0, r[j].1, j));
            shuffle(b, &mut BlockStream::new(o.seed, SHUFFLE, at as u64));
        }
        let mut rmse = Vec::new();
        for it in 0..o.iterations {
            for s in 0..q {
                for bi in 0..q {
                    let block = bi * q + (bi + s) % q;
                    let mine = &blocks[block];
                    let pieces = mine.len().div_ceil(PIECE);
                    let order = update_order(o.seed, it as u64, block as u64, pieces);
                    let visit = order
                        .iter()
                        .flat_map(|&p| mine.chunks(PIECE).nth(p as usize));
                    for &x in visit.flatten() {
                        let (a, b, rating) = r[x];
                        let (a, b) = (a as usize * k, b as usize * k);
                        let mut lanes = [0.0; 4];
                        for f in 0..k {
                            lanes[f % 4] += u[a + f] * v[b + f];
                        }
                        let e = rating - ((lanes[0] + lanes[2]) + (lanes[1] + lanes[3]));
                        for f in 0..k {
                            let (uf, vf) = (u[a + f], v[b + f]);
                            u[a + f] = uf + o.learning_rate * (e * vf - o.regularisation * uf);
                            v[b + f] = vf + o.learning_rate * (e * uf - o.regularisation * vf);
                        }
                    }
                }
            }
            let sse: f64 = r
                .iter()
                .map(|&(a, b, rating)| {
                    let (a, b) = (a as usize * k, b as usize * k);
                    rating - (0..k).map(|f| u[a + f] * v[b + f]).sum::<f64>()
                })
                .map(|e| e * e)
                .sum();
            rmse.push((sse / r.len() as f64).sqrt());
        }
        (u, v, rmse)
    }

    #[test]
    fn ratings_in_memory_follow_the_sequential_schedule() {
        let (users, items) = (37u64, 23u64);
        // 3300 ratings: several pieces a block at one rank.
        let r = ratings(users as u32, items as u32, 3000);
        let mut options = SgdOptions {
            factors: 4,
            learning_rate: 0.02,
            regularisation: 0.05,
            iterations: 3,
            seed: 7,
            error_every: 1,
        };
        // Factor counts with a loop of known length (4, 10) and without (5).
        for (ranks, nodes, every, factors) in
            [(1, 1, 1, 4), (1, 1, 2, 10), (4, 2, 0, 5), (9, 3, 1, 4)]
        {
            options.error_every = every;
            options.factors = factors;
            let q = grid_side(ranks).expect("a square");
            let (u_ref, v_ref, rmse_ref) = sequential(&r, (users, items), q, &options);
            let parts = run(&Config::new(ranks as u32).nodes(nodes), |rank| {
                let world = Comm::world(rank);
                let mine: Vec<Entry> = r
                    .iter()
                    .enumerate()
                    .filter(|(_, &(a, b, _))| {
                        block_owner(users, items, q, a.into(), b.into()) == world.rank()
                    })
                    .map(|(j, &(a, b, x))| entry(a, b, x, j as u64))
                    .rev()
                    .collect();
                let mine = SbVec::from_slice(rank, &mine)?;
                let block = RatingBlock::from_entries(&world, users, items, mine, r.len() as u64)?;
                let out = sgd(&world, block, &options, &mut |_| {})?;
                Ok::<_, AlgoError>((out.u_lo, out.u, out.v_lo, out.v, out.train_rmse))
            })
            .expect("the job runs");
            let k = options.factors;
            for (u_lo, u, v_lo, v, rmse) in &parts {
                let (a, b) = (*u_lo as usize * k, *v_lo as usize * k);
                assert_eq!(u[..], u_ref[a..a + u.len()], "U at {ranks} ranks");
                assert_eq!(v[..], v_ref[b..b + v.len()], "V at {ranks} ranks");
                // Measured after iterations `every`, 2 `every`, ... and the last (the third).
                let measured: Vec<f64> = (1..=3)
                    .filter(|i| *i == 3 || (every > 0 && i % every == 0))
                    .map(|i| rmse_ref[i - 1])
                    .collect();
                assert_eq!(rmse.len(), measured.len(), "RMSEs measured, every {every}");
                for (x, y) in rmse.iter().zip(&measured) {
                    assert!((x - y).abs() <= 1e-12 * y, "RMSE {x} against {y}");
                }
            }
            let held: usize = parts.iter().map(|p| p.1.len()).sum();
            assert_eq!(held, users as usize * k, "the diagonal holds all of U");
        }
    }

    #[test]
    fn ratings_of_another_block_are_refused() {
        let err = run(&Config::new(4), |rank| {
            let world = Comm::world(rank);
            // Rating (0, 0) is block (0, 0)'s: every other rank is given it too.
            let mine = SbVec::from_slice(rank, &[entry(0, 0, 1.0, 0)])?;
            RatingBlock::from_entries(&world, 10, 10, mine, 1).map(drop)
        })
        .unwrap_err();
        let algo = err.rank_error::<AlgoError>().expect("an algorithm error");
        assert!(
            algo.is_bad_input() && algo.to_string().contains("not of its block"),
            "{algo}"
        );
    }
}
