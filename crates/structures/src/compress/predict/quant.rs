//! Quantisation of a value against its prediction, with the bound checked exactly.
//!
//! A value `x` predicted as `p` is stored as the code `q` with `x' = p + q * step`
//! (`step = 2 e`, `e <= epsilon` the bound of the pass), rounded to the output type. The
//! encoder computes `x'` exactly as the decoder will (same operations in the same order, no
//! fused multiply-add) and keeps `q` only if `|x - x'| <= epsilon` holds exactly; otherwise
//! the value becomes an outlier, stored verbatim. So the bound holds at every point by
//! construction, whatever the rounding of the prediction or of `x'`.
//!
//! In lattice mode (every value an integer and `2 epsilon < 1`) the prediction is first
//! rounded to an integer and the step is 1: the values are then coded losslessly, which is
//! cheaper than quantising integers finer than their own spacing.

use super::super::float::{self, Sample};
use super::coder::{Code, MAX_CODE};
use super::strided::StridedMut;

/// `x` rounded to the nearest integer (ties to even) for `|x| < 2^51`; a deterministic value
/// (the same on every machine) otherwise. Two additions, no library call.
#[inline]
pub(crate) fn round_int(x: f64) -> f64 {
    const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52
    (x + MAGIC) - MAGIC
}

/// Whether `|x - y| <= eps` holds exactly (`x`, `y` finite or not: non-finite fails).
#[inline]
fn holds(x: f64, y: f64, eps: f64) -> bool {
    let d = (x - y).abs();
    if d < eps {
        true
    } else if d > eps {
        false
    } else {
        // NaN lands here too and fails the exact test.
        x.is_finite() && y.is_finite() && float::within(x, y, eps)
    }
}

/// The bound of a file and how its quantisers are derived from it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Bound {
    /// The error bound.
    pub(crate) eps: f64,
    /// The spacing of the output type at the largest magnitude (see [`slack`]).
    pub(crate) slack: f64,
    /// Lattice mode.
    pub(crate) lattice: bool,
}

impl Bound {
    /// The quantiser of a pass whose own bound is `e <= eps`: bins of `2 (e - slack)`, so that
    /// a value rebuilt at a bin's centre stays within `e` after rounding to the output type
    /// (when the slack is small against `e`; otherwise bins of `2 e`, and the values that
    /// rounding pushes out become outliers).
    pub(crate) fn quantizer(&self, e: f64) -> Quantizer {
        let half = if self.slack < e / 4.0 {
            e - self.slack
        } else {
            e
        };
        Quantizer::new(2.0 * half, self.eps, self.lattice)
    }
}

/// The spacing of the output type `T` just above the largest finite magnitude in `data`, plus
/// `eps` (0 when there is no finite value): an upper bound on the rounding error of any
/// rebuilt value.
pub(crate) fn slack<T: Sample>(data: &[T], eps: f64) -> f64 {
    use rayon::prelude::*;
    let m = data
        .par_chunks(1 << 16)
        .map(|c| {
            c.iter()
                .map(|v| v.to_f64().abs())
                .filter(|x| x.is_finite())
                .fold(0.0f64, f64::max)
        })
        .reduce(|| 0.0, f64::max);
    let top = T::round_from(m + eps);
    if !top.is_finite_value() {
        return f64::INFINITY;
    }
    let top = if top.to_f64() < m + eps {
        top.next_up()
    } else {
        top
    };
    if !top.is_finite_value() {
        return f64::INFINITY;
    }
    let up = top.next_up();
    if up.is_finite_value() {
        up.to_f64() - top.to_f64()
    } else {
        top.to_f64() - top.next_down().to_f64()
    }
}

/// The quantiser of one pass: its step and the global bound.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Quantizer {
    step: f64,
    inv_step: f64,
    eps: f64,
    lattice: bool,
}

impl Quantizer {
    /// A quantiser with bins of `step` (in lattice mode `step` is 1) checked against `eps`.
    pub(crate) fn new(step: f64, eps: f64, lattice: bool) -> Quantizer {
        let step = if lattice { 1.0 } else { step };
        Quantizer {
            step,
            inv_step: 1.0 / step,
            eps,
            lattice,
        }
    }

    #[inline]
    fn base(&self, pred: f64) -> f64 {
        if self.lattice {
            round_int(pred)
        } else {
            pred
        }
    }

    /// The value the decoder rebuilds from `pred` and code `q`.
    #[inline]
    pub(crate) fn rebuild<T: Sample>(&self, pred: f64, q: i32) -> T {
        T::round_from(self.base(pred) + f64::from(q) * self.step)
    }

