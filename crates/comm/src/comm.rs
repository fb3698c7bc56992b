//! Communicators.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

use spillway_runtime::{Pattern, Rank};

use crate::coll::Collectives;
use crate::{Error, Result};

const WORLD_ID: u64 = 0x5350_494c_4c57_4159; // "SPILLWAY"

/// SplitMix64 finaliser: derives context ids that agree on every member without talking.
pub(crate) fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Collective tags cycle below this mask; a collective may use `tag | ALT_TAG` for messages of
/// an alternative algorithm.
pub(crate) const COLL_TAG_MASK: u32 = 0x3fff_ffff;
/// See [`COLL_TAG_MASK`].
pub(crate) const ALT_TAG: i32 = 0x4000_0000;

/// The members of a communicator grouped by node: the unit of two-phase collectives.
#[derive(Debug)]
pub(crate) struct Groups {
    /// Group index of each communicator rank.
    pub(crate) of: Vec<usize>,
    /// Communicator ranks of each group, ascending; the first is the group's leader. Groups are
    /// ordered by their leader.
    pub(crate) members: Vec<Vec<usize>>,
    /// Whether every group is a contiguous range of communicator ranks.
    pub(crate) contiguous: bool,
}

impl Groups {
    fn by_node(nodes: &[u32]) -> Groups {
        let mut index: HashMap<u32, usize> = HashMap::new();
        let mut members: Vec<Vec<usize>> = Vec::new();
        let mut of = Vec::with_capacity(nodes.len());
        for (r, node) in nodes.iter().enumerate() {
            let g = *index.entry(*node).or_insert_with(|| {
                members.push(Vec::new());
                members.len() - 1
            });
            members[g].push(r);
            of.push(g);
        }
        let contiguous = members
            .iter()
            .all(|m| m.last().expect("non-empty group") - m[0] + 1 == m.len());
        Groups {
            of,
            members,
            contiguous,
        }
    }

    fn flat(size: usize) -> Groups {
        Groups {
            of: (0..size).collect(),
            members: (0..size).map(|r| vec![r]).collect(),
            contiguous: true,
        }
    }

    pub(crate) fn leader(&self, group: usize) -> usize {
        self.members[group][0]
    }
}

pub(crate) struct Inner {
    id: u64,
    /// Global rank of each member.
    pub(crate) members: Vec<u32>,
    /// Communicator rank of each global rank, when not the identity.
    index: Option<HashMap<u32, usize>>,
    pub(crate) me: usize,
    pub(crate) groups: Groups,
    pub(crate) flat: Groups,
    coll_seq: Cell<u32>,
    derived: Cell<u64>,
}

/// A communicator: an ordered group of ranks and a message space of its own.
///
/// Cheap to clone (clones share the communicator). Lives on its rank's thread.
#[derive(Clone)]
pub struct Comm<'r> {
    pub(crate) rank: &'r Rank,
    pub(crate) inner: Rc<Inner>,
}

impl std::fmt::Debug for Comm<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("id", &format_args!("{:#x}", self.inner.id))
            .field("rank", &self.inner.me)
            .field("size", &self.inner.members.len())
            .finish()
    }
}

