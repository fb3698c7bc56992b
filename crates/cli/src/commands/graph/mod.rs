//! Graph commands: PageRank (direct and MapReduce), connected components, colouring.

pub(crate) mod cc;
pub(crate) mod colour;
pub(crate) mod pagerank;
