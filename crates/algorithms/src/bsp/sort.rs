//! BSP sample sort by regular sampling (PSRS: Shi and Schaeffer; Bisseling's BSP analysis).
//!
//! # Algorithm
//! Every rank sorts its part and sends `p` regularly spaced samples to rank 0, which picks
//! `p-1` splitters from the `p²` samples (regularly again) and sends them to every rank;
//! every rank cuts its sorted part at the splitters and tells rank `t` where its piece for
//! `t` is; every rank then gets its pieces (one get per rank) and merges the `p` sorted runs.
//! With distinct keys no rank receives more than `2n/p` elements. Only rank 0 holds the
//! `p²` samples: with every rank holding them (the textbook total exchange) a job of many
//! ranks on one node held `p³` (16 GB at 1,000 ranks).
//!
//! # Cost
//! Computation `O((n/p) log(n/p))` for the local sort, `O(p² log p)` at rank 0 for the
//! splitters and `O((n/p) log p)` for the merge; communication `p² b g + l` for the samples
//! (`b` bytes per element) and as much for the splitters, `2p · 8 g + l` for the piece
//! descriptors, and at most `2 (n/p) b g + l` for the data; plus two syncs of setup.

use bytemuck::Pod;
use spillway_bsp::{Bsp, Options};
use spillway_comm::splitmix::{splitmix64, GOLDEN_GAMMA};

use crate::error::AlgoError;

/// Sorts a vector distributed over the ranks of `bsp`: every rank passes its part (of any
/// length) and gets back a sorted part such that every element on rank `s` is `<=` every
/// element on rank `s+1`. Collective; runs in a pristine context ([`Bsp::rehook`]).
///
/// # Cost
/// See the module documentation.
///
/// # Errors
/// Failures of the primitives (the job is ending).
pub fn sample_sort<T: Ord + Pod>(bsp: &Bsp<'_>, mut local: Vec<T>) -> Result<Vec<T>, AlgoError> {
    let p = bsp.nprocs();
    local.sort_unstable();
    if p == 1 {
        return Ok(local);
    }
    let out = bsp.rehook(Options::default(), |lib| {
        let me = lib.pid();
        lib.resize_memory_register(7)?;
        lib.resize_message_queue(2 * p)?;
        lib.sync()?;
        let n = local.len();
        // Rank 0 gathers p samples of every rank that has elements, chooses the splitters and
        // sends them to every rank: p^2 samples at rank 0 and p at the others (every rank
        // gathering every sample held p^2 at each, p^3 in all: 16 GB at 1,000 ranks).
        let gather = if me == 0 { p } else { 0 };
        let data = lib.register_global(local)?;
        let samples = lib.register_global(vec![T::zeroed(); gather * p])?;
        let have = lib.register_global(vec![0u64; gather])?;
        // (offset, count) of every rank's piece for this rank, by source rank.
        let pieces = lib.register_global(vec![0u64; 2 * p])?;
        // The p - 1 splitters, then whether any rank has an element.
        let split = lib.register_global(vec![T::zeroed(); p - 1])?;
        let any = lib.register_global(vec![0u64; 1])?;
        lib.sync()?;
        if n > 0 {
            let mine: Vec<T> = {
                let sorted = lib.slice(data);
                (0..p).map(|i| sorted[i * n / p]).collect()
            };
            lib.put_from(&mine, 0, samples, me * p)?;
            lib.put_from(&[1u64], 0, have, me)?;
        }
        lib.sync()?;
        if me == 0 {
            let mut all: Vec<T> = lib
                .slice(samples)
                .chunks_exact(p)
                .zip(lib.slice(have))
                .filter(|(_, &h)| h == 1)
                .flat_map(|(s, _)| s.iter().copied())
                .collect();
            all.sort_unstable();
            // Splitter i (1..p) is the sample at i*len/p.
            let splitters: Vec<T> = match all.is_empty() {
                true => vec![T::zeroed(); p - 1],
                false => (1..p).map(|i| all[i * all.len() / p]).collect(),
            };
            for t in 0..p {
                lib.put_from(&splitters, t, split, 0)?;
                lib.put_from(&[u64::from(!all.is_empty())], t, any, 0)?;
            }
        }
        lib.sync()?;
        if lib.slice(any)[0] == 0 {
            // No rank has an element (every rank learns it from rank 0, so all return here).
            return Ok(Vec::new());
        }
        let splitters: Vec<T> = lib.slice(split).to_vec();
        let sorted = lib.slice(data);
        let mut cuts = Vec::with_capacity(p + 1);
        cuts.push(0);
        for s in &splitters {
            // Elements < splitter go left; equal keys go right of the cut.
            let last = *cuts.last().expect("non-empty");
            cuts.push(last + sorted[last..].partition_point(|x| x < s));
        }
        cuts.push(sorted.len());
        for t in 0..p {
            let piece = [cuts[t] as u64, (cuts[t + 1] - cuts[t]) as u64];
            lib.put_from(&piece, t, pieces, 2 * me)?;
        }
        lib.sync()?;
        let desc: Vec<u64> = lib.slice(pieces).to_vec();
        let total: usize = desc.chunks_exact(2).map(|d| d[1] as usize).sum();
        // Fresh memory, written once by the gets: huge pages where the kernel can, rather
        // than a fault per 4 KiB page (a fifth of the sort's time at 2^26 elements a rank).
        let fresh = bytemuck::allocation::zeroed_vec::<T>(total);
        spillway_runtime::advise_huge(fresh.as_ptr().cast(), std::mem::size_of_val(&fresh[..]));
        let recv = lib.register_local(fresh)?;
        let mut runs = Vec::with_capacity(p + 1);
        let mut at = 0;
        runs.push(0);
        for (s, d) in desc.chunks_exact(2).enumerate() {
            let (off, len) = (d[0] as usize, d[1] as usize);
            if len > 0 {
                lib.get(s, data, off, recv, at, len)?;
            }
            at += len;
            runs.push(at);
        }
        lib.sync()?;
        lib.deregister(any)?;
        lib.deregister(split)?;
        lib.deregister(pieces)?;
        lib.deregister(have)?;
        lib.deregister(samples)?;
        // The local part's memory (resident already) receives the merged runs.
        let out = lib.deregister(data)?.into_vec();
        let merged = merge_runs(lib.slice(recv), &runs, out);
        lib.deregister(recv)?;
        Ok(merged)
    })?;
    Ok(out)
}

