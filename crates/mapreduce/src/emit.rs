//! The map side: collecting emitted pairs, combining them, and writing sorted runs.

use std::marker::PhantomData;

use crate::data::{put, put_raw, take_raw, Data};
use crate::error::Error;
use crate::hash::{group_hash, partition_hash, radix_sort, HashRanges};
use crate::run::{Run, RunWriter, Spill};

/// How a combiner merges a second value into the first.
pub(crate) type CombineFn<'f, V> = &'f dyn Fn(&mut V, V);

/// Receives the pairs a map function emits.
///
/// Without a combiner, pairs are appended to a buffer with their (hash, index) pairs; with
/// one, they go into a hash table (seeded differently from the partitioning hash) where the
/// values of equal keys are combined at once. When the buffer or table reaches the memory
/// allowance it becomes a sorted run (in memory, or in the spill directory).
pub struct Emitter<'e, K, V> {
    inner: Collector<'e, V>,
    scratch: Vec<u8>,
    scratch2: Vec<u8>,
    records: u64,
    bytes: u64,
    _k: PhantomData<fn(K)>,
}

enum Collector<'e, V> {
    Plain {
        records: Vec<u8>,
        pairs: Vec<(u64, u64)>,
    },
    Combine {
        table: Table<V>,
        combine: CombineFn<'e, V>,
    },
}

/// What the map side produced and how much.
pub(crate) struct MapOutput {
    pub(crate) runs: Vec<Run>,
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    pub(crate) flush_time: std::time::Duration,
}

pub(crate) struct EmitState<'s> {
    spill: &'s Spill,
    ranges: &'s HashRanges,
    flush_at: usize,
    out: MapOutput,
    error: Option<Error>,
}

impl<'s> EmitState<'s> {
    pub(crate) fn new(spill: &'s Spill, ranges: &'s HashRanges, flush_at: usize) -> Self {
        EmitState {
            spill,
            ranges,
            flush_at,
            out: MapOutput {
                runs: Vec::new(),
                records: 0,
                bytes: 0,
                flush_time: std::time::Duration::ZERO,
            },
            error: None,
        }
    }
}

/// An emitter together with where its runs go.
pub(crate) struct Sink<'e, 's, K, V> {
    pub(crate) emitter: Emitter<'e, K, V>,
    pub(crate) state: EmitState<'s>,
}

impl<'e, 's, K: Data, V: Data> Sink<'e, 's, K, V> {
    pub(crate) fn new(state: EmitState<'s>, combine: Option<CombineFn<'e, V>>) -> Self {
        let inner = match combine {
            None => Collector::Plain {
                records: Vec::new(),
                pairs: Vec::new(),
            },
            Some(combine) => Collector::Combine {
                table: Table::new(),
                combine,
            },
        };
        Sink {
            emitter: Emitter {
                inner,
                scratch: Vec::new(),
                scratch2: Vec::new(),
                records: 0,
                bytes: 0,
                _k: PhantomData,
            },
            state,
        }
    }

    /// Turns the buffer into a run if it reached the allowance.
    pub(crate) fn maybe_flush(&mut self) {
        if self.emitter.heap_bytes() >= self.state.flush_at && self.state.error.is_none() {
            if let Err(e) = self.flush() {
                self.state.error = Some(e);
            }
        }
    }

    fn flush(&mut self) -> Result<(), Error> {
        let t = std::time::Instant::now();
        let run = self
            .emitter
            .write_run(self.state.spill, self.state.ranges)?;
        if let Some(run) = run {
            self.state.out.runs.push(run);
        }
        self.state.out.flush_time += t.elapsed();
        Ok(())
    }

    /// Everything emitted, as sorted runs.
    pub(crate) fn finish(mut self) -> Result<MapOutput, Error> {
        if let Some(e) = self.state.error.take() {
            return Err(e);
        }
        self.flush()?;
        self.state.out.records = self.emitter.records;
        self.state.out.bytes = self.emitter.bytes;
        Ok(self.state.out)
    }
}

