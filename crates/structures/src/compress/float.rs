//! Exact floating-point reasoning for the error bound.
//!
//! The bound `|x - x'| <= epsilon` is decided in exact real arithmetic on the values as
//! stored (`x` and `x'` in the output type, `epsilon` as an `f64`), never on a rounded
//! difference. Because rounding is monotone, an exact bound also holds for any check that
//! computes `x - x'` in floating point, such as `numpy.abs(x - y) <= eps`.
//!
//! [`diff_le`] is the one primitive: it decides `a - b <= eps` exactly with one subtraction
//! and, only when the rounded difference equals `eps`, the error term of that subtraction
//! (Knuth's TwoSum). Everything else (the largest value a representative may take, the
//! feasibility of a set) is built on it with `next_up`/`next_down` steps in the output type.

/// A sample type of the grids: `f32` or `f64`.
///
/// Values are handled as `f64` internally (an `f32` converts exactly); representatives are
/// rounded to the sample type and every bound is checked on the rounded value.
pub(crate) trait Sample: Copy + PartialOrd + Send + Sync + 'static {
    /// Bytes of one value in a file.
    const BYTES: usize;
    /// The exact `f64` of the value.
    fn to_f64(self) -> f64;
    /// Rounds an `f64` to the nearest value of this type (finite `x` beyond the range rounds
    /// to infinity, as `as` casts do).
    fn round_from(x: f64) -> Self;
    /// The smallest value of this type greater than `self` (`self` finite).
    fn next_up(self) -> Self;
    /// The largest value of this type less than `self` (`self` finite).
    fn next_down(self) -> Self;
    /// The largest finite value.
    const MAX: Self;
    /// The lowest finite value.
    const MIN: Self;
    /// Appends the little-endian bytes.
    fn put_le(self, out: &mut Vec<u8>);
    /// Reads a value from `Self::BYTES` little-endian bytes.
    fn from_le(bytes: &[u8]) -> Self;
    /// An order-preserving unsigned key (total order; `-0.0` sorts before `+0.0`).
    fn order_key(self) -> u64;
    /// Whether the value is finite.
    fn is_finite_value(self) -> bool;
}

impl Sample for f64 {
    const BYTES: usize = 8;
    const MAX: f64 = f64::MAX;
    const MIN: f64 = f64::MIN;

    fn to_f64(self) -> f64 {
        self
    }
    fn round_from(x: f64) -> f64 {
        x
    }
    fn next_up(self) -> f64 {
        next_up_f64(self)
    }
    fn next_down(self) -> f64 {
        -next_up_f64(-self)
    }
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn from_le(bytes: &[u8]) -> f64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[..8]);
        f64::from_le_bytes(b)
    }
    fn order_key(self) -> u64 {
        let bits = self.to_bits();
        if bits >> 63 == 1 {
            !bits
        } else {
            bits | (1 << 63)
        }
    }
    fn is_finite_value(self) -> bool {
        self.is_finite()
    }
}

impl Sample for f32 {
    const BYTES: usize = 4;
    const MAX: f32 = f32::MAX;
    const MIN: f32 = f32::MIN;

    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn round_from(x: f64) -> f32 {
        x as f32
    }
    fn next_up(self) -> f32 {
        next_up_f32(self)
    }
    fn next_down(self) -> f32 {
        -next_up_f32(-self)
    }
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn from_le(bytes: &[u8]) -> f32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&bytes[..4]);
        f32::from_le_bytes(b)
    }
    fn order_key(self) -> u64 {
        let bits = self.to_bits();
        u64::from(if bits >> 31 == 1 {
            !bits
        } else {
            bits | (1 << 31)
        })
    }
    fn is_finite_value(self) -> bool {
        self.is_finite()
    }
}

/// The next `f64` above a finite `x` (`-0.0` and `+0.0` both step to the smallest subnormal).
fn next_up_f64(x: f64) -> f64 {
    if x == 0.0 {
        return f64::from_bits(1);
    }
    let bits = x.to_bits();
    if x > 0.0 {
        f64::from_bits(bits + 1)
    } else {
        f64::from_bits(bits - 1)
    }
}

