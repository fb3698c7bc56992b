//! The x86-64 kernels of the nearest-centre assignment: AVX2 with FMA (the scores of a tile
//! stored, then scanned) and AVX-512 (the best and second-best scores kept in registers), and
//! the run-time choice between them.

use super::{Best, Centres, Kernel, Simd, ROWS, WIDE, WIDTH};

/// Detects (once) the widest kernel this CPU runs. `SPILLWAY_NO_AVX512` (any value) limits it
/// to AVX2, to compare the two kernels on one machine.
pub(super) fn simd() -> Simd {
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

impl Centres {
    /// [`Centres::assign`] with the AVX2/FMA register-tiled kernel.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn assign_avx2(&self, points: &[f64], out: &mut [u32]) {
        self.assign_with::<Avx2>(points, out);
    }

    /// [`Centres::assign`] with the AVX-512 register-tiled kernel.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn assign_avx512(&self, points: &[f64], out: &mut [u32]) {
        self.assign_with::<Avx512>(points, out);
    }

    /// As [`Centres::scores_plain`], with [`ROWS`] x [`WIDTH`] accumulators in eight AVX2
    /// registers: per coordinate, two loads of centres, four broadcasts and eight FMAs.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
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

    /// The running bests of the [`ROWS`] points of `block` over the tiles of `range`, kept in
    /// registers across the tiles: per tile, [`ROWS`] x 2 accumulators of 8 lanes, then per
    /// lane a minimum, a maximum, a compare and a blend to update the best, its centre and the
    /// second best.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
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

/// The AVX2/FMA kernel; used only after the CPU was checked.
pub(super) struct Avx2;

impl Kernel for Avx2 {
    const SCORES: usize = 1;

    #[inline(always)]
    fn update(
        centres: &Centres,
        block: &[f64],
        best: &mut [Best],
        range: std::ops::Range<usize>,
        scores: &mut [f64],
    ) {
        // SAFETY: `Avx2` is only chosen by `Centres::assign` after detecting AVX2 and FMA.
        unsafe {
            centres.scores_avx2(block, range.clone(), scores);
            take_scores_avx2(best, range, scores);
        }
    }
}

/// Takes the stored scores of `range` (row `r` at `r * range.len()`) into the running bests of
/// the [`ROWS`] points, eight centres at a time without branches: centres `c0..c0 + 4` go to
/// lanes 0-3, `c0 + 4..c0 + 8` to lanes 4-7, each lane keeping its best score, that score's
/// centre (the first of equal ones) and its second-best score, as the AVX-512 kernel does. The
/// padding centres score `+inf` and never count.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn take_scores_avx2(best: &mut [Best], range: std::ops::Range<usize>, scores: &[f64]) {
    use std::arch::x86_64::*;
    let n = range.len();
    assert!(best.len() == ROWS && scores.len() >= ROWS * n && n.is_multiple_of(WIDTH));
    let four = _mm256_set1_epi64x(4);
    for (r, b) in best.iter_mut().enumerate() {
        // SAFETY: `Best` is `repr(C)` and 64-byte aligned, its three arrays are 8 values of 8
        // bytes; the loads of row `r`'s scores end at `r * n + n <= ROWS * n` (asserted).
        unsafe {
            let mut first = [
                _mm256_load_pd(b.first.as_ptr()),
                _mm256_load_pd(b.first.as_ptr().add(4)),
            ];
            let mut second = [
                _mm256_load_pd(b.second.as_ptr()),
                _mm256_load_pd(b.second.as_ptr().add(4)),
            ];
            let mut index = [
                _mm256_load_si256(b.index.as_ptr().cast()),
                _mm256_load_si256(b.index.as_ptr().add(4).cast()),
            ];
            let start = range.start as i64;
            let mut ids = [
                _mm256_set_epi64x(start + 3, start + 2, start + 1, start),
                _mm256_set_epi64x(start + 7, start + 6, start + 5, start + 4),
            ];
            let row = scores.as_ptr().add(r * n);
            for c in (0..n).step_by(WIDTH) {
                for h in 0..2 {
                    let s = _mm256_loadu_pd(row.add(c + 4 * h));
                    // The operand order makes a NaN score drop out, as in the AVX-512 kernel.
                    second[h] = _mm256_min_pd(_mm256_max_pd(s, first[h]), second[h]);
                    let better = _mm256_cmp_pd::<_CMP_LT_OQ>(s, first[h]);
                    index[h] = _mm256_castpd_si256(_mm256_blendv_pd(
                        _mm256_castsi256_pd(index[h]),
                        _mm256_castsi256_pd(ids[h]),
                        better,
                    ));
                    first[h] = _mm256_min_pd(s, first[h]);
                    ids[h] = _mm256_add_epi64(ids[h], _mm256_add_epi64(four, four));
                }
            }
            _mm256_store_pd(b.first.as_mut_ptr(), first[0]);
            _mm256_store_pd(b.first.as_mut_ptr().add(4), first[1]);
            _mm256_store_pd(b.second.as_mut_ptr(), second[0]);
            _mm256_store_pd(b.second.as_mut_ptr().add(4), second[1]);
            _mm256_store_si256(b.index.as_mut_ptr().cast(), index[0]);
            _mm256_store_si256(b.index.as_mut_ptr().add(4).cast(), index[1]);
        }
    }
}

/// The AVX-512 kernel; used only after the CPU was checked.
pub(super) struct Avx512;

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
