//! The map side: collecting emitted pairs, combining them, and writing sorted runs.

use std::marker::PhantomData;
use std::mem::MaybeUninit;

use spillway_runtime::prefetch;

use crate::data::{put, put_raw, take_raw, Data};
use crate::distinct::Distinct;
use crate::error::Error;
use crate::hash::{partition_hash, radix_sort, HashRanges};
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
    at_end: Option<AtEnd<'e, K, V>>,
    /// Pairs the map combined itself ([`Emitter::emit_distinct_raw_key`]).
    distinct: Distinct,
    _k: PhantomData<fn(K)>,
}

/// What a map function leaves to be done once its input ends (see [`Emitter::at_end`]).
type AtEnd<'e, K, V> = Box<dyn FnOnce(&mut Emitter<'e, K, V>) + 'e>;

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
                at_end: None,
                distinct: Distinct::default(),
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
        if let Collector::Combine { combine, .. } = &self.emitter.inner {
            let distinct = self.emitter.distinct.write_run::<K, V>(
                self.state.spill,
                self.state.ranges,
                *combine,
            )?;
            self.state.out.runs.extend(distinct);
        }
        self.state.out.flush_time += t.elapsed();
        Ok(())
    }

    /// Everything emitted, as sorted runs (after the map function's end step, if any).
    pub(crate) fn finish(mut self) -> Result<MapOutput, Error> {
        if let Some(f) = self.emitter.at_end.take() {
            f(&mut self.emitter);
        }
        if let Some(e) = self.state.error.take() {
            return Err(e);
        }
        self.flush()?;
        self.state.out.records = self.emitter.records;
        self.state.out.bytes = self.emitter.bytes;
        Ok(self.state.out)
    }
}

impl<'e, K, V> Emitter<'e, K, V> {
    /// Has `f` called once, with this emitter, after the map function's last record: for a
    /// map that aggregates across records and emits the aggregate at the end (word counts
    /// kept across chunks). Every map pass has an emitter of its own (the operation's, and
    /// each recovery's re-map of lost input), so a map registers its end step with each: call
    /// it while [`has_at_end`](Emitter::has_at_end) is false. A step registered before is
    /// kept, and `false` returned.
    pub fn at_end(&mut self, f: impl FnOnce(&mut Emitter<'e, K, V>) + 'e) -> bool {
        if self.at_end.is_some() {
            return false;
        }
        self.at_end = Some(Box::new(f));
        true
    }

    /// Whether an end step is registered ([`at_end`](Emitter::at_end)).
    pub fn has_at_end(&self) -> bool {
        self.at_end.is_some()
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
                table.push(key, value, *combine);
            }
        }
        self.records += 1;
    }

    /// Emits a pair the map function has combined itself, such as a count it kept across
    /// records (`key` encoded as for [`emit_raw_key`](Emitter::emit_raw_key)). With a
    /// combiner such pairs skip its hash table: they are collected as they come and sorted
    /// into a run of their own, which saves a table insert per pair when the map already
    /// emits each key about once. A key emitted again (by this method or another) is still
    /// combined: the runs are merged with the combiner.
    #[inline]
    pub fn emit_distinct_raw_key(&mut self, key: &[u8], value: V) {
        match &self.inner {
            Collector::Plain { .. } => self.emit_raw_key(key, value),
            Collector::Combine { .. } => {
                let body = self.distinct.push::<K, V>(key, &value);
                self.bytes += (crate::run::HEADER + body) as u64;
                self.records += 1;
            }
        }
    }

    /// Bytes of memory the buffer or table holds.
    fn heap_bytes(&self) -> usize {
        self.distinct.heap_bytes()
            + match &self.inner {
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
            Collector::Combine { table, combine } => {
                if table.is_empty() {
                    return Ok(None);
                }
                table.settle(*combine);
                let mut pairs: Vec<(u64, u64)> = table
                    .slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| !s.is_empty())
                    .map(|(i, s)| (s.hash, i as u64))
                    .collect();
                radix_sort(&mut pairs);
                for &(h, i) in &pairs {
                    let slot = &table.slots[i as usize];
                    w.entry(h, |b| {
                        put_raw::<K>(table.slot_key(slot), b);
                        put(slot.value(), b);
                    })?;
                }
                *table = Table::new();
            }
        }
        w.finish().map(Some)
    }
}

