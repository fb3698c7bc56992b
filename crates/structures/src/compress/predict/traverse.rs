//! The order in which points are predicted, and the predictions themselves.
//!
//! Both predictors read only values already decoded (the encoder writes every decoded value
//! back before moving on), so the decoder can repeat every prediction bit for bit.
//!
//! - Interpolation (the multilevel scheme of SZ3): anchor points on a lattice of step `A` in
//!   every axis come first (each predicted by the Lorenzo formula from the anchors before it);
//!   then for `s = A/2, A/4, ..., 1` and each axis `a` in turn, every point whose coordinate
//!   along `a` is an odd multiple of `s` (along axes earlier in the order a multiple of `s`,
//!   along later ones a multiple of `2 s`) is predicted from the points `s` and `3 s` away
//!   along `a` (cubic; quadratic, linear or constant near the edges). Coarse levels may use a
//!   tighter bound than `epsilon` (`epsilon / min(alpha^(l-1), beta)` at level `l`, `l = 1`
//!   finest), which makes the many fine-level predictions better.
//! - Lorenzo: every point in memory order from its already decoded corner (1-D: the left
//!   neighbour; 2-D: left + below - diagonal; 3-D: the 7-point form); points on the low faces
//!   use the formula of the face.
//!
//! Each point is handed to a visitor with its prediction, the quantiser of its pass, its level
//! class and its context (the activities of the nearest two points visited before it in the
//! same pass: the previous one on its line and the one at the same place on the previous
//! line).

use super::super::float::Sample;
use super::coder::{activity, table, Code};
use super::quant::{Bound, Quantizer};

/// A block of a structured grid: extents and memory strides of three axes (unused axes have
/// extent 1), fastest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) ext: [usize; 3],
    pub(crate) stride: [usize; 3],
}

impl Shape {
    pub(crate) fn new(dims: &[usize]) -> Shape {
        let mut ext = [1usize; 3];
        ext[..dims.len()].copy_from_slice(dims);
        Shape {
            ext,
            stride: [1, ext[0], ext[0] * ext[1]],
        }
    }

    pub(crate) fn points(&self) -> usize {
        self.ext[0] * self.ext[1] * self.ext[2]
    }
}

/// The settings of the interpolation predictor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct InterpSettings {
    /// Cubic (else linear) interpolation.
    pub(crate) cubic: bool,
    /// The axes in the order they are refined at each level.
    pub(crate) order: [u8; 3],
    /// `log2` of the anchor step.
    pub(crate) anchor_log2: u8,
    /// Level-wise bound: level `l` uses `epsilon / min(alpha^(l-1), beta)`.
    pub(crate) alpha: f64,
    pub(crate) beta: f64,
}

/// What is done at every point: `visit(out, p, prediction, quantiser, code table)` must write
/// `out[p]` and return the point's code.
pub(crate) trait Visitor<T> {
    fn visit(&mut self, out: &mut [T], p: usize, pred: f64, q: &Quantizer, table: usize) -> Code;
}

/// Level class of the Lorenzo predictor and of the coarse interpolation levels.
const LC_LORENZO: usize = 7;
const LC_COARSE: usize = 6;

/// The Lorenzo prediction at `p` from the corner of the cell behind it, with memory strides
/// `st` and `has[a]` telling whether a neighbour exists behind `p` along axis `a`.
#[inline(always)]
fn lorenzo<T: Sample>(out: &[T], p: usize, st: [usize; 3], has: [bool; 3]) -> f64 {
    let v = |o: usize| out[p - o].to_f64();
    match has {
        [false, false, false] => 0.0,
        [true, false, false] => v(st[0]),
        [false, true, false] => v(st[1]),
        [false, false, true] => v(st[2]),
        [true, true, false] => v(st[0]) + v(st[1]) - v(st[0] + st[1]),
        [true, false, true] => v(st[0]) + v(st[2]) - v(st[0] + st[2]),
        [false, true, true] => v(st[1]) + v(st[2]) - v(st[1] + st[2]),
        [true, true, true] => {
            v(st[0]) + v(st[1]) + v(st[2]) - v(st[0] + st[1]) - v(st[0] + st[2]) - v(st[1] + st[2])
                + v(st[0] + st[1] + st[2])
        }
    }
}

