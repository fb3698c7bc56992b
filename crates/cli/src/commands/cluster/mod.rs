//! Clustering commands: K-means (dense points) and spherical K-means (sparse rows).

pub(crate) mod kmeans;
pub(crate) mod spkmeans;

use std::io::Write;
use std::path::Path;

use spillway::algorithms::AlgoError;
use spillway::Comm;

use crate::driver::Job;

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

/// Writes a clustering: the centroids, `dim` values each, held by the first rank, as CSV to
/// `out`; every rank's assignments, one per line in rank order, to `assign`.
pub(crate) fn write_clustering(
    job: &Job<'_>,
    world: &Comm,
    (out, centroids, dim): (Option<&Path>, &[f64], usize),
    (assign, assignment): (Option<&Path>, &[u32]),
) -> Result<(), AlgoError> {
    if let Some(path) = out {
        job.write_root(world, path, |w| {
            if let Some(w) = w {
                for row in centroids.chunks(dim.max(1)) {
                    csv_line(w, row).map_err(|e| AlgoError::Output {
                        path: path.to_path_buf(),
                        source: e,
                    })?;
                }
            }
            Ok(())
        })?;
    }
    if let Some(path) = assign {
        job.write_ordered(world, path, |w| {
            for a in assignment {
                writeln!(w, "{a}")?;
            }
            Ok(())
        })?;
    }
    Ok(())
}
