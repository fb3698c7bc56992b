//! I/O per iteration, sampled by rank 0 at the end of each iteration: what this process read
//! from storage and the pages it dirtied (`/proc/self/io`), and the sectors read and written
//! on the spill directory's block device (`/sys/dev/block/MAJOR:MINOR/stat`, machine-wide).
//!
//! Out-of-core benchmarks report these per iteration from one run, instead of differencing a
//! long and a short run, whose set-up phases do not read the same amounts. A sample is two
//! small file reads; where a file is missing (not Linux, a device without statistics such as
//! tmpfs), its figures are absent from the report.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// Cumulative counters at one instant.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    /// `/proc/self/io` `read_bytes`: bytes this process caused to be read from storage.
    read: Option<u64>,
    /// `/proc/self/io` `write_bytes`: bytes of pages this process dirtied in files.
    dirtied: Option<u64>,
    /// The spill device's sectors read, in bytes.
    device_read: Option<u64>,
    /// The spill device's sectors written, in bytes.
    device_written: Option<u64>,
}

/// The I/O of one iteration (differences of the samples around it).
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub(crate) struct IterationIo {
    /// Bytes this process read from storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) read_bytes: Option<u64>,
    /// Bytes of file pages this process dirtied (written back later, or discarded first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dirtied_bytes: Option<u64>,
    /// Bytes read from the spill directory's device (by anybody on the machine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) device_read_bytes: Option<u64>,
    /// Bytes written to the spill directory's device (by anybody on the machine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) device_written_bytes: Option<u64>,
}

/// The probe of the rank that reports (rank 0 of `world`), none on the others.
pub(crate) fn lead_probe(rank: &spillway::Rank, world: &spillway::Comm) -> Option<IoProbe> {
    (world.rank() == 0).then(|| IoProbe::start(rank.spill_dir()))
}

/// Samples taken at iteration boundaries.
pub(crate) struct IoProbe {
    device_stat: Option<PathBuf>,
    samples: Vec<Sample>,
}

impl IoProbe {
    /// A probe of this process and of the device holding `spill_dir`; takes the first sample
    /// (the start of the first iteration).
    pub(crate) fn start(spill_dir: &Path) -> IoProbe {
        let mut probe = IoProbe {
            device_stat: device_stat_path(spill_dir),
            samples: Vec::new(),
        };
        probe.sample();
        probe
    }

    /// Records the counters now (the end of an iteration).
    pub(crate) fn sample(&mut self) {
        let (read, dirtied) = proc_self_io();
        let (device_read, device_written) = self
            .device_stat
            .as_deref()
            .and_then(device_sectors)
            .map_or((None, None), |(r, w)| (Some(r * 512), Some(w * 512)));
        self.samples.push(Sample {
            read,
            dirtied,
            device_read,
            device_written,
        });
    }

    /// The I/O of each iteration between consecutive samples.
    pub(crate) fn per_iteration(&self) -> Vec<IterationIo> {
        let diff = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
        self.samples
            .windows(2)
            .map(|w| IterationIo {
                read_bytes: diff(w[0].read, w[1].read),
                dirtied_bytes: diff(w[0].dirtied, w[1].dirtied),
                device_read_bytes: diff(w[0].device_read, w[1].device_read),
                device_written_bytes: diff(w[0].device_written, w[1].device_written),
            })
            .collect()
    }
}

/// `read_bytes` and `write_bytes` of `/proc/self/io`.
fn proc_self_io() -> (Option<u64>, Option<u64>) {
    let Ok(text) = std::fs::read_to_string("/proc/self/io") else {
        return (None, None);
    };
    parse_proc_io(&text)
}

fn parse_proc_io(text: &str) -> (Option<u64>, Option<u64>) {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    (field("read_bytes:"), field("write_bytes:"))
}

/// The statistics file of the block device (or partition) that holds `dir`.
fn device_stat_path(dir: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    let path = PathBuf::from(format!("/sys/dev/block/{major}:{minor}/stat"));
    path.exists().then_some(path)
}

/// Sectors read and written (fields 3 and 7 of a block device's `stat`).
fn device_sectors(path: &Path) -> Option<(u64, u64)> {
    parse_device_stat(&std::fs::read_to_string(path).ok()?)
}

fn parse_device_stat(text: &str) -> Option<(u64, u64)> {
    let f: Vec<u64> = text
        .split_ascii_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    Some((*f.get(2)?, *f.get(6)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_io_and_device_stat() {
        let io = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_proc_io(io), (Some(4096), Some(8192)));
        assert_eq!(parse_proc_io("rchar: 1\n"), (None, None));
        let stat = "  143  0  2288  64  7  3  80  12  0  96  77  0 0 0 0 0 0\n";
        assert_eq!(parse_device_stat(stat), Some((2288, 80)));
        assert_eq!(parse_device_stat("1 2"), None);
    }

    #[test]
    fn per_iteration_differences_of_samples() {
        let mut probe = IoProbe::start(&std::env::temp_dir());
        probe.sample();
        probe.sample();
        let per = probe.per_iteration();
        assert_eq!(per.len(), 2);
        if cfg!(target_os = "linux") {
            assert!(per.iter().all(|p| p.read_bytes.is_some()));
        }
        let manual = IoProbe {
            device_stat: None,
            samples: vec![
                Sample {
                    read: Some(10),
                    dirtied: Some(5),
                    device_read: None,
                    device_written: Some(100),
                },
                Sample {
                    read: Some(30),
                    dirtied: Some(5),
                    device_read: None,
                    device_written: Some(612),
                },
            ],
        };
        assert_eq!(
            manual.per_iteration(),
            vec![IterationIo {
                read_bytes: Some(20),
                dirtied_bytes: Some(0),
                device_read_bytes: None,
                device_written_bytes: Some(512),
            }]
        );
    }
}
