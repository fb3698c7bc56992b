//! Nearest-centre assignment: a blocked distance kernel with an exact re-check near ties.
//!
//! # Method
//! The squared distance `||x - c||^2` equals `||x||^2 - 2 x.c + ||c||^2`; for the arg-min over
//! `c` the first term is a constant, so each point needs the scores `s_c = ||c||^2 - 2 x.c`.
//! The dot products of a block of [`ROWS`] points against all centres form a small matrix
//! product: the centres are kept transposed (dimension-major, padded to a multiple of the tile
//! width) so the inner loop broadcasts one coordinate of each point and multiplies it with a
//! contiguous run of centres, with the `ROWS x width` accumulators held in registers. On x86-64
//! the kernel uses AVX-512 (16 centres per tile) or AVX2 with FMA (8 per tile), whichever the
//! CPU has (detected once at run time; `SPILLWAY_NO_AVX512` forces AVX2); elsewhere a portable
//! version is auto-vectorised for the baseline target.
//!
//! # Exactness
//! The expanded form loses accuracy by cancellation, so the kernel's arg-min alone may differ
//! from the direct `sum (x_j - c_j)^2` when two centres are nearly equidistant. With `X =
//! ||x||^2`, `M = max ||c||^2` and `u` the unit round-off, the score of every centre is within
//! `B = 8 (d + 2) u (X + M)` of its direct distance minus `X`, including the direct formula's
//! own rounding. Every centre whose score lies within `2B` of the best score is therefore
//! re-checked with the direct formula (ties to the lower index, as [`nearest_exact`]); any
//! other centre is provably farther. The result is the arg-min of the direct formula for every
//! point, whatever the kernel's rounding; re-checks are rare (they need two centres within
//! about `1e-13` relative distance).

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

/// Centres per tile of the portable kernel and of the AVX2 kernel (two 4-lane vectors).
const WIDTH: usize = 8;

/// Centres per tile of the AVX-512 kernel (two 8-lane vectors); the centres are padded to a
/// multiple of this.
const WIDE: usize = 16;

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

