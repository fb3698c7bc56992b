//! Clustering commands: K-means (dense points) and spherical K-means (sparse rows).

pub(crate) mod kmeans;
pub(crate) mod spkmeans;

use std::io::Write;

/// One CSV line of values, each printed as the shortest text that reads back to the same
/// value.
pub(crate) fn csv_line(w: &mut dyn Write, row: &[f64]) -> std::io::Result<()> {
    let mut line = String::with_capacity(row.len() * 20);
    for (j, v) in row.iter().enumerate() {
        if j > 0 {
            line.push(',');
        }
        line.push_str(&v.to_string());
    }
    line.push('\n');
    w.write_all(line.as_bytes())
}