/// The interpolation prediction at `p`, coordinate `c` along an axis of extent `e` whose
/// points `s` apart lie `sa` apart in memory.
#[inline(always)]
fn interpolate<T: Sample>(
    out: &[T],
    p: usize,
    sa: usize,
    c: usize,
    s: usize,
    e: usize,
    cubic: bool,
) -> f64 {
    let v = |q: usize| out[q].to_f64();
    let b = v(p - sa);
    if c + s < e {
        let d = v(p + sa);
        if cubic {
            let left3 = c >= 3 * s;
            let right3 = c + 3 * s < e;
            match (left3, right3) {
                (true, true) => (-v(p - 3 * sa) + 9.0 * b + 9.0 * d - v(p + 3 * sa)) / 16.0,
                (false, true) => (3.0 * b + 6.0 * d - v(p + 3 * sa)) / 8.0,
                (true, false) => (-v(p - 3 * sa) + 6.0 * b + 3.0 * d) / 8.0,
                (false, false) => (b + d) / 2.0,
            }
        } else {
            (b + d) / 2.0
        }
    } else if cubic && c >= 5 * s {
        (3.0 * v(p - 5 * sa) - 10.0 * v(p - 3 * sa) + 15.0 * b) / 8.0
    } else if c >= 3 * s {
        -0.5 * v(p - 3 * sa) + 1.5 * b
    } else {
        b
    }
}

/// The points `start, start + step, ...` below `end`.
#[inline]
fn count(start: usize, end: usize, step: usize) -> usize {
    if start >= end {
        0
    } else {
        (end - start - 1) / step + 1
    }
}

/// The bound of interpolation level `l` (1 = finest).
pub(crate) fn level_bound(eps: f64, alpha: f64, beta: f64, l: u32) -> f64 {
    let ratio = alpha.powi(l as i32 - 1).min(beta).max(1.0);
    eps / ratio
}

/// Visits every point of `shape` in interpolation order.
pub(crate) fn interpolation<T: Sample>(
    out: &mut [T],
    shape: &Shape,
    set: &InterpSettings,
    bound: &Bound,
    visitor: &mut impl Visitor<T>,
) {
    let Shape { ext, stride } = *shape;
    let big = 1usize << set.anchor_log2;
    let levels = u32::from(set.anchor_log2);
    let mut up: Vec<u8> = Vec::new();

    // Anchors, by the Lorenzo formula on the anchor lattice.
    let eps = bound.eps;
    let q = bound.quantizer(level_bound(eps, set.alpha, set.beta, levels + 1));
    let ast = [big * stride[0], big * stride[1], big * stride[2]];
    up.clear();
    up.resize(count(0, ext[0], big), 0);
    for z in (0..ext[2]).step_by(big) {
        for y in (0..ext[1]).step_by(big) {
            let mut left = 0u8;
            for (j, x) in (0..ext[0]).step_by(big).enumerate() {
                let p = x + y * stride[1] + z * stride[2];
                let pred = lorenzo(out, p, ast, [x > 0, y > 0, z > 0]);
                let code = visitor.visit(out, p, pred, &q, table(LC_COARSE, left, up[j]));
                left = activity(code);
                up[j] = left;
            }
        }
    }

    let used: Vec<usize> = set.order.iter().map(|&a| a as usize).collect();
    let mut s = big / 2;
    while s >= 1 {
        let l = s.trailing_zeros() + 1;
        let q = bound.quantizer(level_bound(eps, set.alpha, set.beta, l));
        for (pass, &a) in used.iter().enumerate() {
            if ext[a] <= s {
                continue;
            }
            let lc = match s {
                1 => pass,
                2 => 3 + pass,
                _ => LC_COARSE,
            };
            // Start and step of each axis in this pass.
            let mut start = [0usize; 3];
            let mut step = [2 * s; 3];
            for (pos, &b) in used.iter().enumerate() {
                if b == a {
                    start[b] = s;
                } else if pos < pass {
                    step[b] = s;
                }
            }
            let sa = s * stride[a];
            up.clear();
            up.resize(count(start[0], ext[0], step[0]), 0);
            let mut z = start[2];
            while z < ext[2] {
                let mut y = start[1];
                while y < ext[1] {
                    let row = y * stride[1] + z * stride[2];
                    let mut left = 0u8;
                    if a == 0 {
                        for (j, x) in (start[0]..ext[0]).step_by(step[0]).enumerate() {
                            let p = row + x;
                            let pred = interpolate(out, p, sa, x, s, ext[0], set.cubic);
                            let code = visitor.visit(out, p, pred, &q, table(lc, left, up[j]));
                            left = activity(code);
                            up[j] = left;
                        }
                    } else {
                        let c = if a == 1 { y } else { z };
                        for (j, x) in (start[0]..ext[0]).step_by(step[0]).enumerate() {
                            let p = row + x;
                            let pred = interpolate(out, p, sa, c, s, ext[a], set.cubic);
                            let code = visitor.visit(out, p, pred, &q, table(lc, left, up[j]));
                            left = activity(code);
                            up[j] = left;
                        }
                    }
                    y += step[1];
                }
                z += step[2];
            }
        }
        s /= 2;
    }
}

