//! The compact forms of what a PageRank iteration reads, and the gather that reads them:
//! in-list sources packed in three or four bytes ([`Sources`]), list lengths of one byte
//! ([`Offsets`]), and where values from other ranks land, as bitmaps or lists ([`Incoming`]).
//! Out of core these are most of an iteration's reads.

use spillway_comm::Comm;
use spillway_runtime::SbVec;

use crate::error::AlgoError;

/// Where the values that arrive each iteration go: for each sending rank, in the order of
/// arrival (rank order), the rows it sends to, in a few ascending runs (the sender groups its
/// targets by in-list length, see [`set_up`](super::setup::set_up)). A run's rows are a
/// bitmap over this rank's rows when that is smaller than a list of 4-byte positions (more
/// than one row in 32 receives from it), else the list; the bitmaps need the position of
/// every row. Out of core this is read every iteration: as lists, one 4-byte entry per value
/// received, it was a sixth of PageRank's reads at 32 ranks.
pub(super) struct Incoming {
    /// Per sender: (sender, values, its runs in `runs`).
    pub(super) blocks: Vec<(usize, usize, std::ops::Range<usize>)>,
    /// Per run: (values, bitmap or list, start in `bits` or `list`).
    runs: Vec<(usize, bool, usize)>,
    bits: SbVec<u64>,
    list: SbVec<u32>,
    /// Position of every row when some sender has a bitmap (else empty).
    pos: SbVec<u32>,
    rows: usize,
}

impl Incoming {
    /// From the rows each sender announced (`rows_in`, concatenated in the order of `from`:
    /// (sender, count)), each below `rows`, and the position of each row.
    pub(super) fn new(
        rt: &spillway_runtime::Rank,
        rows: usize,
        rows_in: &[u32],
        from: &[(usize, usize)],
        pos: SbVec<u32>,
    ) -> Result<Incoming, AlgoError> {
        let words = rows.div_ceil(64);
        assert!(
            rows_in.iter().all(|&r| (r as usize) < rows),
            "incoming row out of range"
        );
        let mut blocks = Vec::with_capacity(from.len());
        let mut runs = Vec::new();
        let (mut nbits, mut nlist, mut at) = (0, 0, 0);
        for &(sender, count) in from {
            let first = runs.len();
            let mine = &rows_in[at..at + count];
            at += count;
            // Maximal ascending runs.
            let mut a = 0;
            while a < mine.len() {
                let mut b = a + 1;
                while b < mine.len() && mine[b - 1] < mine[b] {
                    b += 1;
                }
                let len = b - a;
                let bitmap = words * 8 < len * 4;
                runs.push((len, bitmap, if bitmap { nbits } else { nlist }));
                if bitmap {
                    nbits += words;
                } else {
                    nlist += len;
                }
                a = b;
            }
            blocks.push((sender, count, first..runs.len()));
        }
        let mut bits: SbVec<u64> = SbVec::zeroed(rt, nbits)?;
        let mut list: SbVec<u32> = SbVec::zeroed(rt, nlist)?;
        {
            let (b, l, p) = (bits.as_mut_slice(), list.as_mut_slice(), pos.as_slice());
            let mut at = 0;
            for &(count, bitmap, start) in &runs {
                let mine = &rows_in[at..at + count];
                at += count;
                if bitmap {
                    for &r in mine {
                        b[start + r as usize / 64] |= 1 << (r % 64);
                    }
                } else {
                    for (e, &r) in l[start..start + count].iter_mut().zip(mine) {
                        *e = p[r as usize];
                    }
                }
            }
        }
        let pos = if nbits > 0 {
            pos
        } else {
            SbVec::zeroed(rt, 0)?
        };
        Ok(Incoming {
            blocks,
            runs,
            bits,
            list,
            pos,
            rows,
        })
    }

    /// Bytes of the bitmaps, lists and positions, and of the values received.
    pub(super) fn bytes(&self) -> u64 {
        let values: usize = self.blocks.iter().map(|b| b.1).sum();
        let runs = self.runs.len() * std::mem::size_of::<(usize, bool, usize)>();
        (8 * self.bits.len() + 4 * self.list.len() + 4 * self.pos.len() + 8 * values + runs) as u64
    }

    /// `nx[position of r] += value` for every value received, in arrival order: `received`
    /// holds the values of every sender, one after the other.
    ///
    /// # Panics
    /// Unless `received` holds as many values as announced and `nx` one per row.
    #[cfg(test)]
    pub(super) fn add(&self, received: &[f64], nx: &mut [f64]) {
        let total: usize = self.blocks.iter().map(|b| b.1).sum();
        assert!(received.len() == total);
        let mut k = 0;
        for (b, &(_, count, _)) in self.blocks.iter().enumerate() {
            self.add_from(b, &received[k..k + count], nx);
            k += count;
        }
    }

