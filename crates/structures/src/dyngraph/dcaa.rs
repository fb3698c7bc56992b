//! DCAA: DIAA's intervals and residuals, gap-coded as varints (thesis section 4.2.5).

use super::batch::{for_each_run, max_id, merge_into, sorted_keys};
use super::query::{self, QueryScratch, Traversal, Visit};
use super::{intervals, vec_bytes, vertex_index, DynGraph};
use crate::varint::{put_varint, unzigzag, zigzag};

/// Dynamic compressed adjacency arrays: every vertex owns an exact-size byte array holding
/// its intervalised list (as [`Diaa`](super::Diaa)) in WebGraph style, plus its degree.
///
/// # Semantics
/// As [`DynGraph`]. Byte layout of vertex `v`'s list (empty for no neighbours), every number
/// a LEB128 varint:
///
/// - the number of intervals `i`;
/// - per interval: its start, the first as `zigzag(start - v)` and the others as the gap
///   `start - previous_end - 2` (maximal runs are at least 2 apart), then `length - 2`;
/// - the residuals (their count is the degree minus the interval lengths): the first as
///   `zigzag(r - v)`, the others as `r - previous - 2` (isolated ids are at least 2 apart).
///
/// An update decodes the list, applies DIAA's update and encodes it again into a new
/// exact-size array.
///
/// # Cost
/// Insert and delete: O(Δ) for the decode, the update and the encode (the thesis's
/// O(3Δ)). Contains decodes until it passes the id, O(Δ). Memory: 20 bytes per vertex
/// (pointer, length, degree) plus about one byte per small gap.
pub struct Dcaa {
    lists: Vec<Box<[u8]>>,
    degrees: Vec<u32>,
    arcs: u64,
    bytes: u64,
    /// Decoded form of the list being updated.
    scratch: Vec<u32>,
    /// Encoded form of the list being updated.
    scratch_bytes: Vec<u8>,
}

/// Reads varints from a trusted in-memory list.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    #[inline]
    fn next(&mut self) -> u64 {
        // Most gaps of a list with locality fit in one byte.
        let b = self.bytes[self.at];
        if b < 0x80 {
            self.at += 1;
            return u64::from(b);
        }
        self.next_long()
    }

    /// A varint of two or more bytes.
    #[inline]
    fn next_long(&mut self) -> u64 {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = self.bytes[self.at];
            self.at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return v;
            }
            shift += 7;
        }
    }
}

/// Encodes the flat intervalised list `a` of vertex `v` into `out` (cleared first).
fn encode(a: &[u32], v: u32, out: &mut Vec<u8>) {
    out.clear();
    if a.is_empty() {
        return;
    }
    let i = a[0] as usize;
    put_varint(out, i as u64);
    let base = i64::from(v);
    let mut prev_end = 0u32;
    for j in 0..i {
        let (s, l) = (a[1 + 2 * j], a[2 + 2 * j]);
        if j == 0 {
            put_varint(out, zigzag(i64::from(s) - base));
        } else {
            put_varint(out, u64::from(s - prev_end - 2));
        }
        put_varint(out, u64::from(l - 2));
        prev_end = s + l - 1;
    }
    let mut prev = None;
    for &r in &a[1 + 2 * i..] {
        match prev {
            None => put_varint(out, zigzag(i64::from(r) - base)),
            Some(p) => put_varint(out, u64::from(r - p - 2)),
        }
        prev = Some(r);
    }
}

/// Decodes the list of vertex `v` with `degree` ids into the flat form (cleared first).
fn decode(bytes: &[u8], v: u32, degree: u32, out: &mut Vec<u32>) {
    out.clear();
    if bytes.is_empty() {
        return;
    }
    let mut c = Cursor { bytes, at: 0 };
    let i = c.next() as usize;
    out.push(i as u32);
    let base = i64::from(v);
    let mut prev_end = 0u32;
    let mut covered = 0u32;
    for j in 0..i {
        let s = if j == 0 {
            (base + unzigzag(c.next())) as u32
        } else {
            prev_end + 2 + c.next() as u32
        };
        let l = c.next() as u32 + 2;
        out.push(s);
        out.push(l);
        covered += l;
        prev_end = s + l - 1;
    }
    // The residuals go into slots made beforehand: no length update per id, and the
    // previous id stays in a register.
    let at = out.len();
    out.resize(at + (degree - covered) as usize, 0);
    let mut prev = 0u32;
    for (k, slot) in out[at..].iter_mut().enumerate() {
        prev = if k == 0 {
            (base + unzigzag(c.next())) as u32
        } else {
            prev + 2 + c.next() as u32
        };
        *slot = prev;
    }
}