    /// The code of `x` and the value it decodes to when the value lies safely inside its
    /// bin (the same code and value as [`quantize`](Self::quantize)); `None` leaves the
    /// point to `quantize` (outliers, values at the edge of their bin).
    #[inline(always)]
    pub(crate) fn quantize_fast<T: Sample>(&self, x: T, pred: f64) -> Option<(i32, T)> {
        let xf = x.to_f64();
        let base = self.base(pred);
        let qf = round_int((xf - base) * self.inv_step);
        // Also false for NaN.
        if qf.abs() < (MAX_CODE - 1) as f64 {
            // qf is an integer below 2^30: it equals f64::from(qf as i32).
            let y = T::round_from(base + qf * self.step);
            if (xf - y.to_f64()).abs() < self.eps {
                return Some((qf as i32, y));
            }
        }
        None
    }

    /// The values of a line: point `j` of `dst` becomes `rebuild(preds[j], codes[j])`.
    #[inline]
    pub(crate) fn rebuild_line<T: Sample>(
        &self,
        preds: &[f64],
        codes: &[i32],
        dst: &mut StridedMut<'_, T>,
    ) {
        let len = dst.len();
        assert!(preds.len() == len && codes.len() == len);
        if self.lattice {
            for (j, (&p, &c)) in preds.iter().zip(codes).enumerate() {
                // SAFETY: j < len.
                unsafe { dst.set(j, T::round_from(round_int(p) + f64::from(c) * self.step)) };
            }
        } else {
            for (j, (&p, &c)) in preds.iter().zip(codes).enumerate() {
                // SAFETY: j < len.
                unsafe { dst.set(j, T::round_from(p + f64::from(c) * self.step)) };
            }
        }
    }

    /// The code of `x` and the value it decodes to, or `Outlier`.
    #[inline]
    pub(crate) fn quantize<T: Sample>(&self, x: T, pred: f64) -> (Code, T) {
        let xf = x.to_f64();
        let base = self.base(pred);
        let qf = round_int((xf - base) * self.inv_step);
        // Also false for NaN.
        if qf.abs() < (MAX_CODE - 1) as f64 {
            let q = qf as i32;
            let y = T::round_from(base + f64::from(q) * self.step);
            if holds(xf, y.to_f64(), self.eps) {
                return (Code::Q(q), y);
            }
            // A value near the edge of its bin may fall out of the bound once the rebuilt value
            // is rounded to the output type; the neighbouring bin's value may still hold it.
            let q = if xf - base > qf * self.step {
                q + 1
            } else {
                q - 1
            };
            let y = T::round_from(base + f64::from(q) * self.step);
            if holds(xf, y.to_f64(), self.eps) {
                return (Code::Q(q), y);
            }
        }
        (Code::Outlier, x)
    }
}

/// The value standing in for a non-finite outlier while predicting its neighbours (the final
/// output gets the stored value back): the prediction if it is a finite value of `T`, else 0.
#[inline]
pub(crate) fn stand_in<T: Sample>(pred: f64) -> T {
    let p = T::round_from(pred);
    if p.is_finite_value() {
        p
    } else {
        T::round_from(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_int_rounds_to_nearest() {
        for (x, want) in [
            (0.4, 0.0),
            (0.6, 1.0),
            (-0.6, -1.0),
            (2.5, 2.0),
            (3.5, 4.0),
            (-1e12 - 0.7, -1e12 - 1.0),
        ] {
            assert_eq!(round_int(x), want, "{x}");
        }
    }

    #[test]
    fn codes_decode_within_the_bound_or_become_outliers() {
        let eps = 0.1;
        let qz = Quantizer::new(2.0 * eps, eps, false);
        for &(x, p) in &[
            (1.0f64, 0.93),
            (5.0, -3.0),
            (1e300, 0.0),
            (f64::NAN, 1.0),
            (0.3, f64::INFINITY),
        ] {
            match qz.quantize::<f64>(x, p) {
                (Code::Q(q), y) => {
                    assert!((x - y).abs() <= eps);
                    assert_eq!(qz.rebuild::<f64>(p, q), y);
                }
                (Code::Outlier, y) => assert!(y.to_bits() == x.to_bits()),
            }
        }
        // Integers in lattice mode are exact.
        let ql = Quantizer::new(0.2, 0.1, true);
        let (c, y) = ql.quantize::<f32>(17.0, 15.3);
        assert_eq!((c, y), (Code::Q(2), 17.0));
    }
}