/// The next `f32` above a finite `x`.
fn next_up_f32(x: f32) -> f32 {
    if x == 0.0 {
        return f32::from_bits(1);
    }
    let bits = x.to_bits();
    if x > 0.0 {
        f32::from_bits(bits + 1)
    } else {
        f32::from_bits(bits - 1)
    }
}

/// Decides `a - b <= eps` in exact arithmetic, for finite `a`, `b` and finite `eps > 0`.
///
/// The rounded difference `d = fl(a - b)` settles every case but `d == eps`: rounding is
/// monotone and `eps` is representable, so `d < eps` implies `a - b <= eps` and `d > eps`
/// implies `a - b > eps` (an overflow to infinity included). When `d == eps` the exact
/// difference is `d + e` with `e` the TwoSum error term, which is then compared with zero.
pub(crate) fn diff_le(a: f64, b: f64, eps: f64) -> bool {
    let d = a - b;
    if d < eps {
        return true;
    }
    if d > eps {
        return false;
    }
    // d == eps: finite, so the subtraction did not overflow and TwoSum is exact.
    let nb = -b;
    let bb = d - a;
    let err = (a - (d - bb)) + (nb - bb);
    err <= 0.0
}

/// Whether `|x - q| <= eps` holds exactly.
pub(crate) fn within(x: f64, q: f64, eps: f64) -> bool {
    diff_le(x, q, eps) && diff_le(q, x, eps)
}

/// The largest value `q` of type `T` with `q - x <= eps` (exactly), for finite `x` of type `T`.
pub(crate) fn hi_bound<T: Sample>(x: f64, eps: f64) -> T {
    debug_assert!(x.is_finite() && eps > 0.0);
    let mut q = T::round_from(x + eps);
    if !q.is_finite_value() {
        q = if x + eps > 0.0 { T::MAX } else { T::MIN };
    }
    // Step down while q is too high, then up while the next value still fits.
    while !diff_le(q.to_f64(), x, eps) {
        q = q.next_down();
    }
    while q.to_f64() < T::MAX.to_f64() {
        let up = q.next_up();
        if diff_le(up.to_f64(), x, eps) {
            q = up;
        } else {
            break;
        }
    }
    q
}

/// The smallest value `q` of type `T` with `x - q <= eps` (exactly), for finite `x` of type `T`.
pub(crate) fn lo_bound<T: Sample>(x: f64, eps: f64) -> T {
    debug_assert!(x.is_finite() && eps > 0.0);
    let mut q = T::round_from(x - eps);
    if !q.is_finite_value() {
        q = if x - eps > 0.0 { T::MAX } else { T::MIN };
    }
    while !diff_le(x, q.to_f64(), eps) {
        q = q.next_up();
    }
    while q.to_f64() > T::MIN.to_f64() {
        let down = q.next_down();
        if diff_le(x, down.to_f64(), eps) {
            q = down;
        } else {
            break;
        }
    }
    q
}

/// The largest `f64` `t` with `t - q <= eps` exactly (`f64::INFINITY` when every finite value
/// qualifies). Values `x <= t` are exactly those within `eps` above `q`.
pub(crate) fn reach_above(q: f64, eps: f64) -> f64 {
    let mut t = q + eps;
    if t == f64::INFINITY {
        return t;
    }
    while !diff_le(t, q, eps) {
        t = -next_up_f64(-t);
    }
    loop {
        let up = next_up_f64(t);
        if up.is_finite() && diff_le(up, q, eps) {
            t = up;
        } else {
            return t;
        }
    }
}

