//! The collectives: each rank's buffers are read from its process once, the operation is
//! spillway's collective on the bytes (or on typed elements for reductions), and the result
//! is written into the process once.

use spillway_comm::Collectives;
use spillway_runtime::SbVec;

use crate::proto::{self, op, types, Msg};
use crate::reduce::{self, Fail, Io, Kind};
use crate::serve::{reply_to, Out, Server};

fn size_of(datatype: u64) -> Result<usize, Fail> {
    types::size(datatype as i32).ok_or_else(|| {
        Fail::Code(
            proto::ERR_TYPE,
            format!("{} is not a BDMPI datatype", datatype as i32),
        )
    })
}

fn bytes(count: u64, size: usize) -> Result<usize, Fail> {
    (count as usize)
        .checked_mul(size)
        .ok_or_else(|| Fail::Code(proto::ERR_COUNT, format!("a count of {count} overflows")))
}

impl Server<'_> {
    /// The rank's buffer for a collective's input, `len` bytes long: storage-backed under the
    /// node's memory limit, so that while the rank waits in the collective (its input read by
    /// the others when they run) the runtime can write it out as it does any blocked rank's
    /// memory. One buffer per rank, kept between calls.
    fn staging(&self, len: usize) -> Result<SbVec<u8>, Fail> {
        let mut buf = match self.staging.take() {
            Some(b) => b,
            None => SbVec::with_capacity(self.rank, len)?,
        };
        buf.resize(len)?;
        Ok(buf)
    }

    /// Gives the buffer of [`staging`](Self::staging) back for the next call.
    fn unstage(&self, buf: SbVec<u8>) {
        self.staging.set(Some(buf));
    }

    /// The per-member byte counts and byte offsets of a `v` collective: `counts` is the count
    /// (`FLAG_UNIFORM`) or the address of `n` counts, `displs` the address of `n`
    /// displacements (`size_t`, or `int` with `FLAG_INT_ARRAYS`), in elements of `elem` bytes.
    fn layout(
        &self,
        counts: u64,
        displs: u64,
        n: usize,
        flags: u64,
        elem: usize,
    ) -> Result<(Vec<usize>, Vec<usize>), Fail> {
        if flags & proto::FLAG_UNIFORM != 0 {
            let c = bytes(counts, elem)?;
            return Ok((vec![c; n], (0..n).map(|i| i * c).collect()));
        }
        let ints = flags & proto::FLAG_INT_ARRAYS != 0;
        let read = |addr: u64| -> Result<Vec<usize>, Fail> {
            if ints {
                let mut v = vec![0i32; n];
                self.read(&[(addr, n * 4)], bytemuck::cast_slice_mut(&mut v))?;
                v.iter()
                    .map(|&x| {
                        usize::try_from(x).map_err(|_| {
                            Fail::Code(proto::ERR_COUNT, format!("a count or displacement of {x}"))
                        })
                    })
                    .collect()
            } else {
                let mut v = vec![0u64; n];
                self.read(&[(addr, n * 8)], bytemuck::cast_slice_mut(&mut v))?;
                Ok(v.iter().map(|&x| x as usize).collect())
            }
        };
        let scale = |v: Vec<usize>| -> Result<Vec<usize>, Fail> {
            v.into_iter().map(|x| bytes(x as u64, elem)).collect()
        };
        Ok((scale(read(counts)?)?, scale(read(displs)?)?))
    }

    /// Writes member `i`'s part of `data` (`got[i]` bytes, consecutive in member order) at
    /// `base + offs[i]`, at most `caps[i]` bytes; `Err` names a part that did not fit.
    fn place(
        &self,
        m: &Msg,
        base: u64,
        data: &[u8],
        got: &[usize],
        caps: &[usize],
        offs: &[usize],
    ) -> Out {
        let truncated = got.iter().zip(caps).position(|(g, c)| g > c);
        let pieces: Vec<(u64, usize)> = got
            .iter()
            .zip(caps)
            .zip(offs)
            .filter(|((&g, _), _)| g > 0)
            .map(|((&g, &c), &o)| (base + o as u64, g.min(c)))
            .collect();
        match truncated {
            None => self.write(&pieces, data)?,
            Some(_) => {
                let mut kept = Vec::with_capacity(data.len());
                let mut at = 0;
                for (&g, &c) in got.iter().zip(caps) {
                    kept.extend_from_slice(&data[at..at + g.min(c)]);
                    at += g;
                }
                self.write(&pieces, &kept)?;
            }
        }
        if let Some(i) = truncated {
            let what = format!(
                "the {} bytes from rank {i} do not fit the {} bytes given for them; truncated",
                got[i], caps[i]
            );
            return Ok(self.refuse(m, proto::ERR_TRUNCATE, &what));
        }
        Ok(reply_to(m, proto::SUCCESS))
    }

    pub(crate) fn bcast(&mut self, m: &Msg) -> Out {
        let comm = self.comm(m.comm)?;
        let cap = bytes(m.a[1], size_of(m.a[2])?)?;
        let root = m.a[3] as usize;
        let mut data = Vec::new();
        if comm.rank() == root {
            data = vec![0u8; cap];
            self.read(&[(m.a[0], cap)], &mut data)?;
        }
        comm.bcast(root, &mut data)?;
        if comm.rank() == root {
            return Ok(reply_to(m, proto::SUCCESS));
        }
        self.place(m, m.a[0], &data, &[data.len()], &[cap], &[0])
    }

    pub(crate) fn reduction(&mut self, m: &Msg) -> Out {
        let comm = self.comm(m.comm)?;
        let kind = match m.op {
            op::REDUCE => Kind::Reduce(m.a[5] as usize),
            op::ALLREDUCE => Kind::All,
            op::SCAN => Kind::Scan,
            _ => Kind::Exscan,
        };
        let (sendbuf, recvbuf) = (m.a[0], m.a[1]);
        let mut input = |dst: &mut [u8]| self.read(&[(sendbuf, dst.len())], dst);
        let mut output = |src: &[u8]| self.write(&[(recvbuf, src.len())], src);
        reduce::reduction(
            kind,
            comm,
            m.a[2] as usize,
            m.a[3] as i32,
            m.a[4] as i32,
            &mut Io {
                input: &mut input,
                output: &mut output,
            },
        )?;
        Ok(reply_to(m, proto::SUCCESS))
    }

    pub(crate) fn gatherv(&mut self, m: &Msg) -> Out {
        let comm = self.comm(m.comm)?;
        let n = comm.size();
        let sbytes = bytes(m.a[1], size_of(m.a[2])?)?;
        let mut data = self.staging(sbytes)?;
        self.read(&[(m.a[0], sbytes)], data.as_mut_slice())?;
        let all = if m.op == op::GATHERV {
            comm.gatherv(m.a[7] as usize, &data)
        } else {
            comm.allgatherv(&data).map(Some)
        };
        self.unstage(data);
        let all = all?;
        let Some((all, got)) = all else {
            return Ok(reply_to(m, proto::SUCCESS));
        };
        let (caps, offs) = self.layout(m.a[4], m.a[5], n, m.a[8], size_of(m.a[6])?)?;
        self.place(m, m.a[3], &all, &got, &caps, &offs)
    }

    pub(crate) fn scatterv(&mut self, m: &Msg) -> Out {
        let comm = self.comm(m.comm)?;
        let n = comm.size();
        let root = m.a[7] as usize;
        let cap = bytes(m.a[5], size_of(m.a[6])?)?;
        let mine = if comm.rank() == root {
            let (counts, offs) = self.layout(m.a[1], m.a[2], n, m.a[8], size_of(m.a[3])?)?;
            let pieces: Vec<(u64, usize)> = counts
                .iter()
                .zip(&offs)
                .map(|(&c, &o)| (m.a[0] + o as u64, c))
                .collect();
            let mut data = self.staging(counts.iter().sum())?;
            self.read(&pieces, data.as_mut_slice())?;
            let mine = comm.scatterv(root, Some((&data, &counts)));
            self.unstage(data);
            mine?
        } else {
            comm.scatterv::<u8>(root, None)?
        };
        self.place(m, m.a[4], &mine, &[mine.len()], &[cap], &[0])
    }

    pub(crate) fn alltoallv(&mut self, m: &Msg) -> Out {
        let comm = self.comm(m.comm)?;
        let n = comm.size();
        let flags = m.a[8];
        let (scounts, soffs) = self.layout(m.a[1], m.a[2], n, flags, size_of(m.a[3])?)?;
        let pieces: Vec<(u64, usize)> = scounts
            .iter()
            .zip(&soffs)
            .map(|(&c, &o)| (m.a[0] + o as u64, c))
            .collect();
        let mut data = self.staging(scounts.iter().sum())?;
        self.read(&pieces, data.as_mut_slice())?;
        let exchanged = comm.alltoallv(&data, &scounts);
        self.unstage(data);
        let (recv, got) = exchanged?;
        let (caps, offs) = self.layout(m.a[5], m.a[6], n, flags, size_of(m.a[7])?)?;
        self.place(m, m.a[4], &recv, &got, &caps, &offs)
    }

    /// `BDMPI_Merge`: the (id, value) pairs of all ranks meet at the root, sorted by id, with
    /// the values of equal ids combined in rank order.
    pub(crate) fn merge(&mut self, m: &Msg) -> Out {
        let comm = self.comm(m.comm)?;
        let count = m.a[2] as usize;
        let (datatype, opn, root) = (m.a[6] as i32, m.a[7] as i32, m.a[8] as usize);
        let size = size_of(m.a[6])?;
        let mut ids = vec![0i32; count];
        self.read(&[(m.a[1], count * 4)], bytemuck::cast_slice_mut(&mut ids))?;
        let mut vals = vec![0u8; bytes(count as u64, size)?];
        self.read(&[(m.a[0], vals.len())], &mut vals)?;
        let all_ids = comm.gatherv(root, &ids)?;
        let all_vals = comm.gatherv(root, &vals)?;
        let (Some((ids, _)), Some((vals, _))) = (all_ids, all_vals) else {
            return Ok(reply_to(m, proto::SUCCESS));
        };
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids[i]);
        let mut out_ids: Vec<i32> = Vec::new();
        let mut out_vals: Vec<u8> = Vec::new();
        for i in order {
            let v = &vals[i * size..(i + 1) * size];
            if out_ids.last() == Some(&ids[i]) {
                let at = out_vals.len() - size;
                reduce::combine_one(datatype, opn, &mut out_vals[at..], v)?;
            } else {
                out_ids.push(ids[i]);
                out_vals.extend_from_slice(v);
            }
        }
        let ints = m.a[9] & proto::FLAG_INT_ARRAYS != 0;
        let cap = if ints {
            let mut c = [0i32];
            self.read(&[(m.a[5], 4)], bytemuck::cast_slice_mut(&mut c))?;
            usize::try_from(c[0]).unwrap_or(0)
        } else {
            let mut c = [0u64];
            self.read(&[(m.a[5], 8)], bytemuck::cast_slice_mut(&mut c))?;
            c[0] as usize
        };
        let n = out_ids.len().min(cap);
        if ints {
            self.put(m.a[5], &[n as i32])?;
        } else {
            self.put(m.a[5], &[n as u64])?;
        }
        self.put(m.a[3], &out_vals[..n * size])?;
        self.put(m.a[4], &out_ids[..n])?;
        if out_ids.len() > cap {
            let what = format!(
                "the merge has {} entries; the receive buffers hold {cap}; truncated",
                out_ids.len()
            );
            return Ok(self.refuse(m, proto::ERR_TRUNCATE, &what));
        }
        Ok(reply_to(m, proto::SUCCESS))
    }
}
