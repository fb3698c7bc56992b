//! Communicators.
//!
//! A communicator is an ordered group of ranks with its own message space. Its *shape* — the
//! members, and how they are grouped by node — is the same on every member and is shared by
//! the ranks of a node (one copy per node, through the node table), so a communicator of `R`
//! ranks costs `O(R)` memory per node, not per rank; the world communicator costs `O(nodes)`.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use spillway_runtime::{Pattern, Rank};

use crate::rendezvous::CollRing;
use crate::{Error, Result};

const WORLD_ID: u64 = 0x5350_494c_4c57_4159; // "SPILLWAY"

/// Derives context ids that agree on every member without talking.
pub(crate) use crate::splitmix::splitmix64 as mix;

/// Collective tags cycle below this mask; a collective may use `tag | ALT_TAG` for messages of
/// an alternative algorithm.
pub(crate) const COLL_TAG_MASK: u32 = 0x3fff_ffff;
/// See [`COLL_TAG_MASK`].
pub(crate) const ALT_TAG: i32 = 0x4000_0000;

/// The global ranks of a communicator's members.
#[derive(Debug)]
enum Members {
    /// Member `i` is global rank `i` (the world).
    Identity(usize),
    List(Vec<u32>),
}

/// How the members are grouped by node. Groups are ordered by their lowest member; the first
/// member of a group is its *leader*.
#[derive(Debug)]
enum Groups {
    /// Group `g` is the contiguous range `starts[g] .. starts[g + 1]` of communicator ranks.
    Blocks(Vec<usize>),
    /// Arbitrary groups (members of a node not contiguous in the communicator's order).
    Explicit {
        of: Vec<u32>,
        index: Vec<u32>,
        members: Vec<Vec<u32>>,
    },
}

/// The shape of a communicator: its members and their grouping by node.
#[derive(Debug)]
pub(crate) struct Shape {
    members: Members,
    /// Communicator rank of each global rank, when not the identity.
    index: Option<HashMap<u32, usize>>,
    groups: Groups,
}

impl Shape {
    fn new(members: Vec<u32>, node_of: impl Fn(u32) -> u32) -> Shape {
        let identity = members.iter().enumerate().all(|(i, &g)| i as u32 == g);
        let index = (!identity).then(|| members.iter().enumerate().map(|(i, &g)| (g, i)).collect());
        let mut group_index: HashMap<u32, usize> = HashMap::new();
        let mut groups: Vec<Vec<u32>> = Vec::new();
        let mut of = Vec::with_capacity(members.len());
        let mut pos = Vec::with_capacity(members.len());
        for (r, &g) in members.iter().enumerate() {
            let gi = *group_index.entry(node_of(g)).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            pos.push(groups[gi].len() as u32);
            groups[gi].push(r as u32);
            of.push(gi as u32);
        }
        let contiguous = groups
            .iter()
            .all(|m| (m[m.len() - 1] - m[0]) as usize + 1 == m.len());
        let groups = if contiguous {
            let mut starts: Vec<usize> = groups.iter().map(|m| m[0] as usize).collect();
            starts.push(members.len());
            Groups::Blocks(starts)
        } else {
            Groups::Explicit {
                of,
                index: pos,
                members: groups,
            }
        };
        let members = if identity {
            Members::Identity(members.len())
        } else {
            Members::List(members)
        };
        Shape {
            members,
            index,
            groups,
        }
    }

    fn world(rank: &Rank) -> Shape {
        let layout = rank.layout();
        let mut starts: Vec<usize> = (0..layout.nodes())
            .map(|n| layout.first_rank(n) as usize)
            .collect();
        starts.push(layout.ranks() as usize);
        Shape {
            members: Members::Identity(layout.ranks() as usize),
            index: None,
            groups: Groups::Blocks(starts),
        }
    }

    pub(crate) fn size(&self) -> usize {
        match &self.members {
            Members::Identity(n) => *n,
            Members::List(v) => v.len(),
        }
    }

    pub(crate) fn global(&self, r: usize) -> u32 {
        match &self.members {
            Members::Identity(_) => r as u32,
            Members::List(v) => v[r],
        }
    }

    fn comm_rank_of(&self, global: u32) -> Option<usize> {
        match &self.index {
            None => ((global as usize) < self.size()).then_some(global as usize),
            Some(map) => map.get(&global).copied(),
        }
    }

    /// Number of groups (nodes holding members).
    pub(crate) fn groups(&self) -> usize {
        match &self.groups {
            Groups::Blocks(starts) => starts.len() - 1,
            Groups::Explicit { members, .. } => members.len(),
        }
    }

    /// The group of communicator rank `r`.
    pub(crate) fn group_of(&self, r: usize) -> usize {
        match &self.groups {
            Groups::Blocks(starts) => starts.partition_point(|&s| s <= r) - 1,
            Groups::Explicit { of, .. } => of[r] as usize,
        }
    }

