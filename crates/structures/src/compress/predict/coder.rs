//! The entropy stage of the predictive method: static rANS over a small alphabet of code
//! classes, under a context model, plus a plain bit stream for the low bits of the codes.
//!
//! A code `q` (an integer with `|q| < 2^30`, or "outlier") becomes a symbol and some raw
//! bits: symbol 0 for `q = 0`; symbol 1 for `|q| = 1`; for `|q|` of bit length `k >= 2`,
//! symbol `2 (k - 1) + b` with `b` the bit below the leading one; symbol 60 for an outlier
//! (whose value is stored elsewhere). The sign and the bits below `b` go to the bit stream
//! verbatim. Symbols are coded with one of [`TABLES`] frequency tables, chosen by the level
//! class of the point (which pass of the predictor produced it) and by the bit lengths of the
//! two nearest codes already coded in the same pass, which carry the local activity of the
//! field: where the prediction has just missed, it tends to miss again.
//!
//! The tables are counted over a block and stored in front of its rANS stream (a few hundred
//! bytes at most); decoding a symbol is then one table look-up and a multiplication, with no
//! branch on the data (the rANS coder of Duda, byte-wise renormalisation as in ryg_rans).

use super::super::encodings::VarintReader;
use crate::varint::put_varint;

/// Frequencies are 12-bit fixed point.
const PROB_BITS: u32 = 12;
const PROB_SCALE: u32 = 1 << PROB_BITS;
/// The lower end of the rANS state interval.
const RANS_L: u32 = 1 << 23;

/// Largest code magnitude plus one: codes satisfy `|q| < MAX_CODE`.
pub(crate) const MAX_CODE: i64 = 1 << 30;
/// Symbols: 0, 1, 2..=59 (bit lengths 2..=30 with the bit below the leading one), outlier.
const ALPHABET: usize = 61;
pub(crate) const OUTLIER: u8 = 60;
/// The activity of an outlier.
const OUTLIER_ACTIVITY: u8 = 31;

/// Level classes (passes of the predictor with their own statistics).
pub(crate) const LEVEL_CLASSES: usize = 8;
/// Neighbourhood contexts.
const CONTEXTS: usize = 8;
/// Frequency tables.
pub(crate) const TABLES: usize = LEVEL_CLASSES * CONTEXTS;

/// What a coded point holds: a quantisation code or an outlier (a value stored verbatim).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    /// `|q| < MAX_CODE`.
    Q(i32),
    /// The value is stored verbatim.
    Outlier,
}

/// The bit length of a code as the context of later codes (0 for zero, 31 for outliers).
#[inline]
pub(crate) fn activity(c: Code) -> u8 {
    match c {
        Code::Q(q) => (32 - q.unsigned_abs().leading_zeros()) as u8,
        Code::Outlier => OUTLIER_ACTIVITY,
    }
}

/// The table of a code from its level class and the activities of its two coded neighbours.
#[inline]
pub(crate) fn table(lc: usize, left: u8, up: u8) -> usize {
    lc * CONTEXTS + (usize::from(left) + usize::from(up)).min(CONTEXTS - 1)
}

/// Splits a code into its symbol and its raw bits (value, count).
#[inline]
fn split(c: Code) -> (u8, u32, u32) {
    match c {
        Code::Q(0) => (0, 0, 0),
        Code::Q(q) => {
            let a = q.unsigned_abs();
            let sign = u32::from(q < 0);
            let k = 32 - a.leading_zeros();
            if k == 1 {
                (1, sign, 1)
            } else {
                let below = (a >> (k - 2)) & 1;
                let low = a & ((1 << (k - 2)) - 1);
                ((2 * (k - 1) + below) as u8, (low << 1) | sign, k - 1)
            }
        }
        Code::Outlier => (OUTLIER, 0, 0),
    }
}

/// The code of an outlier in a line of codes.
pub(crate) const OUTLIER_Q: i32 = i32::MIN;