/// Centres prepared for [`Centres::assign`]: transposed, padded, with their squared norms.
#[derive(Debug, Clone)]
pub struct Centres {
    dim: usize,
    k: usize,
    /// `k` rounded up to a multiple of [`WIDE`].
    padded: usize,
    /// Dimension-major copy: coordinate `j` of centre `c` at `j * padded + c`; padding is 0.
    transposed: Vec<f64>,
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
        assert!(
            dim > 0 && !centres.is_empty() && centres.len().is_multiple_of(dim),
            "centres must be k >= 1 rows of dim >= 1 values"
        );
        let k = centres.len() / dim;
        let padded = k.div_ceil(WIDE) * WIDE;
        let mut transposed = vec![0.0; padded * dim];
        let mut norms = vec![f64::INFINITY; padded];
        let mut max_norm = 0.0f64;
        for (c, row) in centres.chunks_exact(dim).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                transposed[j * padded + c] = v;
            }
            let n: f64 = row.iter().map(|v| v * v).sum();
            norms[c] = n;
            max_norm = max_norm.max(n);
        }
        Centres {
            dim,
            k,
            padded,
            transposed,
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

    #[inline(always)]
    fn assign_with<F: Kernel>(&self, points: &[f64], out: &mut [u32]) {
        let dim = self.dim;
        let mut scores = vec![0.0f64; ROWS * self.padded];
        let mut mins = [0.0f64; ROWS];
        let mut blocks = points.chunks_exact(ROWS * dim);
        let mut outs = out.chunks_exact_mut(ROWS);
        for (block, o) in (&mut blocks).zip(&mut outs) {
            F::scores(self, block, &mut scores, &mut mins);
            for (r, slot) in o.iter_mut().enumerate() {
                let x = &block[r * dim..(r + 1) * dim];
                let row = &scores[r * self.padded..(r + 1) * self.padded];
                *slot = F::pick(self, x, row, mins[r]) as u32;
            }
        }
        // The last few points, one at a time through the same kernel (zero rows pad the block).
        let rest = blocks.remainder();
        if !rest.is_empty() {
            let mut block = vec![0.0f64; ROWS * dim];
            block[..rest.len()].copy_from_slice(rest);
            F::scores(self, &block, &mut scores, &mut mins);
            for (r, slot) in outs.into_remainder().iter_mut().enumerate() {
                let x = &rest[r * dim..(r + 1) * dim];
                let row = &scores[r * self.padded..(r + 1) * self.padded];
                *slot = F::pick(self, x, row, mins[r]) as u32;
            }
        }
    }

    /// Scores `||c||^2 - 2 x.c` of the [`ROWS`] points of `block` against every centre, into
    /// `scores` (row `r` at `r * padded`): the portable kernel.
    #[inline(always)]
    fn scores_plain(&self, block: &[f64], scores: &mut [f64]) {
        let dim = self.dim;
        let padded = self.padded;
        for (r, x) in block.chunks_exact(dim).enumerate() {
            for c0 in (0..padded).step_by(WIDTH) {
                let mut acc = [0.0f64; WIDTH];
                for (j, &xv) in x.iter().enumerate() {
                    let col = &self.transposed[j * padded + c0..j * padded + c0 + WIDTH];
                    for (s, &cv) in acc.iter_mut().zip(col) {
                        *s += xv * cv;
                    }
                }
                let norms = &self.norms[c0..c0 + WIDTH];
                let out = &mut scores[r * padded + c0..r * padded + c0 + WIDTH];
                for ((o, &s), &n) in out.iter_mut().zip(&acc).zip(norms) {
                    *o = n - 2.0 * s;
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
    unsafe fn scores_avx2(&self, block: &[f64], scores: &mut [f64]) {
        use std::arch::x86_64::*;
        let dim = self.dim;
        let padded = self.padded;
        assert!(block.len() == ROWS * dim && scores.len() >= ROWS * padded);
        assert!(self.transposed.len() == dim * padded && self.norms.len() == padded);
        let x = block.as_ptr();
        let t = self.transposed.as_ptr();
        for c0 in (0..padded).step_by(WIDTH) {
            let mut a = [_mm256_setzero_pd(); 8];
            for j in 0..dim {
                // SAFETY: `c0 + WIDTH <= padded` and `j < dim`, so both 4-lane loads lie in
                // `transposed` (`dim * padded` values); `r * dim + j < ROWS * dim` stays in
                // `block` (asserted above).
                unsafe {
                    let col = t.add(j * padded + c0);
                    let lo = _mm256_loadu_pd(col);
                    let hi = _mm256_loadu_pd(col.add(4));
                    for r in 0..ROWS {
                        let xv = _mm256_set1_pd(*x.add(r * dim + j));
                        a[2 * r] = _mm256_fmadd_pd(xv, lo, a[2 * r]);
                        a[2 * r + 1] = _mm256_fmadd_pd(xv, hi, a[2 * r + 1]);
                    }
                }
            }
            // SAFETY: `c0 + WIDTH <= padded` bounds the loads of `norms` and, for every
            // `r < ROWS`, the stores into `scores` (`ROWS * padded` values, asserted above).
            unsafe {
                let n_lo = _mm256_loadu_pd(self.norms.as_ptr().add(c0));
                let n_hi = _mm256_loadu_pd(self.norms.as_ptr().add(c0 + 4));
                let minus_two = _mm256_set1_pd(-2.0);
                for r in 0..ROWS {
                    let out = scores.as_mut_ptr().add(r * padded + c0);
                    _mm256_storeu_pd(out, _mm256_fmadd_pd(minus_two, a[2 * r], n_lo));
                    _mm256_storeu_pd(out.add(4), _mm256_fmadd_pd(minus_two, a[2 * r + 1], n_hi));
                }
            }
        }
    }

    /// The arg-min of `scores` for point `x`, re-checked with the direct formula when another
    /// centre's score is within the error window of the best: the portable version.
    #[inline(always)]
    fn pick_plain(&self, x: &[f64], scores: &[f64], min: f64) -> usize {
        let Some(limit) = self.limit(x, || min) else {
            return self.recheck(x, scores, None);
        };
        let mut first = None;
        let mut close = 0;
        for (c, &s) in scores[..self.k].iter().enumerate() {
            if s <= limit {
                close += 1;
                first.get_or_insert(c);
            }
        }
        match first {
            Some(c) if close == 1 => c,
            _ => self.recheck(x, scores, Some(limit)),
        }
    }

    /// As [`Centres::scores_avx2`] with 16-centre tiles in eight AVX-512 registers.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn scores_avx512(&self, block: &[f64], scores: &mut [f64], mins: &mut [f64; ROWS]) {
        use std::arch::x86_64::*;
        let dim = self.dim;
        let padded = self.padded;
        assert!(block.len() == ROWS * dim && scores.len() >= ROWS * padded);
        assert!(self.transposed.len() == dim * padded && self.norms.len() == padded);
        let x = block.as_ptr();
        let t = self.transposed.as_ptr();
        // Each row's minimum score, kept in registers as the tiles are stored.
        let mut m = [_mm512_set1_pd(f64::INFINITY); ROWS];
        for c0 in (0..padded).step_by(WIDE) {
            let mut a = [_mm512_setzero_pd(); 8];
            for j in 0..dim {
                // SAFETY: `c0 + WIDE <= padded` and `j < dim`, so both 8-lane loads lie in
                // `transposed`; `r * dim + j < ROWS * dim` stays in `block` (asserted above).
                unsafe {
                    let col = t.add(j * padded + c0);
                    let lo = _mm512_loadu_pd(col);
                    let hi = _mm512_loadu_pd(col.add(8));
                    for r in 0..ROWS {
                        let xv = _mm512_set1_pd(*x.add(r * dim + j));
                        a[2 * r] = _mm512_fmadd_pd(xv, lo, a[2 * r]);
                        a[2 * r + 1] = _mm512_fmadd_pd(xv, hi, a[2 * r + 1]);
                    }
                }
            }
            // SAFETY: `c0 + WIDE <= padded` bounds the loads of `norms` and the stores into
            // `scores` (`ROWS * padded` values, asserted above).
            unsafe {
                let n_lo = _mm512_loadu_pd(self.norms.as_ptr().add(c0));
                let n_hi = _mm512_loadu_pd(self.norms.as_ptr().add(c0 + 8));
                let minus_two = _mm512_set1_pd(-2.0);
                for (r, m) in m.iter_mut().enumerate() {
                    let out = scores.as_mut_ptr().add(r * padded + c0);
                    let lo = _mm512_fmadd_pd(minus_two, a[2 * r], n_lo);
                    let hi = _mm512_fmadd_pd(minus_two, a[2 * r + 1], n_hi);
                    _mm512_storeu_pd(out, lo);
                    _mm512_storeu_pd(out.add(8), hi);
                    *m = _mm512_min_pd(*m, _mm512_min_pd(lo, hi));
                }
            }
        }
        for (min, m) in mins.iter_mut().zip(m) {
            *min = _mm512_reduce_min_pd(m);
        }
    }

    /// As [`Centres::pick_avx2`] with AVX-512: half the instructions per pass, and the
    /// window test yields a 16-bit mask per tile directly.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn pick_avx512(&self, x: &[f64], scores: &[f64], min: f64) -> usize {
        use std::arch::x86_64::*;
        let padded = self.padded;
        assert!(scores.len() >= padded && padded.is_multiple_of(WIDE));
        let p = scores.as_ptr();
        // As in `pick_avx2`: a finite limit means every score is finite (and `min`, taken
        // over the scores by the tile loop, is their minimum).
        let Some(limit) = self.limit(x, || min) else {
            return self.recheck(x, scores, None);
        };
        let window = _mm512_set1_pd(limit);
        let mut close = 0u32;
        let mut first = usize::MAX;
        for c0 in (0..padded).step_by(WIDE) {
            // SAFETY: as above.
            let (lo, hi) = unsafe { (_mm512_loadu_pd(p.add(c0)), _mm512_loadu_pd(p.add(c0 + 8))) };
            let mask = u32::from(_mm512_cmp_pd_mask::<_CMP_LE_OQ>(lo, window))
                | u32::from(_mm512_cmp_pd_mask::<_CMP_LE_OQ>(hi, window)) << 8;
            if mask != 0 {
                close += mask.count_ones();
                if first == usize::MAX {
                    first = c0 + mask.trailing_zeros() as usize;
                }
            }
        }
        if close == 1 {
            first
        } else {
            self.recheck(x, scores, Some(limit))
        }
    }

    /// The smallest of a row's `padded` scores (four chains of vector minima).
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn row_min_avx2(&self, scores: &[f64]) -> f64 {
        use std::arch::x86_64::*;
        let padded = self.padded;
        assert!(scores.len() >= padded && padded.is_multiple_of(WIDE));
        let p = scores.as_ptr();
        // SAFETY: `c0 + 16 <= padded <= scores.len()` (asserted above).
        unsafe {
            let mut m = [_mm256_set1_pd(f64::INFINITY); 4];
            for c0 in (0..padded).step_by(WIDE) {
                for (i, m) in m.iter_mut().enumerate() {
                    *m = _mm256_min_pd(*m, _mm256_loadu_pd(p.add(c0 + 4 * i)));
                }
            }
            let m = _mm256_min_pd(_mm256_min_pd(m[0], m[1]), _mm256_min_pd(m[2], m[3]));
            let m2 = _mm_min_pd(_mm256_castpd256_pd128(m), _mm256_extractf128_pd(m, 1));
            _mm_cvtsd_f64(_mm_min_sd(m2, _mm_unpackhi_pd(m2, m2)))
        }
    }

    /// As [`Centres::pick_plain`] with AVX2: a vector minimum, then one pass that counts the
    /// scores within the window and finds the first of them.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn pick_avx2(&self, x: &[f64], scores: &[f64], min: f64) -> usize {
        use std::arch::x86_64::*;
        let padded = self.padded;
        assert!(scores.len() >= padded && padded.is_multiple_of(WIDE));
        let p = scores.as_ptr();
        // Finite `limit` means every score is finite (see `limit`), so `min` (from
        // `row_min_avx2`) saw no NaN; the padding is +inf and never within the window.
        let Some(limit) = self.limit(x, || min) else {
            return self.recheck(x, scores, None);
        };
        let window = _mm256_set1_pd(limit);
        let mut close = 0u32;
        let mut first = usize::MAX;
        for c0 in (0..padded).step_by(WIDE) {
            let mut mask = 0u32;
            for i in 0..4 {
                // SAFETY: as above.
                let v = unsafe { _mm256_loadu_pd(p.add(c0 + 4 * i)) };
                let m = _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LE_OQ>(v, window)) as u32;
                mask |= m << (4 * i);
            }
            if mask != 0 {
                close += mask.count_ones();
                if first == usize::MAX {
                    first = c0 + mask.trailing_zeros() as usize;
                }
            }
        }
        if close == 1 {
            first
        } else {
            self.recheck(x, scores, Some(limit))
        }
    }

    /// The upper end of the re-check window, `best + 2B`, with `best` from `min`; `None` when
    /// the point or a centre is not finite (or the window overflows), where every centre must
    /// be checked directly. When `x` and the centres are finite with finite squared norms,
    /// every score is finite (`|x.c| <= (||x||^2 + ||c||^2) / 2`).
    #[inline(always)]
    fn limit(&self, x: &[f64], min: impl FnOnce() -> f64) -> Option<f64> {
        let xx = sq_norm(x);
        if !(xx.is_finite() && self.max_norm.is_finite()) {
            return None;
        }
        let limit = min() + 2.0 * self.window * (xx + self.max_norm);
        limit.is_finite().then_some(limit)
    }

    /// The direct formula's arg-min over the centres whose score is at most `limit` (all
    /// centres when `None`), ties to the lower index.
    #[cold]
    fn recheck(&self, x: &[f64], scores: &[f64], limit: Option<f64>) -> usize {
        let mut best_d = f64::INFINITY;
        let mut best = 0;
        for (c, &s) in scores[..self.k].iter().enumerate() {
            if limit.is_none_or(|l| s <= l) {
                let d = direct(x, &self.rows[c * self.dim..(c + 1) * self.dim]);
                if d < best_d {
                    best_d = d;
                    best = c;
                }
            }
        }
        best
    }
}