    /// `nx[position of r] += value` for the values of sender number `b` (in the order of
    /// [`Incoming::blocks`]), in the order of its rows.
    ///
    /// # Panics
    /// Unless `values` holds as many values as the sender announced and `nx` one per row.
    pub(super) fn add_from(&self, b: usize, values: &[f64], nx: &mut [f64]) {
        let (_, count, ref runs) = self.blocks[b];
        assert!(values.len() == count && nx.len() == self.rows);
        let mut at = 0;
        for &(len, bitmap, start) in &self.runs[runs.clone()] {
            self.add_run(bitmap, start, &values[at..at + len], nx);
            at += len;
        }
    }

    /// `nx[position of r] += value` for the values of one run.
    fn add_run(&self, bitmap: bool, start: usize, values: &[f64], nx: &mut [f64]) {
        if bitmap {
            let (bits, pos) = (self.bits.as_slice(), self.pos.as_slice());
            let words = self.rows.div_ceil(64);
            let mut v = values.iter();
            for (i, &word) in bits[start..start + words].iter().enumerate() {
                let mut w = word;
                while w != 0 {
                    let r = i * 64 + w.trailing_zeros() as usize;
                    w &= w - 1;
                    nx[pos[r] as usize] += v.next().expect("one value per bit");
                }
            }
        } else {
            let list = self.list.as_slice();
            for (&p, &val) in list[start..start + values.len()].iter().zip(values) {
                nx[p as usize] += val;
            }
        }
    }
}

/// The sources of the in-lists (row positions, each below the rank's row count), packed in
/// three bytes each when the rank has at most 2^24 rows, else four. Out of core they are the
/// largest part of what an iteration reads (one per edge): a quarter less to read, for a
/// mask per edge.
pub(super) struct Sources {
    /// The packed values, then one byte so that a 4-byte read of the last one stays inside.
    bytes: SbVec<u8>,
    /// Bytes per value: 3 or 4.
    width: usize,
    len: usize,
}

impl Sources {
    /// Packs `src` (every value below `rows`, checked by [`set_up`](super::setup::set_up)).
    pub(super) fn new(
        rt: &spillway_runtime::Rank,
        src: SbVec<u32>,
        rows: usize,
    ) -> Result<Sources, AlgoError> {
        let width = if rows <= 1 << 24 { 3 } else { 4 };
        let len = src.len();
        let mut bytes: SbVec<u8> = SbVec::zeroed(rt, len * width + 1)?;
        for (b, &u) in bytes
            .as_mut_slice()
            .chunks_exact_mut(width)
            .zip(src.as_slice())
        {
            b.copy_from_slice(&u.to_le_bytes()[..width]);
        }
        Ok(Sources { bytes, width, len })
    }

    /// Bytes of the packed values.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes.len() as u64
    }
}

/// The lists of an edge list as their lengths, one byte each; lengths of [`LONG`] and more are
/// [`LONG`] there and their value is in a side list, read in order. Out of core these are read
/// every iteration, and most in-lists of a power-law graph are a few edges long (a remote
/// in-list, one per distinct target on another rank, holds 1-2 edges on average), so 4-byte
/// offsets were about a sixth of PageRank's per-iteration reads.
pub(super) struct Offsets {
    lens: SbVec<u8>,
    long: SbVec<u64>,
    /// Sum of the lengths.
    total: usize,
}

/// The byte value of a length found in [`Offsets::long`].
pub(super) const LONG: u8 = u8::MAX;

impl Offsets {
    /// The lists between consecutive `offsets` (checked by [`set_up`](super::setup::set_up): non-decreasing).
    pub(super) fn new(comm: &Comm, offsets: SbVec<u64>) -> Result<Offsets, AlgoError> {
        let rt = comm.runtime();
        let off = offsets.as_slice();
        let lists = off.len().saturating_sub(1);
        let mut lens: SbVec<u8> = SbVec::zeroed(rt, lists)?;
        let mut long = Vec::new();
        for (l, w) in lens.as_mut_slice().iter_mut().zip(off.windows(2)) {
            let n = w[1] - w[0];
            if n >= u64::from(LONG) {
                *l = LONG;
                long.push(n);
            } else {
                *l = n as u8;
            }
        }
        let total = off.last().map_or(0, |&e| (e - off[0]) as usize);
        Ok(Offsets {
            lens,
            long: SbVec::from_slice(rt, &long)?,
            total,
        })
    }

