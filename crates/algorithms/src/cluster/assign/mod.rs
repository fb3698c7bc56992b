//! Nearest-centre assignment: a cache-blocked distance kernel with an exact re-check near ties.
//!
//! # Method
//! The squared distance `||x - c||^2` equals `||x||^2 - 2 x.c + ||c||^2`; for the arg-min over
//! `c` the first term is a constant, so each point needs the scores `s_c = ||c||^2 - 2 x.c`.
//! The dot products of a block of [`ROWS`] points against a tile of [`WIDE`] centres form a
//! small matrix product: the centres are kept transposed per tile (tile-major, each tile
//! dimension-major, padded to a multiple of the tile width) so the inner loop broadcasts one
//! coordinate of each point and multiplies it with a contiguous run of centres, with the `ROWS
//! x WIDE` accumulators held in registers.
//!
//! Nothing of size `k` is written per point: each point keeps, per vector lane, the best score,
//! its centre and the second-best score, updated tile by tile. The centres are swept in groups
//! that fit in the core's second-level cache, and every group is applied to a block of points
//! before the next group is touched, so with `k x d` in the megabytes (Harp-scale K-means) the
//! centres are read from memory once per block of [`POINT_BLOCK`] points rather than once per
//! [`ROWS`] points.
//!
//! On x86-64 the kernel uses AVX-512 (best and second-best scores in registers) or AVX2 with
//! FMA (scores of a tile stored and scanned), whichever the CPU has (detected once at run
//! time; `SPILLWAY_NO_AVX512` forces AVX2); elsewhere a portable version is auto-vectorised
//! for the baseline target.
//!
//! # Exactness
//! The expanded form loses accuracy by cancellation, so the kernel's arg-min alone may differ
//! from the direct `sum (x_j - c_j)^2` when two centres are nearly equidistant. With `X =
//! ||x||^2`, `M = max ||c||^2` and `u` the unit round-off, the score of every centre is within
//! `B = 8 (d + 2) u (X + M)` of its direct distance minus `X`, including the direct formula's
//! own rounding. When the second-best score is more than `2B` above the best one, the best is
//! provably the direct formula's unique arg-min; otherwise (two centres within about `1e-13`
//! relative distance, duplicated centres, non-finite values) the point is assigned by the
//! direct formula over all centres ([`nearest_exact`], ties to the lower index). The result is
//! the arg-min of the direct formula for every point, whatever the kernel's rounding.

/// The vector instructions the kernels may use on this CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
enum Simd {
    None,
    Avx2,
    Avx512,
}

#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
use x86::simd;

#[cfg(test)]
mod tests;

/// Points per register block.
pub const ROWS: usize = 4;

/// Centres per half tile of the portable kernel and of the AVX2 kernel (two 4-lane vectors).
const WIDTH: usize = 8;

/// Centres per tile (two 8-lane vectors of the AVX-512 kernel); the centres are padded to a
/// multiple of this.
const WIDE: usize = 16;

/// Lanes of the per-point running best (the AVX-512 kernel's vector width; the other kernels
/// use lane 0).
const LANES: usize = 8;

/// Points per cache block: every group of centres is applied to this many points before the
/// next group is read (their running bests take `POINT_BLOCK x 192` bytes).
const POINT_BLOCK: usize = 256;

/// Bytes of centres per group: a group stays in a core's second-level cache while it is
/// applied to a block of points.
const GROUP_BYTES: usize = 512 << 10;

/// Index of the centre nearest to `x` by the direct formula `sum (x_j - c_j)^2`, ties to the
/// lower index. `centres` holds `k` rows of `dim` values.
pub fn nearest_exact(x: &[f64], centres: &[f64], dim: usize) -> usize {
    let mut best = 0;
    let mut best_d = f64::INFINITY;
    for (c, centre) in centres.chunks_exact(dim).enumerate() {
        let d = direct(x, centre);
        if d < best_d {
            best_d = d;
            best = c;
        }
    }
    best
}

