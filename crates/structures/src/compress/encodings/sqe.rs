//! SQE: the set id of every point in grid order, raw or as residuals of a prediction from
//! already coded neighbours ([`IdPredictor`]).

use super::super::grid::Grid;
use super::{put_varint, unzigzag, zigzag, IdPredictor, VarintReader};

/// Strides and extents of a structured grid as three axes (missing axes have extent 1).
fn axes(dims: &[usize]) -> [usize; 3] {
    let mut a = [1usize; 3];
    for (i, &d) in dims.iter().take(3).enumerate() {
        a[i] = d;
    }
    a
}

/// The points of a structured grid in storage order (x fastest): each one's index and
/// coordinates. The order of the Lorenzo predictor, which [`effective_predictor`] keeps to
/// structured grids.
struct StorageOrder {
    extents: [usize; 3],
    at: [usize; 3],
    p: usize,
    total: usize,
}

impl StorageOrder {
    fn of(grid: &Grid) -> StorageOrder {
        let Grid::Structured(dims) = grid else {
            unreachable!("effective_predictor maps Lorenzo to Delta off structured grids")
        };
        let extents = axes(dims);
        StorageOrder {
            extents,
            at: [0; 3],
            p: 0,
            total: extents.iter().product(),
        }
    }

    /// The strides of y and z.
    fn strides(&self) -> (usize, usize) {
        (self.extents[0], self.extents[0] * self.extents[1])
    }
}

impl Iterator for StorageOrder {
    type Item = (usize, [usize; 3]);

    #[inline]
    fn next(&mut self) -> Option<(usize, [usize; 3])> {
        if self.p == self.total {
            return None;
        }
        let here = (self.p, self.at);
        self.p += 1;
        self.at[0] += 1;
        if self.at[0] == self.extents[0] {
            self.at[0] = 0;
            self.at[1] += 1;
            if self.at[1] == self.extents[1] {
                self.at[1] = 0;
                self.at[2] += 1;
            }
        }
        Some(here)
    }
}

/// The Lorenzo prediction for point `p` at `(x, y, z)` from `ids[..p]`.
#[inline]
fn lorenzo(ids: &[u32], p: usize, x: usize, y: usize, z: usize, sy: usize, sz: usize) -> i64 {
    let at = |o: usize| i64::from(ids[p - o]);
    match (x > 0, y > 0, z > 0) {
        (false, false, false) => 0,
        (true, false, false) => at(1),
        (false, true, false) => at(sy),
        (false, false, true) => at(sz),
        (true, true, false) => at(1) + at(sy) - at(1 + sy),
        (true, false, true) => at(1) + at(sz) - at(1 + sz),
        (false, true, true) => at(sy) + at(sz) - at(sy + sz),
        (true, true, true) => {
            at(1) + at(sy) + at(sz) - at(1 + sy) - at(1 + sz) - at(sy + sz) + at(1 + sy + sz)
        }
    }
}

