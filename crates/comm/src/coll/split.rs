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

impl<'r> Comm<'r> {
    /// The members of this communicator except the global ranks in `lost`, in the same order,
    /// with a message space of their own; `None` if the caller is among `lost`. Made without
    /// any communication (so it works when members were lost: see
    /// [`Rank::acknowledge_loss`](spillway_runtime::Rank::acknowledge_loss)): every remaining
    /// member calls it with the same `lost`. Its message space depends only on this
    /// communicator and the set `lost`, not on the `dup`/`split` calls made on it before:
    /// after a loss the survivors may have got to different points of a computation (one
    /// past a `dup` that another never reached) and still agree on it. Calling it twice with
    /// the same set gives two communicators sharing a message space (each recovery removes
    /// more members, so a recovery never does).
    ///
    /// # Cost
    /// No communication; the new shape is computed once per node.
    pub fn without(&self, lost: &[u32]) -> Option<Comm<'r>> {
        let mut gone: Vec<u32> = lost.to_vec();
        gone.sort_unstable();
        gone.dedup();
        let salt = gone
            .iter()
            .fold(0x0057_4954_484f_5554, |h, &g| mix(h ^ u64::from(g)));
        let id = mix(self.context_id() ^ mix(salt));
        if gone.binary_search(&self.rank.rank()).is_ok() {
            return None;
        }
        let shape = self.shape();
        Some(Comm::from_members(self.rank, id, || {
            (0..shape.size())
                .map(|r| shape.global(r))
                .filter(|g| gone.binary_search(g).is_err())
                .collect()
        }))
    }
}
