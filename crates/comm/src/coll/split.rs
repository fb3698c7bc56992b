//! Splitting a communicator.

use crate::coll::Collectives;
use crate::comm::{mix, Comm};
use crate::Result;

impl<'r> Comm<'r> {
    /// Splits the communicator: members passing the same `color` form a new communicator,
    /// ordered by `key` and then by their rank here; `None` (MPI's `UNDEFINED`) joins none.
    ///
    /// # Cost
    /// One allgather of two words per member; the new communicator's shape is computed once
    /// per node.
    ///
    /// # Errors
    /// [`Error::Aborted`](crate::Error::Aborted) when the job ends during the exchange.
    pub fn split(&self, color: Option<u32>, key: i64) -> Result<Option<Comm<'r>>> {
        let mine = [color.map_or(-1, i64::from), key];
        let all = self.allgather(&mine)?;
        let id = self.derive_id(0x0053_504c_4954);
        let Some(color) = color else {
            return Ok(None);
        };
        let shape = self.shape();
        Ok(Some(Comm::from_members(
            self.rank,
            mix(id ^ u64::from(color)),
            || {
                let mut chosen: Vec<(i64, usize)> = all
                    .chunks_exact(2)
                    .enumerate()
                    .filter(|(_, ck)| ck[0] == i64::from(color))
                    .map(|(r, ck)| (ck[1], r))
                    .collect();
                chosen.sort_unstable();
                chosen.iter().map(|&(_, r)| shape.global(r)).collect()
            },
        )))
    }
}
