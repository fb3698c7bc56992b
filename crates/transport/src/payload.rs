//! Message payloads and envelopes.

use std::sync::Arc;

use crate::pool;

/// A byte buffer whose start is aligned to 16 bytes, so it can be viewed as a slice of any
/// primitive element type (the largest primitive alignment is 16).
///
/// Buffers of [`pool::POOLED_MIN`](crate::pool) bytes and more come from a process-wide pool
/// and go back to it when dropped, so large messages do not pay for fresh pages (and their
/// faults) every time; see [`set_pool_limit`](crate::set_pool_limit).
#[derive(Default)]
pub struct AlignedBuf {
    words: Vec<u128>,
    len: usize,
}

impl AlignedBuf {
    /// A zero-filled buffer of `len` bytes.
    pub fn zeroed(len: usize) -> AlignedBuf {
        let mut buf = AlignedBuf::for_overwrite(len);
        buf.as_bytes_mut().fill(0);
        buf
    }

    /// A buffer of `len` bytes with unspecified (but initialised) contents, for a caller that
    /// overwrites every byte: a recycled buffer from the pool when one is free, else fresh
    /// zeroed memory (whose pages the kernel provides already zeroed, without a pass over them).
    ///
    /// Fresh buffers of 4 MiB and more are marked for transparent huge pages before their
    /// first use, so filling them costs one page fault per 2 MiB instead of one per 4 KiB.
    pub fn for_overwrite(len: usize) -> AlignedBuf {
        let words = pool::take(len.div_ceil(16));
        AlignedBuf { words, len }
    }

    /// A copy of `bytes`, written once (no zero-fill first).
    pub fn from_bytes(bytes: &[u8]) -> AlignedBuf {
        let mut buf = AlignedBuf::for_overwrite(bytes.len());
        buf.as_bytes_mut().copy_from_slice(bytes);
        buf
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        let all: &[u8] = words_as_bytes(&self.words);
        &all[..self.len]
    }

    /// The bytes, mutable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        let all: &mut [u8] = words_as_bytes_mut(&mut self.words);
        &mut all[..len]
    }

    /// Shortens the buffer to `len` bytes (no effect if it is not longer).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> AlignedBuf {
        AlignedBuf::from_bytes(self.as_bytes())
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        pool::give(std::mem::take(&mut self.words));
    }
}

fn words_as_bytes(words: &[u128]) -> &[u8] {
    // SAFETY: u128 has no padding and every byte of it is initialised; u8 has alignment 1, and
    // the length in bytes is exactly 16 times the number of words, so the view covers the same
    // allocation with the same lifetime.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 16) }
}

fn words_as_bytes_mut(words: &mut [u128]) -> &mut [u8] {
    // SAFETY: as in `words_as_bytes`; any byte pattern is a valid u128, so writes through the
    // byte view cannot create an invalid value, and the exclusive borrow is carried over.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 16) }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

/// The bytes of one message.
///
/// `Owned` buffers move from sender to receiver; `Shared` buffers are reference counted so one
/// copy can be handed to several ranks (the second phase of a two-phase collective).
#[derive(Debug)]
pub enum Payload {
    /// A buffer owned by this message.
    Owned(AlignedBuf),
    /// A buffer shared with other messages.
    Shared(Arc<AlignedBuf>),
    /// Part of a shared buffer, starting at a multiple of 16 bytes (see [`Payload::slice`]):
    /// how pipelined collectives send chunks of one buffer without copying.
    Slice {
        /// The whole buffer.
        buf: Arc<AlignedBuf>,
        /// First byte of the part (a multiple of 16).
        start: usize,
        /// Length of the part in bytes.
        len: usize,
    },
    /// Bytes the sender keeps in its own memory while the transport reads them (see
    /// [`Payload::borrowed`]): how a blocking send of a large buffer to another process
    /// avoids copying it.
    Borrowed(Borrowed),
}

/// Memory lent to the transport by a blocked sender; dropping the last holder of the guard
/// tells the sender it may use the memory again.
#[derive(Debug)]
pub struct Borrowed {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    _guard: Arc<SendGuard>,
}

// SAFETY: a read-only view of memory that the sender keeps valid and unchanged until the guard
// is dropped (the contract of `Payload::borrowed`); reading it from any thread is sound.
unsafe impl Send for Borrowed {}
// SAFETY: as above; the view is never written through.
unsafe impl Sync for Borrowed {}

/// Runs its callback when dropped: the end of a [`Payload::Borrowed`] loan.
pub struct SendGuard(Option<Box<dyn FnOnce() + Send + Sync>>);

impl SendGuard {
    /// A guard that calls `done` when the last payload holding it is dropped.
    pub fn new(done: impl FnOnce() + Send + Sync + 'static) -> Arc<SendGuard> {
        Arc::new(SendGuard(Some(Box::new(done))))
    }
}

impl Drop for SendGuard {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            done();
        }
    }
}

impl std::fmt::Debug for SendGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SendGuard")
    }
}

impl Clone for Payload {
    /// Owned and shared payloads clone as before; a borrowed payload clones into an owned
    /// copy (the loan itself stays with the original).
    fn clone(&self) -> Payload {
        match self {
            Payload::Owned(b) => Payload::Owned(b.clone()),
            Payload::Shared(b) => Payload::Shared(Arc::clone(b)),
            Payload::Slice { buf, start, len } => Payload::Slice {
                buf: Arc::clone(buf),
                start: *start,
                len: *len,
            },
            Payload::Borrowed(b) => Payload::copy_of(borrowed_bytes(b)),
        }
    }
}

