//! The BSP fast Fourier transform of Inda and Bisseling, with rustfft for the local FFTs.
//!
//! # Algorithm
//! For `n` points on `p` ranks with `p*p` dividing `n`, write `m = n/p` and `b = n/p²`. Rank
//! `s` holds the *cyclic* part `x[j*p + s]`, `j < m`. Then
//!
//! ```text
//! X[k1 + m*k2] = sum_s  W_p^(s*k2) * W_n^(s*k1) * y_s[k1],   y_s = DFT_m(x[. * p + s])
//! ```
//!
//! so one superstep suffices: every rank computes its local FFT `y_s` of length `m`,
//! multiplies by the twiddles `W_n^(s*k1)`, and puts block `t` (the `b` values with
//! `k1 / b == t`) to rank `t`; rank `t` then does `b` DFTs of length `p` over the ranks.
//! Rank `t` ends with `X[k1 + m*k2]` for its `k1` block and every `k2`: a block-cyclic
//! distribution with blocks of `b` ([`output_index`]).
//!
//! # Cost
//! Computation `5 (n/p) log2(n)` flops per rank (as a sequential FFT, divided by `p`), plus
//! `n/p` twiddle multiplications; communication one superstep with `h = 16 (n/p) (p-1)/p`
//! bytes: `16 (n/p) g + l` (and two syncs of registration, `2l`).

use std::sync::{Arc, Mutex, OnceLock};

use num_complex::Complex64;
use rustfft::{Fft, FftPlanner};
use spillway_bsp::{Bsp, Memory, Options};
use spillway_comm::splitmix::splitmix64;

use crate::error::AlgoError;

/// Global index of the `j`-th local input value of rank `s` (the cyclic distribution).
pub fn input_index(p: usize, s: usize, j: usize) -> usize {
    j * p + s
}

/// Global index of the `i`-th local output value of rank `t` (block-cyclic with blocks of
/// `n/p²`: local block `k2` holds `X[k2*n/p + t*n/p² ..][.. n/p²]`).
pub fn output_index(n: usize, p: usize, t: usize, i: usize) -> usize {
    let b = n / (p * p);
    let (k2, k1l) = (i / b, i % b);
    k2 * (n / p) + t * b + k1l
}

/// Checks that `n` points can be transformed on `p` ranks.
///
/// # Errors
/// [`AlgoError::BadParameter`] unless `n` is a power of two and a multiple of `p*p`.
pub fn check_length(n: usize, p: usize) -> Result<(), AlgoError> {
    if !n.is_power_of_two() {
        return Err(AlgoError::BadParameter {
            name: "length",
            reason: format!("{n} is not a power of two"),
        });
    }
    if !n.is_multiple_of(p * p) {
        return Err(AlgoError::BadParameter {
            name: "length",
            reason: format!(
                "{n} points cannot be split over {p} ranks (need a multiple of ranks squared, {})",
                p * p
            ),
        });
    }
    Ok(())
}

/// `W_n^a = exp(-2 pi i a / n)` for `a < n`, from two tables of about `sqrt(n)` entries each
/// (every entry computed directly, so the product is accurate to a few ulps).
struct Twiddles {
    shift: u32,
    lo: Vec<Complex64>,
    hi: Vec<Complex64>,
}

impl Twiddles {
    fn new(n: usize) -> Twiddles {
        let log = n.trailing_zeros();
        let shift = log.div_ceil(2);
        let w = |a: usize| {
            let angle = -2.0 * std::f64::consts::PI * (a as f64) / (n as f64);
            let (s, c) = angle.sin_cos();
            Complex64::new(c, s)
        };
        let lo = (0..1usize << shift).map(w).collect();
        let hi = (0..n >> shift).map(|h| w(h << shift)).collect();
        Twiddles { shift, lo, hi }
    }

    fn get(&self, a: usize) -> Complex64 {
        self.hi[a >> self.shift] * self.lo[a & ((1 << self.shift) - 1)]
    }
}

