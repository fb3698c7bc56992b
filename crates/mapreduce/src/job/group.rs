//! Grouping the entries of one hash by key: merging sorted runs (combining equal keys),
//! running the reduce function into its [`Output`] (records and the operation's totals),
//! and keeping a reduce for a recovery.

use crate::data::{put, put_raw, take_raw, Data, Values};
use crate::dataset::DatasetBuilder;
use crate::emit::CombineFn;
use crate::error::Error;
use crate::hash::HashRanges;
use crate::run::{merge, Cursor, Run, RunWriter, Spill};

/// Where a reduce function puts its output records (they stay on this rank), and the
/// operation's totals ([`add`](Self::add)).
pub struct Output<K, V> {
    /// Where records go: a dataset, or (re-running a reduce in a recovery) a byte buffer.
    pub(super) builder: Option<DatasetBuilder<K, V>>,
    pub(super) raw: Vec<u8>,
    pub(super) error: Option<Error>,
    pub(super) records: u64,
    /// This rank's share of the operation's totals.
    pub(super) sums: [f64; MAX_TOTALS],
}

/// The most totals an operation keeps ([`MapReduce::with_totals`]).
pub const MAX_TOTALS: usize = 8;

impl<K: Data, V: Data> Output<K, V> {
    /// Emits an output record.
    #[inline]
    pub fn emit(&mut self, key: &K, value: &V) {
        if self.error.is_none() {
            match &mut self.builder {
                Some(b) => {
                    if let Err(e) = b.push(key, value) {
                        self.error = Some(e);
                    }
                }
                None => {
                    put(key, &mut self.raw);
                    put(value, &mut self.raw);
                }
            }
            self.records += 1;
        }
    }

    /// Adds `value` to total `slot` of the operation: the sums over all ranks are
    /// [`MapReduce::totals`] once the operation has returned (declare the slots with
    /// [`MapReduce::with_totals`]). A reduce function that counts or sums on the side (changes,
    /// a residual) should do it here rather than in variables of its own: the totals are
    /// computed with the operation's own collectives, and the lost ranks' shares are computed
    /// again when ranks are lost.
    ///
    /// # Panics
    /// If `slot` is not below [`MAX_TOTALS`].
    #[inline]
    pub fn add(&mut self, slot: usize, value: f64) {
        self.sums[slot] += value;
    }
}

impl<K: Data, V: Data> Output<K, V> {
    pub(super) fn new(builder: Option<DatasetBuilder<K, V>>, raw: Vec<u8>) -> Output<K, V> {
        Output {
            builder,
            raw,
            error: None,
            records: 0,
            sums: [0.0; MAX_TOTALS],
        }
    }
}

/// A reduce function kept for a recovery: the bodies of one hash in, the encoded output
/// records appended to the buffer.
pub(super) type KeptReduce = Box<dyn FnMut(&[&[u8]], &mut Vec<u8>) -> Result<(), Error>>;

/// Erases the types of a reduce function so it can be kept for the next operation.
pub(super) fn keep_reduce<K: Data, V: Data, K2: Data, V2: Data, R>(mut reduce: R) -> KeptReduce
where
    R: FnMut(K, Values<'_, V>, &mut Output<K2, V2>) + 'static,
{
    Box::new(move |bodies: &[&[u8]], raw: &mut Vec<u8>| {
        let mut out = Output::<K2, V2>::new(None, std::mem::take(raw));
        for_each_key::<K>(bodies, |key, vals| {
            reduce(K::read(key), Values::new(vals), &mut out);
            Ok(())
        })?;
        *raw = out.raw;
        Ok(())
    })
}

/// What a merge calls for every hash: the hash and the bodies of its entries.
pub(super) type OnHash<'a> = dyn FnMut(u64, &[&[u8]]) -> Result<(), Error> + 'a;
/// Runs `reduce` on every key among the entry bodies of one hash, into `output`.
pub(super) fn reduce_hash<K: Data, V: Data, K2: Data, V2: Data, R>(
    bodies: &[&[u8]],
    reduce: &mut R,
    output: &mut Output<K2, V2>,
) -> Result<(), Error>
where
    R: FnMut(K, Values<'_, V>, &mut Output<K2, V2>),
{
    for_each_key::<K>(bodies, |key, vals| {
        reduce(K::read(key), Values::new(vals), output);
        Ok(())
    })?;
    match output.error.take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Calls `f(key, values)` for each distinct key among entry bodies of one hash, in order of
/// first appearance; `values` are the value bytes of that key's entries.
pub(super) fn for_each_key<K: Data>(
    bodies: &[&[u8]],
    mut f: impl FnMut(&[u8], &[&[u8]]) -> Result<(), Error>,
) -> Result<(), Error> {
    let split = |b: &&[u8]| -> (usize, usize) {
        let mut at = 0;
        let key = take_raw::<K>(b, &mut at);
        (key.len(), at)
    };
    if let [b] = bodies {
        let (klen, at) = split(b);
        return f(&b[at - klen..at], &[&b[at..]]);
    }
    let mut groups: Vec<(&[u8], Vec<&[u8]>)> = Vec::new();
    for b in bodies {
        let (klen, at) = split(b);
        let key = &b[at - klen..at];
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, vs)) => vs.push(&b[at..]),
            None => groups.push((key, vec![&b[at..]])),
        }
    }
    for (key, vals) in &groups {
        f(key, vals)?;
    }
    Ok(())
}

/// Writes one key's values as one entry: combined into one value, or concatenated.
pub(super) fn write_group<K: Data, V: Data>(
    w: &mut RunWriter<'_>,
    hash: u64,
    key: &[u8],
    vals: &[&[u8]],
    combine: Option<CombineFn<'_, V>>,
) -> Result<(), Error> {
    match combine {
        Some(c) => {
            let mut it = Values::<V>::new(vals);
            let mut acc = it.next().expect("an entry has a value");
            for v in it {
                c(&mut acc, v);
            }
            w.entry(hash, |b| {
                put_raw::<K>(key, b);
                put(&acc, b);
            })
        }
        None => w.entry(hash, |b| {
            put_raw::<K>(key, b);
            for v in vals {
                b.extend_from_slice(v);
            }
        }),
    }
}

/// Merges the map side's sorted runs into one (combining equal keys if there is a
/// combiner); an empty run if there are none.
pub(super) fn merge_runs<K: Data, V: Data>(
    mut runs: Vec<Run>,
    spill: &Spill,
    ranges: &HashRanges,
    combine: Option<CombineFn<'_, V>>,
    repartition: bool,
) -> Result<Run, Error> {
    if runs.len() == 1 && !repartition {
        return Ok(runs.pop().expect("one run"));
    }
    let mut w = RunWriter::new(spill, ranges);
    {
        let mut cursors = runs
            .iter()
            .map(|r| Cursor::new(vec![r.piece(0, r.len)], spill))
            .collect::<Result<Vec<_>, _>>()?;
        merge(&mut cursors, spill, |h, bodies| {
            for_each_key::<K>(bodies, |key, vals| {
                write_group::<K, V>(&mut w, h, key, vals, combine)
            })
        })?;
    }
    for r in runs {
        r.release(spill);
    }
    w.finish()
}
