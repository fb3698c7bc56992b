//! The check that no byte is both read and written in a superstep.

use std::panic::Location;

use crate::error::{Error, Misuse, Result};

/// A memory range touched in a superstep, for the conflict check.
#[derive(Clone, Copy)]
pub(super) struct Touch {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) what: &'static str,
    pub(super) by: usize,
    pub(super) loc: Option<&'static Location<'static>>,
}

/// Fails when some byte is both read and written in the superstep.
pub(super) fn check_conflicts(reads: &mut Vec<Touch>, writes: &mut Vec<Touch>) -> Result<()> {
    // Empty ranges touch nothing (and would hide others in the prefix maximum below).
    reads.retain(|t| t.end > t.start);
    writes.retain(|t| t.end > t.start);
    if reads.is_empty() || writes.is_empty() {
        return Ok(());
    }
    writes.sort_unstable_by_key(|t| t.start);
    // Prefix maximum of the ends, to find any write overlapping a range by binary search.
    let mut reach = Vec::with_capacity(writes.len());
    let mut best = 0usize;
    for (i, w) in writes.iter().enumerate() {
        if i == 0 || w.end > writes[best].end {
            best = i;
        }
        reach.push(best);
    }
    for r in reads.iter() {
        // Writes starting before the read's end; the one reaching furthest among them.
        let n = writes.partition_point(|w| w.start < r.end);
        if n == 0 {
            continue;
        }
        let w = &writes[reach[n - 1]];
        if w.end > r.start {
            let at = |t: &Touch| match t.loc {
                Some(l) => format!(" at {l}"),
                None => String::new(),
            };
            return Err(Error::misuse(
                Misuse::ReadWriteConflict,
                format!(
                    "a {} by rank {}{} and a {} by rank {}{} touch the same bytes in one superstep",
                    w.what,
                    w.by,
                    at(w),
                    r.what,
                    r.by,
                    at(r)
                ),
                r.loc.or(w.loc),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{check_conflicts, Touch};

    fn touch(start: usize, end: usize) -> Touch {
        Touch {
            start,
            end,
            what: "t",
            by: 0,
            loc: None,
        }
    }

    #[test]
    fn conflicts_are_found_exactly_when_ranges_overlap() {
        // Every small configuration against the quadratic definition.
        let mut x: u64 = 7;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m) as usize
        };
        for _ in 0..20_000 {
            let mut reads: Vec<Touch> = (0..next(4))
                .map(|_| {
                    let s = next(40);
                    touch(s, s + next(6))
                })
                .collect();
            let mut writes: Vec<Touch> = (0..next(5))
                .map(|_| {
                    let s = next(40);
                    touch(s, s + next(6))
                })
                .collect();
            let overlap = reads.iter().any(|r| {
                writes.iter().any(|w| {
                    r.start < r.end && w.start < w.end && r.start < w.end && w.start < r.end
                })
            });
            let found = check_conflicts(&mut reads, &mut writes).is_err();
            assert_eq!(found, overlap);
        }
    }
}
