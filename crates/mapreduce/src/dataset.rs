//! Datasets: records partitioned over the ranks, stored in storage-backed memory.

use std::marker::PhantomData;

use spillway_comm::{Collectives, Comm, Sum};
use spillway_runtime::{Rank, SbVec};

use crate::data::{put, take, Data};
use crate::error::Error;
use crate::{Input, Recovery, RecoveryKind};

/// A distributed dataset of `(K, V)` records: every rank holds its own part, which stays on
/// that rank (the output of a MapReduce operation is on the ranks that own its keys' hash
/// ranges, and is the next operation's input there).
///
/// Records are stored encoded in storage-backed memory ([`SbVec`]), so a part larger than
/// the memory budget lives in the spill directory.
pub struct Dataset<K, V> {
    bytes: SbVec<u8>,
    len: u64,
    pub(crate) origin: Origin,
    _kv: PhantomData<fn() -> (K, V)>,
}

/// Where a dataset's parts come from, which says how a lost rank's part can be rebuilt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Made on each rank from local data: not rebuildable.
    Local,
    /// The output of operation `op` of the fault-tolerant MapReduce object `mr`.
    Output { mr: u64, op: u64 },
}

impl<K, V> std::fmt::Debug for Dataset<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("local_len", &self.len)
            .field("local_bytes", &self.bytes.len())
            .finish()
    }
}

impl<K: Data, V: Data> Dataset<K, V> {
    /// An empty part on `rank`.
    ///
    /// # Errors
    /// A runtime error if storage cannot be allocated.
    pub fn empty(rank: &Rank) -> Result<Dataset<K, V>, Error> {
        Ok(Dataset {
            bytes: SbVec::with_capacity(rank, 0)?,
            len: 0,
            origin: Origin::Local,
            _kv: PhantomData,
        })
    }

    /// This rank's part made of `records` (rank-local data: no communication).
    ///
    /// # Errors
    /// A runtime error if storage cannot be allocated.
    pub fn from_local<I: IntoIterator<Item = (K, V)>>(
        rank: &Rank,
        records: I,
    ) -> Result<Dataset<K, V>, Error> {
        let mut b = DatasetBuilder::new(rank)?;
        for (k, v) in records {
            b.push(&k, &v)?;
        }
        b.finish()
    }

    /// This rank's records as stored (loaded in full; e.g. for a checkpoint) and their
    /// number; [`from_encoded`](Self::from_encoded) makes a part of them again.
    pub fn encoded(&self) -> (&[u8], u64) {
        (self.bytes.as_slice(), self.len)
    }

    /// A part made of `records` records encoded as [`encoded`](Self::encoded) gives them.
    ///
    /// # Errors
    /// [`Error::Corrupt`] if `bytes` are not `records` whole records of these types; a
    /// runtime error if storage cannot be allocated.
    pub fn from_encoded(rank: &Rank, bytes: &[u8], records: u64) -> Result<Dataset<K, V>, Error> {
        let mut at = 0;
        let mut n = 0u64;
        while at < bytes.len() {
            match record_end::<K, V>(bytes, at) {
                Some(end) => at = end,
                None => {
                    return Err(Error::Corrupt(format!(
                        "a record cut off at byte {at} of {}",
                        bytes.len()
                    )))
                }
            }
            n += 1;
        }
        if n != records {
            return Err(Error::Corrupt(format!(
                "{n} records where {records} were expected"
            )));
        }
        let mut stored = SbVec::with_capacity(rank, bytes.len())?;
        stored.extend_from_slice(bytes)?;
        stored.unload();
        Ok(Dataset {
            bytes: stored,
            len: records,
            origin: Origin::Local,
            _kv: PhantomData,
        })
    }

    /// The storage of this part.
    pub(crate) fn into_raw(self) -> SbVec<u8> {
        self.bytes
    }

    /// Records on this rank.
    pub fn local_len(&self) -> u64 {
        self.len
    }

