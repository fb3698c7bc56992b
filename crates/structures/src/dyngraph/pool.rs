//! A pooled arena of singly linked list nodes, the storage of LL and of BCSR's overflow.
//!
//! Nodes live in fixed-size chunks (so growth never copies and the slack is at most one
//! chunk) and are addressed by `u32` indices; freed nodes go on a free list and are reused
//! first. Each vertex's list is sorted and starts at `heads[v]`.

use super::vec_bytes;

/// End of a list.
pub(crate) const NIL: u32 = u32::MAX;

/// log2 of the nodes per chunk.
const CHUNK_BITS: u32 = 14;
const CHUNK: usize = 1 << CHUNK_BITS;

/// A list node: a neighbour id and the index of the next node.
#[derive(Clone, Copy)]
pub(crate) struct Node {
    pub(crate) value: u32,
    pub(crate) next: u32,
}

/// Sorted linked lists, one per vertex, in one node arena.
pub(crate) struct Lists {
    pub(crate) heads: Vec<u32>,
    pub(crate) degrees: Vec<u32>,
    chunks: Vec<Box<[Node]>>,
    /// Nodes handed out from the chunks so far (the next fresh index).
    fresh: u32,
    /// Head of the free list.
    free: u32,
    /// Arcs stored.
    pub(crate) arcs: u64,
}

impl Lists {
    pub(crate) fn with_vertices(n: usize) -> Lists {
        Lists {
            heads: vec![NIL; n],
            degrees: vec![0; n],
            chunks: Vec::new(),
            fresh: 0,
            free: NIL,
            arcs: 0,
        }
    }

    #[inline]
    pub(crate) fn node(&self, i: u32) -> Node {
        self.chunks[(i >> CHUNK_BITS) as usize][i as usize & (CHUNK - 1)]
    }

    /// Hints that node `i` (or nothing, for [`NIL`]) will be read soon.
    #[inline]
    pub(crate) fn prefetch_node(&self, i: u32) {
        if i != NIL {
            let chunk = &self.chunks[(i >> CHUNK_BITS) as usize];
            super::query::prefetch(chunk.as_ptr().wrapping_add(i as usize & (CHUNK - 1)));
        }
    }

    #[inline]
    fn node_mut(&mut self, i: u32) -> &mut Node {
        &mut self.chunks[(i >> CHUNK_BITS) as usize][i as usize & (CHUNK - 1)]
    }

    fn alloc(&mut self, value: u32, next: u32) -> u32 {
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.node(i).next;
            i
        } else {
            assert!(self.fresh < NIL, "more than {} list nodes", NIL - 1);
            let i = self.fresh;
            if (i as usize) >> CHUNK_BITS == self.chunks.len() {
                self.chunks.push(
                    vec![
                        Node {
                            value: 0,
                            next: NIL
                        };
                        CHUNK
                    ]
                    .into_boxed_slice(),
                );
            }
            self.fresh += 1;
            i
        };
        *self.node_mut(i) = Node { value, next };
        i
    }

    /// Makes room for vertex `u`.
    pub(crate) fn ensure(&mut self, u: usize) {
        if u >= self.heads.len() {
            self.heads.resize(u + 1, NIL);
            self.degrees.resize(u + 1, 0);
        }
    }

    /// Inserts `v` into `u`'s sorted list (`u` must be covered by [`ensure`](Self::ensure)).
    pub(crate) fn insert(&mut self, u: usize, v: u32) -> bool {
        let mut prev = NIL;
        let mut cur = self.heads[u];
        while cur != NIL {
            let n = self.node(cur);
            if n.value >= v {
                if n.value == v {
                    return false;
                }
                break;
            }
            prev = cur;
            cur = n.next;
        }
        let i = self.alloc(v, cur);
        if prev == NIL {
            self.heads[u] = i;
        } else {
            self.node_mut(prev).next = i;
        }
        self.degrees[u] += 1;
        self.arcs += 1;
        true
    }

    /// Inserts the increasing values `vals` into `u`'s sorted list in one walk (`u` covered by
    /// [`ensure`](Self::ensure)); returns how many were new. New nodes of one call are
    /// allocated consecutively.
    pub(crate) fn insert_sorted(&mut self, u: usize, vals: &[u32]) -> u32 {
        let mut prev = NIL;
        let mut cur = self.heads[u];
        let mut new = 0u32;
        for &v in vals {
            while cur != NIL {
                let n = self.node(cur);
                if n.value >= v {
                    break;
                }
                prev = cur;
                cur = n.next;
            }
            if cur != NIL && self.node(cur).value == v {
                continue;
            }
            let i = self.alloc(v, cur);
            if prev == NIL {
                self.heads[u] = i;
            } else {
                self.node_mut(prev).next = i;
            }
            prev = i;
            new += 1;
        }
        self.degrees[u] += new;
        self.arcs += u64::from(new);
        new
    }

    /// Removes `v` from `u`'s list.
    pub(crate) fn delete(&mut self, u: usize, v: u32) -> bool {
        if u >= self.heads.len() {
            return false;
        }
        let mut prev = NIL;
        let mut cur = self.heads[u];
        while cur != NIL {
            let n = self.node(cur);
            if n.value >= v {
                if n.value != v {
                    return false;
                }
                if prev == NIL {
                    self.heads[u] = n.next;
                } else {
                    self.node_mut(prev).next = n.next;
                }
                *self.node_mut(cur) = Node {
                    value: 0,
                    next: self.free,
                };
                self.free = cur;
                self.degrees[u] -= 1;
                self.arcs -= 1;
                return true;
            }
            prev = cur;
            cur = n.next;
        }
        false
    }

    pub(crate) fn contains(&self, u: usize, v: u32) -> bool {
        let mut cur = match self.heads.get(u) {
            Some(&h) => h,
            None => return false,
        };
        while cur != NIL {
            let n = self.node(cur);
            if n.value >= v {
                return n.value == v;
            }
            cur = n.next;
        }
        false
    }

    /// Calls `f` with the values of `u`'s list in order.
    #[inline]
    pub(crate) fn for_each(&self, u: usize, mut f: impl FnMut(u32)) {
        let mut cur = match self.heads.get(u) {
            Some(&h) => h,
            None => return,
        };
        while cur != NIL {
            let n = self.node(cur);
            f(n.value);
            cur = n.next;
        }
    }

    /// `|N(u) ∩ N(v)|`: one merge walk of the two sorted lists.
    pub(crate) fn intersect(&self, u: usize, v: usize) -> u64 {
        let head = |x: usize| self.heads.get(x).copied().unwrap_or(NIL);
        let (mut a, mut b) = (head(u), head(v));
        let mut c = 0u64;
        while a != NIL && b != NIL {
            let (x, y) = (self.node(a), self.node(b));
            c += u64::from(x.value == y.value);
            if x.value <= y.value {
                a = x.next;
            }
            if y.value <= x.value {
                b = y.next;
            }
        }
        c
    }

    /// Drops every node (keeps the vertex arrays, zeroes the degrees).
    pub(crate) fn clear(&mut self) {
        self.chunks = Vec::new();
        self.fresh = 0;
        self.free = NIL;
        self.arcs = 0;
        self.heads.fill(NIL);
        self.degrees.fill(0);
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        vec_bytes(&self.heads)
            + vec_bytes(&self.degrees)
            + vec_bytes(&self.chunks)
            + self.chunks.len() * CHUNK * std::mem::size_of::<Node>()
    }
}