/// Keys up to this many bytes live in their slot; longer ones in the table's arena.
const INLINE: usize = 12;

/// Inserts kept waiting while their slot's cache line is fetched (software prefetch): enough
/// to cover a memory latency with the tokenising and hashing of the following keys.
const IN_FLIGHT: usize = 16;

/// An open-addressing (linear probing) hash table from encoded keys to combined values,
/// indexed by the partitioning hash, which every key needs anyway to be sent (its low bits:
/// see [`home`]). A slot holds the full hash, the key (inline when short) and the value, so an
/// insert of a short key touches one slot (usually one cache line) and nothing else, and the
/// slot's line is prefetched [`IN_FLIGHT`] inserts ahead. The table is at most 3/4 full.
struct Table<V> {
    slots: Vec<Slot<V>>,
    len: usize,
    arena: Vec<u8>,
    /// Short-key inserts whose slot is being prefetched: a ring of `queued` entries from
    /// `head`, oldest first.
    pending: [Pending<V>; IN_FLIGHT],
    head: usize,
    queued: usize,
}

/// An insert waiting in [`Table::pending`].
struct Pending<V> {
    hash: u64,
    len: u32,
    bytes: [u8; INLINE],
    value: Option<V>,
}

/// A slot's `len` when it is empty.
const EMPTY: u32 = u32::MAX;

/// 32 bytes with a `u64` value: two slots per cache line.
struct Slot<V> {
    hash: u64,
    /// The key's length, or [`EMPTY`].
    len: u32,
    /// The key when at most [`INLINE`] bytes; otherwise its offset in the arena (4 bytes LE).
    bytes: [u8; INLINE],
    /// Initialised exactly when the slot is not empty.
    value: MaybeUninit<V>,
}

impl<V> Slot<V> {
    fn empty() -> Slot<V> {
        Slot {
            hash: 0,
            len: EMPTY,
            bytes: [0; INLINE],
            value: MaybeUninit::uninit(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len == EMPTY
    }

    /// The value of an occupied slot.
    fn value(&self) -> &V {
        assert!(!self.is_empty(), "the value of an empty slot");
        // SAFETY: a slot's value is initialised whenever its `len` is not EMPTY (set together
        // in `insert`; slots are only ever emptied by dropping the table).
        unsafe { self.value.assume_init_ref() }
    }

    fn value_mut(&mut self) -> &mut V {
        assert!(!self.is_empty(), "the value of an empty slot");
        // SAFETY: as in `value`.
        unsafe { self.value.assume_init_mut() }
    }
}

impl<V> Drop for Table<V> {
    fn drop(&mut self) {
        for s in &mut self.slots {
            if !s.is_empty() {
                // SAFETY: an occupied slot's value is initialised, and it is dropped once:
                // the table is going away.
                unsafe { s.value.assume_init_drop() };
            }
        }
    }
}

/// A key's home slot in a table of `n` slots (a power of two): the hash's low bits. They are
/// uniform however the keys' hashes are distributed: a map can emit keys spread over the whole
/// hash space together with keys of one rank's range (MapReduce PageRank emits contributions
/// to every vertex and its own vertices again), and homes from the top bits crowded the
/// latter into the share of the table their top bits select (clusters of tens of thousands
/// of slots at 3/8 load, most of the job's time). Writing a run reads the slots in hash order,
/// at random.
#[inline]
fn home(hash: u64, n: usize) -> usize {
    hash as usize & (n - 1)
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
            len: 0,
            arena: Vec::new(),
            pending: std::array::from_fn(|_| Pending {
                hash: 0,
                len: 0,
                bytes: [0; INLINE],
                value: None,
            }),
            head: 0,
            queued: 0,
        }
    }

    /// Whether nothing was inserted since the table was made.
    fn is_empty(&self) -> bool {
        self.len == 0 && self.queued == 0
    }

    fn slot_key<'a>(&'a self, slot: &'a Slot<V>) -> &'a [u8] {
        let len = slot.len as usize;
        if len <= INLINE {
            &slot.bytes[..len]
        } else {
            let at = u32::from_le_bytes(slot.bytes[..4].try_into().expect("4 bytes")) as usize;
            &self.arena[at..at + len]
        }
    }

    fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Slot<V>>() * self.slots.len() + self.arena.len()
    }

    fn grow(&mut self) {
        let size = (2 * self.slots.len()).max(1 << 12);
        let mask = size - 1;
        let mut slots: Vec<Slot<V>> = Vec::with_capacity(size);
        spillway_runtime::advise_huge(
            slots.as_ptr() as *const u8,
            size * std::mem::size_of::<Slot<V>>(),
        );
        slots.resize_with(size, Slot::empty);
        // Slots move bitwise (`MaybeUninit` never drops), so each value ends up in exactly
        // one slot of the new array; the old array is then left empty.
        for s in std::mem::take(&mut self.slots) {
            if s.is_empty() {
                continue;
            }
            let mut i = home(s.hash, size);
            while !slots[i].is_empty() {
                i = (i + 1) & mask;
            }
            slots[i] = s;
        }
        self.slots = slots;
    }

    /// Adds `value` to `key`'s entry (`hash` is its partitioning hash), or makes the entry.
    #[inline]
    fn insert(&mut self, hash: u64, key: &[u8], value: V, combine: &dyn Fn(&mut V, V)) {
        if 4 * (self.len + 1) > 3 * self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = home(hash, self.slots.len());
        loop {
            let s = &self.slots[i];
            if s.is_empty() {
                break;
            }
            if s.hash == hash && same_bytes(self.slot_key(s), key) {
                combine(self.slots[i].value_mut(), value);
                return;
            }
            i = (i + 1) & mask;
        }
        let mut bytes = [0u8; INLINE];
        if key.len() <= INLINE {
            bytes[..key.len()].copy_from_slice(key);
        } else {
            let at = u32::try_from(self.arena.len()).expect("combine arena below 4 GiB");
            bytes[..4].copy_from_slice(&at.to_le_bytes());
            self.arena.extend_from_slice(key);
        }
        assert!(key.len() < EMPTY as usize, "a key of 4 GiB or more");
        // The slot is empty: overwriting it drops nothing.
        self.slots[i] = Slot {
            hash,
            len: key.len() as u32,
            bytes,
            value: MaybeUninit::new(value),
        };
        self.len += 1;
    }

    /// Queues an insert: short keys wait while their slot is prefetched (the oldest queued
    /// insert is done when the queue is full); long keys are inserted at once, after the
    /// queued ones, so that the inserts of one key keep their order.
    #[inline]
    fn push(&mut self, key: &[u8], value: V, combine: &dyn Fn(&mut V, V)) {
        let hash = partition_hash(key);
        if key.len() > INLINE {
            self.settle(combine);
            self.insert(hash, key, value, combine);
            return;
        }
        if !self.slots.is_empty() {
            let i = home(hash, self.slots.len());
            prefetch(self.slots.as_ptr().wrapping_add(i));
        }
        if self.queued == IN_FLIGHT {
            self.insert_oldest(combine);
        }
        let p = &mut self.pending[(self.head + self.queued) % IN_FLIGHT];
        p.hash = hash;
        p.len = key.len() as u32;
        p.bytes[..key.len()].copy_from_slice(key);
        p.value = Some(value);
        self.queued += 1;
    }

    /// Does the oldest queued insert.
    fn insert_oldest(&mut self, combine: &dyn Fn(&mut V, V)) {
        let p = &mut self.pending[self.head];
        let (hash, len, bytes) = (p.hash, p.len as usize, p.bytes);
        let value = p.value.take().expect("a queued insert has its value");
        self.head = (self.head + 1) % IN_FLIGHT;
        self.queued -= 1;
        self.insert(hash, &bytes[..len], value, combine);
    }

    /// Does the queued inserts.
    fn settle(&mut self, combine: &dyn Fn(&mut V, V)) {
        while self.queued > 0 {
            self.insert_oldest(combine);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Keys of every length around the inline limit (including empty), many repeats, enough
    /// distinct ones to grow the table several times: the combined values equal a HashMap's.
    #[test]
    fn table_combines_like_a_hash_map() {
        let mut table: Table<u64> = Table::new();
        let mut want: HashMap<Vec<u8>, u64> = HashMap::new();
        let add = |a: &mut u64, b: u64| *a += b;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = x % 30_000;
            let len = (id % 40) as usize;
            let key: Vec<u8> = (0..len).map(|j| (id >> (j % 8)) as u8 ^ j as u8).collect();
            let key = [key, id.to_le_bytes().to_vec()].concat()[..len.max(1)].to_vec();
            table.push(&key, i, &add);
            *want.entry(key).or_default() += i;
        }
        table.settle(&add);
        let mut got: HashMap<Vec<u8>, u64> = HashMap::new();
        for s in table.slots.iter().filter(|s| !s.is_empty()) {
            assert_eq!(s.hash, partition_hash(table.slot_key(s)));
            let fresh = got.insert(table.slot_key(s).to_vec(), *s.value()).is_none();
            assert!(fresh, "a key stored twice");
        }
        assert_eq!(table.len, want.len());
        assert_eq!(got, want);
    }

    /// Keys spread over the hash space together with as many again from one rank's range of
    /// sixteen (what MapReduce PageRank's map emits): combined like a HashMap, and no key
    /// far from its home slot (homes from the top bits of the hash put the confined keys into
    /// a sixteenth of the table, and linear probing walked clusters of thousands of slots).
    #[test]
    fn keys_crowded_in_one_hash_range_do_not_cluster() {
        let mut table: Table<u64> = Table::new();
        let mut want: HashMap<Vec<u8>, u64> = HashMap::new();
        let add = |a: &mut u64, b: u64| *a += b;
        let (mut spread, mut crowded) = (0u64, 0u64);
        for id in 0..1_600_000u64 {
            let key = id.to_le_bytes();
            let confined = partition_hash(&key) >> 60 == 5;
            if !confined && id % 16 != 0 {
                continue;
            }
            if confined {
                crowded += 1;
            } else {
                spread += 1;
            }
            for rep in 0..2 {
                table.push(&key, id + rep, &add);
                *want.entry(key.to_vec()).or_default() += id + rep;
            }
        }
        assert!(
            crowded > 80_000 && spread > 80_000,
            "{crowded} / {spread} keys"
        );
        table.settle(&add);
        let n = table.slots.len();
        let mut got: HashMap<Vec<u8>, u64> = HashMap::new();
        let mut farthest = 0;
        for (i, s) in table.slots.iter().enumerate() {
            if s.is_empty() {
                continue;
            }
            farthest = farthest.max(i.wrapping_sub(home(s.hash, n)) & (n - 1));
            got.insert(table.slot_key(s).to_vec(), *s.value());
        }
        assert_eq!(got, want);
        assert!(farthest < 256, "a key {farthest} slots from its home");
    }

    /// Values that own memory: combined, moved by growth, left queued, and dropped with the
    /// table (each exactly once: a double drop or a leak shows in the count).
    #[test]
    fn owned_values_are_combined_moved_and_dropped_once() {
        use std::rc::Rc;
        let token = Rc::new(());
        let add = |a: &mut (Vec<u8>, Rc<()>), b: (Vec<u8>, Rc<()>)| a.0.extend_from_slice(&b.0);
        let mut table: Table<(Vec<u8>, Rc<()>)> = Table::new();
        let mut distinct = std::collections::HashSet::new();
        for i in 0..50_000u32 {
            let key = (i % 9_000).to_le_bytes();
            let long = [key.as_slice(); 5].concat();
            let k: &[u8] = if i % 7 == 0 { &long } else { &key };
            distinct.insert(k.to_vec());
            table.push(k, (vec![(i % 251) as u8], Rc::clone(&token)), &add);
        }
        // Some inserts are still queued here; settle them, then check the entries.
        table.settle(&add);
        assert_eq!(table.len, distinct.len());
        let total: usize = table
            .slots
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| s.value().0.len())
            .sum();
        assert_eq!(total, 50_000);
        assert_eq!(Rc::strong_count(&token), 1 + distinct.len());
        // Queued values are dropped with the table too.
        table.push(b"queued", (Vec::new(), Rc::clone(&token)), &add);
        drop(table);
        assert_eq!(Rc::strong_count(&token), 1);
    }
}
