//! The memory limit of this process's control group: what a container or a batch system allows,
//! which may be far below the machine's memory.
//!
//! cgroup v2: `memory.max` and `memory.current` of the group named by the `0::PATH` line of
//! `/proc/self/cgroup`, under the unified mount (`/sys/fs/cgroup`). cgroup v1: the memory
//! controller's `memory.limit_in_bytes` and `memory.usage_in_bytes` of the group named by the
//! `N:memory:PATH` line, under `/sys/fs/cgroup/memory`. The effective limit is the smallest of
//! the group and its ancestors (a parent's limit binds its children). Inside a container the
//! group's own directory may be the mount's root; both places are tried.

use std::path::{Path, PathBuf};

/// A control group's memory limit and what its processes use now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupMemory {
    /// The effective limit in bytes (the smallest of the group and its ancestors).
    pub limit: u64,
    /// Bytes the group uses now, less the inactive page cache that the kernel reclaims first
    /// (the working set, as container runtimes count it).
    pub usage: u64,
}

/// Limits at or above this mean "no limit" (cgroup v1 writes `PAGE_COUNTER_MAX`).
const UNLIMITED: u64 = 1 << 62;

/// The memory limit of this process's control group, if it has one.
pub fn cgroup_memory() -> Option<CgroupMemory> {
    let table = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    memory_in(&table, Path::new("/sys/fs/cgroup"))
}

/// [`cgroup_memory`] for a `/proc/self/cgroup` text and a cgroup mount root (for tests).
fn memory_in(table: &str, root: &Path) -> Option<CgroupMemory> {
    let mut v1 = None;
    let mut v2 = None;
    for line in table.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path);
        } else if controllers.split(',').any(|c| c == "memory") {
            v1 = Some(path);
        }
    }
    let v1 = v1.and_then(|path| {
        group_memory(
            &root.join("memory"),
            path,
            [
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                "total_inactive_file",
            ],
        )
    });
    let v2 = v2.and_then(|path| {
        group_memory(
            root,
            path,
            ["memory.max", "memory.current", "inactive_file"],
        )
    });
    match (v1, v2) {
        (Some(a), Some(b)) => Some(if a.limit <= b.limit { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The limit of the group at `path` below `mount` (or at the mount's root) and its ancestors.
/// `files` names the limit file, the usage file and the `memory.stat` field of inactive page
/// cache.
fn group_memory(mount: &Path, path: &str, files: [&str; 3]) -> Option<CgroupMemory> {
    let [limit_file, usage_file, inactive_field] = files;
    let relative = path.trim_start_matches('/');
    let leaf = [mount.join(relative), mount.to_path_buf()]
        .into_iter()
        .find(|dir| dir.join(limit_file).is_file())?;
    let inactive = std::fs::read_to_string(leaf.join("memory.stat"))
        .ok()
        .and_then(|stat| {
            stat.lines()
                .find_map(|l| l.strip_prefix(inactive_field)?.strip_prefix(' '))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    let usage = read_number(&leaf.join(usage_file))
        .unwrap_or(0)
        .saturating_sub(inactive);
    let mut limit = None::<u64>;
    let mut dir: Option<PathBuf> = Some(leaf);
    while let Some(d) = dir {
        if !d.starts_with(mount) {
            break;
        }
        if let Some(l) = read_number(&d.join(limit_file)) {
            limit = Some(limit.map_or(l, |m| m.min(l)));
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    let limit = limit.filter(|&l| l < UNLIMITED)?;
    Some(CgroupMemory { limit, usage })
}

/// The swap this process's control group may use beyond its memory limit, if the group bounds
/// it: cgroup v1's `memory.memsw.limit_in_bytes` less `memory.limit_in_bytes` (memory and swap
/// together), cgroup v2's `memory.swap.max`. `None`: no bound (or no group).
pub(crate) fn cgroup_swap_limit() -> Option<u64> {
    let table = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let root = Path::new("/sys/fs/cgroup");
    let mut bound = None::<u64>;
    let mut tighten = |b: u64| bound = Some(bound.map_or(b, |m| m.min(b)));
    for line in table.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let relative = path.trim_start_matches('/');
        if id == "0" && controllers.is_empty() {
            if let Some(max) = read_number(&root.join(relative).join("memory.swap.max")) {
                tighten(max);
            }
        } else if controllers.split(',').any(|c| c == "memory") {
            let dir = root.join("memory").join(relative);
            let both = read_number(&dir.join("memory.memsw.limit_in_bytes"));
            let memory = read_number(&dir.join("memory.limit_in_bytes"));
            if let (Some(both), Some(memory)) = (both, memory) {
                if both < UNLIMITED {
                    tighten(both.saturating_sub(memory));
                }
            }
        }
    }
    bound
}

/// A number in a cgroup file (`max` reads as no number).
fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn v1_limit_of_the_group_or_an_ancestor() {
        let root = tempfile::tempdir().unwrap();
        let mem = root.path().join("memory");
        write(&mem.join("memory.limit_in_bytes"), "9223372036854771712\n");
        write(&mem.join("jobs/memory.limit_in_bytes"), "1073741824\n");
        write(
            &mem.join("jobs/a/memory.limit_in_bytes"),
            "9223372036854771712\n",
        );
        write(&mem.join("jobs/a/memory.usage_in_bytes"), "3145728\n");
        write(
            &mem.join("jobs/a/memory.stat"),
            "cache 4096\ntotal_inactive_file 2097152\ntotal_active_file 0\n",
        );
        let table = "9:name=systemd:/\n4:memory:/jobs/a\n0::/\n";
        assert_eq!(
            memory_in(table, root.path()),
            Some(CgroupMemory {
                limit: 1 << 30,
                usage: 1 << 20
            })
        );
        // No limit anywhere.
        write(
            &mem.join("jobs/memory.limit_in_bytes"),
            "9223372036854771712\n",
        );
        assert_eq!(memory_in(table, root.path()), None);
    }

    #[test]
    fn v2_limit_and_a_container_whose_group_is_the_mount_root() {
        let root = tempfile::tempdir().unwrap();
        write(&root.path().join("user/job/memory.max"), "268435456\n");
        write(&root.path().join("user/job/memory.current"), "4096\n");
        write(&root.path().join("user/memory.max"), "max\n");
        let table = "0::/user/job\n";
        assert_eq!(
            memory_in(table, root.path()),
            Some(CgroupMemory {
                limit: 256 << 20,
                usage: 4096
            })
        );
        // In a container /proc/self/cgroup names a path the mount does not have.
        let inner = tempfile::tempdir().unwrap();
        write(&inner.path().join("memory.max"), "536870912\n");
        write(&inner.path().join("memory.current"), "0\n");
        assert_eq!(
            memory_in("0::/kubepods/pod1/c2\n", inner.path()).map(|m| m.limit),
            Some(512 << 20)
        );
        assert_eq!(memory_in("0::/x\n", Path::new("/nonexistent")), None);
    }
}
