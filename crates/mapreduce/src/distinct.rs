//! Pairs a map function has already combined itself (each key once per batch): collected in
//! a flat buffer and written as a sorted run of their own, without passing through the
//! combiner's hash table.

use spillway_runtime::prefetch;

use crate::data::{put, put_raw, take, take_raw, Data};
use crate::error::Error;
use crate::hash::{partition_hash, radix_sort, HashRanges};
use crate::run::{Run, RunWriter, Spill};

/// Entries whose record is prefetched before it is copied into the run.
const AHEAD: usize = 16;

/// Encoded pairs and their (partitioning hash, offset) in the buffer.
#[derive(Default)]
pub(crate) struct Distinct {
    /// `[body length u32][key as put_raw wrote it][value as put wrote it]` per pair.
    records: Vec<u8>,
    pairs: Vec<(u64, u64)>,
}

impl Distinct {
    /// Adds a pair; returns the bytes it takes in a run.
    #[inline]
    pub(crate) fn push<K: Data, V: Data>(&mut self, key: &[u8], value: &V) -> usize {
        let at = self.records.len();
        self.records.extend_from_slice(&[0; 4]);
        put_raw::<K>(key, &mut self.records);
        put(value, &mut self.records);
        let body = self.records.len() - at - 4;
        self.records[at..at + 4].copy_from_slice(&(body as u32).to_le_bytes());
        self.pairs.push((partition_hash(key), at as u64));
        body
    }

    /// Bytes of memory held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.records.len() + 16 * self.pairs.len()
    }

    /// The pairs as a run sorted by partitioning hash (`None` if there are none); pairs of
    /// equal keys (given in different batches) are combined with `combine` into one entry.
    /// Empties the buffer.
    pub(crate) fn write_run<K: Data, V: Data>(
        &mut self,
        spill: &Spill,
        ranges: &HashRanges,
        combine: &dyn Fn(&mut V, V),
    ) -> Result<Option<Run>, Error> {
        if self.pairs.is_empty() {
            return Ok(None);
        }
        let mut w = RunWriter::new(spill, ranges);
        radix_sort(&mut self.pairs);
        let records = &self.records;
        let body = |at: u64| -> &[u8] {
            let at = at as usize;
            let len = u32::from_le_bytes(records[at..at + 4].try_into().expect("4 bytes"));
            &records[at + 4..at + 4 + len as usize]
        };
        let n = self.pairs.len();
        let mut i = 0;
        while i < n {
            // The records are in the order they came, the pairs in hash order: fetch the
            // record a few entries ahead.
            if let Some(&(_, ahead)) = self.pairs.get(i + AHEAD) {
                prefetch(records.as_ptr().wrapping_add(ahead as usize));
            }
            let h = self.pairs[i].0;
            let mut j = i + 1;
            while j < n && self.pairs[j].0 == h {
                j += 1;
            }
            if j == i + 1 {
                // The common case: a hash of one key.
                w.entry(h, |b| b.extend_from_slice(body(self.pairs[i].1)))?;
            } else {
                // Equal hashes: one entry per distinct key, its values combined.
                let mut groups: Vec<(&[u8], V)> = Vec::new();
                for &(_, at) in &self.pairs[i..j] {
                    let rec = body(at);
                    let mut pos = 0;
                    let key = take_raw::<K>(rec, &mut pos);
                    let value = take::<V>(rec, &mut pos);
                    match groups.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, v)) => combine(v, value),
                        None => groups.push((key, value)),
                    }
                }
                for (key, value) in groups {
                    w.entry(h, |b| {
                        put_raw::<K>(key, b);
                        put(&value, b);
                    })?;
                }
            }
            i = j;
        }
        self.records = Vec::new();
        self.pairs = Vec::new();
        w.finish().map(Some)
    }
}
