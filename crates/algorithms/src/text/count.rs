//! The map side of word count at memory speed: a tokenizer that classifies 64 bytes at a
//! time and walks the word boundaries with bit scans, and a counting table for short words
//! (the local aggregation before the MapReduce combiner) that needs no allocation per word,
//! compares a word in two 64-bit loads and hashes it with one multiplication.
//!
//! Words are maximal runs of bytes that are not ASCII whitespace
//! ([`is_space`](spillway_mapreduce::is_space)); they need not be UTF-8 and may hold any other
//! byte, zero included.

use spillway_runtime::prefetch;

/// Bytes classified at a time.
const BLOCK: usize = 64;

/// Words of at most this many bytes are counted in the [`WordCounter`]'s table; longer ones
/// go to the caller.
pub const SHORT: usize = 16;

/// The whitespace bytes of a 64-byte block as bits (bit `i` set: byte `i` is whitespace).
#[inline]
fn space_mask(block: &[u8; BLOCK]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        sse2_space_mask(block)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = 0u64;
        for (i, &b) in block.iter().enumerate() {
            m |= u64::from(spillway_mapreduce::is_space(&b)) << i;
        }
        m
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn sse2_space_mask(block: &[u8; BLOCK]) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8, _mm_sub_epi8,
    };
    let mut m = 0u64;
    for q in 0..BLOCK / 16 {
        // SAFETY: SSE2 is part of x86_64; the load reads bytes 16q..16q+16 of the 64-byte
        // block (an unaligned load is allowed).
        let bits = unsafe {
            let v = _mm_loadu_si128(block.as_ptr().add(16 * q) as *const __m128i);
            let space = _mm_cmpeq_epi8(v, _mm_set1_epi8(b' ' as i8));
            // \t \n \v \f \r are 9..=13: b - 9 is at most 4 exactly for them (unsigned).
            let d = _mm_sub_epi8(v, _mm_set1_epi8(9));
            let ctl = _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(4)), d);
            _mm_movemask_epi8(_mm_or_si128(space, ctl)) as u32 as u64
        };
        m |= bits << (16 * q);
    }
    m
}

/// Calls `f` with the byte range of every word of `text`, in order. `f` is called from one
/// place only, so that the compiler puts its body into the block loop.
#[inline(always)]
pub fn for_each_word_range(text: &[u8], mut f: impl FnMut(usize, usize)) {
    let n = text.len();
    // The start of the word under way (one that began in an earlier block), if any.
    let mut open: Option<usize> = None;
    let mut base = 0;
    let mut pad: [u8; BLOCK];
    // A word still open at the end of the text is closed by a block of spaces past it.
    while base < n || open.is_some() {
        let block: &[u8; BLOCK] = match text.get(base..base + BLOCK) {
            Some(b) => b.try_into().expect("64 bytes"),
            None => {
                // The last, partial block (or none), padded with spaces.
                let rest = &text[base.min(n)..];
                pad = [b' '; BLOCK];
                pad[..rest.len()].copy_from_slice(rest);
                &pad
            }
        };
        let word = !space_mask(block);
        // Starts: a word byte after a space (or the first byte when no word is open); ends:
        // a space after a word byte (a word open from the last block counts as one before 0).
        let before = (word << 1) | u64::from(open.is_some());
        let mut starts = word & !before;
        let mut ends = !word & before;
        if open.is_some() && ends == 0 {
            // The whole block continues the open word.
            base += BLOCK;
            continue;
        }
        // Starts and ends alternate from here (the open word's start first): each start is
        // followed by its end, in this block or a later one.
        let mut first = open.take();
        loop {
            let s = match first.take() {
                Some(s) => s,
                None if starts == 0 => break,
                None => {
                    let s = base + starts.trailing_zeros() as usize;
                    starts &= starts - 1;
                    s
                }
            };
            if ends == 0 {
                open = Some(s);
                break;
            }
            let e = base + ends.trailing_zeros() as usize;
            ends &= ends - 1;
            f(s, e);
        }
        base += BLOCK;
    }
}