/// The points of a structured grid in the order of the interpolation predictor, each with
/// the lattice step and axis it is predicted along (`axis == usize::MAX` for the origin).
///
/// Order: the origin first, then for each lattice step `s` from the largest power of two
/// below the longest extent down to 1, and for each axis `d` in turn, the points whose
/// coordinate along `d` is an odd multiple of `s`, whose coordinates along earlier axes are
/// multiples of `s` and along later axes multiples of `2s`. Every point is visited once, and
/// its neighbours at `+-s` and `+-3s` along `d` come before it.
fn interpolation_order(dims: &[usize], mut visit: impl FnMut(usize, usize, usize, usize)) {
    let [nx, ny, nz] = axes(dims);
    let ext = [nx, ny, nz];
    let strides = [1, nx, nx * ny];
    visit(0, usize::MAX, 0, 0);
    let longest = nx.max(ny).max(nz);
    let mut s = 1usize;
    while s * 2 < longest {
        s *= 2;
    }
    loop {
        for d in 0..3 {
            if ext[d] <= s {
                continue;
            }
            // Step along each axis: s for axes before d, 2s after d; d itself odd multiples.
            let step_of = |a: usize| if a < d { s } else { 2 * s };
            let mut c = [0usize; 3];
            let (s0, s1, s2) = (step_of(0), step_of(1), step_of(2));
            let start = |a: usize| if a == d { s } else { 0 };
            let inc = |a: usize, st: usize| if a == d { 2 * s } else { st };
            c[2] = start(2);
            while c[2] < nz {
                c[1] = start(1);
                while c[1] < ny {
                    c[0] = start(0);
                    while c[0] < nx {
                        let p = c[0] + strides[1] * c[1] + strides[2] * c[2];
                        visit(p, d, s, c[d]);
                        c[0] += inc(0, s0);
                    }
                    c[1] += inc(1, s1);
                }
                c[2] += inc(2, s2);
            }
        }
        if s == 1 {
            break;
        }
        s /= 2;
    }
}

/// The interpolation prediction of the point `p` at coordinate `c` along `axis` with lattice
/// step `s`, from ids already coded.
#[inline]
fn interpolate(ids: &[u32], dims: &[usize], p: usize, axis: usize, s: usize, c: usize) -> i64 {
    if axis == usize::MAX {
        return 0;
    }
    let ext = axes(dims);
    let stride = match axis {
        0 => 1,
        1 => ext[0],
        _ => ext[0] * ext[1],
    };
    let n = ext[axis];
    let at = |q: usize| i64::from(ids[q]);
    let b = at(p - s * stride);
    if c + s >= n {
        return b;
    }
    let e = at(p + s * stride);
    if c >= 3 * s && c + 3 * s < n {
        let a = at(p - 3 * s * stride);
        let f = at(p + 3 * s * stride);
        (-a + 9 * b + 9 * e - f + 8).div_euclid(16)
    } else {
        (b + e + 1).div_euclid(2)
    }
}

/// The predictor actually used on `grid` for the requested one.
pub(crate) fn effective_predictor(grid: &Grid, p: IdPredictor) -> IdPredictor {
    match (grid, p) {
        (Grid::Unstructured(_), IdPredictor::Lorenzo | IdPredictor::Interpolation) => {
            IdPredictor::Delta
        }
        _ => p,
    }
}

/// SQE: the ids of all points as varints of the (zigzagged) prediction residuals.
pub(crate) fn encode_sqe(ids: &[u32], grid: &Grid, predictor: IdPredictor) -> Vec<u8> {
    let mut out = Vec::with_capacity(ids.len() + 16);
    match effective_predictor(grid, predictor) {
        IdPredictor::Raw => {
            for &id in ids {
                put_varint(&mut out, u64::from(id));
            }
        }
        IdPredictor::Delta => {
            let mut prev = 0i64;
            for &id in ids {
                put_varint(&mut out, zigzag(i64::from(id) - prev));
                prev = i64::from(id);
            }
        }
        IdPredictor::Lorenzo => {
            let order = StorageOrder::of(grid);
            let (sy, sz) = order.strides();
            for (p, [x, y, z]) in order {
                let pred = lorenzo(ids, p, x, y, z, sy, sz);
                put_varint(&mut out, zigzag(i64::from(ids[p]) - pred));
            }
        }
        IdPredictor::Interpolation => {
            let Grid::Structured(dims) = grid else {
                unreachable!("effective_predictor maps Interpolation to Delta off structured grids")
            };
            interpolation_order(dims, |p, axis, s, c| {
                let pred = interpolate(ids, dims, p, axis, s, c);
                put_varint(&mut out, zigzag(i64::from(ids[p]) - pred));
            });
        }
    }
    out
}

