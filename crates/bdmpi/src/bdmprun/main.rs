//! `bdmprun`: runs a BDMPI program, one process per rank, on spillway's runtime.
//!
//! This process is the node: it runs a spillway job with one rank per process of the program
//! (a fiber that starts the process and carries out its calls; see `serve.rs`), so at most
//! `-nr` processes run at once, blocked ones give up their slot and their storage-backed
//! memory, and collectives, spilling and the traffic between nodes (under `mpirun`) are
//! spillway's. See the crate's README for the design.

#[path = "../proto.rs"]
mod proto;

mod chan;
mod coll;
mod opts;
mod procs;
mod reduce;
mod serve;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;

use spillway_runtime::{Backend, Config, JobError, Policy};

use crate::opts::{Opts, Sbma};
use crate::procs::{Exit, Procs};
use crate::serve::Node;

/// Writes a line on standard error in one write (the rank processes share it).
pub(crate) fn say(line: std::fmt::Arguments<'_>) {
    let line = format!("bdmprun: {line}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
}

fn fail(code: u8, what: impl std::fmt::Display) -> ExitCode {
    say(format_args!("error: {what}"));
    ExitCode::from(code)
}

/// The program as a path `execve` can run: as given if it names a directory, else found on
/// `PATH`; it must be an executable file.
fn resolve(program: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        if executable(&p) {
            return Ok(p);
        }
        return Err(format!("program {program}: not an executable file"));
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let p = dir.join(program);
        if executable(&p) {
            return Ok(p);
        }
    }
    Err(format!("program {program}: not found on PATH"))
}

/// The number of processes and this process's index when started by `mpirun`.
fn mpi_world() -> Option<(u32, u32)> {
    let var = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| std::env::var(n).ok()?.parse::<u32>().ok())
    };
    let size = var(&["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"])?;
    let rank = var(&["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"]).unwrap_or(0);
    Some((size, rank))
}

/// Removes directories `bdmprun-<pid>-*` under `wd` left by runs that were killed (their
/// files had no names and are gone; only the empty directories remain).
fn remove_stale(wd: &Path) {
    let Ok(entries) = std::fs::read_dir(wd) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("bdmprun-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: kill with signal 0 only checks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Raises the limit of open descriptors to its maximum (one socket per rank).
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: reads and sets this process's limit through a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

fn machine_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = match opts::parse(&args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{}", opts::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => return fail(2, e),
    };
    match resolve(&opts.program[0]) {
        Ok(p) => opts.program[0] = p.display().to_string(),
        Err(e) => return fail(2, e),
    }
    let (nodes, node_index) = match mpi_world() {
        Some((n, i)) if n > 1 => (n, i),
        _ => (1, 0),
    };
    if nodes > 1 && !cfg!(feature = "mpi") {
        return fail(
            2,
            format!(
                "started as {nodes} MPI processes, but this bdmprun was built without MPI \
                 (build it with --features mpi)"
            ),
        );
    }
    if let Err(e) = std::fs::create_dir_all(&opts.wd) {
        return fail(2, format!("working directory {}: {e}", opts.wd.display()));
    }
    remove_stale(&opts.wd);
    let workdir = opts
        .wd
        .join(format!("bdmprun-{}-{node_index}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&workdir) {
        return fail(2, format!("working directory {}: {e}", workdir.display()));
    }
    let code = run(opts, workdir.clone(), nodes);
    let _ = std::fs::remove_dir_all(&workdir);
    code
}

fn run(opts: Opts, workdir: PathBuf, nodes: u32) -> ExitCode {
    raise_fd_limit();
    let procs = match Procs::start(&opts.program) {
        Ok(p) => p,
        Err(e) => return fail(1, format!("cannot start: {e}")),
    };
    // SIGINT, SIGTERM, SIGHUP: the rank processes are killed and the job ends.
    let signalled = Arc::new(AtomicI32::new(0));
    if let Ok(mut signals) = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ]) {
        let (p, s) = (Arc::clone(&procs), Arc::clone(&signalled));
        let _ = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    s.store(sig, Ordering::Release);
                    p.set_ending();
                    spillway_runtime::interrupt(sig);
                    p.kill_all();
                }
            });
    }
    let budget = if opts.rm_given {
        opts.rm_bytes
    } else {
        opts.rm_bytes.min(machine_memory().unwrap_or(opts.rm_bytes))
    };
    let mut config = Config::new(opts.ns * nodes)
        .nodes(nodes)
        .running(opts.nr)
        .spill_dir(&workdir)
        .message_spill_threshold(opts.im_bytes)
        .mem_budget(budget)
        // The node's own storage-backed buffers (the ranks' inputs to collectives) follow
        // the ranks' policy; without one they leave memory only when the limit needs room.
        .policy(match opts.sbma {
            Sbma::Araw | Sbma::Lraw => Policy::Araw,
            Sbma::Lrlw => Policy::Lrlw,
            Sbma::Arlw | Sbma::None => Policy::Arlw,
        });
    if nodes > 1 {
        config = config.backend(Backend::Mpi);
    }
    let dl = opts.dl;
    let node = Arc::new(Node {
        opts,
        procs: Arc::clone(&procs),
        workdir,
        released: AtomicU64::new(0),
        unloads: AtomicU64::new(0),
    });
    let result = spillway_runtime::run_with_stats(&config, |rank| serve::serve(rank, &node));
    if result.is_err() {
        procs.set_ending();
        procs.kill_all();
    }
    let exits = procs.finish();
    if dl > 0 {
        eprintln!(
            "bdmprun: {} unloads released {} MiB of storage-backed memory",
            node.unloads.load(Ordering::Relaxed),
            node.released.load(Ordering::Relaxed) >> 20
        );
    }
    let sig = signalled.load(Ordering::Acquire);
    if sig != 0 {
        say(format_args!(
            "interrupted by signal {sig}; the ranks were stopped"
        ));
        return ExitCode::from(128 + sig as u8);
    }
    if let Some(failure) = procs.failure() {
        return fail(1, failure);
    }
    match result {
        Err(JobError::RankFailed { error, .. }) => return fail(1, error),
        Err(e) => return fail(1, e),
        Ok((_, stats)) => {
            if dl > 0 {
                eprintln!(
                    "bdmprun: {} ranks, {:.3} s, {} messages spilled ({} MiB), peak RSS of \
                     bdmprun {} MiB",
                    stats.ranks.len(),
                    stats.elapsed.as_secs_f64(),
                    stats.memory.messages_spilled,
                    stats.memory.message_bytes_spilled >> 20,
                    stats.peak_rss.unwrap_or(0) >> 20
                );
            }
        }
    }
    // Every rank finalized: the job's status is that of the first rank that did not end well.
    let mut ranks: Vec<_> = exits.into_iter().collect();
    ranks.sort_by_key(|(r, _)| *r);
    for (rank, (pid, exit)) in ranks {
        match exit {
            Exit::Code(0) => {}
            Exit::Code(c) => {
                say(format_args!("rank {rank} (pid {pid}) {exit}"));
                return ExitCode::from(c as u8);
            }
            Exit::Signal(_) => return fail(1, format!("rank {rank} (pid {pid}) {exit}")),
        }
    }
    ExitCode::SUCCESS
}
