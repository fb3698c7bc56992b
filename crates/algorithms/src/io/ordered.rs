//! Writing one result file from all ranks.

use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use spillway_comm::Comm;

use crate::error::AlgoError;
use crate::io::AtomicFile;

fn output_error(path: &Path, source: std::io::Error) -> AlgoError {
    AlgoError::Output {
        path: path.to_path_buf(),
        source,
    }
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
    let p = comm.size();
    let me = comm.rank();
    const TOKEN: i32 = 1;
    if me == 0 {
        let mut file = AtomicFile::create(path).map_err(|e| output_error(path, e))?;
        write_part(file.writer()).map_err(|e| output_error(path, e))?;
        file.writer().flush().map_err(|e| output_error(path, e))?;
        if p > 1 {
            comm.send_obj(1, TOKEN, &file.temp_path().to_path_buf())?;
            comm.recv::<u8>(p - 1, TOKEN)?;
        }
        file.commit().map_err(|e| output_error(path, e))?;
    } else {
        let (temp, _) = comm.recv_obj::<PathBuf>(me - 1, TOKEN)?;
        let file = OpenOptions::new()
            .append(true)
            .open(&temp)
            .map_err(|e| output_error(path, e))?;
        let mut w = BufWriter::new(file);
        write_part(&mut w).map_err(|e| output_error(path, e))?;
        w.flush().map_err(|e| output_error(path, e))?;
        if me + 1 < p {
            comm.send_obj(me + 1, TOKEN, &temp)?;
        } else {
            comm.send(0, TOKEN, &[1u8])?;
        }
    }
    Ok(())
}