/// [`split`] of a code of a line (`OUTLIER_Q` for an outlier), without branches on the
/// code: symbol, raw bits, their count, and the activity.
#[inline(always)]
fn split_q(q: i32) -> (u8, u32, u32, u8) {
    if q == OUTLIER_Q {
        return (OUTLIER, 0, 0, OUTLIER_ACTIVITY);
    }
    let a = q.unsigned_abs();
    let sign = u32::from(q < 0);
    let k = 32 - a.leading_zeros();
    // k >= 2: the bit below the leading one picks the symbol, the bits below it are raw.
    let sh = k.saturating_sub(2);
    let below = (a >> sh) & 1;
    let low = a & ((1u32 << sh) - 1);
    let big = k >= 2;
    let sym = if big { 2 * (k - 1) + below } else { k };
    let raw = if big { (low << 1) | sign } else { sign };
    let n = if big { k - 1 } else { k };
    (sym as u8, raw, n, k as u8)
}

/// Collects the symbols of a block in coding order (with their tables) and writes the raw
/// bits as they come.
pub(crate) struct CodeWriter {
    symbols: Vec<u16>,
    bits: BitWriter,
}

impl CodeWriter {
    pub(crate) fn new(capacity: usize) -> CodeWriter {
        CodeWriter {
            symbols: Vec::with_capacity(capacity),
            bits: BitWriter::new(),
        }
    }

    /// Appends a code under table `t`.
    #[inline]
    pub(crate) fn put(&mut self, t: usize, c: Code) {
        let (sym, raw, n) = split(c);
        self.symbols.push(((t as u16) << 6) | u16::from(sym));
        if n > 0 {
            self.bits.put(raw, n);
        }
    }

    /// Appends the codes of a line of level class `lc` (`OUTLIER_Q` for an outlier), with
    /// `up` the activities of the previous line (replaced by this line's).
    pub(crate) fn put_line(&mut self, lc: usize, codes: &[i32], up: &mut [u8]) {
        debug_assert_eq!(codes.len(), up.len());
        self.symbols.reserve(codes.len());
        let mut left = 0u8;
        for (&q, u) in codes.iter().zip(up.iter_mut()) {
            let t = table(lc, left, *u);
            let (sym, raw, n, act) = split_q(q);
            self.symbols.push(((t as u16) << 6) | u16::from(sym));
            self.bits.put(raw, n);
            left = act;
            *u = act;
        }
    }

    /// The coded stream (tables, then rANS) and the raw bits.
    pub(crate) fn finish(self) -> (Vec<u8>, Vec<u8>) {
        let mut counts = vec![[0u32; ALPHABET]; TABLES];
        for &s in &self.symbols {
            counts[usize::from(s >> 6)][usize::from(s & 63)] += 1;
        }
        let mut out = Vec::new();
        let mut freq = [0u32; ALPHABET];
        let mut enc = vec![EncSymbol::default(); TABLES * 64];
        for t in 0..TABLES {
            normalize(&counts[t], &mut freq);
            let used = freq.iter().rposition(|&f| f > 0).map_or(0, |m| m + 1);
            put_varint(&mut out, used as u64);
            let mut c = 0;
            for (s, &f) in freq[..used].iter().enumerate() {
                put_varint(&mut out, u64::from(f));
                if f > 0 {
                    enc[t * 64 + s] = EncSymbol::new(c, f);
                }
                c += f;
            }
        }
        // rANS runs backwards: encode the last symbol first, emit bytes in reverse.
        let mut rev: Vec<u8> = Vec::with_capacity(self.symbols.len() / 4 + 8);
        let mut x = RANS_L;
        for &s in self.symbols.iter().rev() {
            let e = &enc[usize::from(s)];
            while x >= e.x_max {
                rev.push(x as u8);
                x >>= 8;
            }
            // x / f by multiplication with a reciprocal (exact for x < 2^31).
            let q = ((u64::from(x) * u64::from(e.rcp)) >> 32) as u32 >> e.shift;
            x = x + e.bias + q * e.cmpl;
        }
        rev.extend_from_slice(&x.to_le_bytes());
        rev.reverse();
        out.extend_from_slice(&rev);
        (out, self.bits.finish())
    }
}