    /// Number of lists.
    pub(super) fn lists(&self) -> usize {
        self.lens.len()
    }

    /// Bytes of the lengths.
    pub(super) fn bytes(&self) -> u64 {
        (self.lens.len() + 8 * self.long.len()) as u64
    }

    /// `out[s] = sum of c[u]` over list `s` of `src` (see [`pull_sums`]).
    ///
    /// # Panics
    /// Unless `out` has one value per list, `c` one per row and `src` the lists' edges.
    pub(super) fn pull(&self, c: &[f64], rows: usize, src: &Sources, out: &mut [f64]) {
        assert!(c.len() == rows && self.lists() == out.len() && src.len == self.total);
        assert!(src.bytes.len() > src.len * src.width && matches!(src.width, 3 | 4));
        // SAFETY: `c` has one value per row and `src` holds the edges of every list (asserted;
        // `new` made the lengths sum to `total` with one `long` entry per `LONG` byte), and
        // `set_up` checked that every source is a row; the lists never change after.
        let (lens, long, packed) = (
            self.lens.as_slice(),
            self.long.as_slice(),
            src.bytes.as_slice(),
        );
        // SAFETY: as above, and `packed` holds `total` values of `width` bytes and one byte
        // more (asserted).
        unsafe {
            match src.width {
                3 => pull_sums::<3>(c, lens, long, packed, out),
                _ => pull_sums::<4>(c, lens, long, packed, out),
            }
        }
    }
}

/// `out[s] = sum of c[u]` over list `s` of the sources packed in `src` (`W` bytes each,
/// little-endian, see [`Sources`]), the lists following each other with lengths `lens` (a
/// [`LONG`] byte: the next value of `long`), each sum as [`gather_sum`] forms it (bitwise),
/// without bounds checks: half the instructions of the gathers were compares, and most
/// in-lists of a power-law graph are a few edges long.
///
/// # Safety
/// `W` is 3 or 4, `lens.len() == out.len()`, `long` has an entry for every `LONG` byte of
/// `lens`, `src` holds the values of all lists, `W` bytes each, and at least one byte more,
/// and every value is below `c.len()` (what [`set_up`](super::setup::set_up), [`Sources::new`] and
/// [`Offsets::new`] ensure of their lists).
#[inline(always)]
pub(super) unsafe fn pull_sums<const W: usize>(
    c: &[f64],
    lens: &[u8],
    long: &[u64],
    src: &[u8],
    out: &mut [f64],
) {
    let mask: u32 = if W == 3 { 0x00ff_ffff } else { u32::MAX };
    let (c, p) = (c.as_ptr(), src.as_ptr());
    // SAFETY: (of every call) value `i` starts at byte `W * i`, and its 4-byte read ends at
    // most one byte past the values, inside `src` (the caller's contract).
    let s = |i: usize| unsafe {
        (u32::from_le(p.add(W * i).cast::<u32>().read_unaligned()) & mask) as usize
    };
    let mut a = 0usize;
    let mut next_long = 0usize;
    for (&len, o) in lens.iter().zip(out.iter_mut()) {
        // SAFETY: the window `a..b` lies in `src` and its values index `c`, and a `LONG` byte
        // has its entry in `long` (the caller's contract).
        unsafe {
            let n = if len == LONG {
                next_long += 1;
                *long.get_unchecked(next_long - 1) as usize
            } else {
                usize::from(len)
            };
            let b = a + n;
            let mut acc = [0.0f64; 4];
            let mut i = a;
            while i + 4 <= b {
                for (j, acc) in acc.iter_mut().enumerate() {
                    *acc += *c.add(s(i + j));
                }
                i += 4;
            }
            let mut sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
            while i < b {
                sum += *c.add(s(i));
                i += 1;
            }
            *o = sum;
            a = b;
        }
    }
}