/// Calls `f` with the ids of an encoded list in increasing order; stops early when `f`
/// returns `false`.
#[inline]
fn scan(bytes: &[u8], v: u32, degree: u32, mut f: impl FnMut(u32) -> bool) {
    if bytes.is_empty() {
        return;
    }
    let mut c = Cursor { bytes, at: 0 };
    let i = c.next() as usize;
    // Intervals come first in the stream but interleave with residuals in value order:
    // read the intervals (few) into a small buffer, then merge while streaming residuals.
    let mut ivl: Vec<(u32, u32)> = Vec::with_capacity(i);
    let base = i64::from(v);
    let mut prev_end = 0u32;
    let mut covered = 0u32;
    for j in 0..i {
        let s = if j == 0 {
            (base + unzigzag(c.next())) as u32
        } else {
            prev_end + 2 + c.next() as u32
        };
        let l = c.next() as u32 + 2;
        ivl.push((s, l));
        covered += l;
        prev_end = s + l - 1;
    }
    let mut next_ivl = 0;
    let mut prev = None;
    for _ in 0..degree - covered {
        let r = match prev {
            None => (base + unzigzag(c.next())) as u32,
            Some(p) => p + 2 + c.next() as u32,
        };
        prev = Some(r);
        while next_ivl < ivl.len() && ivl[next_ivl].0 < r {
            let (s, l) = ivl[next_ivl];
            for x in s..s + l {
                if !f(x) {
                    return;
                }
            }
            next_ivl += 1;
        }
        if !f(r) {
            return;
        }
    }
    for &(s, l) in &ivl[next_ivl..] {
        for x in s..s + l {
            if !f(x) {
                return;
            }
        }
    }
}

/// Calls `f` with the ids of an encoded list in stream order (intervals, then residuals),
/// decoding as it goes, without a buffer.
#[inline]
fn visit_encoded(bytes: &[u8], v: u32, degree: u32, mut f: impl FnMut(u32)) {
    if bytes.is_empty() {
        return;
    }
    let mut c = Cursor { bytes, at: 0 };
    let i = c.next() as usize;
    let base = i64::from(v);
    let mut prev_end = 0u32;
    let mut covered = 0u32;
    for j in 0..i {
        let s = if j == 0 {
            (base + unzigzag(c.next())) as u32
        } else {
            prev_end + 2 + c.next() as u32
        };
        let l = c.next() as u32 + 2;
        (s..s + l).for_each(&mut f);
        covered += l;
        prev_end = s + l - 1;
    }
    let left = degree - covered;
    if left == 0 {
        return;
    }
    let mut r = (base + unzigzag(c.next())) as u32;
    f(r);
    for _ in 1..left {
        r += 2 + c.next() as u32;
        f(r);
    }
}

/// Whether the encoded list holds `x`: the intervals (first in the stream) are checked as
/// they are read, then the residuals until one passes `x`; nothing is buffered.
fn contains_encoded(bytes: &[u8], v: u32, degree: u32, x: u32) -> bool {
    if bytes.is_empty() {
        return false;
    }
    let mut c = Cursor { bytes, at: 0 };
    let i = c.next() as usize;
    let base = i64::from(v);
    let mut prev_end = 0u32;
    let mut covered = 0u32;
    for j in 0..i {
        let s = if j == 0 {
            (base + unzigzag(c.next())) as u32
        } else {
            prev_end + 2 + c.next() as u32
        };
        let l = c.next() as u32 + 2;
        if x >= s && x - s < l {
            return true;
        }
        covered += l;
        prev_end = s + l - 1;
    }
    let mut r = 0u32;
    for k in 0..degree - covered {
        r = if k == 0 {
            (base + unzigzag(c.next())) as u32
        } else {
            r + 2 + c.next() as u32
        };
        if r >= x {
            return r == x;
        }
    }
    false
}

impl Dcaa {
    /// An empty graph.
    pub fn new() -> Dcaa {
        Dcaa::with_vertices(0)
    }

    /// An empty graph with ids `0..n` reserved.
    pub fn with_vertices(n: usize) -> Dcaa {
        let mut lists = Vec::new();
        lists.resize_with(n, Default::default);
        Dcaa {
            lists,
            degrees: vec![0; n],
            arcs: 0,
            bytes: 0,
            scratch: Vec::new(),
            scratch_bytes: Vec::new(),
        }
    }

    fn ensure(&mut self, u: usize) {
        if u >= self.lists.len() {
            self.lists.resize_with(u + 1, Default::default);
            self.degrees.resize(u + 1, 0);
        }
    }

    /// Decodes `u`'s list, applies `op`, and stores the result if it changed.
    fn update(&mut self, u: usize, op: impl FnOnce(&mut Vec<u32>) -> bool) -> bool {
        let v = u as u32;
        decode(&self.lists[u], v, self.degrees[u], &mut self.scratch);
        if !op(&mut self.scratch) {
            return false;
        }
        encode(&self.scratch, v, &mut self.scratch_bytes);
        self.bytes = self.bytes - self.lists[u].len() as u64 + self.scratch_bytes.len() as u64;
        self.lists[u] = self.scratch_bytes.as_slice().into();
        true
    }
}

impl Default for Dcaa {
    fn default() -> Self {
        Dcaa::new()
    }
}

impl Visit for Dcaa {
    fn vertex_count(&self) -> usize {
        self.lists.len()
    }