/// A symbol prepared for encoding: `x -> (x / f) * SCALE + x % f + start` computed as
/// `x + bias + q * (SCALE - f)` with `q = x / f` from a 32-bit reciprocal (the encoder of
/// ryg_rans).
#[derive(Clone, Copy, Default)]
struct EncSymbol {
    x_max: u32,
    rcp: u32,
    shift: u32,
    bias: u32,
    cmpl: u32,
}

impl EncSymbol {
    fn new(start: u32, freq: u32) -> EncSymbol {
        let x_max = ((RANS_L >> PROB_BITS) << 8) * freq;
        let cmpl = PROB_SCALE - freq;
        if freq < 2 {
            // q = x - 1 (x >= 1), and the bias makes up for it.
            EncSymbol {
                x_max,
                rcp: u32::MAX,
                shift: 0,
                bias: start + PROB_SCALE - 1,
                cmpl,
            }
        } else {
            let mut shift = 0;
            while freq > (1 << shift) {
                shift += 1;
            }
            let rcp = (1u64 << (shift + 31)).div_ceil(u64::from(freq)) as u32;
            EncSymbol {
                x_max,
                rcp,
                shift: shift - 1,
                bias: start,
                cmpl,
            }
        }
    }
}

/// Scales `counts` to frequencies summing to `PROB_SCALE`, every counted symbol at least 1
/// (all zero for a table never used).
fn normalize(counts: &[u32; ALPHABET], freq: &mut [u32; ALPHABET]) {
    let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    if total == 0 {
        freq.fill(0);
        return;
    }
    let mut sum = 0u32;
    for (f, &c) in freq.iter_mut().zip(counts) {
        *f = if c == 0 {
            0
        } else {
            ((u64::from(c) * u64::from(PROB_SCALE) / total) as u32).max(1)
        };
        sum += *f;
    }
    // Give the difference to (or take it from) the largest entries.
    while sum != PROB_SCALE {
        let big = (0..ALPHABET).max_by_key(|&s| freq[s]).expect("non-empty");
        if sum < PROB_SCALE {
            freq[big] += PROB_SCALE - sum;
            sum = PROB_SCALE;
        } else {
            let excess = sum - PROB_SCALE;
            let take = excess.min(freq[big] - 1);
            freq[big] -= take;
            sum -= take;
            if take == 0 {
                // Every entry is 1 (cannot happen: fewer symbols than PROB_SCALE).
                break;
            }
        }
    }
}

/// The symbol that the slots of an unused table decode to (never written: an error).
const INVALID: u8 = 63;

/// What a symbol means: activity, count of raw bits, and the magnitude before the raw bits.
#[derive(Clone, Copy)]
struct SymbolInfo {
    act: u8,
    bits: u8,
    base: u32,
}

/// [`SymbolInfo`] of every symbol (and of the invalid ones, 61..=63: no bits, zero).
const SYMBOLS: [SymbolInfo; 64] = {
    let mut t = [SymbolInfo {
        act: 0,
        bits: 0,
        base: 0,
    }; 64];
    t[1] = SymbolInfo {
        act: 1,
        bits: 1,
        base: 1,
    };
    let mut s = 2;
    while s < OUTLIER as usize {
        let k = s as u32 / 2 + 1;
        let below = s as u32 & 1;
        t[s] = SymbolInfo {
            act: k as u8,
            bits: (k - 1) as u8,
            base: (1 << (k - 1)) | (below << (k - 2)),
        };
        s += 1;
    }
    t[OUTLIER as usize].act = OUTLIER_ACTIVITY;
    t
};

