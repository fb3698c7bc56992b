//! What the file inputs have in common: any rank can read any rank's share of the files, so
//! reading a share is both the input and its recovery after a loss.

use std::path::Path;

use spillway_comm::Comm;

use crate::error::Error;
use crate::Recovery;

/// Files split into one share per rank, records `(position, bytes)`.
pub(crate) trait Shares: Clone + 'static {
    /// Calls `f` with every record of the share of rank `r` of `p` (inside the runtime's I/O
    /// critical sections if `rank` is given).
    fn read_share(
        &self,
        r: usize,
        p: usize,
        rank: Option<&spillway_runtime::Rank>,
        f: &mut dyn FnMut(u64, Vec<u8>),
    ) -> Result<(), Error>;

    /// The share of `comm`'s rank, read inside the runtime's I/O critical sections.
    fn read_mine(&self, comm: &Comm<'_>, f: &mut dyn FnMut(u64, Vec<u8>)) -> Result<(), Error> {
        self.read_share(comm.rank(), comm.size(), Some(comm.runtime()), f)
    }

    /// Recovery after a loss: a survivor reads the lost rank's share again.
    fn reread(&self) -> Recovery<u64, Vec<u8>> {
        let files = self.clone();
        Recovery::reread(Box::new(move |r, p, f| files.read_share(r, p, None, f)))
    }
}

/// An I/O error on `path`.
pub(crate) fn input_error(path: &Path, source: std::io::Error) -> Error {
    Error::Input {
        path: path.to_path_buf(),
        source,
    }
}