    /// Index of communicator rank `r` within its group.
    pub(crate) fn index_in_group(&self, r: usize) -> usize {
        match &self.groups {
            Groups::Blocks(starts) => r - starts[self.group_of(r)],
            Groups::Explicit { index, .. } => index[r] as usize,
        }
    }

    /// Number of members of group `g`.
    pub(crate) fn group_len(&self, g: usize) -> usize {
        match &self.groups {
            Groups::Blocks(starts) => starts[g + 1] - starts[g],
            Groups::Explicit { members, .. } => members[g].len(),
        }
    }

    /// Communicator rank of member `i` of group `g`.
    pub(crate) fn group_member(&self, g: usize, i: usize) -> usize {
        match &self.groups {
            Groups::Blocks(starts) => starts[g] + i,
            Groups::Explicit { members, .. } => members[g][i] as usize,
        }
    }

    /// The leader (lowest member) of group `g`.
    pub(crate) fn leader(&self, g: usize) -> usize {
        self.group_member(g, 0)
    }

    /// Whether every group is a contiguous range of communicator ranks (then node-level
    /// combination respects rank order).
    pub(crate) fn contiguous(&self) -> bool {
        matches!(self.groups, Groups::Blocks(_))
    }

    /// The first communicator rank of each group and, last, the size, when every group is a
    /// contiguous range of ranks.
    pub(crate) fn group_starts(&self) -> Option<&[usize]> {
        match &self.groups {
            Groups::Blocks(starts) => Some(starts),
            Groups::Explicit { .. } => None,
        }
    }
}

pub(crate) struct Inner {
    pub(crate) id: u64,
    pub(crate) shape: Arc<Shape>,
    pub(crate) me: usize,
    pub(crate) my_group: usize,
    pub(crate) my_index: usize,
    coll_seq: Cell<u32>,
    /// Calls that met on the node so far (position in the rendezvous ring).
    ring_seq: Cell<u32>,
    derived: Cell<u64>,
    /// The node's rendezvous ring of this communicator (looked up at the first collective).
    ring: std::cell::OnceCell<Arc<CollRing>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle of this rank goes: calls it left but others have not finished keep
        // the node's ring alive until they do.
        if let Some(ring) = self.ring.get() {
            for rv in ring.entries.iter() {
                rv.pin_while_in_use(ring);
            }
        }
    }
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
            .field("size", &self.size())
            .finish()
    }
}

