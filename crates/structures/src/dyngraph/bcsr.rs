//! BCSR: a static CSR plus linked-list overflow, folded periodically (thesis section 4.2.2).

use super::batch::{for_each_run, max_id, merge_into, sorted_keys};
use super::csr::Csr;
use super::pool::Lists;
use super::query::{self, QueryScratch, Traversal, Visit};
use super::{vec_bytes, vertex_index, DynGraph};

/// When BCSR folds its overflow lists into a new CSR.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FoldPolicy {
    /// When the overflow holds more than this fraction of the arcs in the CSR part (and at
    /// least 4096 arcs). A constant fraction keeps the amortised fold cost per update O(1)
    /// (thesis: "as long as the static CSR is expanded by some constant proportion").
    Fraction(f64),
    /// After every this many updates (inserts and deletes that changed the graph); the
    /// thesis's experiments folded before each query, every `|V| / alpha` insertions.
    Every(u64),
    /// Only when [`Bcsr::fold`] is called.
    Manual,
}

impl Default for FoldPolicy {
    fn default() -> Self {
        FoldPolicy::Fraction(0.25)
    }
}

impl std::str::FromStr for FoldPolicy {
    type Err = String;

    /// Parses `fraction:F` (finite, F > 0), `every:N` (N >= 1) or `manual`.
    fn from_str(text: &str) -> Result<FoldPolicy, String> {
        let bad = || {
            format!(
                "'{text}' is not a fold policy (expected fraction:F with F > 0, every:N with \
                 N >= 1, or manual)"
            )
        };
        if text == "manual" {
            return Ok(FoldPolicy::Manual);
        }
        if let Some(f) = text.strip_prefix("fraction:") {
            let f: f64 = f.parse().map_err(|_| bad())?;
            return (f.is_finite() && f > 0.0)
                .then_some(FoldPolicy::Fraction(f))
                .ok_or_else(bad);
        }
        if let Some(k) = text.strip_prefix("every:") {
            let k: u64 = k.parse().map_err(|_| bad())?;
            return (k >= 1).then_some(FoldPolicy::Every(k)).ok_or_else(bad);
        }
        Err(bad())
    }
}

impl std::fmt::Display for FoldPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FoldPolicy::Fraction(x) => write!(f, "fraction:{x}"),
            FoldPolicy::Every(k) => write!(f, "every:{k}"),
            FoldPolicy::Manual => f.write_str("manual"),
        }
    }
}

/// Batch CSR: most arcs sit in a static CSR; new arcs go into per-vertex sorted linked
/// lists (as [`LinkedLists`](super::LinkedLists)) until a fold merges them into a new CSR.
///
/// # Semantics
/// As [`DynGraph`]. Deleting an arc of the CSR part shifts the rest of the vertex's segment
/// left (the segment keeps its capacity until the next fold); deleting an overflow arc
/// unlinks it. A fold builds a new CSR holding every arc, with no free slots, and empties
/// the overflow; it happens after an update when the [`FoldPolicy`] says so.
///
/// # Cost
/// Insert: a binary search of the CSR segment and a walk of the (short) overflow list. A
/// batch: one walk of each touched overflow list, or one fold O(V + E + k).
/// Delete: O(Δ). Fold: O(V + E) time, and while it runs the old and the new CSR coexist
/// ([`peak_bytes`](Bcsr::peak_bytes) records the high-water mark). Memory: 20 bytes per vertex
/// + 4 per arc in the CSR + 8 per overflow arc.
pub struct Bcsr {
    csr: Csr,
    /// Valid arcs at the start of each vertex's CSR segment.
    lens: Vec<u32>,
    overflow: Lists,
    csr_arcs: u64,
    policy: FoldPolicy,
    updates_since_fold: u64,
    folds: u64,
    peak: usize,
}

impl Bcsr {
    /// An empty graph with ids `0..n` reserved.
    pub fn with_vertices(n: usize, policy: FoldPolicy) -> Bcsr {
        let mut g = Bcsr {
            csr: Csr::from_parts(vec![0; n + 1], Vec::new()),
            lens: vec![0; n],
            overflow: Lists::with_vertices(n),
            csr_arcs: 0,
            policy,
            updates_since_fold: 0,
            folds: 0,
            peak: 0,
        };
        g.peak = g.bytes_used();
        g
    }

    /// Number of folds so far.
    pub fn folds(&self) -> u64 {
        self.folds
    }

    /// Arcs in the overflow lists.
    pub fn overflow_arcs(&self) -> u64 {
        self.overflow.arcs
    }

