//! Reading a rank's part of a file in bounded chunks, and agreeing on what went wrong.
//!
//! Every rank reads its line-aligned part of a file ([`super::split`]) in chunks sized to its
//! share of the memory budget, one reader per node at a time, and hands each chunk to a
//! format's parser; afterwards every rank agrees on the first error in the file, so all
//! fail the same way with the right file, line and reason.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use spillway_comm::{Collectives, Comm, Sum};

use super::error::InputError;
use super::split::{count_lines, line_aligned_range};
use crate::error::AlgoError;

/// Fails on every rank if any rank could not read its part (the lowest rank's error wins).
fn agree_on_read_error(comm: &Comm, local: Option<AlgoError>) -> Result<(), AlgoError> {
    let mine = local.as_ref().map(|e| e.to_string());
    let all = comm.allgather_obj(&mine)?;
    match (local, all.into_iter().flatten().next()) {
        (Some(e), _) => Err(e),
        (None, Some(first)) => Err(AlgoError::BadParameter {
            name: "input",
            reason: first,
        }),
        (None, None) => Ok(()),
    }
}

/// Agrees on the first input error of all ranks, so every rank fails the same way. Ranks read
/// consecutive parts of the file, so the first error in the file is the lowest rank's; its
/// line number is right because the ranks below it read their whole parts (a rank stops
/// counting lines at its own first error).
pub(crate) fn agree_on_error(
    comm: &Comm,
    path: &Path,
    local: Option<(u64, String)>,
    line_base: u64,
) -> Result<(), AlgoError> {
    let mine = local.map(|(i, reason)| (line_base + i + 1, reason));
    let all = comm.allgather_obj(&mine)?;
    match all.into_iter().flatten().next() {
        Some((line, reason)) => Err(InputError::new(path, Some(line), reason).into()),
        None => Ok(()),
    }
}

/// Number of lines in the parts of lower ranks (a collective).
fn lines_before(comm: &Comm, lines: u64) -> Result<u64, AlgoError> {
    Ok(comm.exscan(&[lines], Sum)?.map_or(0, |v| v[0]))
}

/// Bytes a rank may keep on its heap for reading and exchanging data: a share of the
/// node's budget (so that the heap of the running ranks stays small beside it), or 16 MiB
/// without a budget.
pub(crate) fn heap_allowance(comm: &Comm) -> usize {
    let rt = comm.runtime();
    match rt.mem_budget() {
        Some(b) => ((b / 16) / u64::from(rt.running_slots())).clamp(64 << 10, 16 << 20) as usize,
        None => 16 << 20,
    }
}

/// What reading a rank's part of a file found.
pub(crate) struct ChunkedRead {
    /// Lines in this rank's part (up to the first bad line).
    pub(crate) lines: u64,
    /// The first bad line (0-based within this rank's part) and why.
    pub(crate) error: Option<(u64, String)>,
}

/// Reads this rank's line-aligned part of `[data_start, len)` of `path` in chunks of about
/// `chunk` bytes, each read inside the node's critical section (one reader per node at a
/// time) and handed to `parse` outside it. `parse` returns the first bad line of its chunk
/// (0-based within the chunk), which ends the reading. Then every rank agrees on read
/// errors, and the caller learns the lines of lower ranks' parts.
///
/// Memory: one chunk (plus the longest line) at a time.
pub(crate) fn read_chunks(
    comm: &Comm,
    path: &Path,
    data_start: u64,
    chunk: usize,
    mut parse: impl FnMut(&[u8]) -> Result<Option<(u64, String)>, AlgoError>,
) -> Result<(ChunkedRead, u64), AlgoError> {
    let mut read = ChunkedRead {
        lines: 0,
        error: None,
    };
    let outcome = (|| -> Result<(), AlgoError> {
        let range = {
            let _io = comm.runtime().enter_critical()?;
            let file = File::open(path).map_err(|e| InputError::io(path, &e))?;
            let len = file.metadata().map_err(|e| InputError::io(path, &e))?.len();
            line_aligned_range(&file, data_start.min(len), len, comm.rank(), comm.size())
                .map_err(|e| InputError::io(path, &e))?
        };
        read = read_part(comm, path, range, chunk, &mut parse)?;
        Ok(())
    })();
    let read_error = match outcome {
        Ok(()) => None,
        Err(AlgoError::Comm(e)) => return Err(AlgoError::Comm(e)),
        Err(e) => Some(e),
    };
    let before = lines_before(comm, read.lines)?;
    agree_on_read_error(comm, read_error)?;
    Ok((read, before))
}

/// A chunk parser: the first bad line of the chunk (0-based within it) and why, if any.
pub(crate) type ParseChunk<'a> = dyn FnMut(&[u8]) -> Result<Option<(u64, String)>, AlgoError> + 'a;

/// Reads the line-aligned byte range `[at, end)` of `path` in chunks of about `chunk` bytes
/// as [`read_chunks`] does, on this rank alone (no collective): each chunk is read inside
/// the node's critical section and handed to `parse` outside it, until the first bad line.
pub(crate) fn read_part(
    comm: &Comm,
    path: &Path,
    (mut at, end): (u64, u64),
    chunk: usize,
    parse: &mut ParseChunk<'_>,
) -> Result<ChunkedRead, AlgoError> {
    let mut read = ChunkedRead {
        lines: 0,
        error: None,
    };
    let mut buf: Vec<u8> = Vec::new();
    while at < end {
        let mut want = (chunk as u64).min(end - at);
        let bytes = loop {
            buf.resize(want as usize, 0);
            {
                let _io = comm.runtime().enter_critical()?;
                let file = File::open(path).map_err(|e| InputError::io(path, &e))?;
                file.read_exact_at(&mut buf, at)
                    .map_err(|e| InputError::io(path, &e))?;
            }
            if at + want == end {
                break &buf[..];
            }
            // End the chunk at its last newline (a line longer than the chunk grows it).
            match memchr::memrchr(b'\n', &buf) {
                Some(i) => break &buf[..=i],
                None => want = (want * 2).min(end - at),
            }
        };
        let taken = bytes.len() as u64;
        if let Some((i, reason)) = parse(bytes)? {
            read.error = Some((read.lines + i, reason));
            return Ok(read);
        }
        read.lines += count_lines(bytes);
        at += taken;
    }
    Ok(read)
}