impl<'r> Comm<'r> {
    pub(crate) fn with_shape(rank: &'r Rank, id: u64, shape: Arc<Shape>) -> Comm<'r> {
        Comm {
            rank,
            inner: Rc::new(Comm::new_inner(rank, id, shape)),
        }
    }

    fn new_inner(rank: &Rank, id: u64, shape: Arc<Shape>) -> Inner {
        let me = shape
            .comm_rank_of(rank.rank())
            .expect("the calling rank is a member");
        let my_group = shape.group_of(me);
        let my_index = shape.index_in_group(me);
        Inner {
            id,
            shape,
            me,
            my_group,
            my_index,
            coll_seq: Cell::new(0),
            ring_seq: Cell::new(0),
            derived: Cell::new(0),
            ring: std::cell::OnceCell::new(),
        }
    }

    /// A predefined communicator (world, node, cyclic world): every call on a rank returns a
    /// handle to the same communicator, as `MPI_COMM_WORLD` is one communicator however often
    /// a program names it, so that collectives through any of the handles stay in step.
    fn predefined(rank: &'r Rank, id: u64, shape: impl FnOnce() -> Arc<Shape>) -> Comm<'r> {
        let inner = rank.rank_local(mix(id ^ 0x0050_5245_4445_4600), || {
            Comm::new_inner(rank, id, shape())
        });
        Comm { rank, inner }
    }

    /// A communicator of the given global ranks, whose shape the ranks of a node share.
    pub(crate) fn from_members(
        rank: &'r Rank,
        id: u64,
        members: impl FnOnce() -> Vec<u32>,
    ) -> Comm<'r> {
        let layout = rank.layout().clone();
        let shape = rank.node_table().cached(mix(id ^ 0x0053_4841_5045), || {
            Shape::new(members(), |g| layout.node_of(g))
        });
        Comm::with_shape(rank, id, shape)
    }

    /// All ranks of the job, numbered as the job numbers them (`MPI_COMM_WORLD`).
    ///
    /// Every call returns a handle to the same communicator (one sequence of collectives),
    /// so it may be called wherever a handle is needed.
    pub fn world(rank: &'r Rank) -> Comm<'r> {
        Comm::predefined(rank, WORLD_ID, || {
            rank.node_table()
                .cached(mix(WORLD_ID ^ 0x0053_4841_5045), || Shape::world(rank))
        })
    }

    /// The ranks of this rank's node, in global order (BDMPI's `COMM_NODE`). Like
    /// [`world`](Self::world), one communicator however often it is called.
    pub fn node(rank: &'r Rank) -> Comm<'r> {
        let first = rank.node_first_rank();
        let size = rank.local_size();
        let id = mix(WORLD_ID ^ 0x4e4f_4445 ^ (u64::from(rank.node()) << 32));
        Comm::predefined(rank, id, || {
            let layout = rank.layout().clone();
            rank.node_table().cached(mix(id ^ 0x0053_4841_5045), || {
                Shape::new((first..first + size).collect(), |g| layout.node_of(g))
            })
        })
    }

    /// All ranks numbered cyclically over the nodes: rank `i` is local rank `i / nodes` of
    /// node `i % nodes` while every node has ranks left (BDMPI's `COMM_CWORLD`). Like
    /// [`world`](Self::world), one communicator however often it is called.
    pub fn cyclic_world(rank: &'r Rank) -> Comm<'r> {
        let id = mix(WORLD_ID ^ 0x4357_4f52_4c44);
        Comm::predefined(rank, id, || {
            let layout = rank.layout().clone();
            rank.node_table().cached(mix(id ^ 0x0053_4841_5045), || {
                let mut members: Vec<u32> = (0..rank.size()).collect();
                members.sort_by_key(|&g| (layout.local_rank(g), layout.node_of(g)));
                Shape::new(members, |g| layout.node_of(g))
            })
        })
    }

    /// This rank's number in the communicator.
    pub fn rank(&self) -> usize {
        self.inner.me
    }

    /// Number of ranks in the communicator.
    pub fn size(&self) -> usize {
        self.inner.shape.size()
    }

    /// The runtime context of the calling rank.
    pub fn runtime(&self) -> &'r Rank {
        self.rank
    }

    /// Global (world) rank of communicator rank `r`.
    ///
    /// # Errors
    /// [`Error::InvalidRank`] for `r` outside the communicator.
    pub fn global_rank(&self, r: usize) -> Result<u32> {
        if r >= self.size() {
            return Err(Error::InvalidRank {
                rank: r,
                size: self.size(),
            });
        }
        Ok(self.inner.shape.global(r))
    }

    /// Number of distinct nodes holding members (BDMPI's `nsize`).
    pub fn node_count(&self) -> usize {
        self.inner.shape.groups()
    }

    /// Index of this rank's node among the communicator's nodes (BDMPI's `nrank`).
    pub fn node_index(&self) -> usize {
        self.inner.my_group
    }

    /// Number of members on this rank's node (BDMPI's `lsize`).
    pub fn local_size(&self) -> usize {
        self.inner.shape.group_len(self.inner.my_group)
    }

    /// This rank's index among the members on its node (BDMPI's `lrank`).
    pub fn local_rank(&self) -> usize {
        self.inner.my_index
    }

    /// Lowest communicator rank on this rank's node (BDMPI's `rrank`).
    pub fn node_leader(&self) -> usize {
        self.inner.shape.leader(self.inner.my_group)
    }

    pub(crate) fn shape(&self) -> &Shape {
        &self.inner.shape
    }

    pub(crate) fn comm_rank_of(&self, global: u32) -> usize {
        self.inner
            .shape
            .comm_rank_of(global)
            .expect("messages come from members")
    }

    pub(crate) fn p2p_context(&self) -> u64 {
        self.inner.id & !1
    }

    pub(crate) fn coll_context(&self) -> u64 {
        self.inner.id | 1
    }

    pub(crate) fn id(&self) -> u64 {
        self.inner.id
    }

    /// An identifier of this communicator that every member sees alike and that differs
    /// between communicators (e.g. to key objects shared by the ranks of a node).
    pub fn context_id(&self) -> u64 {
        self.inner.id
    }

    /// The rendezvous ring the members of this communicator on this node share.
    pub(crate) fn ring(&self) -> &CollRing {
        self.inner.ring.get_or_init(|| {
            let size = self.local_size();
            self.rank
                .node_table()
                .cached(mix(self.inner.id ^ 0x0052_494e_4700), || {
                    CollRing::new(size)
                })
        })
    }

    /// The position of the next node-level rendezvous of this communicator in its ring.
    pub(crate) fn next_ring_seq(&self) -> u32 {
        let seq = self.inner.ring_seq.get();
        self.inner.ring_seq.set(seq.wrapping_add(1));
        seq
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

    pub(crate) fn derive_id(&self, salt: u64) -> u64 {
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
        Comm::with_shape(self.rank, id, Arc::clone(&self.inner.shape))
    }
}