/// `||x||^2` with eight independent partial sums (vectorisable; only the window bound uses it,
/// and its rounding is far inside the bound's safety factor).
#[inline(always)]
fn sq_norm(x: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += v * v;
        }
    }
    for (a, v) in acc.iter_mut().zip(chunks.remainder()) {
        *a += v * v;
    }
    acc.iter().sum()
}

/// `sum (x_j - c_j)^2`, summed in index order.
fn direct(x: &[f64], c: &[f64]) -> f64 {
    x.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum()
}

/// A point's running best per lane: the smallest score, its centre, and the second smallest
/// score seen by the lane. NaN scores are never taken as best (they may lower `second`, which
/// only sends the point to the exact re-check).
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Best {
    first: [f64; LANES],
    second: [f64; LANES],
    index: [u64; LANES],
}

impl Best {
    const NONE: Best = Best {
        first: [f64::INFINITY; LANES],
        second: [f64::INFINITY; LANES],
        index: [0; LANES],
    };

    /// Takes score `s` of centre `c` into lane 0 (the scalar kernels' update).
    #[inline(always)]
    fn take(&mut self, s: f64, c: usize) {
        if s < self.first[0] {
            self.second[0] = self.first[0];
            self.first[0] = s;
            self.index[0] = c as u64;
        } else if s < self.second[0] {
            self.second[0] = s;
        }
    }

    /// The best score over the lanes, its centre (the lowest index among equal scores) and
    /// the second-best score over all centres; without branches on the data (this runs once
    /// per point, and which lane wins is unpredictable).
    #[inline(always)]
    fn reduce(&self) -> (f64, usize, f64) {
        let first = self.first.iter().fold(f64::INFINITY, |m, &v| m.min(v));
        let mut index = u64::MAX;
        let mut ties = 0u32;
        let mut others = f64::INFINITY;
        for l in 0..LANES {
            let (v, i) = (self.first[l], self.index[l]);
            let tie = v == first;
            index = if tie { index.min(i) } else { index };
            ties += u32::from(tie);
            others = if tie { others } else { others.min(v) };
        }
        let second = self.second.iter().fold(others, |m, &v| m.min(v));
        // Two lanes with the best score: the second best equals it.
        let second = if ties > 1 { first } else { second };
        (first, index as usize, second)
    }
}

/// Centres prepared for [`Centres::assign`]: transposed per tile, padded, with their squared
/// norms.
#[derive(Debug, Clone)]
pub struct Centres {
    dim: usize,
    k: usize,
    /// `k` rounded up to a multiple of [`WIDE`].
    padded: usize,
    /// Centres per cache group, a multiple of [`WIDE`].
    group: usize,
    /// Tile-major copy: coordinate `j` of centre `c` at `(c / WIDE) * WIDE * dim + j * WIDE +
    /// c % WIDE`; padding is 0.
    tiles: Vec<f64>,
    /// `||c||^2`, `+inf` for the padding (so it never wins).
    norms: Vec<f64>,
    /// Row-major copy for the exact re-check.
    rows: Vec<f64>,
    /// Largest `||c||^2` (finite centres).
    max_norm: f64,
    /// Re-check window factor `16 (d + 2) u`.
    window: f64,
}

impl Centres {
    /// Prepares `centres` (`k` rows of `dim` values, `k >= 1`, `dim >= 1`).
    ///
    /// # Panics
    /// If `dim == 0` or `centres.len()` is not a positive multiple of `dim`.
    pub fn new(centres: &[f64], dim: usize) -> Centres {
        let group = (GROUP_BYTES / (8 * dim.max(1))).max(WIDE);
        Centres::with_group(centres, dim, group)
    }