/// The activity of symbol `sym` as far as [`table`] tells it apart: exact below
/// `CONTEXTS - 1`, at least `CONTEXTS - 1` otherwise (outliers and invalid symbols included).
/// Arithmetic rather than a look-up: it lies on the decoder's chain from symbol to symbol.
#[inline(always)]
fn context_activity(sym: u8) -> u8 {
    // 0 -> 0, 1 -> 1, 2 (k - 1) + b -> k for k >= 2.
    (sym + 1 + u8::from(sym != 0)) >> 1
}

/// Decodes what [`CodeWriter`] wrote.
pub(crate) struct CodeReader<'a> {
    /// The symbol of every slot of every table: `slots[t << PROB_BITS | slot]`.
    slots: Box<[u8; TABLES << PROB_BITS]>,
    /// Frequency (low 16 bits) and start (high 16 bits) of every symbol of every table:
    /// `entries[t << 6 | symbol]`.
    entries: Box<[u32; TABLES * 64]>,
    x: u32,
    bytes: &'a [u8],
    at: usize,
    bits: BitReader<'a>,
    bad: bool,
}

impl<'a> CodeReader<'a> {
    /// Reads the tables and starts the streams.
    pub(crate) fn new(coded: &'a [u8], raw: &'a [u8]) -> Result<CodeReader<'a>, String> {
        let mut r = VarintReader::new(coded);
        let mut slots: Box<[u8; TABLES << PROB_BITS]> = vec![INVALID; TABLES << PROB_BITS]
            .into_boxed_slice()
            .try_into()
            .expect("the length of the table");
        let mut entries = Box::new([0u32; TABLES * 64]);
        for t in 0..TABLES {
            let used = r.next()?;
            if used > ALPHABET as u64 {
                return Err(format!("a code table of {used} symbols"));
            }
            // Slots of an unused table decode to the invalid symbol, which leaves the state
            // as it is (frequency = scale, start 0) and is reported by `finish`.
            entries[t << 6 | usize::from(INVALID)] = PROB_SCALE;
            let mut c = 0u32;
            for s in 0..used as usize {
                let f = r.next()?;
                if f > u64::from(PROB_SCALE) - u64::from(c) {
                    return Err("code table frequencies exceed the scale".into());
                }
                let f = f as u32;
                entries[t << 6 | s] = f | (c << 16);
                let base = t << PROB_BITS;
                slots[base + c as usize..base + (c + f) as usize].fill(s as u8);
                c += f;
            }
            if used > 0 && c != PROB_SCALE {
                return Err("code table frequencies do not fill the scale".into());
            }
        }
        let at = coded.len() - r.remaining();
        let mut d = CodeReader {
            slots,
            entries,
            x: 0,
            bytes: coded,
            at,
            bits: BitReader::new(raw),
            bad: false,
        };
        for _ in 0..4 {
            d.x = (d.x << 8) | u32::from(d.next_byte());
        }
        Ok(d)
    }

    #[inline]
    fn next_byte(&mut self) -> u8 {
        let b = self.bytes.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    /// The next symbol under table `t < TABLES`.
    #[inline(always)]
    fn symbol(&mut self, t: usize) -> u8 {
        let slot = self.x & (PROB_SCALE - 1);
        // The masks keep both indices in range without a check (t < TABLES already).
        let t = t & (TABLES - 1);
        let sym = self.slots[(t << PROB_BITS) | slot as usize] & 63;
        let e = self.entries[(t << 6) | usize::from(sym)];
        self.x = (e & 0xffff) * (self.x >> PROB_BITS) + slot - (e >> 16);
        // At most two bytes: the state is at least 2^11 after decoding.
        if self.x < RANS_L {
            self.x = (self.x << 8) | u32::from(self.next_byte());
            if self.x < RANS_L {
                self.x = (self.x << 8) | u32::from(self.next_byte());
            }
        }
        sym
    }

    /// The code of symbol `sym` (reading its raw bits): the code, or `OUTLIER_Q`.
    #[inline(always)]
    fn code_of(&mut self, sym: u8) -> i32 {
        let info = SYMBOLS[usize::from(sym & 63)];
        let raw = self.bits.get(u32::from(info.bits));
        let a = (info.base | (raw >> 1)) as i32;
        let neg = -((raw & 1) as i32);
        // a < 2^30: no overflow.
        (a ^ neg) - neg
    }

    /// The next code, under table `t`.
    #[inline]
    pub(crate) fn get(&mut self, t: usize) -> Code {
        let sym = self.symbol(t);
        match sym {
            OUTLIER => Code::Outlier,
            INVALID => {
                self.bad = true;
                Code::Q(0)
            }
            s => Code::Q(self.code_of(s)),
        }
    }

    /// The symbols of a line of level class `lc` into `syms`, with `up` the activities of the
    /// previous line (replaced by this line's). Returns the number of outliers.
    pub(crate) fn symbols(&mut self, lc: usize, up: &mut [u8], syms: &mut [u8]) -> usize {
        debug_assert_eq!(up.len(), syms.len());
        let mut left = 0u8;
        let mut outliers = 0;
        let mut bad = false;
        for (u, out) in up.iter_mut().zip(syms.iter_mut()) {
            let sym = self.symbol(table(lc, left, *u));
            left = context_activity(sym);
            *u = left;
            *out = sym;
            outliers += usize::from(sym == OUTLIER);
            bad |= sym == INVALID;
        }
        self.bad |= bad;
        outliers
    }

    /// The codes of the symbols `syms` of a line (outliers as code 0), reading their raw bits.
    pub(crate) fn codes(&mut self, syms: &[u8], codes: &mut [i32]) {
        for (&s, c) in syms.iter().zip(codes.iter_mut()) {
            *c = self.code_of(s);
        }
    }

    /// Checks that the streams ended where the codes did.
    pub(crate) fn finish(&self) -> Result<(), String> {
        if self.bad || self.x != RANS_L || self.at != self.bytes.len() {
            return Err("the coded stream does not match the grid".into());
        }
        if self.bits.overran() || self.bits.has_spare_bytes() {
            return Err("the low bits do not match the codes".into());
        }
        Ok(())
    }
}