    /// The most bytes held at any moment so far, folds included.
    pub fn peak_bytes(&self) -> usize {
        self.peak.max(self.bytes_used())
    }

    fn ensure(&mut self, u: usize) {
        if u >= self.lens.len() {
            // New vertices get empty CSR segments at the end.
            let last = *self.csr.offsets.last().unwrap_or(&0);
            self.csr.offsets.resize(u + 2, last);
            self.lens.resize(u + 1, 0);
        }
        self.overflow.ensure(u);
    }

    /// The valid part of `u`'s CSR segment.
    #[inline]
    fn segment(&self, u: usize) -> &[u32] {
        let start = self.csr.offsets[u] as usize;
        &self.csr.targets[start..start + self.lens[u] as usize]
    }

    /// Merges the overflow lists into a new CSR.
    pub fn fold(&mut self) {
        self.fold_with(&[]);
    }

    /// Merges the overflow lists and the sorted batch `keys` (see
    /// [`sorted_keys`](super::batch::sorted_keys); sources within the vertex range) into a new
    /// CSR in one pass; returns how many arcs of the batch were new.
    fn fold_with(&mut self, keys: &[u64]) -> u64 {
        let n = self.lens.len();
        let total = self.csr_arcs + self.overflow.arcs + keys.len() as u64;
        let mut offsets = Vec::with_capacity(n + 1);
        let mut targets = Vec::with_capacity(total as usize);
        offsets.push(0u64);
        let (mut list, mut vals, mut merged) = (Vec::new(), Vec::new(), Vec::new());
        let mut k = 0;
        let mut new = 0u64;
        for u in 0..n {
            let seg = self.segment(u);
            let current: &[u32] = if self.overflow.degrees[u] == 0 {
                seg
            } else {
                list.clear();
                let mut i = 0;
                self.overflow.for_each(u, |x| {
                    while i < seg.len() && seg[i] < x {
                        list.push(seg[i]);
                        i += 1;
                    }
                    list.push(x);
                });
                list.extend_from_slice(&seg[i..]);
                &list
            };
            vals.clear();
            while k < keys.len() && (keys[k] >> 32) as usize == u {
                vals.push(keys[k] as u32);
                k += 1;
            }
            if vals.is_empty() {
                targets.extend_from_slice(current);
            } else {
                new += merge_into(current, &vals, &mut merged) as u64;
                targets.extend_from_slice(&merged);
            }
            offsets.push(targets.len() as u64);
        }
        // Both CSRs are alive here.
        let during = self.bytes_used() + vec_bytes(&offsets) + vec_bytes(&targets);
        self.peak = self.peak.max(during);
        for u in 0..n {
            self.lens[u] = (offsets[u + 1] - offsets[u]) as u32;
        }
        self.csr_arcs = targets.len() as u64;
        self.csr = Csr::from_parts(offsets, targets);
        self.overflow.clear();
        self.updates_since_fold = 0;
        self.folds += 1;
        new
    }

    fn after_update(&mut self) {
        self.updates_since_fold += 1;
        self.peak = self.peak.max(self.bytes_used());
        let fold = match self.policy {
            FoldPolicy::Fraction(f) => {
                self.overflow.arcs >= 4096 && self.overflow.arcs as f64 > f * self.csr_arcs as f64
            }
            FoldPolicy::Every(k) => k > 0 && self.updates_since_fold >= k,
            FoldPolicy::Manual => false,
        };
        if fold {
            self.fold();
        }
    }
}

impl Visit for Bcsr {
    fn vertex_count(&self) -> usize {
        self.lens.len()
    }

    /// The CSR segment, then the overflow list (no merge: order does not matter).
    #[inline]
    fn visit(&self, v: u32, mut f: impl FnMut(u32)) {
        let vi = v as usize;
        self.segment(vi).iter().for_each(|&x| f(x));
        if self.overflow.degrees[vi] != 0 {
            self.overflow.for_each(vi, f);
        }
    }

    #[inline]
    fn prefetch(&self, v: u32, far: bool) {
        let vi = v as usize;
        let at = &self.csr.offsets[vi];
        if far {
            query::prefetch(at);
            query::prefetch(&self.lens[vi]);
            query::prefetch(&self.overflow.degrees[vi]);
        } else {
            query::prefetch(self.csr.targets.as_ptr().wrapping_add(*at as usize));
        }
    }
}

impl DynGraph for Bcsr {
    fn bft(&self, source: u32, whole: bool, scratch: &mut QueryScratch) -> Traversal {
        query::bft(self, source, whole, scratch)
    }