/// The AVX-512 kernel; used only after the CPU was checked.
#[cfg(target_arch = "x86_64")]
struct Avx512;

#[cfg(target_arch = "x86_64")]
impl Kernel for Avx512 {
    #[inline(always)]
    fn scores(centres: &Centres, block: &[f64], scores: &mut [f64], mins: &mut [f64; ROWS]) {
        // SAFETY: `Avx512` is only chosen by `Centres::assign` after detecting AVX-512F and
        // FMA (AVX2 comes with AVX-512F).
        unsafe { centres.scores_avx512(block, scores, mins) }
    }

    #[inline(always)]
    fn pick(centres: &Centres, x: &[f64], scores: &[f64], min: f64) -> usize {
        // SAFETY: as above.
        unsafe { centres.pick_avx512(x, scores, min) }
    }
}

/// Which score kernel [`Centres::assign_with`] runs.
trait Kernel {
    /// Scores of a block of [`ROWS`] points, and each row's smallest score (any value when a
    /// score is NaN: the pick then ignores it).
    fn scores(centres: &Centres, block: &[f64], scores: &mut [f64], mins: &mut [f64; ROWS]);
    fn pick(centres: &Centres, x: &[f64], scores: &[f64], min: f64) -> usize;
}

/// The portable kernel.
struct Plain;