/// Writes bit fields (least significant first) into bytes.
pub(crate) struct BitWriter {
    acc: u64,
    used: u32,
    out: Vec<u8>,
}

impl BitWriter {
    pub(crate) fn new() -> BitWriter {
        BitWriter {
            acc: 0,
            used: 0,
            out: Vec::new(),
        }
    }

    /// Appends the low `n <= 32` bits of `v`.
    #[inline]
    pub(crate) fn put(&mut self, v: u32, n: u32) {
        debug_assert!(n <= 32 && (n == 32 || v >> n == 0));
        self.acc |= u64::from(v) << self.used;
        self.used += n;
        if self.used >= 32 {
            self.out.extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.used -= 32;
        }
    }

    pub(crate) fn finish(mut self) -> Vec<u8> {
        let bytes = self.used.div_ceil(8) as usize;
        self.out.extend_from_slice(&self.acc.to_le_bytes()[..bytes]);
        self.out
    }
}

/// Reads what [`BitWriter`] wrote; past the end it yields zero bits and remembers it.
pub(crate) struct BitReader<'a> {
    bytes: &'a [u8],
    at: usize,
    acc: u64,
    have: u32,
    overran: bool,
}

impl<'a> BitReader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> BitReader<'a> {
        BitReader {
            bytes,
            at: 0,
            acc: 0,
            have: 0,
            overran: false,
        }
    }

    /// The next `n <= 32` bits.
    #[inline]
    pub(crate) fn get(&mut self, n: u32) -> u32 {
        if self.have < n {
            if let Some(w) = self.bytes.get(self.at..self.at + 4) {
                let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                self.acc |= u64::from(w) << self.have;
                self.at += 4;
                self.have += 32;
            } else {
                while self.have < n {
                    match self.bytes.get(self.at) {
                        Some(&b) => self.acc |= u64::from(b) << self.have,
                        None => self.overran = true,
                    }
                    self.at += 1;
                    self.have += 8;
                }
            }
        }
        let v = (self.acc & ((1u64 << n) - 1)) as u32;
        self.acc >>= n;
        self.have -= n;
        v
    }

    /// Whether more bits were read than written (up to the padding of the last byte).
    pub(crate) fn overran(&self) -> bool {
        self.overran
    }

    /// Whether whole unread bytes remain.
    pub(crate) fn has_spare_bytes(&self) -> bool {
        self.at < self.bytes.len() || self.have >= 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decoder's context activity of every symbol picks the same table as the activity
    /// of the codes it stands for (computed from the code's bit length).
    #[test]
    fn context_activity_picks_the_tables_of_the_codes() {
        let mut seen = [false; ALPHABET];
        let codes = (-(1i32 << 12)..=(1 << 12))
            .chain((2..30).flat_map(|k| [1i32 << k, -(1 << k) - 1, (1 << (k + 1)) - 1]))
            .map(Code::Q)
            .chain([Code::Outlier]);
        for c in codes {
            let (sym, _, _) = split(c);
            seen[usize::from(sym)] = true;
            for up in 0..=OUTLIER_ACTIVITY {
                assert_eq!(
                    table(3, context_activity(sym), up),
                    table(3, activity(c), up),
                    "{c:?} (symbol {sym}), up {up}"
                );
            }
        }
        assert!(seen.iter().all(|&s| s), "every symbol tried");
    }

    #[test]
    fn codes_round_trip() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut codes = Vec::new();
        for i in 0..20_000 {
            let r = next();
            let c = match r % 7 {
                0 => Code::Outlier,
                1 => {
                    Code::Q(((r >> 8) % (MAX_CODE as u64)) as i32 * if i % 2 == 0 { 1 } else { -1 })
                }
                2 | 3 => Code::Q(((r >> 8) % 5) as i32 - 2),
                _ => Code::Q(0),
            };
            codes.push((c, (r >> 40) as usize % TABLES));
        }
        codes.push((Code::Q(-(MAX_CODE as i32 - 1)), 0));
        let mut w = CodeWriter::new(0);
        for &(c, t) in &codes {
            w.put(t, c);
        }
        let (coded, raw) = w.finish();
        let mut r = CodeReader::new(&coded, &raw).unwrap();
        for &(c, t) in &codes {
            assert_eq!(r.get(t), c);
        }
        r.finish().unwrap();
        // A table the writer never used decodes to an error, not a panic.
        let mut w = CodeWriter::new(0);
        w.put(0, Code::Q(3));
        let (coded, raw) = w.finish();
        let mut r = CodeReader::new(&coded, &raw).unwrap();
        r.get(5);
        assert!(r.finish().is_err());
    }

    #[test]
    fn reciprocal_division_is_exact() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for f in 1..=PROB_SCALE {
            let start = (PROB_SCALE - f) / 2;
            let e = EncSymbol::new(start, f);
            // The states the encoder divides: renormalised below x_max, at least x_max / 256.
            let lo = e.x_max >> 8;
            let hi = e.x_max - 1;
            for i in 0..64u64 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let x = match i {
                    0 => lo,
                    1 => hi,
                    _ => lo + (state % u64::from(hi - lo + 1)) as u32,
                };
                let q = ((u64::from(x) * u64::from(e.rcp)) >> 32) as u32 >> e.shift;
                let got = x + e.bias + q * e.cmpl;
                let want = ((x / f) << PROB_BITS) + x % f + start;
                assert_eq!(got, want, "f {f} x {x}");
            }
        }
    }

    #[test]
    fn skewed_streams_cost_little() {
        // 100,000 zeros and a few ones in one table: well below a bit each.
        let mut w = CodeWriter::new(0);
        for i in 0..100_000 {
            w.put(0, Code::Q(i32::from(i % 1000 == 0)));
        }
        let (coded, _) = w.finish();
        assert!(coded.len() < 2_000, "{} bytes", coded.len());
    }
}