    /// As [`Centres::new`] with groups of about `group` centres.
    fn with_group(centres: &[f64], dim: usize, group: usize) -> Centres {
        assert!(
            dim > 0 && !centres.is_empty() && centres.len().is_multiple_of(dim),
            "centres must be k >= 1 rows of dim >= 1 values"
        );
        let k = centres.len() / dim;
        let padded = k.div_ceil(WIDE) * WIDE;
        let mut tiles = vec![0.0; padded * dim];
        let mut norms = vec![f64::INFINITY; padded];
        let mut max_norm = 0.0f64;
        for (c, row) in centres.chunks_exact(dim).enumerate() {
            let base = (c / WIDE) * WIDE * dim + c % WIDE;
            for (j, &v) in row.iter().enumerate() {
                tiles[base + j * WIDE] = v;
            }
            let n: f64 = row.iter().map(|v| v * v).sum();
            norms[c] = n;
            max_norm = max_norm.max(n);
        }
        Centres {
            dim,
            k,
            padded,
            group: (group / WIDE).max(1) * WIDE,
            tiles,
            norms,
            rows: centres.to_vec(),
            max_norm,
            window: 16.0 * (dim as f64 + 2.0) * (f64::EPSILON / 2.0),
        }
    }

    /// Number of centres.
    pub fn len(&self) -> usize {
        self.k
    }

    /// Whether there are no centres (never: [`Centres::new`] requires one).
    pub fn is_empty(&self) -> bool {
        self.k == 0
    }

