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
use super::coder::table;
use super::quant::{Bound, Quantizer};
pub(crate) use super::strided::{Strided, StridedMut};

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

/// What the encoder and the decoder do with the points of a traversal.
pub(crate) trait Coder<T> {
    /// A point predicted from points of its own pass (the anchors, Lorenzo): code or decode
    /// it under table `table`, write `out[p]`, and return its activity.
    fn point(&mut self, out: &mut [T], p: usize, pred: f64, q: &Quantizer, table: usize) -> u8;
    /// A line of an interpolation pass, whose points are predicted from points of earlier
    /// passes only ([`Line::predict`]): code or decode its points in order under level class
    /// `lc`, with `up[j]` the activity of point `j` of the previous line of the pass (replaced
    /// by the activity of point `j` of this line), and write them to `out`.
    fn line(&mut self, out: &mut [T], line: &Line, q: &Quantizer, lc: usize, up: &mut [u8]);
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

/// The interpolation formula of a point at coordinate `c` (an odd multiple of `s`) along the
/// axis of its pass, from the points `s`, `3 s` and `5 s` away along that axis: `m1 = c - s`,
/// `p1 = c + s` and so on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// `(-m3 + 9 m1 + 9 p1 - p3) / 16`.
    Cubic,
    /// No `m3`: `(3 m1 + 6 p1 - p3) / 8`.
    NoM3,
    /// No `p3`: `(-m3 + 6 m1 + 3 p1) / 8`.
    NoP3,
    /// `(m1 + p1) / 2`.
    Linear,
    /// No right neighbour, quadratic extrapolation: `(3 m5 - 10 m3 + 15 m1) / 8`.
    Quadratic,
    /// No right neighbour, linear extrapolation: `-m3 / 2 + 3 m1 / 2`.
    Extrapolate,
    /// The left neighbour alone: `m1`.
    Constant,
}

impl Kernel {
    /// The formula at coordinate `c` along an axis of extent `e`, level step `s`.
    #[inline]
    pub(crate) fn at(c: usize, s: usize, e: usize, cubic: bool) -> Kernel {
        if c + s < e {
            if cubic {
                match (c >= 3 * s, c + 3 * s < e) {
                    (true, true) => Kernel::Cubic,
                    (false, true) => Kernel::NoM3,
                    (true, false) => Kernel::NoP3,
                    (false, false) => Kernel::Linear,
                }
            } else {
                Kernel::Linear
            }
        } else if cubic && c >= 5 * s {
            Kernel::Quadratic
        } else if c >= 3 * s {
            Kernel::Extrapolate
        } else {
            Kernel::Constant
        }
    }

    /// The prediction at `p` whose neighbours `s` apart along the axis lie `sa` apart in
    /// memory.
    #[inline(always)]
    fn apply<T: Sample>(self, out: &[T], p: usize, sa: usize) -> f64 {
        let v = |q: usize| out[q].to_f64();
        match self {
            Kernel::Cubic => cubic(v(p - 3 * sa), v(p - sa), v(p + sa), v(p + 3 * sa)),
            Kernel::NoM3 => no_m3(v(p - sa), v(p + sa), v(p + 3 * sa)),
            Kernel::NoP3 => no_p3(v(p - 3 * sa), v(p - sa), v(p + sa)),
            Kernel::Linear => linear(v(p - sa), v(p + sa)),
            Kernel::Quadratic => quadratic(v(p - 5 * sa), v(p - 3 * sa), v(p - sa)),
            Kernel::Extrapolate => extrapolate(v(p - 3 * sa), v(p - sa)),
            Kernel::Constant => v(p - sa),
        }
    }
}

// The formulas, each evaluated in one fixed order (the decoder repeats them bit for bit).
#[inline(always)]
fn cubic(m3: f64, m1: f64, p1: f64, p3: f64) -> f64 {
    (-m3 + 9.0 * m1 + 9.0 * p1 - p3) / 16.0
}
#[inline(always)]
fn no_m3(m1: f64, p1: f64, p3: f64) -> f64 {
    (3.0 * m1 + 6.0 * p1 - p3) / 8.0
}
#[inline(always)]
fn no_p3(m3: f64, m1: f64, p1: f64) -> f64 {
    (-m3 + 6.0 * m1 + 3.0 * p1) / 8.0
}
#[inline(always)]
fn linear(m1: f64, p1: f64) -> f64 {
    (m1 + p1) / 2.0
}
#[inline(always)]
fn quadratic(m5: f64, m3: f64, m1: f64) -> f64 {
    (3.0 * m5 - 10.0 * m3 + 15.0 * m1) / 8.0
}
#[inline(always)]
fn extrapolate(m3: f64, m1: f64) -> f64 {
    -0.5 * m3 + 1.5 * m1
}