/// Calls `f` with every word of `text`, in order.
#[inline]
pub fn for_each_word(text: &[u8], mut f: impl FnMut(&[u8])) {
    for_each_word_range(text, |s, e| f(&text[s..e]));
}

/// A word of at most [`SHORT`] bytes as two little-endian words, zero-padded.
#[inline]
fn load_short(text: &[u8], s: usize, len: usize) -> (u64, u64) {
    let mask = |k: usize| -> u64 {
        match k {
            0 => 0,
            8.. => u64::MAX,
            k => (1u64 << (8 * k)) - 1,
        }
    };
    match text.get(s..s + SHORT) {
        Some(b) => {
            let lo = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
            let hi = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
            (lo & mask(len), hi & mask(len.saturating_sub(8)))
        }
        None => {
            let mut b = [0u8; SHORT];
            b[..len].copy_from_slice(&text[s..s + len]);
            (
                u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
                u64::from_le_bytes(b[8..].try_into().expect("8 bytes")),
            )
        }
    }
}

/// The hash of a short word: one 64x64->128 multiplication mixes both halves and the length.
#[inline]
fn hash_short(lo: u64, hi: u64, len: u64) -> u64 {
    let m = u128::from(lo ^ 0x9e37_79b9_7f4a_7c15)
        .wrapping_mul(u128::from(hi ^ (len << 56) ^ 0xc2b2_ae3d_27d4_eb4f));
    (m as u64) ^ ((m >> 64) as u64)
}

/// Words whose slot is being fetched (software prefetch) before they are counted: enough to
/// cover a memory latency with the tokenizing and hashing of the following words.
const IN_FLIGHT: usize = 16;

/// A slot for a word of at most 8 bytes: the word zero-padded, and its count shifted left by
/// 8 above its length (length 0: empty). 16 bytes: four slots per cache line.
#[derive(Clone, Copy, Default)]
#[repr(C, align(16))]
struct Narrow {
    lo: u64,
    meta: u64,
}

/// A slot for a word of 9 to 16 bytes: the word zero-padded, its length (0: empty), its
/// count. 32 bytes: two slots per cache line.
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct Wide {
    lo: u64,
    hi: u64,
    len: u64,
    count: u64,
}

/// A word waiting for its slot: its bytes, length and hash.
#[derive(Clone, Copy, Default)]
struct Pending {
    lo: u64,
    hi: u64,
    len: u64,
    hash: u64,
}

/// Counts the short words of texts in two tables (words of up to 8 bytes, the most common,
/// in slots half the size). A table starts small (it stays in cache for a small vocabulary)
/// and doubles when it fills up, up to a limit; the counts are handed on
/// ([`drain`](WordCounter::drain)) whenever a table at its limit is full and when the caller
/// is done.
pub struct WordCounter {
    /// Open addressing, linear probing, at most half full.
    narrow: Vec<Narrow>,
    wide: Vec<Wide>,
    /// The occupied slots of each table, in the order they were taken.
    used_narrow: Vec<u32>,
    used_wide: Vec<u32>,
    /// Distinct words each table holds before it grows or the tables are drained (half its
    /// slots).
    cap_narrow: usize,
    cap_wide: usize,
    /// The largest `cap` a table grows to.
    max: usize,
    /// A ring of words whose slots are being prefetched: `queued` from `head`, oldest first.
    pending: [Pending; IN_FLIGHT],
    head: usize,
    queued: usize,
}

impl Default for WordCounter {
    fn default() -> Self {
        WordCounter::new(1 << 16)
    }
}

impl std::fmt::Debug for WordCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WordCounter")
            .field("distinct", &self.len())
            .field("cap_narrow", &self.cap_narrow)
            .field("cap_wide", &self.cap_wide)
            .field("max", &self.max)
            .finish()
    }
}

/// A table of `n` empty slots, backed by huge pages where the kernel can (the slots are read
/// at random).
fn table<T: Default + Clone>(n: usize) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    spillway_runtime::advise_huge(v.as_ptr() as *const u8, n * std::mem::size_of::<T>());
    v.resize(n, T::default());
    v
}