/// Inverse of [`encode_sqe`]: `n` ids, each checked to be below `k`.
pub(crate) fn decode_sqe(
    bytes: &[u8],
    grid: &Grid,
    predictor: IdPredictor,
    n: usize,
    k: usize,
) -> Result<Vec<u32>, String> {
    let mut r = VarintReader::new(bytes);
    let mut ids = Vec::with_capacity(n);
    let check = |v: i64| -> Result<u32, String> {
        if v >= 0 && (v as u64) < k as u64 {
            Ok(v as u32)
        } else {
            Err(format!("set id {v} out of range (there are {k} sets)"))
        }
    };
    match effective_predictor(grid, predictor) {
        IdPredictor::Raw => {
            for _ in 0..n {
                let v = r.next()?;
                ids.push(check(i64::try_from(v).unwrap_or(-1))?);
            }
        }
        IdPredictor::Delta => {
            let mut prev = 0i64;
            for _ in 0..n {
                let v = prev.wrapping_add(unzigzag(r.next()?));
                ids.push(check(v)?);
                prev = v;
            }
        }
        IdPredictor::Lorenzo => {
            let order = StorageOrder::of(grid);
            let (sy, sz) = order.strides();
            for (p, [x, y, z]) in order {
                let pred = lorenzo(&ids, p, x, y, z, sy, sz);
                let v = pred.wrapping_add(unzigzag(r.next()?));
                ids.push(check(v)?);
            }
        }
        IdPredictor::Interpolation => {
            let Grid::Structured(dims) = grid else {
                unreachable!("effective_predictor maps Interpolation to Delta off structured grids")
            };
            ids.resize(n, 0);
            let mut failure = None;
            interpolation_order(dims, |p, axis, s, c| {
                if failure.is_some() {
                    return;
                }
                let pred = interpolate(&ids, dims, p, axis, s, c);
                match r
                    .next()
                    .map(|v| pred.wrapping_add(unzigzag(v)))
                    .and_then(check)
                {
                    Ok(v) => ids[p] = v,
                    Err(e) => failure = Some(e),
                }
            });
            if let Some(e) = failure {
                return Err(e);
            }
        }
    }
    if !r.is_done() {
        return Err("id stream has bytes after the last point".into());
    }
    Ok(ids)
}

