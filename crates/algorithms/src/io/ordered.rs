//! Writing one result file from all ranks.

use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::path::Path;

use spillway_comm::{Collectives, Comm};

use crate::error::AlgoError;
use crate::io::AtomicFile;

fn output_error(path: &Path, source: std::io::Error) -> AlgoError {
    AlgoError::Output {
        path: path.to_path_buf(),
        source,
    }
}

/// Runs `f` on every rank of `comm` in rank order: rank `r` starts when rank `r - 1` has
/// returned, one at a time (as BDMPI's critical sections for I/O); rank 0 returns only when
/// the last rank has finished. A collective.
///
/// # Errors
/// The error of `f` on this rank (the job then ends, and the ranks waiting for their turn
/// with it); communication errors.
pub fn in_rank_order(
    comm: &Comm,
    f: impl FnOnce() -> Result<(), AlgoError>,
) -> Result<(), AlgoError> {
    let comm = comm.dup();
    let (p, me) = (comm.size(), comm.rank());
    const TOKEN: i32 = 1;
    if me > 0 {
        comm.recv::<u8>(me - 1, TOKEN)?;
    }
    f()?;
    if p > 1 {
        comm.send((me + 1) % p, TOKEN, &[1u8])?;
        if me == 0 {
            comm.recv::<u8>(p - 1, TOKEN)?;
        }
    }
    Ok(())
}

/// Writes `path` from all ranks in rank order: each rank appends its part with `write_part`
/// when its predecessor is done (one writer at a time, as BDMPI's critical sections for I/O).
///
/// # Semantics
/// The file appears under its name only when every rank has written its part; if any rank
/// fails, no file (and no partial file) is left.
///
/// # Errors
/// [`AlgoError::Output`] naming the path and the cause.
pub fn write_ordered<F>(comm: &Comm, path: &Path, mut write_part: F) -> Result<(), AlgoError>
where
    F: FnMut(&mut dyn Write) -> std::io::Result<()>,
{
    let comm = comm.dup();
    let file = match comm.rank() {
        0 => Some(AtomicFile::create(path).map_err(|e| output_error(path, e))?),
        _ => None,
    };
    let temp = comm.bcast_obj(0, file.as_ref().map(|f| f.temp_path().to_path_buf()))?;
    in_rank_order(&comm, || {
        let file = OpenOptions::new()
            .append(true)
            .open(&temp)
            .map_err(|e| output_error(path, e))?;
        let mut w = BufWriter::new(file);
        write_part(&mut w).map_err(|e| output_error(path, e))?;
        w.flush().map_err(|e| output_error(path, e))
    })?;
    if let Some(file) = file {
        file.commit().map_err(|e| output_error(path, e))?;
    }
    Ok(())
}