impl<'r> Comm<'r> {
    fn build(rank: &'r Rank, id: u64, members: Vec<u32>) -> Comm<'r> {
        let me = members
            .iter()
            .position(|&g| g == rank.rank())
            .expect("the calling rank is a member");
        let identity = members.iter().enumerate().all(|(i, &g)| i as u32 == g);
        let index = (!identity).then(|| members.iter().enumerate().map(|(i, &g)| (g, i)).collect());
        let nodes: Vec<u32> = members.iter().map(|&g| rank.layout().node_of(g)).collect();
        let size = members.len();
        Comm {
            rank,
            inner: Rc::new(Inner {
                id,
                members,
                index,
                me,
                groups: Groups::by_node(&nodes),
                flat: Groups::flat(size),
                coll_seq: Cell::new(0),
                derived: Cell::new(0),
            }),
        }
    }

    /// All ranks of the job, numbered as the job numbers them (`MPI_COMM_WORLD`).
    pub fn world(rank: &'r Rank) -> Comm<'r> {
        Comm::build(rank, WORLD_ID, (0..rank.size()).collect())
    }

    /// The ranks of this rank's node, in global order (BDMPI's `COMM_NODE`).
    pub fn node(rank: &'r Rank) -> Comm<'r> {
        let first = rank.node_first_rank();
        Comm::build(
            rank,
            mix(WORLD_ID ^ 0x4e4f_4445 ^ (u64::from(rank.node()) << 32)),
            (first..first + rank.local_size()).collect(),
        )
    }

    /// All ranks numbered cyclically over the nodes: rank `i` is local rank `i / nodes` of
    /// node `i % nodes` while every node has ranks left (BDMPI's `COMM_CWORLD`).
    pub fn cyclic_world(rank: &'r Rank) -> Comm<'r> {
        let layout = rank.layout();
        let mut members: Vec<u32> = (0..rank.size()).collect();
        members.sort_by_key(|&g| (layout.local_rank(g), layout.node_of(g)));
        Comm::build(rank, mix(WORLD_ID ^ 0x4357_4f52_4c44), members)
    }

    /// This rank's number in the communicator.
    pub fn rank(&self) -> usize {
        self.inner.me
    }

    /// Number of ranks in the communicator.
    pub fn size(&self) -> usize {
        self.inner.members.len()
    }

    /// The runtime context of the calling rank.
    pub fn runtime(&self) -> &'r Rank {
        self.rank
    }

    /// Global (world) rank of communicator rank `r`.
    pub fn global_rank(&self, r: usize) -> Result<u32> {
        self.inner
            .members
            .get(r)
            .copied()
            .ok_or(Error::InvalidRank {
                rank: r,
                size: self.size(),
            })
    }

    /// Number of distinct nodes holding members (BDMPI's `nsize`).
    pub fn node_count(&self) -> usize {
        self.inner.groups.members.len()
    }

    /// Index of this rank's node among the communicator's nodes (BDMPI's `nrank`).
    pub fn node_index(&self) -> usize {
        self.inner.groups.of[self.inner.me]
    }

    /// Number of members on this rank's node (BDMPI's `lsize`).
    pub fn local_size(&self) -> usize {
        self.inner.groups.members[self.node_index()].len()
    }

    /// This rank's index among the members on its node (BDMPI's `lrank`).
    pub fn local_rank(&self) -> usize {
        let g = &self.inner.groups.members[self.node_index()];
        g.iter()
            .position(|&r| r == self.inner.me)
            .expect("member of own group")
    }

    /// Lowest communicator rank on this rank's node (BDMPI's `rrank`).
    pub fn node_leader(&self) -> usize {
        self.inner.groups.leader(self.node_index())
    }

    pub(crate) fn comm_rank_of(&self, global: u32) -> usize {
        match &self.inner.index {
            None => global as usize,
            Some(map) => map[&global],
        }
    }

    pub(crate) fn p2p_context(&self) -> u64 {
        self.inner.id & !1
    }

    pub(crate) fn coll_context(&self) -> u64 {
        self.inner.id | 1
    }

    pub(crate) fn next_coll_tag(&self) -> i32 {
        let seq = self.inner.coll_seq.get();
        self.inner.coll_seq.set(seq.wrapping_add(1));
        (seq & COLL_TAG_MASK) as i32
    }

    pub(crate) fn pattern(
        &self,
        context: u64,
        source: Option<usize>,
        tag: Option<i32>,
    ) -> Result<Pattern> {
        let source = match source {
            Some(s) => Some(self.global_rank(s)?),
            None => None,
        };
        Ok(Pattern {
            context,
            source,
            tag,
        })
    }

    fn derive_id(&self, salt: u64) -> u64 {
        let n = self.inner.derived.get();
        self.inner.derived.set(n + 1);
        mix(self.inner.id ^ mix(n ^ mix(salt)))
    }

    /// A communicator with the same members and a message space of its own.
    ///
    /// # Semantics
    /// Collective in the MPI sense: every member calls it, in the same order relative to other
    /// `dup`/`split` calls on this communicator. It needs no communication.
    pub fn dup(&self) -> Comm<'r> {
        let id = self.derive_id(0x0044_5550);
        Comm::build(self.rank, id, self.inner.members.clone())
    }

    /// Splits the communicator: members passing the same `color` form a new communicator,
    /// ordered by `key` and then by their rank here; `None` (MPI's `UNDEFINED`) joins none.
    ///
    /// # Cost
    /// One allgather of two words per member.
    ///
    /// # Errors
    /// [`Error::Aborted`] when the job ends during the exchange.
    pub fn split(&self, color: Option<u32>, key: i64) -> Result<Option<Comm<'r>>> {
        let mine = [color.map_or(-1, i64::from), key];
        let all = self.allgather(&mine)?;
        let id = self.derive_id(0x0053_504c_4954);
        let Some(color) = color else {
            return Ok(None);
        };
        let mut chosen: Vec<(i64, usize)> = all
            .chunks_exact(2)
            .enumerate()
            .filter(|(_, ck)| ck[0] == i64::from(color))
            .map(|(r, ck)| (ck[1], r))
            .collect();
        chosen.sort_unstable();
        let members = chosen.iter().map(|&(_, r)| self.inner.members[r]).collect();
        Ok(Some(Comm::build(
            self.rank,
            mix(id ^ u64::from(color)),
            members,
        )))
    }
}
