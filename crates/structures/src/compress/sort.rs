//! Sorting grid points by value: an LSD radix sort on order-preserving keys.

use super::float::Sample;

/// Point indices sorted by value (ties by index), with the values in that order as `f64`.
pub(crate) struct Sorted {
    /// `order[r]` is the point of rank `r`.
    pub(crate) order: Vec<u32>,
    /// `values[r]` is the value of point `order[r]`.
    pub(crate) values: Vec<f64>,
}

/// Sorts the points of `data` by value.
///
/// Cost: one histogram pass plus one scatter pass per key byte that is not the same for every
/// value (at most 8 for `f64`, 4 for `f32`), each over `n` (key, index) pairs; O(n) memory.
/// The sort is stable, so equal values stay in index order.
pub(crate) fn sort_by_value<T: Sample>(data: &[T]) -> Sorted {
    let n = data.len();
    let mut keys: Vec<u64> = data.iter().map(|v| v.order_key()).collect();
    let mut order: Vec<u32> = (0..n as u32).collect();
    let key_bytes = T::BYTES;
    // All histograms in one pass.
    let mut hist = vec![[0usize; 256]; key_bytes];
    for &k in &keys {
        for (b, h) in hist.iter_mut().enumerate() {
            h[((k >> (8 * b)) & 0xff) as usize] += 1;
        }
    }
    let mut keys_tmp = vec![0u64; n];
    let mut order_tmp = vec![0u32; n];
    for (b, h) in hist.iter().enumerate() {
        if h.contains(&n) {
            continue; // every key has the same byte here
        }
        let mut pos = [0usize; 256];
        let mut sum = 0;
        for (p, &c) in pos.iter_mut().zip(h.iter()) {
            *p = sum;
            sum += c;
        }
        let shift = 8 * b;
        for (&k, &i) in keys.iter().zip(order.iter()) {
            let d = ((k >> shift) & 0xff) as usize;
            let at = pos[d];
            keys_tmp[at] = k;
            order_tmp[at] = i;
            pos[d] = at + 1;
        }
        std::mem::swap(&mut keys, &mut keys_tmp);
        std::mem::swap(&mut order, &mut order_tmp);
    }
    drop(keys_tmp);
    drop(order_tmp);
    drop(keys);
    let values = order.iter().map(|&i| data[i as usize].to_f64()).collect();
    Sorted { order, values }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_like_the_standard_library() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut data: Vec<f64> = (0..5000)
            .map(|_| f64::from_bits(next()))
            .filter(|v| v.is_finite())
            .collect();
        data.extend([0.0, -0.0, 1.0, 1.0, -1.0, f64::MAX, f64::MIN, 5e-324]);
        let s = sort_by_value(&data);
        let mut expect: Vec<u32> = (0..data.len() as u32).collect();
        expect.sort_by(|&a, &b| {
            data[a as usize]
                .total_cmp(&data[b as usize])
                .then(a.cmp(&b))
        });
        assert_eq!(s.order, expect);
        let f: Vec<f32> = data
            .iter()
            .map(|&v| v as f32)
            .filter(|v| v.is_finite())
            .collect();
        let s = sort_by_value(&f);
        let mut expect: Vec<u32> = (0..f.len() as u32).collect();
        expect.sort_by(|&a, &b| f[a as usize].total_cmp(&f[b as usize]).then(a.cmp(&b)));
        assert_eq!(s.order, expect);
    }
}