    #[inline]
    fn visit(&self, v: u32, f: impl FnMut(u32)) {
        let vi = v as usize;
        visit_encoded(&self.lists[vi], v, self.degrees[vi], f);
    }

    #[inline]
    fn prefetch(&self, v: u32, far: bool) {
        let vi = v as usize;
        if far {
            query::prefetch(&self.lists[vi]);
            query::prefetch(&self.degrees[vi]);
        } else {
            query::prefetch(self.lists[vi].as_ptr());
        }
    }
}

impl Dcaa {
    /// Decodes `v`'s list into its flat intervalised form (empty beyond the range).
    fn decode_into(&self, v: u32, out: &mut Vec<u32>) {
        match self.lists.get(v as usize) {
            Some(l) => decode(l, v, self.degrees[v as usize], out),
            None => out.clear(),
        }
    }
}

impl DynGraph for Dcaa {
    fn bft(&self, source: u32, whole: bool, scratch: &mut QueryScratch) -> Traversal {
        query::bft(self, source, whole, scratch)
    }

    /// Decodes both lists to intervals and residuals, then intersects them as DIAA does.
    fn common_neighbours(&self, u: u32, v: u32, scratch: &mut QueryScratch) -> u64 {
        self.decode_into(u, &mut scratch.a);
        self.decode_into(v, &mut scratch.b);
        query::intersect_intervalised(&scratch.a, &scratch.b)
    }

    fn insert(&mut self, u: u32, v: u32) -> bool {
        let ui = vertex_index(u);
        self.ensure(ui.max(vertex_index(v)));
        if !self.update(ui, |a| intervals::insert(a, v)) {
            return false;
        }
        self.degrees[ui] += 1;
        self.arcs += 1;
        true
    }

    /// Each touched list is decoded, merged with its new arcs, intervalised and encoded again
    /// into a new exact-size array.
    fn insert_batch(&mut self, batch: &[(u32, u32)]) -> u64 {
        let keys = sorted_keys(batch);
        let Some(top) = max_id(&keys) else {
            return 0;
        };
        self.ensure(vertex_index(top));
        let (mut vals, mut ids, mut merged, mut res) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut new = 0u64;
        for_each_run(&keys, &mut vals, |u, vs| {
            let ui = u as usize;
            decode(&self.lists[ui], u, self.degrees[ui], &mut self.scratch);
            ids.clear();
            intervals::for_each(&self.scratch, |x| ids.push(x));
            let added = merge_into(&ids, vs, &mut merged);
            if added > 0 {
                intervals::from_sorted(&merged, &mut self.scratch, &mut res);
                encode(&self.scratch, u, &mut self.scratch_bytes);
                self.bytes =
                    self.bytes - self.lists[ui].len() as u64 + self.scratch_bytes.len() as u64;
                self.lists[ui] = self.scratch_bytes.as_slice().into();
                self.degrees[ui] += added as u32;
                new += added as u64;
            }
        });
        self.arcs += new;
        new
    }

    fn delete(&mut self, u: u32, v: u32) -> bool {
        let ui = u as usize;
        if ui >= self.lists.len() || !self.update(ui, |a| intervals::delete(a, v)) {
            return false;
        }
        self.degrees[ui] -= 1;
        self.arcs -= 1;
        true
    }

    fn contains(&self, u: u32, v: u32) -> bool {
        let ui = u as usize;
        if ui >= self.lists.len() {
            return false;
        }
        contains_encoded(&self.lists[ui], u, self.degrees[ui], v)
    }

    fn degree(&self, v: u32) -> usize {
        self.degrees.get(v as usize).map_or(0, |&d| d as usize)
    }

    fn neighbours_into(&self, v: u32, out: &mut Vec<u32>) {
        out.clear();
        let vi = v as usize;
        if vi < self.lists.len() {
            scan(&self.lists[vi], v, self.degrees[vi], |x| {
                out.push(x);
                true
            });
        }
    }

    fn num_vertices(&self) -> usize {
        self.lists.len()
    }

    fn num_arcs(&self) -> u64 {
        self.arcs
    }

    fn bytes_used(&self) -> usize {
        std::mem::size_of::<Self>()
            + vec_bytes(&self.lists)
            + vec_bytes(&self.degrees)
            + self.bytes as usize
            + vec_bytes(&self.scratch)
            + vec_bytes(&self.scratch_bytes)
    }

    fn name(&self) -> &'static str {
        "dcaa"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips() {
        let mut a = Vec::new();
        for x in [3u32, 4, 5, 9, 20, 21, 40, 1000, 1001, 1002, 70000] {
            intervals::insert(&mut a, x);
        }
        for v in [0u32, 10, 5000, 100000] {
            let mut bytes = Vec::new();
            encode(&a, v, &mut bytes);
            let mut back = Vec::new();
            decode(&bytes, v, 11, &mut back);
            assert_eq!(back, a);
            let mut ids = Vec::new();
            scan(&bytes, v, 11, |x| {
                ids.push(x);
                true
            });
            assert_eq!(ids, vec![3, 4, 5, 9, 20, 21, 40, 1000, 1001, 1002, 70000]);
        }
    }
}