/// `sum of c[u]` over `sources`, with four independent partial sums so that the additions of a
/// long in-list do not wait on each other (the order differs from a left-to-right sum by a few
/// units in the last place): the checked form of one sum of [`pull_sums`].
#[cfg(test)]
pub(super) fn gather_sum(c: &[f64], sources: &[u32]) -> f64 {
    let mut acc = [0.0f64; 4];
    let mut quads = sources.chunks_exact(4);
    for q in &mut quads {
        for (a, &u) in acc.iter_mut().zip(q) {
            *a += c[u as usize];
        }
    }
    let mut sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for &u in quads.remainder() {
        sum += c[u as usize];
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_sums_equal_the_checked_gather_bitwise() {
        // In-lists of every length from 0 to 11 and some of 255 and more (kept in the side
        // list), sources anywhere in `c`, which is long enough for three-byte sources to use
        // their third byte; the sources packed in three and in four bytes.
        const N: usize = 70_001;
        let c: Vec<f64> = (0..N).map(|i| 1.0 / (i as f64 + 0.37)).collect();
        let mut off = vec![0u64];
        let mut src = Vec::new();
        let lengths = (0..12).chain([255, 3, 300, 254, 256]).chain((0..12).rev());
        for len in lengths {
            src.extend((0..len).map(|j| ((len * 40_031 + j * 17_389) % N) as u32));
            off.push(src.len() as u64);
        }
        assert!(
            src.iter().any(|&u| u >= 1 << 16),
            "no source uses a third byte"
        );
        let mut lens = Vec::new();
        let mut long = Vec::new();
        for w in off.windows(2) {
            let n = w[1] - w[0];
            lens.push(if n >= 255 { 255 } else { n as u8 });
            if n >= 255 {
                long.push(n);
            }
        }
        let pack = |width: usize| -> Vec<u8> {
            let mut bytes: Vec<u8> = src
                .iter()
                .flat_map(|u| u.to_le_bytes()[..width].to_vec())
                .collect();
            bytes.push(0);
            bytes
        };
        for width in [3, 4] {
            let packed = pack(width);
            let mut out = vec![f64::NAN; off.len() - 1];
            // SAFETY: the lengths sum to `src.len()`, one `long` entry per 255 byte, the
            // values packed in `width` bytes with one byte more, every source below `N`.
            unsafe {
                match width {
                    3 => pull_sums::<3>(&c, &lens, &long, &packed, &mut out),
                    _ => pull_sums::<4>(&c, &lens, &long, &packed, &mut out),
                }
            };
            for (k, &got) in out.iter().enumerate() {
                let want = gather_sum(&c, &src[off[k] as usize..off[k + 1] as usize]);
                assert_eq!(got.to_bits(), want.to_bits(), "width {width}, slot {k}");
            }
        }
    }

    #[test]
    fn incoming_values_land_at_their_rows_as_bitmaps_and_as_lists() {
        // 1000 rows; four senders: dense (bitmap), sparse (list), dense again, and one whose
        // rows come in three ascending runs (dense, sparse, dense; as a sender that groups its
        // lists by length sends them); an arbitrary permutation of positions.
        let rows = 1000usize;
        let pos_of = |r: usize| ((r * 389 + 17) % rows) as u32;
        let dense_a: Vec<u32> = (0..rows as u32).filter(|r| r % 3 == 0).collect();
        let sparse: Vec<u32> = vec![5, 64, 127, 128, 999];
        let dense_b: Vec<u32> = (0..rows as u32).filter(|r| r % 7 != 1).collect();
        let runs: Vec<u32> = (0..rows as u32)
            .filter(|r| r % 2 == 0)
            .chain([3, 501, 997])
            .chain((0..rows as u32).filter(|r| r % 4 == 1))
            .collect();
        let from = [
            (4, dense_a.len()),
            (9, sparse.len()),
            (11, dense_b.len()),
            (12, runs.len()),
        ];
        let rows_in: Vec<u32> = [&dense_a[..], &sparse, &dense_b, &runs].concat();
        let received: Vec<f64> = (0..rows_in.len()).map(|k| 1.0 + k as f64 * 0.5).collect();
        let mut want = vec![0.25f64; rows];
        for (&r, &v) in rows_in.iter().zip(&received) {
            want[pos_of(r as usize) as usize] += v;
        }
        let out = spillway_runtime::run(&spillway_runtime::Config::new(1), |rt| {
            let mut pos: SbVec<u32> = SbVec::zeroed(rt, rows)?;
            for (r, p) in pos.as_mut_slice().iter_mut().enumerate() {
                *p = pos_of(r);
            }
            let incoming = Incoming::new(rt, rows, &rows_in, &from, pos)?;
            let kinds: Vec<Vec<bool>> = incoming
                .blocks
                .iter()
                .map(|b| incoming.runs[b.2.clone()].iter().map(|r| r.1).collect())
                .collect();
            let mut nx = vec![0.25f64; rows];
            incoming.add(&received, &mut nx);
            Ok::<_, AlgoError>((kinds, nx))
        })
        .unwrap();
        let (kinds, nx) = &out[0];
        let want_kinds = [vec![true], vec![false], vec![true], vec![true, false, true]];
        assert_eq!(kinds, &want_kinds, "bitmap, list, bitmap, three runs");
        assert_eq!(nx, &want);
    }
}