/// Merges the sorted runs `data[runs[i]..runs[i+1]]` pairwise (`log2(runs)` passes) into
/// `out`, whose memory is reused (grown to exactly the length needed, not doubled).
fn merge_runs<T: Ord + Copy>(data: &[T], runs: &[usize], mut out: Vec<T>) -> Vec<T> {
    out.clear();
    out.reserve_exact(data.len());
    out.extend_from_slice(data);
    let mut bounds: Vec<usize> = runs.to_vec();
    if bounds.len() <= 2 {
        return out;
    }
    // Later passes read the previous pass's output from a copy.
    let mut from: Vec<T> = Vec::new();
    let mut first = true;
    while bounds.len() > 2 {
        if !first {
            from.clear();
            from.extend_from_slice(&out);
        }
        let src: &[T] = if first { data } else { &from };
        let mut nb = vec![0];
        let mut i = 0;
        while i + 1 < bounds.len() {
            let end = if i + 2 < bounds.len() {
                bounds[i + 2]
            } else {
                bounds[i + 1]
            };
            merge_into(
                &src[bounds[i]..bounds[i + 1]],
                &src[bounds[i + 1]..end],
                &mut out[bounds[i]..end],
            );
            nb.push(end);
            i += 2;
        }
        bounds = nb;
        first = false;
    }
    out
}

/// Merges `a` and `b` into `out` (`a.len() + b.len()` long), taking from `a` on ties; the
/// choice is a conditional move, not a branch.
fn merge_into<T: Ord + Copy>(a: &[T], b: &[T], out: &mut [T]) {
    let (mut i, mut j, mut k) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let take_b = b[j] < a[i];
        out[k] = if take_b { b[j] } else { a[i] };
        j += usize::from(take_b);
        i += usize::from(!take_b);
        k += 1;
    }
    out[k..k + a.len() - i].copy_from_slice(&a[i..]);
    k += a.len() - i;
    out[k..].copy_from_slice(&b[j..]);
}

/// The `i`-th value of the generated input `random:LOG2N[:SEED]` for sorting: a pure function
/// of the seed and the index.
pub fn random_u64(seed: u64, i: u64) -> u64 {
    splitmix64(seed ^ i.wrapping_mul(GOLDEN_GAMMA))
}

#[cfg(test)]
mod tests {
    use super::merge_runs;

    #[test]
    fn merging_runs_gives_the_sorted_sequence() {
        for k in 1..9usize {
            let mut data = Vec::new();
            let mut runs = vec![0];
            for r in 0..k {
                let mut run: Vec<u32> = (0..(r * 7 % 5 + r))
                    .map(|i| (i * 31 + r * 17) as u32 % 23)
                    .collect();
                run.sort_unstable();
                data.extend(run);
                runs.push(data.len());
            }
            let mut want = data.clone();
            want.sort_unstable();
            assert_eq!(merge_runs(&data, &runs, Vec::new()), want, "{k} runs");
        }
    }
}