    /// Writes to `out[i]` the index of the centre nearest to point `i` of `points` (rows of
    /// `dim` values; `out.len()` points), exactly as [`nearest_exact`] would.
    ///
    /// # Panics
    /// If `points.len() != out.len() * dim`.
    pub fn assign(&self, points: &[f64], out: &mut [u32]) {
        assert_eq!(
            points.len(),
            out.len() * self.dim,
            "points and output disagree"
        );
        #[cfg(target_arch = "x86_64")]
        match simd() {
            Simd::Avx512 => {
                // SAFETY: `simd` detected AVX-512F, AVX2 and FMA on this CPU.
                unsafe { self.assign_avx512(points, out) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: `simd` detected AVX2 and FMA on this CPU.
                unsafe { self.assign_avx2(points, out) };
                return;
            }
            Simd::None => {}
        }
        self.assign_with::<Plain>(points, out);
    }

    /// The cache-blocked sweep: for each block of [`POINT_BLOCK`] points, each group of
    /// centres, each [`ROWS`] points of the block, the kernel updates the points' running
    /// bests over the group's tiles; then every point of the block is decided.
    #[inline(always)]
    fn assign_with<F: Kernel>(&self, points: &[f64], out: &mut [u32]) {
        let dim = self.dim;
        let mut best = vec![Best::NONE; POINT_BLOCK];
        let mut scores = vec![0.0f64; F::SCORES * ROWS * self.group];
        let mut pad = vec![0.0f64; ROWS * dim];
        for (block, outs) in points
            .chunks(POINT_BLOCK * dim)
            .zip(out.chunks_mut(POINT_BLOCK))
        {
            best.fill(Best::NONE);
            for g0 in (0..self.padded).step_by(self.group) {
                let g1 = (g0 + self.group).min(self.padded);
                let rows = block.chunks_exact(ROWS * dim);
                let rest = rows.remainder();
                let full = rows.len() * ROWS;
                for (rows, b) in rows.zip(best.chunks_exact_mut(ROWS)) {
                    F::update(self, rows, b, g0..g1, &mut scores);
                }
                // The last few points, through the same kernel (zero rows pad the block;
                // `POINT_BLOCK` is a multiple of `ROWS`, so their bests exist).
                if !rest.is_empty() {
                    pad[..rest.len()].copy_from_slice(rest);
                    pad[rest.len()..].fill(0.0);
                    let b = &mut best[full..full + ROWS];
                    F::update(self, &pad, b, g0..g1, &mut scores);
                }
            }
            for ((x, slot), b) in block.chunks_exact(dim).zip(outs.iter_mut()).zip(&best) {
                *slot = self.decide(x, b) as u32;
            }
        }
    }

    /// The centre for point `x` from its running best: the best when every other score lies
    /// more than `2B` above it, else the direct formula over all centres.
    #[inline(always)]
    fn decide(&self, x: &[f64], best: &Best) -> usize {
        let (first, index, second) = best.reduce();
        let xx = sq_norm(x);
        if xx.is_finite() && self.max_norm.is_finite() {
            let limit = first + 2.0 * self.window * (xx + self.max_norm);
            if limit.is_finite() && second > limit {
                return index;
            }
        }
        self.recheck(x)
    }

    /// The direct formula's arg-min over all centres, ties to the lower index.
    #[cold]
    #[inline(never)]
    fn recheck(&self, x: &[f64]) -> usize {
        nearest_exact(x, &self.rows, self.dim)
    }

    /// Offset in `tiles` of coordinate 0 of centre `c0` (a multiple of [`WIDTH`]).
    #[inline(always)]
    fn tile_base(&self, c0: usize) -> usize {
        (c0 / WIDE) * WIDE * self.dim + c0 % WIDE
    }

    /// Scores `||c||^2 - 2 x.c` of the [`ROWS`] points of `block` against the centres of
    /// `range`, into `scores` (row `r` at `r * range.len()`): the portable kernel.
    #[inline(always)]
    fn scores_plain(&self, block: &[f64], range: std::ops::Range<usize>, scores: &mut [f64]) {
        let dim = self.dim;
        let n = range.len();
        for (r, x) in block.chunks_exact(dim).enumerate() {
            for c0 in range.clone().step_by(WIDTH) {
                let base = self.tile_base(c0);
                let mut acc = [0.0f64; WIDTH];
                for (j, &xv) in x.iter().enumerate() {
                    let col = &self.tiles[base + j * WIDE..base + j * WIDE + WIDTH];
                    for (s, &cv) in acc.iter_mut().zip(col) {
                        *s += xv * cv;
                    }
                }
                let norms = &self.norms[c0..c0 + WIDTH];
                let at = r * n + c0 - range.start;
                for ((o, &s), &nc) in scores[at..at + WIDTH].iter_mut().zip(&acc).zip(norms) {
                    *o = nc - 2.0 * s;
                }
            }
        }
    }

    /// Takes the stored scores of `range` (row `r` at `r * range.len()`) into the running
    /// bests of the [`ROWS`] points.
    #[inline(always)]
    fn take_scores(&self, best: &mut [Best], range: std::ops::Range<usize>, scores: &[f64]) {
        let n = range.len();
        let end = range.end.min(self.k).max(range.start);
        for (r, b) in best.iter_mut().enumerate() {
            let row = &scores[r * n..r * n + (end - range.start)];
            for (c, &s) in (range.start..end).zip(row) {
                b.take(s, c);
            }
        }
    }
}

/// Which kernel [`Centres::assign_with`] runs.
trait Kernel {
    /// Score buffers the kernel needs (0 or 1, times `ROWS x group` values).
    const SCORES: usize;
    /// Updates the running bests of the [`ROWS`] points of `block` over the centres of
    /// `range` (a multiple of [`WIDE`] wide, starting at one).
    fn update(
        centres: &Centres,
        block: &[f64],
        best: &mut [Best],
        range: std::ops::Range<usize>,
        scores: &mut [f64],
    );
}

/// A kernel that stores the scores of a group's tiles, then takes them into the bests.
trait Stored {
    /// Scores of the [`ROWS`] points of `block` against the centres of `range`.
    fn scores(centres: &Centres, block: &[f64], range: std::ops::Range<usize>, scores: &mut [f64]);
}

impl<S: Stored> Kernel for S {
    const SCORES: usize = 1;

    #[inline(always)]
    fn update(
        centres: &Centres,
        block: &[f64],
        best: &mut [Best],
        range: std::ops::Range<usize>,
        scores: &mut [f64],
    ) {
        S::scores(centres, block, range.clone(), scores);
        centres.take_scores(best, range, scores);
    }
}

/// The portable kernel.
struct Plain;

impl Stored for Plain {
    #[inline(always)]
    fn scores(centres: &Centres, block: &[f64], range: std::ops::Range<usize>, scores: &mut [f64]) {
        centres.scores_plain(block, range, scores);
    }
}