    /// The two CSR segments in place when neither vertex has overflow arcs; otherwise merged
    /// copies of both lists.
    fn common_neighbours(&self, u: u32, v: u32, scratch: &mut QueryScratch) -> u64 {
        let (ui, vi) = (u as usize, v as usize);
        let n = self.lens.len();
        if ui >= n || vi >= n {
            return 0;
        }
        if self.overflow.degrees[ui] == 0 && self.overflow.degrees[vi] == 0 {
            return query::intersect_sorted(self.segment(ui), self.segment(vi));
        }
        self.neighbours_into(u, &mut scratch.a);
        self.neighbours_into(v, &mut scratch.b);
        query::intersect_sorted(&scratch.a, &scratch.b)
    }

    fn insert(&mut self, u: u32, v: u32) -> bool {
        let ui = vertex_index(u);
        self.ensure(ui.max(vertex_index(v)));
        if self.segment(ui).binary_search(&v).is_ok() {
            return false;
        }
        if !self.overflow.insert(ui, v) {
            return false;
        }
        self.after_update();
        true
    }

    /// The batch goes into the overflow lists (one walk of each touched list, arcs of the CSR
    /// part skipped by binary search); if the policy would fold during the batch, the batch is
    /// merged with the CSR and the overflow in one fold instead.
    fn insert_batch(&mut self, batch: &[(u32, u32)]) -> u64 {
        let keys = sorted_keys(batch);
        let Some(top) = max_id(&keys) else {
            return 0;
        };
        self.ensure(vertex_index(top));
        let m = keys.len() as u64;
        let fold_now = match self.policy {
            FoldPolicy::Fraction(f) => {
                let o = self.overflow.arcs + m;
                o >= 4096 && o as f64 > f * self.csr_arcs as f64
            }
            FoldPolicy::Every(k) => k > 0 && self.updates_since_fold + m >= k,
            FoldPolicy::Manual => false,
        };
        if fold_now {
            return self.fold_with(&keys);
        }
        let mut new = 0u64;
        let (mut vals, mut fresh) = (Vec::new(), Vec::new());
        for_each_run(&keys, &mut vals, |u, vs| {
            let ui = u as usize;
            let seg = self.segment(ui);
            fresh.clear();
            fresh.extend(vs.iter().filter(|v| seg.binary_search(v).is_err()));
            new += u64::from(self.overflow.insert_sorted(ui, &fresh));
        });
        self.updates_since_fold += new;
        self.peak = self.peak.max(self.bytes_used());
        new
    }

    fn delete(&mut self, u: u32, v: u32) -> bool {
        let ui = u as usize;
        if ui >= self.lens.len() {
            return false;
        }
        if let Ok(pos) = self.segment(ui).binary_search(&v) {
            let start = self.csr.offsets[ui] as usize;
            let len = self.lens[ui] as usize;
            self.csr
                .targets
                .copy_within(start + pos + 1..start + len, start + pos);
            self.lens[ui] -= 1;
            self.csr_arcs -= 1;
            self.after_update();
            return true;
        }
        if self.overflow.delete(ui, v) {
            self.after_update();
            return true;
        }
        false
    }

    fn contains(&self, u: u32, v: u32) -> bool {
        let ui = u as usize;
        ui < self.lens.len()
            && (self.segment(ui).binary_search(&v).is_ok() || self.overflow.contains(ui, v))
    }

    fn degree(&self, v: u32) -> usize {
        let vi = v as usize;
        if vi >= self.lens.len() {
            return 0;
        }
        self.lens[vi] as usize + self.overflow.degrees[vi] as usize
    }

    fn neighbours_into(&self, v: u32, out: &mut Vec<u32>) {
        out.clear();
        let vi = v as usize;
        if vi >= self.lens.len() {
            return;
        }
        let seg = self.segment(vi);
        let mut i = 0;
        self.overflow.for_each(vi, |x| {
            while i < seg.len() && seg[i] < x {
                out.push(seg[i]);
                i += 1;
            }
            out.push(x);
        });
        out.extend_from_slice(&seg[i..]);
    }

    fn num_vertices(&self) -> usize {
        self.lens.len()
    }

    fn num_arcs(&self) -> u64 {
        self.csr_arcs + self.overflow.arcs
    }

    fn bytes_used(&self) -> usize {
        std::mem::size_of::<Self>() - std::mem::size_of::<Csr>()
            + self.csr.bytes_used()
            + vec_bytes(&self.lens)
            + self.overflow.heap_bytes()
    }

    fn name(&self) -> &'static str {
        "bcsr"
    }
}