    /// Bytes of this rank's part as stored.
    pub fn local_bytes(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Records on all ranks (a collective).
    ///
    /// # Errors
    /// A communication error.
    pub fn count(&self, comm: &Comm) -> Result<u64, Error> {
        Ok(comm.allreduce(&[self.len], Sum)?[0])
    }

    /// Calls `f` with every record of this rank's part, in stored order (loading a window
    /// of the storage at a time).
    pub fn for_each(&self, mut f: impl FnMut(K, V)) {
        let total = self.bytes.len();
        let mut at = 0;
        while at < total {
            let want = WINDOW.min(total - at);
            let mut window = self.bytes.range(at..at + want);
            let mut pos = 0;
            loop {
                match record_end::<K, V>(window, pos) {
                    Some(end) => {
                        let k = take::<K>(window, &mut pos);
                        let v = take::<V>(window, &mut pos);
                        debug_assert_eq!(pos, end);
                        f(k, v);
                        if pos == window.len() {
                            break;
                        }
                    }
                    None if pos == 0 => {
                        // One record larger than the window: load all of it.
                        let end = record_end::<K, V>(self.bytes.range(at..total), 0)
                            .expect("a stored record is complete");
                        window = self.bytes.range(at..at + end);
                    }
                    None => break,
                }
            }
            at += pos;
        }
        self.bytes.unload();
    }

    /// This rank's records as a vector.
    pub fn to_local_vec(&self) -> Vec<(K, V)> {
        let mut out = Vec::with_capacity(self.len as usize);
        self.for_each(|k, v| out.push((k, v)));
        out
    }

    /// Every rank's records, in rank order, at `root` (`None` elsewhere); a collective.
    ///
    /// # Errors
    /// A communication error.
    pub fn gather(&self, comm: &Comm, root: usize) -> Result<Option<Vec<(K, V)>>, Error> {
        let all = comm.gatherv(root, self.bytes.as_slice())?;
        self.bytes.unload();
        Ok(all.map(|(bytes, _)| {
            let mut out = Vec::new();
            let mut at = 0;
            while at < bytes.len() {
                let k = take::<K>(&bytes, &mut at);
                let v = take::<V>(&bytes, &mut at);
                out.push((k, v));
            }
            out
        }))
    }
}

impl<K: Data, V: Data> Input for Dataset<K, V> {
    type Key = K;
    type Value = V;

    fn recovery(&self) -> Recovery<K, V> {
        match self.origin {
            Origin::Local => Recovery::none(),
            Origin::Output { mr, op } => Recovery(RecoveryKind::Output { mr, op }),
        }
    }

    fn for_each(self, f: &mut dyn FnMut(K, V)) -> Result<(), Error> {
        // Read in windows so that only a window is resident at a time besides the map's
        // own memory; the part is freed when the operation is done with it.
        Dataset::for_each(&self, f);
        Ok(())
    }
}

/// Calls `f` with every record encoded in `bytes` (as a dataset part stores them).
pub(crate) fn decode_records<K: Data, V: Data>(bytes: &[u8], f: &mut dyn FnMut(K, V)) {
    let mut at = 0;
    while at < bytes.len() {
        let k = take::<K>(bytes, &mut at);
        let v = take::<V>(bytes, &mut at);
        f(k, v);
    }
}

/// Bytes of storage loaded at a time while reading a part.
const WINDOW: usize = 1 << 20;

/// The end of the record that starts at `at` in `bytes`, if all of it is there.
fn record_end<K: Data, V: Data>(bytes: &[u8], at: usize) -> Option<usize> {
    let field = |at: usize, size: Option<usize>| -> Option<usize> {
        let end = match size {
            Some(n) => at + n,
            None => {
                let p = bytes.get(at..at + 4)?;
                at + 4 + u32::from_le_bytes(p.try_into().expect("4")) as usize
            }
        };
        (end <= bytes.len()).then_some(end)
    };
    if at >= bytes.len() {
        return None;
    }
    let k = field(at, K::SIZE)?;
    field(k, V::SIZE)
}

/// Builds a rank's part record by record, in storage-backed memory.
pub struct DatasetBuilder<K, V> {
    buf: Vec<u8>,
    bytes: SbVec<u8>,
    len: u64,
    _kv: PhantomData<fn() -> (K, V)>,
}

/// Records are copied into storage in blocks of this size.
const BLOCK: usize = 256 << 10;

impl<K: Data, V: Data> DatasetBuilder<K, V> {
    /// An empty part on `rank`.
    ///
    /// # Errors
    /// A runtime error if storage cannot be allocated.
    pub fn new(rank: &Rank) -> Result<DatasetBuilder<K, V>, Error> {
        Ok(DatasetBuilder {
            buf: Vec::new(),
            bytes: SbVec::with_capacity(rank, 0)?,
            len: 0,
            _kv: PhantomData,
        })
    }

    /// Appends a record.
    ///
    /// # Errors
    /// A runtime error if storage cannot grow.
    #[inline]
    pub fn push(&mut self, key: &K, value: &V) -> Result<(), Error> {
        put(key, &mut self.buf);
        put(value, &mut self.buf);
        self.len += 1;
        if self.buf.len() >= BLOCK {
            self.bytes.extend_from_slice(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// The finished part.
    ///
    /// # Errors
    /// A runtime error if storage cannot grow.
    pub fn finish(mut self) -> Result<Dataset<K, V>, Error> {
        self.bytes.extend_from_slice(&self.buf)?;
        self.bytes.unload();
        Ok(Dataset {
            bytes: self.bytes,
            len: self.len,
            origin: Origin::Local,
            _kv: PhantomData,
        })
    }
}