impl Kernel for Plain {
    #[inline(always)]
    fn scores(centres: &Centres, block: &[f64], scores: &mut [f64], mins: &mut [f64; ROWS]) {
        centres.scores_plain(block, scores);
        for (r, min) in mins.iter_mut().enumerate() {
            let row = &scores[r * centres.padded..r * centres.padded + centres.k];
            *min = row.iter().fold(f64::INFINITY, |m, &s| m.min(s));
        }
    }

    #[inline(always)]
    fn pick(centres: &Centres, x: &[f64], scores: &[f64], min: f64) -> usize {
        centres.pick_plain(x, scores, min)
    }
}

/// The AVX2/FMA kernel; used only after the CPU was checked.
#[cfg(target_arch = "x86_64")]
struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Kernel for Avx2 {
    #[inline(always)]
    fn scores(centres: &Centres, block: &[f64], scores: &mut [f64], mins: &mut [f64; ROWS]) {
        // SAFETY: `Avx2` is only chosen by `Centres::assign` after detecting AVX2 and FMA.
        unsafe { centres.scores_avx2(block, scores) };
        for (r, min) in mins.iter_mut().enumerate() {
            let row = &scores[r * centres.padded..(r + 1) * centres.padded];
            // SAFETY: as above.
            *min = unsafe { centres.row_min_avx2(row) };
        }
    }

    #[inline(always)]
    fn pick(centres: &Centres, x: &[f64], scores: &[f64], min: f64) -> usize {
        // SAFETY: as above.
        unsafe { centres.pick_avx2(x, scores, min) }
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