/// Fills `preds` with the predictions of points `first + j * step` under one kernel.
fn run_kernel<T: Sample>(
    k: Kernel,
    out: &[T],
    first: usize,
    step: usize,
    sa: usize,
    preds: &mut [f64],
) {
    let len = preds.len();
    if len == 0 {
        return;
    }
    // Offsets behind and ahead of the point, in units of `sa`.
    let (back, ahead) = match k {
        Kernel::Cubic => (3, 3),
        Kernel::NoM3 => (1, 3),
        Kernel::NoP3 => (3, 1),
        Kernel::Linear => (1, 1),
        Kernel::Quadratic => (5, 0),
        Kernel::Extrapolate => (3, 0),
        Kernel::Constant => (1, 0),
    };
    let w = Strided::new(out, first - back * sa, step, len, (back + ahead) * sa);
    // Offset of the neighbour `i` units of `sa` from the point (i in -5..=3).
    let o = |i: isize| (back as isize + i) as usize * sa;
    macro_rules! fill {
        ($($i:expr),+ ; $f:expr) => {{
            let offs = [$(o($i)),+];
            for (j, p) in preds.iter_mut().enumerate() {
                // SAFETY: j < len, and every offset is at most (back + ahead) * sa, the span
                // checked by `Strided::new`.
                let v = offs.map(|of| unsafe { w.at(j, of) }.to_f64());
                *p = $f(v);
            }
        }};
    }
    match k {
        Kernel::Cubic => fill!(-3, -1, 1, 3; |v: [f64; 4]| cubic(v[0], v[1], v[2], v[3])),
        Kernel::NoM3 => fill!(-1, 1, 3; |v: [f64; 3]| no_m3(v[0], v[1], v[2])),
        Kernel::NoP3 => fill!(-3, -1, 1; |v: [f64; 3]| no_p3(v[0], v[1], v[2])),
        Kernel::Linear => fill!(-1, 1; |v: [f64; 2]| linear(v[0], v[1])),
        Kernel::Quadratic => fill!(-5, -3, -1; |v: [f64; 3]| quadratic(v[0], v[1], v[2])),
        Kernel::Extrapolate => fill!(-3, -1; |v: [f64; 2]| extrapolate(v[0], v[1])),
        Kernel::Constant => fill!(-1; |v: [f64; 1]| v[0]),
    }
}

/// A line of an interpolation pass: the points `first + j * step` for `j < len`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Line {
    /// Memory index of the first point.
    pub(crate) first: usize,
    /// Memory distance between consecutive points.
    pub(crate) step: usize,
    /// Points.
    pub(crate) len: usize,
    /// Memory distance of the neighbours `s` apart along the pass's axis.
    sa: usize,
    /// How the points are predicted.
    form: Form,
}

#[derive(Clone, Copy, Debug)]
enum Form {
    /// The line runs along the pass's axis: point `j` sits at coordinate `s + 2 s j` of an
    /// axis of extent `e`.
    Along { s: usize, e: usize, cubic: bool },
    /// The line runs across the pass's axis: one formula for every point.
    Across(Kernel),
}