/// Relaxed SQE: every point may take any set whose value is within `eps` of it (the ids
/// admissible for it form a contiguous range, as the values increase with the id); it takes
/// the id its predictor expects when that one is admissible, otherwise the nearest
/// admissible one. `ids` holds a valid assignment on entry (each point's own set) and the
/// chosen one on return; the returned stream decodes with [`decode_sqe`] like any other.
///
/// The ids then change only where the field leaves the tolerance of the prediction, instead
/// of wherever a value crosses a cut between two sets, which removes most of the noise along
/// set boundaries.
pub(crate) fn encode_sqe_relaxed<T: super::super::float::Sample>(
    data: &[T],
    ids: &mut [u32],
    reps: &[T],
    eps: f64,
    grid: &Grid,
    predictor: IdPredictor,
) -> Vec<u8> {
    use super::super::float::within;
    let n = ids.len();
    let mut out = Vec::with_capacity(n + 16);
    // The admissible range of point p around its own set id, clamped towards `pred`.
    let choose = |p: usize, own: u32, pred: i64| -> u32 {
        let x = data[p].to_f64();
        let own_i = i64::from(own);
        if pred == own_i {
            return own;
        }
        if pred < own_i {
            let mut id = own;
            while i64::from(id) > pred && id > 0 && within(x, reps[id as usize - 1].to_f64(), eps) {
                id -= 1;
            }
            id
        } else {
            let mut id = own;
            while i64::from(id) < pred
                && (id as usize) + 1 < reps.len()
                && within(x, reps[id as usize + 1].to_f64(), eps)
            {
                id += 1;
            }
            id
        }
    };
    match effective_predictor(grid, predictor) {
        IdPredictor::Raw => {
            let mut prev = 0i64;
            for (p, slot) in ids.iter_mut().enumerate() {
                let id = choose(p, *slot, prev);
                *slot = id;
                put_varint(&mut out, u64::from(id));
                prev = i64::from(id);
            }
        }
        IdPredictor::Delta => {
            let mut prev = 0i64;
            for (p, slot) in ids.iter_mut().enumerate() {
                let id = choose(p, *slot, prev);
                *slot = id;
                put_varint(&mut out, zigzag(i64::from(id) - prev));
                prev = i64::from(id);
            }
        }
        IdPredictor::Lorenzo => {
            let order = StorageOrder::of(grid);
            let (sy, sz) = order.strides();
            for (p, [x, y, z]) in order {
                let pred = lorenzo(ids, p, x, y, z, sy, sz);
                let id = choose(p, ids[p], pred);
                ids[p] = id;
                put_varint(&mut out, zigzag(i64::from(id) - pred));
            }
        }
        IdPredictor::Interpolation => {
            let Grid::Structured(dims) = grid else {
                unreachable!("effective_predictor maps Interpolation to Delta off structured grids")
            };
            interpolation_order(dims, |p, axis, s, c| {
                let pred = interpolate(ids, dims, p, axis, s, c);
                let id = choose(p, ids[p], pred);
                ids[p] = id;
                put_varint(&mut out, zigzag(i64::from(id) - pred));
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqe_round_trips_with_every_predictor() {
        for dims in [vec![17], vec![5, 7], vec![3, 4, 5]] {
            let grid = Grid::structured(&dims);
            let n: usize = dims.iter().product();
            let ids: Vec<u32> = (0..n as u32).map(|i| (i * 7 + i / 3) % 11).collect();
            let k = *ids.iter().max().unwrap() as usize + 1;
            for pred in [
                IdPredictor::Raw,
                IdPredictor::Delta,
                IdPredictor::Lorenzo,
                IdPredictor::Interpolation,
            ] {
                let bytes = encode_sqe(&ids, &grid, pred);
                assert_eq!(decode_sqe(&bytes, &grid, pred, n, k).unwrap(), ids);
                assert!(decode_sqe(&bytes, &grid, pred, n, k - 1).is_err());
                assert!(decode_sqe(&bytes[..bytes.len() - 1], &grid, pred, n, k).is_err());
            }
        }
    }

    #[test]
    fn interpolation_order_visits_every_point_once_after_its_neighbours() {
        for dims in [
            vec![1],
            vec![9],
            vec![8, 1],
            vec![5, 7],
            vec![16, 3],
            vec![3, 4, 5],
            vec![1, 1, 6],
        ] {
            let grid_points: usize = dims.iter().product();
            let mut seen = vec![false; grid_points];
            let ext = axes(&dims);
            let strides = [1, ext[0], ext[0] * ext[1]];
            interpolation_order(&dims, |p, axis, s, c| {
                assert!(!seen[p], "point {p} visited twice in {dims:?}");
                if axis != usize::MAX {
                    assert!(seen[p - s * strides[axis]]);
                    if c + s < ext[axis] {
                        assert!(seen[p + s * strides[axis]]);
                    }
                }
                seen[p] = true;
            });
            assert!(seen.iter().all(|&v| v), "{dims:?}");
        }
    }

    #[test]
    fn lorenzo_is_exact_on_planes() {
        // ids = x + 2y + 3z is predicted exactly away from the low faces.
        let grid = Grid::structured(&[6, 5, 4]);
        let ids: Vec<u32> = (0..120u32)
            .map(|p| p % 6 + 2 * ((p / 6) % 5) + 3 * (p / 30))
            .collect();
        let bytes = encode_sqe(&ids, &grid, IdPredictor::Lorenzo);
        // Every residual is small: one byte each, and most are zero.
        assert_eq!(bytes.len(), 120);
        assert!(bytes.iter().filter(|&&b| b == 0).count() > 60);
    }
}