impl<K: Data, V: Data> Emitter<'_, K, V> {
    /// Emits the pair `(key, value)`.
    #[inline]
    pub fn emit(&mut self, key: &K, value: V) {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        key.write(&mut scratch);
        self.emit_raw_key(&scratch, value);
        self.scratch = scratch;
    }

    /// Emits a pair whose key is given by its encoding (what [`Data::write`] of the key
    /// appends); saves building the key when the bytes are at hand (a word of a text is
    /// the encoding of a `Vec<u8>`).
    #[inline]
    pub fn emit_raw_key(&mut self, key: &[u8], value: V) {
        let key_prefix = if K::SIZE.is_some() { 0 } else { 4 };
        match &mut self.inner {
            Collector::Plain { records, pairs } => {
                let at = records.len();
                put_raw::<K>(key, records);
                put(&value, records);
                pairs.push((partition_hash(key), at as u64));
                self.bytes += (records.len() - at + crate::run::HEADER) as u64;
            }
            Collector::Combine { table, combine } => {
                let value_bytes = match V::SIZE {
                    Some(n) => n,
                    None => {
                        self.scratch2.clear();
                        value.write(&mut self.scratch2);
                        4 + self.scratch2.len()
                    }
                };
                self.bytes += (crate::run::HEADER + key_prefix + key.len() + value_bytes) as u64;
                table.insert(key, value, *combine);
            }
        }
        self.records += 1;
    }

    /// Bytes of memory the buffer or table holds.
    fn heap_bytes(&self) -> usize {
        match &self.inner {
            Collector::Plain { records, pairs } => records.len() + 16 * pairs.len(),
            Collector::Combine { table, .. } => table.heap_bytes(),
        }
    }

    /// Sorts what was collected by partitioning hash into a run (grouping the values of each
    /// key into one entry) and empties the buffer or table.
    fn write_run(&mut self, spill: &Spill, ranges: &HashRanges) -> Result<Option<Run>, Error> {
        let mut w = RunWriter::new(spill, ranges);
        match &mut self.inner {
            Collector::Plain { records, pairs } => {
                if pairs.is_empty() {
                    return Ok(None);
                }
                radix_sort(pairs);
                let n = pairs.len();
                let mut i = 0;
                while i < n {
                    let h = pairs[i].0;
                    let mut j = i + 1;
                    while j < n && pairs[j].0 == h {
                        j += 1;
                    }
                    // (key, values with their prefixes) for each distinct key of this hash.
                    let mut groups: Vec<(&[u8], Vec<&[u8]>)> = Vec::new();
                    for &(_, at) in &pairs[i..j] {
                        let rec = &records[at as usize..];
                        let mut pos = 0;
                        let key = take_raw::<K>(rec, &mut pos);
                        let v0 = pos;
                        take_raw::<V>(rec, &mut pos);
                        let value = &rec[v0..pos];
                        match groups.iter_mut().find(|(k, _)| *k == key) {
                            Some((_, vs)) => vs.push(value),
                            None => groups.push((key, vec![value])),
                        }
                    }
                    for (key, values) in groups {
                        w.entry(h, |b| {
                            put_raw::<K>(key, b);
                            for v in values {
                                b.extend_from_slice(v);
                            }
                        })?;
                    }
                    i = j;
                }
                records.clear();
                pairs.clear();
            }
            Collector::Combine { table, .. } => {
                if table.len() == 0 {
                    return Ok(None);
                }
                let mut pairs: Vec<(u64, u64)> = (0..table.len())
                    .map(|i| (partition_hash(table.key(i)), i as u64))
                    .collect();
                radix_sort(&mut pairs);
                for &(h, i) in &pairs {
                    w.entry(h, |b| {
                        put_raw::<K>(table.key(i as usize), b);
                        put(table.value(i as usize), b);
                    })?;
                }
                *table = Table::new();
            }
        }
        w.finish().map(Some)
    }
}

/// An open-addressing hash table from encoded keys to combined values, probed with the
/// grouping hash. A slot packs the hash's high 32 bits (a tag checked before the key) and
/// the entry's index + 1, so a probe touches the slot array, then one entry, then the key.
struct Table<V> {
    /// `tag << 32 | (index + 1)`, 0 for an empty slot.
    slots: Vec<u64>,
    entries: Vec<TableEntry<V>>,
    arena: Vec<u8>,
}

struct TableEntry<V> {
    at: u32,
    len: u32,
    value: V,
}

/// Equality of short byte strings without a library call.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.len() <= 16 {
        let mut diff = 0u8;
        for i in 0..a.len() {
            diff |= a[i] ^ b[i];
        }
        diff == 0
    } else {
        a == b
    }
}

impl<V> Table<V> {
    fn new() -> Table<V> {
        Table {
            slots: Vec::new(),
            entries: Vec::new(),
            arena: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn key(&self, i: usize) -> &[u8] {
        let e = &self.entries[i];
        &self.arena[e.at as usize..(e.at + e.len) as usize]
    }

    fn value(&self, i: usize) -> &V {
        &self.entries[i].value
    }

    fn heap_bytes(&self) -> usize {
        8 * self.slots.len()
            + std::mem::size_of::<TableEntry<V>>() * self.entries.len()
            + self.arena.len()
    }

    fn grow(&mut self) {
        let size = (2 * self.slots.len()).max(1 << 12);
        let mask = size - 1;
        let mut slots = vec![0u64; size];
        for &s in &self.slots {
            if s == 0 {
                continue;
            }
            let idx = (s & 0xffff_ffff) as usize - 1;
            let h = group_hash(self.key(idx));
            let mut i = h as usize & mask;
            while slots[i] != 0 {
                i = (i + 1) & mask;
            }
            slots[i] = s;
        }
        self.slots = slots;
    }

    #[inline]
    fn insert(&mut self, key: &[u8], value: V, combine: &dyn Fn(&mut V, V)) {
        if 2 * (self.entries.len() + 1) > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let h = group_hash(key);
        let tag = h >> 32;
        let mut i = h as usize & mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                self.slots[i] = tag << 32 | (self.entries.len() as u64 + 1);
                self.entries.push(TableEntry {
                    at: self.arena.len() as u32,
                    len: key.len() as u32,
                    value,
                });
                self.arena.extend_from_slice(key);
                return;
            }
            if s >> 32 == tag {
                let idx = (s & 0xffff_ffff) as usize - 1;
                let e = &self.entries[idx];
                let stored = &self.arena[e.at as usize..(e.at + e.len) as usize];
                if same_bytes(stored, key) {
                    combine(&mut self.entries[idx].value, value);
                    return;
                }
            }
            i = (i + 1) & mask;
        }
    }
}