/// The forward DFT `X[k] = sum_j x[j] exp(-2 pi i jk/n)` (numpy's sign, no scaling) of a
/// vector of `n` points distributed cyclically over the ranks of `bsp` ([`input_index`]);
/// every rank passes its `n/p` values and gets its `n/p` values of the result in the
/// block-cyclic distribution of [`output_index`]. Collective.
///
/// The transform runs in a pristine context ([`Bsp::rehook`]), so it neither needs nor
/// changes `bsp`'s registrations and capacities. Storage-backed input gives a storage-backed
/// result (and scratch).
///
/// # Cost
/// See the module documentation: `5 (n/p) log2 n` flops and `16 (n/p) g + 3l`.
///
/// # Errors
/// [`AlgoError::BadParameter`] when `n` does not suit `p` ([`check_length`]) or the local
/// length is not `n/p`; failures of the primitives.
pub fn fft(
    bsp: &Bsp<'_>,
    n: usize,
    local: impl Into<Memory<Complex64>>,
) -> Result<Memory<Complex64>, AlgoError> {
    let local = local.into();
    let p = bsp.nprocs();
    check_length(n, p)?;
    let m = n / p;
    if local.len() != m {
        return Err(AlgoError::BadParameter {
            name: "local length",
            reason: format!("{} values on rank {}, {m} expected", local.len(), bsp.pid()),
        });
    }
    let storage = matches!(local, Memory::Storage(_));
    let local_fft = plan(m);
    if p == 1 {
        let mut local = local;
        run(&local_fft, &mut local);
        return Ok(local);
    }
    let mut local = local;
    let mut out: Memory<Complex64> = if storage {
        Memory::Storage(spillway_runtime::SbVec::zeroed(bsp.comm().runtime(), m)?)
    } else {
        Memory::Heap(fresh(m))
    };
    // Local FFT out of place (rustfft needs little or no scratch then). The twiddles are
    // applied by the receivers, fused with the length-p DFTs (every rank then multiplies
    // (p-1)/p of its values, instead of rank s>0 all of its values and rank 0 none).
    {
        let mut buf = fresh(local_fft.get_outofplace_scratch_len());
        local_fft.process_outofplace_with_scratch(
            local.as_mut_slice(),
            out.as_mut_slice(),
            &mut buf,
        );
    }
    let result = bsp.rehook(Options::default(), |lib| {
        let s = lib.pid();
        lib.resize_memory_register(2)?;
        lib.resize_message_queue(p)?;
        lib.sync()?;
        // `y` (the local FFT) is sent, `x` (the input's memory, now free) receives.
        let y = lib.register_local(out)?;
        let x = lib.register_global(local)?;
        lib.sync()?;
        let b = n / (p * p);
        for t in 0..p {
            lib.put(y, t * b, t, x, s * b, b)?;
        }
        lib.sync()?;
        // Rows R[s'][k1l] = y_s'[s*b + k1l] (from rank s'): twiddles W_n^(s'*(s*b + k1l)),
        // then length-p DFTs over s' for every k1l, into `y`.
        let mut rows = lib.deregister(x)?;
        combine(rows.as_mut_slice(), lib.slice_mut(y), n, p, s * b);
        lib.deregister(y)
    })?;
    Ok(result)
}

/// Calls `f(i, w)` with `w = W_n^(s*(offset + i))` for `i < len`, computed in blocks that share
/// the high part of the exponent (one complex product per value, contiguous tables).
fn for_twiddles(
    n: usize,
    s: usize,
    offset: usize,
    len: usize,
    mut f: impl FnMut(usize, Complex64),
) {
    let tw = Twiddles::new(n);
    let block = tw.lo.len();
    // W^(s*(k0 + l)) = W^(s*k0) * W^(s*l).
    let steps: Vec<Complex64> = (0..block).map(|l| tw.get((s * l) % n)).collect();
    let mut i = 0;
    while i < len {
        let base = tw.get((s * (offset + i)) % n);
        let end = (i + block).min(len);
        for (l, w) in steps[..end - i].iter().enumerate() {
            f(i + l, base * w);
        }
        i = end;
    }
}

/// `len` zeroed values, backed by huge pages where the kernel can: the buffers of a large
/// transform are fresh memory, which 4 KiB pages would fault in one by one while the
/// transform writes them (a third of its time at 2^23 points).
fn fresh(len: usize) -> Vec<Complex64> {
    let v: Vec<Complex64> = bytemuck::allocation::zeroed_vec(len);
    spillway_runtime::advise_huge(v.as_ptr().cast(), len * std::mem::size_of::<Complex64>());
    v
}

/// The plan of a forward FFT of length `len`, from a process-wide planner: plans are made
/// once per length (as FFTW's wisdom), and ranks that are threads of one process share them.
fn plan(len: usize) -> Arc<dyn Fft<f64>> {
    static PLANNER: OnceLock<Mutex<FftPlanner<f64>>> = OnceLock::new();
    let planner = PLANNER.get_or_init(|| Mutex::new(FftPlanner::new()));
    planner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .plan_fft_forward(len)
}