/// A table of room for `cap` words (`2 * cap` slots) holding the occupied slots `used` of
/// `old`, which `used` then names in the new table; `hash` gives a slot's hash and
/// `occupied` whether it holds a word.
fn grown<T: Default + Clone + Copy>(
    old: &[T],
    used: &mut [u32],
    cap: usize,
    hash: impl Fn(&T) -> u64,
    occupied: impl Fn(&T) -> bool,
) -> Vec<T> {
    let mut grown = table::<T>(2 * cap);
    let mask = grown.len() - 1;
    for at in used {
        let slot = old[*at as usize];
        let mut i = hash(&slot) as usize & mask;
        while occupied(&grown[i]) {
            i = (i + 1) & mask;
        }
        grown[i] = slot;
        *at = i as u32;
    }
    grown
}

impl WordCounter {
    /// A counter that holds up to `cap` distinct words of each kind (at least 2 ×
    /// [`IN_FLIGHT`]; rounded up to a power of two): `cap` × 104 bytes.
    pub fn new(cap: usize) -> WordCounter {
        WordCounter::growing(cap, cap)
    }

    /// A counter whose tables start with room for `initial` distinct words each and double
    /// when full while they hold fewer than `max` (`initial` at least 2 × [`IN_FLIGHT`] and
    /// rounded up to a power of two, `max` rounded down to one, and at least `initial`): at
    /// most `max` × 36 bytes for words of up to 8 bytes and `max` × 68 for longer ones.
    pub fn growing(initial: usize, max: usize) -> WordCounter {
        let cap = initial.max(2 * IN_FLIGHT).next_power_of_two();
        let max = match max.checked_ilog2() {
            Some(b) => (1usize << b).max(cap),
            None => cap,
        };
        WordCounter {
            narrow: table(2 * cap),
            wide: table(2 * cap),
            used_narrow: Vec::with_capacity(cap),
            used_wide: Vec::with_capacity(cap),
            cap_narrow: cap,
            cap_wide: cap,
            max,
            pending: [Pending::default(); IN_FLIGHT],
            head: 0,
            queued: 0,
        }
    }

    /// The distinct words held (those still in flight not counted).
    pub fn len(&self) -> usize {
        self.used_narrow.len() + self.used_wide.len()
    }

