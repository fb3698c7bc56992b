//! A small measurement harness: repeated timings summarised by median and minimum, the
//! single-threaded `memcpy` baseline and formatting helpers.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Errors of the benchmark binary (also what SPMD functions return).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Median and minimum of a set of repeated timings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// Median (the mean of the two middle values for an even count).
    pub median: Duration,
    /// Fastest repetition.
    pub min: Duration,
    /// Number of repetitions summarised.
    pub reps: usize,
}

impl Stats {
    /// Summarises `times`.
    ///
    /// # Panics
    /// If `times` is empty.
    pub fn of(times: &[Duration]) -> Stats {
        assert!(!times.is_empty(), "no timings to summarise");
        let mut sorted = times.to_vec();
        sorted.sort_unstable();
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2
        };
        Stats {
            median,
            min: sorted[0],
            reps: n,
        }
    }
}

/// Bytes per second of moving `bytes` in `time`, in GB/s (10^9 bytes per second).
pub fn gb_per_s(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64() / 1e9
}

/// Median and minimum time of one single-threaded `copy_from_slice` of `bytes` bytes.
///
/// Both buffers are allocated and written before timing, so no page faults are measured. Each
/// repetition times a batch of copies (enough to move about 64 MiB, at least one copy) and
/// divides by the batch length, so tiny copies are not lost in the timer's resolution. Small
/// sizes therefore run from cache, large ones (beyond the last-level cache) from memory.
pub fn memcpy_stats(bytes: usize, reps: usize) -> Stats {
    let src: Vec<u8> = (0..bytes).map(|i| i as u8).collect();
    let mut dst = vec![0u8; bytes];
    let batch = ((64usize << 20) / bytes.max(1)).max(1);
    // Warm-up: touches both buffers and the caches.
    dst.copy_from_slice(&src);
    let times: Vec<Duration> = (0..reps.max(1))
        .map(|_| {
            let start = Instant::now();
            for _ in 0..batch {
                black_box(&mut dst).copy_from_slice(black_box(&src));
            }
            start.elapsed() / batch as u32
        })
        .collect();
    assert_eq!(dst, src, "memcpy baseline copied wrong data");
    Stats::of(&times)
}

/// A vector of the `n` values `f(0)`, `f(1)`, ...; with `huge`, backed by transparent huge
/// pages from 4 MiB on, as numpy backs its arrays, so that spillway and a Python reference
/// measure the same kind of memory (huge pages make the TLB and the kernel's single-copy
/// transfers between processes cheaper: 10-30% for Open MPI's own 16-64 MiB transfers here).
pub fn filled<T: Copy>(n: usize, huge: bool, f: impl Fn(usize) -> T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    let bytes = n * std::mem::size_of::<T>();
    if huge && bytes >= 4 << 20 {
        // Before the first touch, so that the kernel can back the pages with huge ones.
        spillway_transport::advise_huge(v.as_ptr().cast(), bytes);
    }
    v.extend((0..n).map(f));
    v
}

/// A byte count with the largest binary suffix that divides it (`65536` -> `64K`).
pub fn format_size(bytes: usize) -> String {
    spillway::ByteSize(bytes as u64).to_string()
}

/// Formats a duration with a unit suited to its magnitude.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else if s >= 1e-6 {
        format!("{:.1} µs", s * 1e6)
    } else {
        format!("{:.1} ns", s * 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_median_and_min() {
        let ms = Duration::from_millis;
        let s = Stats::of(&[ms(5), ms(1), ms(3)]);
        assert_eq!((s.median, s.min, s.reps), (ms(3), ms(1), 3));
        let s = Stats::of(&[ms(4), ms(1), ms(2), ms(8)]);
        assert_eq!(s.median, ms(3));
    }
}
