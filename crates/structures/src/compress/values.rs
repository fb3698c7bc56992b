//! The value table: the representative of every set or region.
//!
//! Stored raw (little-endian values of the output type) or, when every representative can
//! be moved onto the lattice `m * 2^k` (with `2^k <= epsilon / 16`) without leaving the bound
//! of any of its points, as the lattice exponent and the differences of consecutive `m`s.
//! Set-based tables increase with the set id, so the differences are small (about
//! `2 epsilon / 2^k`, one or two bytes) where raw `f64`s would take eight.
//!
//! ```text
//! mode 0: [0] then t values, little-endian
//! mode 1: [1] varint zigzag(k), then t varints zigzag(m_i - m_(i-1)) (m_(-1) = 0)
//! ```
//!
//! Multiples of a power of two with `|m| < 2^53` are exact in `f64`, so the decoder rebuilds
//! every value bit for bit; it checks that each is also exact in the output type.

use super::encodings::VarintReader;
use super::float::{self, Sample};
use crate::varint::{put_varint, unzigzag, zigzag};

/// `2^k` exactly, for `k` in the range of `f64` (subnormals included).
fn pow2(k: i32) -> Option<f64> {
    if (-1022..=1023).contains(&k) {
        Some(f64::from_bits(((k + 1023) as u64) << 52))
    } else if (-1074..-1022).contains(&k) {
        Some(f64::from_bits(1u64 << (k + 1074)))
    } else {
        None
    }
}

/// `floor(log2(x))` for finite `x > 0`.
fn floor_log2(x: f64) -> i32 {
    let b = x.to_bits();
    let e = ((b >> 52) & 0x7ff) as i32;
    if e == 0 {
        -1074 + (63 - b.leading_zeros() as i32)
    } else {
        e - 1023
    }
}

/// The lattice exponent for `eps`: the largest `k` with `2^k <= eps / 16`, if that is a
/// positive `f64`.
pub(crate) fn lattice_exponent(eps: f64) -> Option<i32> {
    let x = eps / 16.0;
    (x > 0.0).then(|| floor_log2(x))
}

/// The step `2^k` of [`lattice_exponent`].
pub(crate) fn lattice_step(eps: f64) -> Option<f64> {
    lattice_exponent(eps).and_then(pow2)
}

/// Largest lattice index that stays exact.
const MAX_M: f64 = 9_007_199_254_740_992.0; // 2^53

/// Moves every value of `table` onto the lattice of `eps` while keeping every point within
/// `eps` of its value; `value_of(p)` is the table index of point `p`. Returns the lattice
/// indices, or `None` (and leaves `table` as it was) if some value cannot move.
pub(crate) fn snap<T: Sample>(
    data: &[T],
    value_of: impl Fn(usize) -> usize,
    table: &mut [T],
    eps: f64,
) -> Option<(i32, Vec<i64>)> {
    let k = lattice_exponent(eps)?;
    let h = pow2(k)?;
    let t = table.len();
    let mut lo = vec![f64::INFINITY; t];
    let mut hi = vec![f64::NEG_INFINITY; t];
    for (p, v) in data.iter().enumerate() {
        let j = value_of(p);
        let x = v.to_f64();
        lo[j] = lo[j].min(x);
        hi[j] = hi[j].max(x);
    }
    let mut ms = Vec::with_capacity(t);
    let mut snapped = Vec::with_capacity(t);
    for j in 0..t {
        let q0 = table[j].to_f64();
        if lo[j] > hi[j] {
            // A value no point uses (cannot happen for the decompositions here): keep it if
            // it is on the lattice already.
            let m = (q0 / h).round();
            if m.abs() >= MAX_M || m * h != q0 {
                return None;
            }
            ms.push(m as i64);
            snapped.push(table[j]);
            continue;
        }
        let top: T = float::hi_bound(lo[j], eps);
        let bottom: T = float::lo_bound(hi[j], eps);
        let (top, bottom) = (top.to_f64(), bottom.to_f64());
        let m_min = (bottom / h).ceil();
        let m_max = (top / h).floor();
        if m_min > m_max || m_min.is_nan() || m_min.abs() >= MAX_M || m_max.abs() >= MAX_M {
            return None;
        }
        let m = (q0 / h).round().clamp(m_min, m_max);
        let q = m * h;
        let qt = T::round_from(q);
        if qt.to_f64() != q || !float::within(lo[j], q, eps) || !float::within(hi[j], q, eps) {
            return None;
        }
        ms.push(m as i64);
        snapped.push(qt);
    }
    table.copy_from_slice(&snapped);
    Some((k, ms))
}