/// Visits every point of `shape` in memory order with its Lorenzo prediction.
pub(crate) fn lorenzo_order<T: Sample>(
    out: &mut [T],
    shape: &Shape,
    bound: &Bound,
    visitor: &mut impl Visitor<T>,
) {
    let Shape { ext, stride } = *shape;
    let q = bound.quantizer(bound.eps);
    let mut up = vec![0u8; ext[0]];
    let mut p = 0;
    for z in 0..ext[2] {
        for y in 0..ext[1] {
            let mut left = 0u8;
            for (x, u) in up.iter_mut().enumerate() {
                let pred = lorenzo(out, p, stride, [x > 0, y > 0, z > 0]);
                let code = visitor.visit(out, p, pred, &q, table(LC_LORENZO, left, *u));
                left = activity(code);
                *u = left;
                p += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Check {
        seen: Vec<bool>,
    }

    impl Visitor<f64> for Check {
        fn visit(&mut self, out: &mut [f64], p: usize, pred: f64, _: &Quantizer, _: usize) -> Code {
            assert!(!self.seen[p], "point {p} twice");
            self.seen[p] = true;
            assert!(pred.is_finite(), "point {p} read unwritten values");
            out[p] = 1.0;
            Code::Q(0)
        }
    }

    /// Every point is visited once, and every value an interpolation reads was written before.
    #[test]
    fn interpolation_visits_every_point_once_after_what_it_reads() {
        for dims in [
            vec![1],
            vec![2],
            vec![37],
            vec![300],
            vec![5, 7],
            vec![130, 3],
            vec![1, 9],
            vec![33, 2, 40],
            vec![3, 4, 5],
        ] {
            let shape = Shape::new(&dims);
            for anchor_log2 in [1u8, 3, 5, 7] {
                for order in [[0u8, 1, 2], [2, 1, 0], [1, 0, 2]] {
                    for cubic in [false, true] {
                        let set = InterpSettings {
                            cubic,
                            order,
                            anchor_log2,
                            alpha: 1.25,
                            beta: 2.0,
                        };
                        // NaN marks "not written yet"; a prediction that reads one is NaN.
                        let mut out = vec![f64::NAN; shape.points()];
                        let bound = Bound {
                            eps: 1.0,
                            slack: 0.0,
                            lattice: false,
                        };
                        let mut check = Check {
                            seen: vec![false; shape.points()],
                        };
                        interpolation(&mut out, &shape, &set, &bound, &mut check);
                        assert!(
                            check.seen.iter().all(|&s| s),
                            "{dims:?} anchor {anchor_log2}"
                        );
                    }
                }
            }
        }
    }
}
