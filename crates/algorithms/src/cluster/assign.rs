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

/// Detects (once) the widest kernel this CPU runs. `SPILLWAY_NO_AVX512` (any value) limits it
/// to AVX2, to compare the two kernels on one machine.
#[cfg(target_arch = "x86_64")]
fn simd() -> Simd {
    use std::arch::is_x86_feature_detected as has;
    static CHOICE: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
    *CHOICE.get_or_init(|| {
        if !(has!("avx2") && has!("fma")) {
            Simd::None
        } else if has!("avx512f") && std::env::var_os("SPILLWAY_NO_AVX512").is_none() {
            Simd::Avx512
        } else {
            Simd::Avx2
        }
    })
}

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

    /// [`Centres::assign`] with the AVX2/FMA register-tiled kernel.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn assign_avx2(&self, points: &[f64], out: &mut [u32]) {
        self.assign_with::<Avx2>(points, out);
    }

    /// [`Centres::assign`] with the AVX-512 register-tiled kernel.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn assign_avx512(&self, points: &[f64], out: &mut [u32]) {
        self.assign_with::<Avx512>(points, out);
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

    /// As [`Centres::scores_plain`], with [`ROWS`] x [`WIDTH`] accumulators in eight AVX2
    /// registers: per coordinate, two loads of centres, four broadcasts and eight FMAs.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn scores_avx2(&self, block: &[f64], range: std::ops::Range<usize>, scores: &mut [f64]) {
        use std::arch::x86_64::*;
        let dim = self.dim;
        let n = range.len();
        assert!(block.len() == ROWS * dim && scores.len() >= ROWS * n);
        assert!(range.end <= self.padded && range.start.is_multiple_of(WIDE));
        assert!(self.tiles.len() == dim * self.padded && self.norms.len() == self.padded);
        let x = block.as_ptr();
        let t = self.tiles.as_ptr();
        for c0 in range.clone().step_by(WIDTH) {
            let base = self.tile_base(c0);
            let mut a = [_mm256_setzero_pd(); 8];
            for j in 0..dim {
                // SAFETY: `c0 + WIDTH <= padded` and `j < dim`: the half tile's coordinate
                // `j` lies at `base + j * WIDE .. + WIDTH`, inside `tiles` (`dim * padded`
                // values); `r * dim + j < ROWS * dim` stays in `block` (asserted above).
                unsafe {
                    let col = t.add(base + j * WIDE);
                    let lo = _mm256_loadu_pd(col);
                    let hi = _mm256_loadu_pd(col.add(4));
                    for r in 0..ROWS {
                        let xv = _mm256_set1_pd(*x.add(r * dim + j));
                        a[2 * r] = _mm256_fmadd_pd(xv, lo, a[2 * r]);
                        a[2 * r + 1] = _mm256_fmadd_pd(xv, hi, a[2 * r + 1]);
                    }
                }
            }
            // SAFETY: `c0 + WIDTH <= range.end <= padded` bounds the loads of `norms`; row
            // `r`'s stores end at `r * n + c0 + WIDTH - range.start <= ROWS * n`.
            unsafe {
                let n_lo = _mm256_loadu_pd(self.norms.as_ptr().add(c0));
                let n_hi = _mm256_loadu_pd(self.norms.as_ptr().add(c0 + 4));
                let minus_two = _mm256_set1_pd(-2.0);
                for r in 0..ROWS {
                    let out = scores.as_mut_ptr().add(r * n + c0 - range.start);
                    _mm256_storeu_pd(out, _mm256_fmadd_pd(minus_two, a[2 * r], n_lo));
                    _mm256_storeu_pd(out.add(4), _mm256_fmadd_pd(minus_two, a[2 * r + 1], n_hi));
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

    /// The running bests of the [`ROWS`] points of `block` over the tiles of `range`, kept in
    /// registers across the tiles: per tile, [`ROWS`] x 2 accumulators of 8 lanes, then per
    /// lane a minimum, a maximum, a compare and a blend to update the best, its centre and the
    /// second best.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn update_avx512(
        &self,
        block: &[f64],
        best: &mut [Best],
        range: std::ops::Range<usize>,
    ) {
        use std::arch::x86_64::*;
        let dim = self.dim;
        assert!(block.len() == ROWS * dim && best.len() == ROWS);
        assert!(range.end <= self.padded && range.start.is_multiple_of(WIDE));
        assert!(self.tiles.len() == dim * self.padded && self.norms.len() == self.padded);
        let x = block.as_ptr();
        let t = self.tiles.as_ptr();
        // SAFETY: (loads and stores of `best`) `Best` is `repr(C)` and 64-byte aligned, its
        // three arrays are 8 values of 8 bytes at offsets 0, 64 and 128.
        let (mut first, mut second, mut index) = unsafe {
            let mut f = [_mm512_setzero_pd(); ROWS];
            let mut s = [_mm512_setzero_pd(); ROWS];
            let mut i = [_mm512_setzero_si512(); ROWS];
            for r in 0..ROWS {
                f[r] = _mm512_load_pd(best[r].first.as_ptr());
                s[r] = _mm512_load_pd(best[r].second.as_ptr());
                i[r] = _mm512_load_si512(best[r].index.as_ptr().cast());
            }
            (f, s, i)
        };
        let lanes = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
        let minus_two = _mm512_set1_pd(-2.0);
        for c0 in range.step_by(WIDE) {
            let base = self.tile_base(c0);
            let mut a = [_mm512_setzero_pd(); 8];
            for j in 0..dim {
                // SAFETY: `c0 + WIDE <= padded` and `j < dim`: the tile's coordinate `j` lies
                // at `base + j * WIDE .. + WIDE`, inside `tiles`; `r * dim + j < ROWS * dim`
                // stays in `block` (asserted above).
                unsafe {
                    let col = t.add(base + j * WIDE);
                    let lo = _mm512_loadu_pd(col);
                    let hi = _mm512_loadu_pd(col.add(8));
                    for r in 0..ROWS {
                        let xv = _mm512_set1_pd(*x.add(r * dim + j));
                        a[2 * r] = _mm512_fmadd_pd(xv, lo, a[2 * r]);
                        a[2 * r + 1] = _mm512_fmadd_pd(xv, hi, a[2 * r + 1]);
                    }
                }
            }
            // SAFETY: `c0 + WIDE <= padded` bounds the loads of `norms`.
            let (n_lo, n_hi) = unsafe {
                (
                    _mm512_loadu_pd(self.norms.as_ptr().add(c0)),
                    _mm512_loadu_pd(self.norms.as_ptr().add(c0 + 8)),
                )
            };
            let i_lo = _mm512_add_epi64(lanes, _mm512_set1_epi64(c0 as i64));
            let i_hi = _mm512_add_epi64(lanes, _mm512_set1_epi64(c0 as i64 + 8));
            for r in 0..ROWS {
                for (s, i) in [
                    (_mm512_fmadd_pd(minus_two, a[2 * r], n_lo), i_lo),
                    (_mm512_fmadd_pd(minus_two, a[2 * r + 1], n_hi), i_hi),
                ] {
                    // The operand order makes a NaN score drop out: `max(s, f)` and
                    // `min(s, f)` return `f` when `s` is NaN, and the compare is false.
                    second[r] = _mm512_min_pd(_mm512_max_pd(s, first[r]), second[r]);
                    let better = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(s, first[r]);
                    index[r] = _mm512_mask_blend_epi64(better, index[r], i);
                    first[r] = _mm512_min_pd(s, first[r]);
                }
            }
        }
        // SAFETY: as for the loads above.
        unsafe {
            for r in 0..ROWS {
                _mm512_store_pd(best[r].first.as_mut_ptr(), first[r]);
                _mm512_store_pd(best[r].second.as_mut_ptr(), second[r]);
                _mm512_store_si512(best[r].index.as_mut_ptr().cast(), index[r]);
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

/// The AVX2/FMA kernel; used only after the CPU was checked.
#[cfg(target_arch = "x86_64")]
struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Stored for Avx2 {
    #[inline(always)]
    fn scores(centres: &Centres, block: &[f64], range: std::ops::Range<usize>, scores: &mut [f64]) {
        // SAFETY: `Avx2` is only chosen by `Centres::assign` after detecting AVX2 and FMA.
        unsafe { centres.scores_avx2(block, range, scores) };
    }
}

/// The AVX-512 kernel; used only after the CPU was checked.
#[cfg(target_arch = "x86_64")]
struct Avx512;

#[cfg(target_arch = "x86_64")]
impl Kernel for Avx512 {
    const SCORES: usize = 0;

    #[inline(always)]
    fn update(
        centres: &Centres,
        block: &[f64],
        best: &mut [Best],
        range: std::ops::Range<usize>,
        _scores: &mut [f64],
    ) {
        // SAFETY: `Avx512` is only chosen by `Centres::assign` after detecting AVX-512F and
        // FMA (AVX2 comes with AVX-512F).
        unsafe { centres.update_avx512(block, best, range) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (tests only).
    struct Lcg(u64);

    impl Lcg {
        fn unit(&mut self) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Every kernel this CPU can run, applied to `points`.
    fn every_kernel(prepared: &Centres, points: &[f64], n: usize) -> Vec<(&'static str, Vec<u32>)> {
        let mut runs = Vec::new();
        let mut out = vec![u32::MAX; n];
        prepared.assign_with::<Plain>(points, &mut out);
        runs.push(("portable", out));
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") && has!("fma") {
                let mut out = vec![u32::MAX; n];
                // SAFETY: AVX2 and FMA detected just above.
                unsafe { prepared.assign_avx2(points, &mut out) };
                runs.push(("avx2", out));
            }
            if has!("avx512f") && has!("avx2") && has!("fma") {
                let mut out = vec![u32::MAX; n];
                // SAFETY: AVX-512F, AVX2 and FMA detected just above.
                unsafe { prepared.assign_avx512(points, &mut out) };
                runs.push(("avx512", out));
            }
        }
        let mut out = vec![u32::MAX; n];
        prepared.assign(points, &mut out);
        runs.push(("dispatched", out));
        runs
    }

    fn check(n: usize, dim: usize, k: usize, seed: u64, scale: f64) {
        let mut g = Lcg(seed);
        let points: Vec<f64> = (0..n * dim).map(|_| scale * (g.unit() - 0.5)).collect();
        let centres: Vec<f64> = (0..k * dim).map(|_| scale * (g.unit() - 0.5)).collect();
        let prepared = Centres::new(&centres, dim);
        for (kernel, got) in every_kernel(&prepared, &points, n) {
            for i in 0..n {
                let want = nearest_exact(&points[i * dim..(i + 1) * dim], &centres, dim) as u32;
                assert_eq!(got[i], want, "{kernel}: point {i} (n={n} dim={dim} k={k})");
            }
        }
    }

    #[test]
    fn matches_the_direct_formula_for_every_shape() {
        for (n, dim, k) in [
            (1, 1, 1),
            (3, 1, 2),
            (17, 3, 5),
            (64, 32, 100),
            (7, 5, 9),
            (33, 2, 8),
            (9, 7, 17),
            (21, 40, 33),
        ] {
            check(n, dim, k, n as u64 * 31 + k as u64, 10.0);
        }
    }

    #[test]
    fn groups_of_centres_and_blocks_of_points_agree_with_the_direct_formula() {
        // Several cache groups (forced small) and point blocks with a partial last block.
        let (n, dim, k) = (2 * POINT_BLOCK + 7, 24, 150);
        let mut g = Lcg(5);
        let points: Vec<f64> = (0..n * dim).map(|_| g.unit() - 0.5).collect();
        let centres: Vec<f64> = (0..k * dim).map(|_| g.unit() - 0.5).collect();
        for group in [WIDE, 3 * WIDE, 1 << 20] {
            let prepared = Centres::with_group(&centres, dim, group);
            for (kernel, got) in every_kernel(&prepared, &points, n) {
                for i in 0..n {
                    let want = nearest_exact(&points[i * dim..(i + 1) * dim], &centres, dim);
                    assert_eq!(got[i] as usize, want, "{kernel}: point {i}, group {group}");
                }
            }
        }
    }

    #[test]
    fn nan_centres_are_never_chosen_and_duplicates_go_to_the_lower_index() {
        let dim = 2;
        let mut centres = vec![f64::NAN, 0.0, 3.0, 3.0, -1.0, -1.0, 3.0, 3.0];
        centres.extend((0..40).flat_map(|c| [10.0 + c as f64, 10.0]));
        let points = [2.5, 2.5, -0.5, -1.5, 0.0, 0.0, 11.2, 10.0, 3.0, 3.0];
        for group in [WIDE, 1 << 20] {
            let prepared = Centres::with_group(&centres, dim, group);
            for (kernel, got) in every_kernel(&prepared, &points, 5) {
                for i in 0..5 {
                    let want = nearest_exact(&points[i * dim..(i + 1) * dim], &centres, dim);
                    assert_eq!(got[i] as usize, want, "{kernel}: point {i}, group {group}");
                }
                assert_eq!(got[0], 1, "{kernel}: the duplicate with the lower index");
            }
        }
    }

    #[test]
    fn far_from_the_origin_cancellation_is_caught_by_the_re_check() {
        // Coordinates near 1e6 with centres 1e-3 apart: the expanded form cancels away most
        // digits, so only the re-check can order the centres.
        let dim = 4;
        let base = 1.0e6;
        let centres: Vec<f64> = (0..12)
            .flat_map(|c| (0..dim).map(move |j| base + 1e-3 * (c as f64) + j as f64))
            .collect();
        let points: Vec<f64> = (0..40)
            .flat_map(|i| (0..dim).map(move |j| base + 3e-4 * (i as f64) + j as f64))
            .collect();
        let prepared = Centres::new(&centres, dim);
        for (kernel, got) in every_kernel(&prepared, &points, 40) {
            for i in 0..40 {
                let want = nearest_exact(&points[i * dim..(i + 1) * dim], &centres, dim) as u32;
                assert_eq!(got[i], want, "{kernel}: point {i}");
            }
        }
    }

    #[test]
    fn non_finite_and_overflowing_points_follow_the_direct_formula() {
        let dim = 3;
        let centres = [0.0, 0.0, 0.0, 1e200, 0.0, 0.0, -5.0, 1.0, 2.0];
        let points = [
            f64::NAN,
            0.0,
            0.0, //
            1e200,
            1.0,
            0.0, //
            f64::INFINITY,
            0.0,
            0.0, //
            -4.0,
            1.0,
            2.0, //
            1e160,
            -1e160,
            0.0,
        ];
        let prepared = Centres::new(&centres, dim);
        for (kernel, got) in every_kernel(&prepared, &points, 5) {
            for i in 0..5 {
                let want = nearest_exact(&points[i * dim..(i + 1) * dim], &centres, dim) as u32;
                assert_eq!(got[i], want, "{kernel}: point {i}");
            }
        }
    }

    #[test]
    fn exact_ties_go_to_the_lower_index() {
        // Two identical centres and a point equidistant from two distinct ones.
        let centres = [1.0, 0.0, -1.0, 0.0, 1.0, 0.0];
        let prepared = Centres::new(&centres, 2);
        for (kernel, got) in every_kernel(&prepared, &[0.0, 0.0, 2.0, 0.0], 2) {
            assert_eq!(got, [0, 0], "{kernel}");
        }
    }
}