/// `out[k2*b + i] = sum_s W_p^(s*k2) W_n^(s*(offset+i)) rows[s*b + i]`: the twiddles and the
/// length-`p` DFTs across the rows (`rows` is scratch).
fn combine(rows: &mut [Complex64], out: &mut [Complex64], n: usize, p: usize, offset: usize) {
    let b = rows.len() / p;
    if p == 2 {
        let (r0, r1) = rows.split_at(b);
        let (o0, o1) = out.split_at_mut(b);
        for_twiddles(n, 1, offset, b, |i, w| {
            let t = w * r1[i];
            o0[i] = r0[i] + t;
            o1[i] = r0[i] - t;
        });
        return;
    }
    for (sp, row) in rows.chunks_exact_mut(b).enumerate().skip(1) {
        for_twiddles(n, sp, offset, b, |i, w| row[i] *= w);
    }
    let rows: &[Complex64] = rows;
    if p <= 16 {
        // Row by row: p*p streaming passes of b elements, vectorisable.
        let w: Vec<Complex64> = (0..p)
            .map(|a| {
                let angle = -2.0 * std::f64::consts::PI * a as f64 / p as f64;
                Complex64::new(angle.cos(), angle.sin())
            })
            .collect();
        for (k2, o) in out.chunks_exact_mut(b).enumerate() {
            o.copy_from_slice(&rows[..b]);
            for (sp, row) in rows.chunks_exact(b).enumerate().skip(1) {
                let f = w[(sp * k2) % p];
                for (x, y) in o.iter_mut().zip(row) {
                    *x += f * y;
                }
            }
        }
        return;
    }
    let mut cols: Vec<Complex64> = fresh(p * b);
    for (sp, row) in rows.chunks_exact(b).enumerate() {
        for (i, v) in row.iter().enumerate() {
            cols[i * p + sp] = *v;
        }
    }
    let rank_fft = plan(p);
    let mut buf = fresh(rank_fft.get_inplace_scratch_len());
    rank_fft.process_with_scratch(&mut cols, &mut buf);
    for (i, col) in cols.chunks_exact(p).enumerate() {
        for (k2, v) in col.iter().enumerate() {
            out[k2 * b + i] = *v;
        }
    }
}

fn run(plan: &Arc<dyn Fft<f64>>, data: &mut Memory<Complex64>) {
    let mut buf = fresh(plan.get_inplace_scratch_len());
    match data {
        Memory::Heap(v) => plan.process_with_scratch(v, &mut buf),
        Memory::Storage(v) => plan.process_with_scratch(v.as_mut_slice(), &mut buf),
    }
}

/// Reads a text vector of complex values, one `"re im"` per line.
///
/// # Errors
/// [`InputError`](crate::io::InputError) with the file, the 1-based line and the reason:
/// a line without exactly two numbers, a number that does not parse or is not finite, an
/// empty file.
pub fn parse_complex(
    path: &std::path::Path,
    bytes: &[u8],
) -> Result<Vec<Complex64>, crate::io::InputError> {
    use crate::io::InputError;
    let mut out = Vec::new();
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        if body.is_empty() {
            break;
        }
        let line_no = i as u64 + 1;
        let text = std::str::from_utf8(line)
            .map_err(|_| InputError::new(path, Some(line_no), "not UTF-8 text"))?
            .trim();
        if text.is_empty() {
            return Err(InputError::new(path, Some(line_no), "empty line"));
        }
        let mut parts = text.split_ascii_whitespace();
        let mut number = |what: &str| -> Result<f64, InputError> {
            let tok = parts.next().ok_or_else(|| {
                InputError::new(
                    path,
                    Some(line_no),
                    format!("missing {what} part (expected \"re im\")"),
                )
            })?;
            match tok.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(v),
                Ok(_) => Err(InputError::new(
                    path,
                    Some(line_no),
                    format!("{what} part '{tok}' is not finite"),
                )),
                Err(_) => Err(InputError::new(
                    path,
                    Some(line_no),
                    format!("{what} part '{tok}' is not a number"),
                )),
            }
        };
        let re = number("real")?;
        let im = number("imaginary")?;
        if parts.next().is_some() {
            return Err(InputError::new(
                path,
                Some(line_no),
                "more than two numbers (expected \"re im\")",
            ));
        }
        out.push(Complex64::new(re, im));
    }
    if out.is_empty() {
        return Err(InputError::new(path, None, "no values"));
    }
    if !out.len().is_power_of_two() {
        return Err(InputError::new(
            path,
            Some(out.len() as u64),
            format!("{} values: the length must be a power of two", out.len()),
        ));
    }
    Ok(out)
}

/// The value at global index `i` of the generated input `random:LOG2N[:SEED]`: real and
/// imaginary parts uniform in [-1, 1), a pure function of the seed and the index so any
/// distribution generates the same vector.
pub fn random_value(seed: u64, i: usize) -> Complex64 {
    let mix = splitmix64;
    let a = mix(seed ^ mix(2 * i as u64));
    let b = mix(seed ^ mix(2 * i as u64 + 1));
    let unit = |x: u64| (x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
    Complex64::new(unit(a), unit(b))
}

/// Parses `random:LOG2N[:SEED]` into `(log2 n, seed)`.
///
/// # Errors
/// A message saying what is wrong.
pub fn parse_generate(spec: &str) -> Result<(u32, u64), String> {
    let parts: Vec<&str> = spec.split(':').collect();
    let bad = || format!("invalid --generate '{spec}' (expected random:LOG2N[:SEED])");
    if parts.len() < 2 || parts.len() > 3 || parts[0] != "random" {
        return Err(bad());
    }
    let log: u32 = parts[1].parse().map_err(|_| bad())?;
    if log > 40 {
        return Err(format!("invalid --generate '{spec}': LOG2N at most 40"));
    }
    let seed = match parts.get(2) {
        Some(s) => s.parse().map_err(|_| bad())?,
        None => 1,
    };
    Ok((log, seed))
}