fn borrowed_bytes(b: &Borrowed) -> &[u8] {
    // SAFETY: the contract of `Payload::borrowed`: `len` readable bytes at `ptr`, unchanged,
    // until the guard (held by `b`) is dropped.
    unsafe { std::slice::from_raw_parts(b.ptr.as_ptr(), b.len) }
}

impl Payload {
    /// An empty payload.
    pub fn empty() -> Payload {
        Payload::Owned(AlignedBuf::default())
    }

    /// A payload holding a copy of `bytes` (one pass, no zero-fill).
    pub fn copy_of(bytes: &[u8]) -> Payload {
        Payload::Owned(AlignedBuf::from_bytes(bytes))
    }

    /// A payload that reads `bytes` where they are; `guard` is dropped (and its callback
    /// runs) once nothing reads them any more.
    ///
    /// # Safety
    /// The bytes must stay valid and unchanged until `guard`'s callback has run: the sender
    /// must not touch, move or free them before then, even if the job fails meanwhile.
    pub unsafe fn borrowed(bytes: &[u8], guard: Arc<SendGuard>) -> Payload {
        Payload::Borrowed(Borrowed {
            ptr: std::ptr::NonNull::from(bytes).cast(),
            len: bytes.len(),
            _guard: guard,
        })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Whether the payload has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes (16-byte aligned).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Payload::Owned(b) => b.as_bytes(),
            Payload::Shared(b) => b.as_bytes(),
            Payload::Slice { buf, start, len } => &buf.as_bytes()[*start..*start + *len],
            Payload::Borrowed(b) => borrowed_bytes(b),
        }
    }

    /// Bytes `start..start + len` of `buf`, without copying.
    ///
    /// # Panics
    /// If `start` is not a multiple of 16 (the payload would lose its alignment) or the range
    /// is outside the buffer.
    pub fn slice(buf: &Arc<AlignedBuf>, start: usize, len: usize) -> Payload {
        assert!(
            start.is_multiple_of(16),
            "payload slices start at multiples of 16 bytes"
        );
        assert!(start + len <= buf.len(), "payload slice outside its buffer");
        Payload::Slice {
            buf: Arc::clone(buf),
            start,
            len,
        }
    }

    /// Turns this payload into one that can be cloned without copying the bytes.
    pub fn into_shared(self) -> Arc<AlignedBuf> {
        match self {
            Payload::Owned(b) => Arc::new(b),
            Payload::Shared(b) => b,
            other @ (Payload::Slice { .. } | Payload::Borrowed(_)) => {
                Arc::new(AlignedBuf::from_bytes(other.as_bytes()))
            }
        }
    }

    /// Takes the buffer, copying only if it is shared with other messages.
    pub fn into_owned(self) -> AlignedBuf {
        match self {
            Payload::Owned(b) => b,
            Payload::Shared(b) => Arc::try_unwrap(b).unwrap_or_else(|b| (*b).clone()),
            other @ (Payload::Slice { .. } | Payload::Borrowed(_)) => {
                AlignedBuf::from_bytes(other.as_bytes())
            }
        }
    }
}

/// A message in flight: the payload and what a receive matches on.
#[derive(Debug)]
pub struct Envelope {
    /// Communication context (one per communicator and purpose); receives match it exactly.
    pub context: u64,
    /// Global rank of the sender.
    pub source: u32,
    /// Message tag.
    pub tag: i32,
    /// The bytes.
    pub payload: Payload,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buf_round_trips_and_is_aligned() {
        let data: Vec<u8> = (0..37u8).collect();
        let b = AlignedBuf::from_bytes(&data);
        assert_eq!(b.as_bytes(), &data[..]);
        assert_eq!(b.as_bytes().as_ptr() as usize % 16, 0);
        assert_eq!(b.len(), 37);
        assert!(AlignedBuf::zeroed(0).is_empty());
    }

    #[test]
    fn large_buffers_are_recycled_and_zeroed_on_request() {
        let n = 3 << 20;
        let first = AlignedBuf::from_bytes(&vec![7u8; n]);
        let ptr = first.as_bytes().as_ptr();
        drop(first);
        // The pool hands the same allocation back; `zeroed` must still clear it.
        let again = AlignedBuf::zeroed(n - 5);
        assert_eq!(again.len(), n - 5);
        assert!(again.as_bytes().iter().all(|&b| b == 0));
        let _ = ptr;
    }

    #[test]
    fn slices_view_part_of_a_buffer_and_stay_aligned() {
        let data: Vec<u8> = (0..100u8).collect();
        let buf = Arc::new(AlignedBuf::from_bytes(&data));
        let p = Payload::slice(&buf, 32, 50);
        assert_eq!(p.as_bytes(), &data[32..82]);
        assert_eq!(p.as_bytes().as_ptr() as usize % 16, 0);
        assert_eq!(p.clone().into_owned().as_bytes(), &data[32..82]);
        assert_eq!(p.into_shared().as_bytes(), &data[32..82]);
    }

    #[test]
    #[should_panic(expected = "multiples of 16")]
    fn unaligned_slices_are_refused() {
        let buf = Arc::new(AlignedBuf::zeroed(64));
        let _ = Payload::slice(&buf, 8, 8);
    }

    #[test]
    fn shared_payload_unwraps_without_copy_when_unique() {
        let p = Payload::Owned(AlignedBuf::from_bytes(b"abc"));
        let shared = p.into_shared();
        let ptr = shared.as_bytes().as_ptr();
        let owned = Payload::Shared(shared).into_owned();
        assert_eq!(owned.as_bytes().as_ptr(), ptr);
        assert_eq!(owned.as_bytes(), b"abc");
    }
}