    /// Whether no word is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.queued == 0
    }

    /// Counts the words of `text`: those of at most [`SHORT`] bytes here (handing the words
    /// held and their counts to `out` when a table fills up), longer ones by handing each
    /// to `out` with a count of 1.
    pub fn count(&mut self, text: &[u8], mut out: impl FnMut(&[u8], u64)) {
        for_each_word_range(text, |s, e| {
            let len = e - s;
            if len > SHORT {
                out(&text[s..e], 1);
                return;
            }
            if self.used_narrow.len() + IN_FLIGHT >= self.cap_narrow
                || self.used_wide.len() + IN_FLIGHT >= self.cap_wide
            {
                self.make_room(&mut out);
            }
            let (lo, hi) = load_short(text, s, len);
            let len = len as u64;
            let hash = hash_short(lo, hi, len);
            if len <= 8 {
                let i = hash as usize & (self.narrow.len() - 1);
                prefetch(self.narrow.as_ptr().wrapping_add(i));
            } else {
                let i = hash as usize & (self.wide.len() - 1);
                prefetch(self.wide.as_ptr().wrapping_add(i));
            }
            if self.queued == IN_FLIGHT {
                self.add_oldest();
            }
            self.pending[(self.head + self.queued) % IN_FLIGHT] = Pending { lo, hi, len, hash };
            self.queued += 1;
        });
        self.settle();
    }

    /// Makes room for [`IN_FLIGHT`] new words in each table: a full table below the limit
    /// doubles; if one at the limit is full, every word held is handed to `out`.
    #[cold]
    fn make_room(&mut self, out: &mut impl FnMut(&[u8], u64)) {
        self.settle();
        let full = |used: usize, cap: usize| used + IN_FLIGHT >= cap;
        if (full(self.used_narrow.len(), self.cap_narrow) && self.cap_narrow >= self.max)
            || (full(self.used_wide.len(), self.cap_wide) && self.cap_wide >= self.max)
        {
            self.drain(out);
            return;
        }
        if full(self.used_narrow.len(), self.cap_narrow) {
            self.cap_narrow *= 2;
            self.narrow = grown(
                &self.narrow,
                &mut self.used_narrow,
                self.cap_narrow,
                |s| hash_short(s.lo, 0, s.meta as u8 as u64),
                |s| s.meta != 0,
            );
        }
        if full(self.used_wide.len(), self.cap_wide) {
            self.cap_wide *= 2;
            self.wide = grown(
                &self.wide,
                &mut self.used_wide,
                self.cap_wide,
                |s| hash_short(s.lo, s.hi, s.len),
                |s| s.len != 0,
            );
        }
    }

    /// Counts the oldest word in flight.
    #[inline(always)]
    fn add_oldest(&mut self) {
        let p = self.pending[self.head];
        self.head = (self.head + 1) % IN_FLIGHT;
        self.queued -= 1;
        if p.len <= 8 {
            let mask = self.narrow.len() - 1;
            let mut i = p.hash as usize & mask;
            loop {
                let slot = &mut self.narrow[i];
                if slot.meta == 0 {
                    *slot = Narrow {
                        lo: p.lo,
                        meta: (1 << 8) | p.len,
                    };
                    self.used_narrow.push(i as u32);
                    return;
                }
                if slot.lo == p.lo && slot.meta as u8 as u64 == p.len {
                    slot.meta += 1 << 8;
                    return;
                }
                i = (i + 1) & mask;
            }
        }
        let mask = self.wide.len() - 1;
        let mut i = p.hash as usize & mask;
        loop {
            let slot = &mut self.wide[i];
            if slot.len == 0 {
                *slot = Wide {
                    lo: p.lo,
                    hi: p.hi,
                    len: p.len,
                    count: 1,
                };
                self.used_wide.push(i as u32);
                return;
            }
            if slot.lo == p.lo && slot.hi == p.hi && slot.len == p.len {
                slot.count += 1;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Counts the words in flight.
    fn settle(&mut self) {
        while self.queued > 0 {
            self.add_oldest();
        }
    }

    /// Hands every word held and its count to `f` and empties the tables.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8], u64)) {
        self.settle();
        let mut b = [0u8; SHORT];
        // Many words: one pass over a table in memory order beats visiting their slots.
        let dense = 8 * self.used_narrow.len() >= self.narrow.len();
        let mut hand = |slot: Narrow| {
            b[..8].copy_from_slice(&slot.lo.to_le_bytes());
            f(&b[..slot.meta as u8 as usize], slot.meta >> 8);
        };
        if dense {
            for slot in self.narrow.iter_mut().filter(|s| s.meta != 0) {
                hand(std::mem::take(slot));
            }
        } else {
            for &i in &self.used_narrow {
                hand(std::mem::take(&mut self.narrow[i as usize]));
            }
        }
        self.used_narrow.clear();
        let dense = 8 * self.used_wide.len() >= self.wide.len();
        let mut hand = |slot: Wide| {
            b[..8].copy_from_slice(&slot.lo.to_le_bytes());
            b[8..].copy_from_slice(&slot.hi.to_le_bytes());
            f(&b[..slot.len as usize], slot.count);
        };
        if dense {
            for slot in self.wide.iter_mut().filter(|s| s.len != 0) {
                hand(std::mem::take(slot));
            }
        } else {
            for &i in &self.used_wide {
                hand(std::mem::take(&mut self.wide[i as usize]));
            }
        }
        self.used_wide.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// The reference: Python's `bytes.split()`.
    fn split(text: &[u8]) -> Vec<&[u8]> {
        text.split(spillway_mapreduce::is_space)
            .filter(|w| !w.is_empty())
            .collect()
    }

    fn counted(text: &[u8], cap: usize) -> HashMap<Vec<u8>, u64> {
        counted_growing(text, cap, cap)
    }

    fn counted_growing(text: &[u8], initial: usize, max: usize) -> HashMap<Vec<u8>, u64> {
        let mut c = WordCounter::growing(initial, max);
        let mut got: HashMap<Vec<u8>, u64> = HashMap::new();
        let mut add = |w: &[u8], n: u64| {
            assert!(
                n == 1 || w.len() <= SHORT,
                "a long word is handed on at once"
            );
            *got.entry(w.to_vec()).or_default() += n;
        };
        c.count(text, &mut add);
        c.drain(&mut add);
        got
    }

    fn reference(text: &[u8]) -> HashMap<Vec<u8>, u64> {
        let mut want: HashMap<Vec<u8>, u64> = HashMap::new();
        for w in split(text) {
            *want.entry(w.to_vec()).or_default() += 1;
        }
        want
    }

    /// Texts of words (short, at the inline limit, long, with zero and high bytes) and runs of
    /// every whitespace byte, around block boundaries.
    fn texts() -> impl Strategy<Value = Vec<u8>> {
        let byte = prop_oneof![
            4 => Just(b' '),
            1 => prop::sample::select(vec![b'\t', b'\n', 0x0b, 0x0c, b'\r']),
            6 => prop::sample::select(vec![b'a', b'b', b'c']),
            1 => any::<u8>(),
            1 => Just(0u8),
        ];
        prop::collection::vec(byte, 0..400)
    }

    proptest! {
        #[test]
        fn words_are_those_of_a_split_on_whitespace(text in texts()) {
            let mut got = Vec::new();
            for_each_word(&text, |w| got.push(w.to_vec()));
            let want: Vec<Vec<u8>> = split(&text).into_iter().map(<[u8]>::to_vec).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn counts_are_those_of_a_hash_map(text in texts(), cap in 0usize..40) {
            prop_assert_eq!(counted(&text, cap), reference(&text));
        }

        #[test]
        fn counts_are_kept_while_the_tables_grow(
            text in texts(),
            initial in 0usize..40,
            doublings in 1u32..4,
        ) {
            prop_assert_eq!(
                counted_growing(&text, initial, initial.max(1) << doublings),
                reference(&text)
            );
        }
    }

    #[test]
    fn words_across_blocks_and_at_the_inline_limit() {
        // Words of every length 1..=70 at every offset within a block, so that words
        // start, end and span the 64-byte boundaries, and short words end at the text's end.
        for len in 1..=70 {
            for offset in 0..BLOCK {
                let mut text = vec![b' '; offset];
                text.extend(std::iter::repeat_n(b'x', len));
                text.push(b'\n');
                text.extend(std::iter::repeat_n(b'y', len));
                assert_eq!(counted(&text, 16), reference(&text), "{len} at {offset}");
                let mut got = Vec::new();
                for_each_word(&text, |w| got.push(w.to_vec()));
                assert_eq!(got, vec![vec![b'x'; len], vec![b'y'; len]]);
            }
        }
    }

    /// Many distinct words of both kinds through tables that double several times, then
    /// reach their limit and are drained while counting goes on.
    #[test]
    fn tables_grow_to_their_limit_then_drain() {
        let mut text = Vec::new();
        for i in 0..3000u32 {
            for w in [
                format!("n{}", i % 1500),
                format!("wide-word-{:06}", i % 1100),
            ] {
                text.extend_from_slice(w.as_bytes());
                text.push(if i % 7 == 0 { b'\n' } else { b' ' });
            }
        }
        let want = reference(&text);
        assert_eq!(counted_growing(&text, 32, 4096), want);
        assert_eq!(counted_growing(&text, 32, 256), want);
        let mut c = WordCounter::growing(32, 4096);
        let mut handed = 0;
        c.count(&text, |_, _| handed += 1);
        assert_eq!(handed, 0, "room for every word after growing");
        assert_eq!(c.len(), 1500 + 1100);
    }

    #[test]
    fn words_differing_only_in_trailing_zero_bytes_are_apart() {
        let text = b"a a\0 a\0\0 \0 \0\0 a\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0 a";
        assert_eq!(counted(text, 16), reference(text));
        assert_eq!(counted(text, 16)[&b"a"[..]], 2);
    }
}
