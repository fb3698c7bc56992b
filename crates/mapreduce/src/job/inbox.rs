//! The exchange of an operation: segments of a sorted run sent to their owners in rounds
//! of bounded size, and the [`Inbox`] that holds what arrived, in memory while the allowance
//! lasts and in one spill file beyond it.

use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;

use spillway_comm::{Collectives, Comm, Max};

use crate::error::Error;
use crate::run::{Cursor, Piece, Run, Spill};

/// Where one source's received blocks are.
#[derive(Clone, Copy)]
pub(super) enum Loc {
    Mem(usize, usize),
    File(u64, u64),
}

/// Blocks received in an exchange: in memory while the allowance lasts, then appended to
/// one spill file. Held by arrival, not by source: a rank of many (10,000 ranks) hears from
/// few sources, and a slot per source would cost every rank memory in proportion to the
/// ranks.
pub(super) struct Inbox {
    mem: Vec<u8>,
    file: Option<File>,
    file_len: u64,
    /// Each block as it arrived: its source and where it is.
    pieces: Vec<(usize, Loc)>,
    held: usize,
}

impl Inbox {
    fn new() -> Inbox {
        Inbox {
            mem: Vec::new(),
            file: None,
            file_len: 0,
            pieces: Vec::new(),
            held: 0,
        }
    }

    pub(super) fn accept(&mut self, src: usize, bytes: &[u8], spill: &Spill) -> Result<(), Error> {
        if spill.try_take(bytes.len()) {
            self.held += bytes.len();
            let a = self.mem.len();
            self.mem.extend_from_slice(bytes);
            self.pieces.push((src, Loc::Mem(a, self.mem.len())));
        } else {
            if self.file.is_none() {
                self.file = Some(spill.file()?);
            }
            let f = self.file.as_ref().expect("created");
            f.write_all_at(bytes, self.file_len)
                .map_err(|e| Error::spill(spill.dir(), e))?;
            spill.note_written(bytes.len());
            let a = self.file_len;
            self.file_len += bytes.len() as u64;
            self.pieces.push((src, Loc::File(a, self.file_len)));
        }
        Ok(())
    }

    /// A cursor over each source's blocks, in the order of the sources, each source's
    /// blocks in the order they arrived.
    pub(super) fn cursors<'a>(&'a self, spill: &Spill) -> Result<Vec<Cursor<'a>>, Error> {
        let mut order: Vec<usize> = (0..self.pieces.len()).collect();
        // Stable: a source's blocks stay in the order they arrived.
        order.sort_by_key(|&i| self.pieces[i].0);
        order
            .chunk_by(|&a, &b| self.pieces[a].0 == self.pieces[b].0)
            .map(|group| {
                let pieces = group
                    .iter()
                    .map(|&i| match self.pieces[i].1 {
                        Loc::Mem(a, b) => Piece::Mem(&self.mem[a..b]),
                        Loc::File(a, b) => {
                            Piece::File(self.file.as_ref().expect("spilled blocks"), a, b)
                        }
                    })
                    .collect();
                Cursor::new(pieces, spill)
            })
            .collect()
    }

    pub(super) fn release(self, spill: &Spill) {
        spill.give_back(self.held);
    }
}

/// Sends segment `[bounds[j], bounds[j + 1])` of `run` to member `j` of `comm`, in rounds of
/// at most about `quota` bytes per member (one round when everything fits); returns what
/// arrived, the bytes sent to other members and the number of rounds.
pub(super) fn exchange(
    comm: &Comm,
    run: &Run,
    bounds: &[u64],
    spill: &Spill,
    quota: usize,
) -> Result<(Inbox, u64, u64), Error> {
    let p = comm.size();
    let per_dest = if quota == usize::MAX {
        usize::MAX
    } else {
        (quota / p).max(4 << 10)
    };
    let mut inbox = Inbox::new();
    let mut pos: Vec<u64> = bounds[..p].to_vec();
    let mut sent = 0u64;
    let mut rounds = 0u64;
    match exchange_rounds(
        comm,
        run,
        bounds,
        spill,
        per_dest,
        &mut inbox,
        &mut pos,
        &mut sent,
        &mut rounds,
    ) {
        Ok(()) => Ok((inbox, sent, rounds)),
        Err(e) => {
            // Give the allowance back (an exchange that failed because a process was lost
            // is run again on the survivors).
            inbox.release(spill);
            Err(e)
        }
    }
}

/// The rounds of [`exchange`].
#[allow(clippy::too_many_arguments)]
fn exchange_rounds(
    comm: &Comm,
    run: &Run,
    bounds: &[u64],
    spill: &Spill,
    per_dest: usize,
    inbox: &mut Inbox,
    pos: &mut [u64],
    sent: &mut u64,
    rounds: &mut u64,
) -> Result<(), Error> {
    let p = comm.size();
    let me = comm.rank();
    loop {
        let mut blocks: Vec<(usize, Cow<'_, [u8]>)> = Vec::new();
        for j in 0..p {
            if pos[j] < bounds[j + 1] {
                let (b, next) = run.read_block(pos[j], bounds[j + 1], per_dest, spill)?;
                pos[j] = next;
                if j != me {
                    *sent += b.len() as u64;
                }
                blocks.push((j, b));
            }
        }
        let refs: Vec<(usize, &[u8])> = blocks.iter().map(|(j, b)| (*j, &b[..])).collect();
        let mut failed: Option<Error> = None;
        comm.alltoallv_stream(&refs, &mut |src, bytes| {
            if failed.is_none() {
                if let Err(e) = inbox.accept(src, bytes, spill) {
                    failed = Some(e);
                }
            }
            Ok(())
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        drop(refs);
        drop(blocks);
        *rounds += 1;
        let left = pos.iter().zip(&bounds[1..]).any(|(a, b)| a < b);
        if comm.allreduce(&[u8::from(left)], Max)?[0] == 0 {
            return Ok(());
        }
    }
}
