//! The commands, one small module each, grouped by family. Each declares its inputs, outputs
//! and options, checks its option values, estimates what it needs and does its work; the
//! driver does the rest.

pub(crate) mod bsp;
pub(crate) mod checkpoint;
pub(crate) mod cluster;
pub(crate) mod factor;
pub(crate) mod ft;
pub(crate) mod gen;
pub(crate) mod graph;
pub(crate) mod structures;
pub(crate) mod text;