/// A representative for the values in `[lo, hi]` (of type `T`, `lo <= hi`): the value of
/// type `T` nearest to `target` among those within `eps` of both `lo` and `hi`, or `None`
/// when no value of type `T` is.
pub(crate) fn representative<T: Sample>(lo: f64, hi: f64, eps: f64, target: f64) -> Option<T> {
    let top: T = hi_bound(lo, eps);
    let bottom: T = lo_bound(hi, eps);
    if bottom.to_f64() > top.to_f64() {
        return None;
    }
    let mut q = T::round_from(target);
    if !q.is_finite_value() || q.to_f64() > top.to_f64() {
        q = top;
    }
    if q.to_f64() < bottom.to_f64() {
        q = bottom;
    }
    Some(q)
}

/// The midpoint of `lo <= hi` without overflow.
pub(crate) fn midpoint(lo: f64, hi: f64) -> f64 {
    let d = hi - lo;
    if d.is_finite() {
        lo + d / 2.0
    } else {
        lo / 2.0 + hi / 2.0
    }
}

/// Checks `epsilon`: finite and greater than zero.
pub(crate) fn check_epsilon(eps: f64) -> Result<(), String> {
    if eps.is_finite() && eps > 0.0 {
        Ok(())
    } else {
        Err(format!(
            "epsilon must be a finite number greater than 0, got {eps}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_le_is_exact_where_rounding_hides_the_excess() {
        // 1 - 2^-60 rounds to 1 in f64, so fl(1 - tiny) == 1 == eps but the exact difference
        // is below 1; and fl(1 + tiny - 0) would be 1 while exactly above it.
        let tiny = 2f64.powi(-60);
        assert!(diff_le(1.0, tiny, 1.0));
        assert!(!diff_le(1.0, -tiny, 1.0));
        assert!(diff_le(1.0, 0.0, 1.0));
        assert!(!diff_le(1.0, -0.0 - f64::from_bits(1), 1.0));
        assert!(diff_le(5.0, 6.0, 1e-300));
        assert!(!diff_le(f64::MAX, -f64::MAX, f64::MAX));
        assert!(diff_le(-f64::MAX, f64::MAX, 1.0));
    }

    #[test]
    fn bounds_are_tight() {
        for &(x, eps) in &[
            (1.0, 0.1),
            (1e300, 1e290),
            (-3.5, 1e-20),
            (0.0, 1e-310),
            (123456.789, 0.001),
            (f64::MAX, 1.0),
            (-f64::MAX, 1e308),
        ] {
            let hi: f64 = hi_bound(x, eps);
            assert!(diff_le(hi, x, eps));
            if hi < f64::MAX {
                assert!(!diff_le(hi.next_up(), x, eps));
            }
            let lo: f64 = lo_bound(x, eps);
            assert!(diff_le(x, lo, eps));
            if lo > f64::MIN {
                assert!(!diff_le(x, lo.next_down(), eps));
            }
            let x32 = x as f32;
            if x32.is_finite() {
                let hi32: f32 = hi_bound(x32.to_f64(), eps);
                assert!(hi32.is_finite() && diff_le(hi32.to_f64(), x32.to_f64(), eps));
            }
        }
    }

    #[test]
    fn representative_respects_type_rounding() {
        // Two adjacent f32 values one ulp apart with eps below one ulp: no common value.
        let a = 1.0f32;
        let b = a.next_up();
        let eps = f64::from(b - a) * 0.75;
        assert!(representative::<f32>(a.to_f64(), b.to_f64(), eps, 1.0).is_none());
        assert_eq!(
            representative::<f32>(a.to_f64(), a.to_f64(), eps, 1.0),
            Some(a)
        );
        // With eps of one ulp either end works.
        let eps = f64::from(b - a);
        let q = representative::<f32>(a.to_f64(), b.to_f64(), eps, 1.0).unwrap();
        assert!(q == a || q == b);
    }

    #[test]
    fn order_keys_sort_like_values() {
        let vals = [-f64::MAX, -1.0, -1e-310, -0.0, 0.0, 1e-310, 1.0, f64::MAX];
        for w in vals.windows(2) {
            assert!(w[0].order_key() < w[1].order_key());
            let (a, b) = (w[0] as f32, w[1] as f32);
            assert!(a.order_key() <= b.order_key());
        }
    }
}