/// Encodes the table, on the lattice if `lattice` is given.
pub(crate) fn encode<T: Sample>(table: &[T], lattice: Option<&(i32, Vec<i64>)>) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + table.len() * T::BYTES);
    match lattice {
        Some((k, ms)) => {
            out.push(1);
            put_varint(&mut out, zigzag(i64::from(*k)));
            let mut prev = 0i64;
            for &m in ms {
                put_varint(&mut out, zigzag(m - prev));
                prev = m;
            }
        }
        None => {
            out.push(0);
            for v in table {
                v.put_le(&mut out);
            }
        }
    }
    out
}

/// Decodes a table of `t` values.
pub(crate) fn decode<T: Sample>(bytes: &[u8], t: usize) -> Result<Vec<T>, String> {
    let (&mode, rest) = bytes
        .split_first()
        .ok_or_else(|| "the value table is empty".to_string())?;
    match mode {
        0 => {
            if rest.len() != t * T::BYTES {
                return Err("the value table is not the size the header gives".into());
            }
            Ok(rest.chunks_exact(T::BYTES).map(T::from_le).collect())
        }
        1 => {
            let mut r = VarintReader::new(rest);
            let k = unzigzag(r.next()?);
            let h = i32::try_from(k)
                .ok()
                .and_then(pow2)
                .ok_or_else(|| format!("lattice exponent {k} out of range"))?;
            let mut out = Vec::with_capacity(t.min(rest.len()));
            let mut m = 0i64;
            for _ in 0..t {
                m = m.wrapping_add(unzigzag(r.next()?));
                if (m as f64).abs() >= MAX_M {
                    return Err(format!("lattice index {m} out of range"));
                }
                let q = m as f64 * h;
                let v = T::round_from(q);
                if !v.is_finite_value() || v.to_f64() != q {
                    return Err(format!(
                        "lattice value {q:e} is not exact in the output type"
                    ));
                }
                out.push(v);
            }
            if !r.is_done() {
                return Err("the value table has bytes after the last value".into());
            }
            Ok(out)
        }
        m => Err(format!("unknown value table mode {m}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_and_logs() {
        assert_eq!(pow2(0), Some(1.0));
        assert_eq!(pow2(-1074), Some(f64::from_bits(1)));
        assert_eq!(pow2(1023), Some(2f64.powi(1023)));
        assert_eq!(pow2(-1075), None);
        for x in [1.0, 3.0, 0.1, 1e-300, f64::from_bits(5), f64::MAX] {
            let k = floor_log2(x);
            assert!(pow2(k).unwrap() <= x);
            assert!(k == 1023 || pow2(k + 1).unwrap() > x);
        }
        assert_eq!(lattice_step(16.0), Some(1.0));
        assert_eq!(lattice_step(f64::from_bits(3)), None);
    }

    #[test]
    fn tables_round_trip() {
        let data = [0.0f64, 0.9, 2.05, 3.0, 5.2];
        let mut table = vec![0.45, 2.5, 5.2];
        let of = |p: usize| [0, 0, 1, 1, 2][p];
        let lattice = snap(&data, of, &mut table, 0.5).unwrap();
        for (p, &x) in data.iter().enumerate() {
            assert!(float::within(x, table[of(p)], 0.5));
        }
        let bytes = encode(&table, Some(&lattice));
        assert_eq!(decode::<f64>(&bytes, 3).unwrap(), table);
        assert!(bytes.len() < 1 + 3 * 8);
        let raw = encode(&table, None);
        assert_eq!(decode::<f64>(&raw, 3).unwrap(), table);
        assert!(decode::<f64>(&raw, 2).is_err());
        assert!(decode::<f64>(&bytes, 4).is_err());
        assert!(decode::<f64>(&[7], 0).is_err());
    }

    #[test]
    fn tiny_epsilon_falls_back_to_raw() {
        // Values far above the lattice's exact range.
        let data = [1e20f64, 1e20];
        let mut table = vec![1e20];
        assert!(snap(&data, |_| 0, &mut table, 1e-3).is_none());
        assert_eq!(table, vec![1e20]);
    }
}
