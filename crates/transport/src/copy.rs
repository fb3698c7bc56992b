//! Large copies that bypass the caches.
//!
//! A copy of many megabytes between ranks (a BSP sync's puts and gets, a collective's blocks)
//! is read once by its destination much later, if at all before it leaves the caches: writing it
//! through the caches first reads every destination line (read-for-ownership) and evicts what
//! the other ranks of the node are using. From [`STREAM_MIN`] to [`STREAM_MAX`] bytes, and where
//! the CPU has AVX-512 or AVX2, [`copy`] writes with streaming (non-temporal) stores instead;
//! otherwise it is `memcpy`. Beyond `STREAM_MAX` the C library streams by itself (glibc from
//! about three quarters of the last-level cache) with a loop tuned for it, faster there than
//! this one on the machines measured; below that size it writes through the caches, which on a
//! machine with a large last-level cache made a BSP total exchange of 8-64 MiB per rank
//! 1.3-2.4x slower per byte than one of 128-256 MiB.

/// Copies of at least this many bytes use streaming stores (where available).
pub const STREAM_MIN: usize = 4 << 20;

/// Copies of more than this many bytes are left to `memcpy`.
pub const STREAM_MAX: usize = 32 << 20;

/// Copies `src` into `dst` (of the same length), with streaming stores when large.
///
/// # Panics
/// If the lengths differ.
pub fn copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(
        dst.len(),
        src.len(),
        "copy between slices of different lengths"
    );
    // SAFETY: two slices, one of them mutable, cannot overlap; both hold `len` bytes.
    unsafe { copy_raw(dst.as_mut_ptr(), src.as_ptr(), src.len()) }
}

/// [`copy`] on raw pointers.
///
/// # Safety
/// `src` must be valid for reading and `dst` for writing `len` bytes, and the two ranges must
/// not overlap (as for [`std::ptr::copy_nonoverlapping`]).
pub unsafe fn copy_raw(dst: *mut u8, src: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    if (STREAM_MIN..=STREAM_MAX).contains(&len) {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked); the caller guarantees the ranges.
            unsafe { stream_avx512(dst, src, len) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked); the caller guarantees the ranges.
            unsafe { stream_avx2(dst, src, len) };
            return;
        }
    }
    // SAFETY: as the caller guarantees.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
}

/// The frame of a streaming copy: an ordinary copy up to the first `align`-byte boundary of
/// `dst`, then `block` bytes at a time with `copy_block` (streaming stores to aligned
/// addresses), the tail ordinarily, and a fence, so that the bytes are visible to other
/// threads in the usual order once this returns (streaming stores are weakly ordered).
///
/// # Safety
/// The ranges must be as for [`copy_raw`], and `copy_block(d, s)` must be sound for every
/// `align`-aligned `d` with `block` bytes to write at `d` and to read at `s` inside them.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn stream_frame(
    dst: *mut u8,
    src: *const u8,
    len: usize,
    align: usize,
    block: usize,
    copy_block: impl Fn(*mut u8, *const u8),
) {
    let head = dst.align_offset(align).min(len);
    // SAFETY: every access lies inside `dst..dst+len` / `src..src+len`, valid and disjoint
    // by the caller's guarantee; blocks start at aligned addresses of `dst` after the head.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, head);
        let mut i = head;
        while i + block <= len {
            copy_block(dst.add(i), src.add(i));
            i += block;
        }
        std::arch::x86_64::_mm_sfence();
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
    }
}

/// Streaming copy with 32-byte stores, 128 bytes per block.
///
/// # Safety
/// The CPU must have AVX2, and the ranges must be as for [`copy_raw`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn stream_avx2(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_stream_si256};
    // SAFETY: the frame hands over 32-byte aligned blocks of 128 bytes inside the ranges;
    // loads are unaligned.
    unsafe {
        stream_frame(dst, src, len, 32, 128, |d, s| {
            let (d, s) = (d.cast::<__m256i>(), s.cast::<__m256i>());
            for k in 0..4 {
                _mm256_stream_si256(d.add(k), _mm256_loadu_si256(s.add(k)));
            }
        })
    }
}

/// Streaming copy with 64-byte stores (one whole cache line each, which the CPU's
/// write-combining buffers pass on at once), 256 bytes per block, the source prefetched 1 KiB
/// ahead.
///
/// # Safety
/// The CPU must have AVX-512F, and the ranges must be as for [`copy_raw`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn stream_avx512(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{
        __m512i, _mm512_loadu_si512, _mm512_stream_si512, _mm_prefetch, _MM_HINT_T0,
    };
    const AHEAD: usize = 1024;
    // SAFETY: the frame hands over 64-byte aligned blocks of 256 bytes inside the ranges;
    // loads are unaligned; prefetches may point past the source, which is allowed (they
    // never fault).
    unsafe {
        stream_frame(dst, src, len, 64, 256, |d, s| {
            for k in 0..4 {
                _mm_prefetch::<_MM_HINT_T0>(s.wrapping_add(AHEAD + 64 * k).cast());
            }
            let (d, s) = (d.cast::<__m512i>(), s.cast::<__m512i>());
            for k in 0..4 {
                _mm512_stream_si512(d.add(k), _mm512_loadu_si512(s.add(k)));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy routine: destination, source, length.
    type Kernel = unsafe fn(*mut u8, *const u8, usize);

    /// Every copy routine this CPU can run, by name.
    fn kernels() -> Vec<(&'static str, Kernel)> {
        let mut k: Vec<(&'static str, Kernel)> = vec![("copy_raw", copy_raw)];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                k.push(("avx2", stream_avx2));
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                k.push(("avx512", stream_avx512));
            }
        }
        k
    }

    #[test]
    fn copies_every_length_and_offset_exactly() {
        let src: Vec<u8> = (0..STREAM_MIN + 1000)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        for (name, kernel) in kernels() {
            for &(off_s, off_d, len) in &[
                (0, 0, 0),
                (3, 5, 100),
                (0, 0, 255),
                (7, 1, 4096 + 77),
                (0, 0, STREAM_MIN),
                (1, 0, STREAM_MIN + 1),
                (0, 17, STREAM_MIN + 127),
                (31, 9, STREAM_MIN + 500),
            ] {
                let mut dst = vec![0xAAu8; len + off_d + 40];
                // SAFETY: both ranges lie inside their vectors, which are distinct; the
                // kernels other than `copy_raw` run only where the CPU has their features.
                unsafe { kernel(dst.as_mut_ptr().add(off_d), src.as_ptr().add(off_s), len) };
                assert_eq!(
                    &dst[off_d..off_d + len],
                    &src[off_s..off_s + len],
                    "{name} {len}"
                );
                assert!(
                    dst[..off_d].iter().all(|&b| b == 0xAA),
                    "{name}: before the range"
                );
                assert!(
                    dst[off_d + len..].iter().all(|&b| b == 0xAA),
                    "{name}: after the range"
                );
            }
        }
        let mut dst = vec![0u8; 1000];
        copy(&mut dst, &src[..1000]);
        assert_eq!(dst, src[..1000]);
    }

    #[test]
    #[should_panic(expected = "different lengths")]
    fn lengths_must_match() {
        copy(&mut [0u8; 3], &[1u8; 4]);
    }
}
