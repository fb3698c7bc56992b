//! Text processing as MapReduce.
//!
//! [`wordcount`]: word count over text files read in bounded chunks (thesis algorithms 2-3),
//! with the counts written as one file in descending order; [`count`]: its tokenizer and the
//! table that counts a chunk's words before they are emitted.

pub mod count;
pub mod wordcount;