impl Line {
    /// The predictions of the points of the line (`preds.len() == len`), from `out`.
    pub(crate) fn predict<T: Sample>(&self, out: &[T], preds: &mut [f64]) {
        debug_assert_eq!(preds.len(), self.len);
        let (first, step, sa) = (self.first, self.step, self.sa);
        match self.form {
            Form::Across(k) => run_kernel(k, out, first, step, sa, preds),
            Form::Along { s, e, cubic } => {
                // The points with the full formula: c >= 3 s and c + 3 s < e for cubic,
                // c + s < e for linear.
                let (lo, hi, k) = if cubic {
                    (1, count(4 * s, e, 2 * s), Kernel::Cubic)
                } else {
                    (0, count(2 * s, e, 2 * s), Kernel::Linear)
                };
                let lo = lo.min(self.len);
                let hi = hi.clamp(lo, self.len);
                for j in (0..lo).chain(hi..self.len) {
                    let k = Kernel::at(s + 2 * s * j, s, e, cubic);
                    preds[j] = k.apply(out, first + j * step, sa);
                }
                run_kernel(k, out, first + lo * step, step, sa, &mut preds[lo..hi]);
            }
        }
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
    coder: &mut impl Coder<T>,
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
                left = coder.point(out, p, pred, &q, table(LC_COARSE, left, up[j]));
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
            let len = count(start[0], ext[0], step[0]);
            up.clear();
            up.resize(len, 0);
            let mut z = start[2];
            while z < ext[2] {
                let mut y = start[1];
                while y < ext[1] {
                    let form = match a {
                        0 => Form::Along {
                            s,
                            e: ext[0],
                            cubic: set.cubic,
                        },
                        1 => Form::Across(Kernel::at(y, s, ext[1], set.cubic)),
                        _ => Form::Across(Kernel::at(z, s, ext[2], set.cubic)),
                    };
                    let line = Line {
                        first: y * stride[1] + z * stride[2] + start[0],
                        step: step[0],
                        len,
                        sa,
                        form,
                    };
                    coder.line(out, &line, &q, lc, &mut up);
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
    coder: &mut impl Coder<T>,
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
                left = coder.point(out, p, pred, &q, table(LC_LORENZO, left, *u));
                *u = left;
                p += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Marks every point visited, checks its prediction read only written values (NaN marks
    /// an unwritten one), and checks the predictions of every line against
    /// [`interpolate`], the per-point formula of format version 2.
    struct Check {
        seen: Vec<bool>,
        ext: [usize; 3],
        stride: [usize; 3],
        cubic: bool,
        lines: usize,
    }

    impl Check {
        fn mark(&mut self, out: &mut [f64], p: usize, pred: f64) {
            assert!(!self.seen[p], "point {p} twice");
            self.seen[p] = true;
            assert!(pred.is_finite(), "point {p} read unwritten values");
            // A value that differs from point to point, so that wrong taps show.
            out[p] = (p as f64 * 0.618).fract() * 100.0 + (p % 7) as f64;
        }
    }

    impl Coder<f64> for Check {
        fn point(&mut self, out: &mut [f64], p: usize, pred: f64, _: &Quantizer, _: usize) -> u8 {
            self.mark(out, p, pred);
            0
        }

        fn line(&mut self, out: &mut [f64], line: &Line, _: &Quantizer, _: usize, up: &mut [u8]) {
            assert_eq!(up.len(), line.len);
            let mut preds = vec![0.0; line.len];
            line.predict(out, &mut preds);
            // The pass's axis and level step: the axis along which the first point sits at
            // an odd multiple of s, with sa = s * stride.
            let p0 = line.first;
            let found: Vec<(usize, usize)> = (0..3)
                .filter_map(|a| {
                    let c = (p0 / self.stride[a]) % self.ext[a];
                    let s = line.sa / self.stride[a];
                    let fits = self.ext[a] > 1
                        && line.sa.is_multiple_of(self.stride[a])
                        && s.is_power_of_two()
                        && c.is_multiple_of(s)
                        && (c / s) % 2 == 1;
                    fits.then_some((a, s))
                })
                .collect();
            assert_eq!(found.len(), 1, "the pass of line {line:?}");
            let (a, s) = found[0];
            for (j, &pred) in preds.iter().enumerate() {
                let p = line.first + j * line.step;
                let c = (p / self.stride[a]) % self.ext[a];
                let want = interpolate(out, p, line.sa, c, s, self.ext[a], self.cubic);
                assert!(
                    pred.to_bits() == want.to_bits() || (pred.is_nan() && want.is_nan()),
                    "point {p}: line {pred} point formula {want}"
                );
                self.mark(out, p, pred);
            }
            self.lines += 1;
        }
    }

    /// The prediction of format version 2 at `p`, coordinate `c` along an axis of extent `e`
    /// whose points `s` apart lie `sa` apart in memory (written out independently of
    /// [`Kernel`]).
    fn interpolate(
        out: &[f64],
        p: usize,
        sa: usize,
        c: usize,
        s: usize,
        e: usize,
        cubic: bool,
    ) -> f64 {
        let v = |q: usize| out[q];
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
                            ext: shape.ext,
                            stride: shape.stride,
                            cubic,
                            lines: 0,
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
