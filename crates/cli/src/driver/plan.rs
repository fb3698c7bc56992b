//! The plan of a job, made before it starts: the runtime configuration (each option checked on
//! its own, so that a message names it), inputs that can only be read once copied to the spill
//! directory, and the memory, storage and ranks the job needs set against what there is.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use spillway::algorithms::io::AtomicFile;
use spillway::algorithms::state::{free_space, human_bytes};
use spillway::{ByteSize, Config, JobError};

use super::args::{CommonArgs, RuntimeArgs};
use super::failure::Failure;
use super::paths::{CheckedInput, CheckedOutput, Source};
use crate::options::Running;

/// Resident bytes each rank costs beside its data: the touched part of its stack, its mailbox
/// and scheduler state (PageRank of a ring at 10,000 ranks: 16 KiB a rank).
pub(crate) const RANK_RESIDENT_BYTES: u64 = 16 << 10;
/// Resident bytes of the process whatever its job: the program, its libraries, the runtime's
/// threads and buffers (6 to 10 MiB measured with the smallest inputs).
pub(crate) const PROCESS_BYTES: u64 = 8 << 20;
/// Storage-backed bytes each rank costs under a memory budget: its smallest storage-backed
/// vectors (measured: about 512 KiB per rank for a graph of a few kilobytes).
pub(crate) const RANK_STORAGE_BYTES: u64 = 512 << 10;
/// Ranks any job may have, whatever its data.
pub(crate) const FREE_RANKS: u64 = 64;
/// Beyond [`FREE_RANKS`], bytes of input (or items generated, times 8) per rank at least.
pub(crate) const BYTES_PER_RANK: u64 = 64;
/// The most bytes read from a stream when `--input-limit` is not given.
pub(crate) const DEFAULT_INPUT_LIMIT: u64 = 64 << 30;

/// What a command expects to need, from its options and the sizes of its inputs.
#[derive(Debug, Default)]
pub(crate) struct Estimate {
    /// Bytes of the job's data (storage-backed under a budget); 0 when only the input's
    /// contents tell (the readers check those before allocating).
    pub(crate) data: u64,
    /// What asks for `data`, for the message (e.g. `--generate rmat:30:16`).
    pub(crate) because: String,
    /// Items of work the options ask for (generated edges, points, values), for the ranks
    /// that can have work.
    pub(crate) items: u64,
    /// Bytes an output will take, by the option that names it, where they can be told.
    pub(crate) outputs: Vec<(&'static str, u64)>,
    /// Bytes of `data` the job keeps a second time when it survives lost processes (MPI
    /// with ULFM): copies of the graph's parts or of the points on other ranks.
    pub(crate) copies: u64,
    /// Resident bytes each rank holds beside [`RANK_RESIDENT_BYTES`] and its share of
    /// `data`, whatever the data (buffers, tables, the centres of a clustering).
    pub(crate) per_rank: u64,
    /// Bytes each rank holds per rank it exchanges with: the bounds, counts and cursors of
    /// an all-to-all exchange, or the queued messages of a sparse one (ranks squared in all,
    /// at most).
    pub(crate) per_pair: u64,
    /// The most ranks one rank exchanges with, when its data bound them (a rank of a graph
    /// sends to the owners of its edges' targets only); `None`: every rank.
    pub(crate) peers: Option<u64>,
    /// The command runs no ranks with these options (it takes runtime options for others).
    pub(crate) no_ranks: bool,
}

impl Estimate {
    /// The estimate of a job on the input `given` of `bytes` bytes whose data take about
    /// `per_byte` times its size (what the input's size alone tells).
    pub(crate) fn of_input(given: &Path, bytes: u64, per_byte: u64) -> Estimate {
        Estimate {
            data: bytes.saturating_mul(per_byte),
            because: format!("--input {}", given.display()),
            ..Estimate::default()
        }
    }

    /// The estimate with what each rank costs alone (`per_rank`) and per rank of the job
    /// (`per_pair`), beside its share of the data.
    pub(crate) fn ranks(mut self, per_rank: u64, per_pair: u64) -> Estimate {
        self.per_rank = per_rank;
        self.per_pair = per_pair;
        self
    }

    /// The estimate of a job whose ranks each exchange with the owners of their share of
    /// `edges` edges only, `per_message` bytes for each of them.
    pub(crate) fn sparse_exchange(mut self, edges: u64, ranks: u64, per_message: u64) -> Estimate {
        self.per_pair = per_message;
        self.peers = Some(edges / ranks.max(1) + 1);
        self
    }
}

/// What a rank of a MapReduce job costs beside its data: its run and exchange buffers, and
/// per rank of the job the bounds and cursors of its exchanges (measured: about 50 KiB and
/// 25 bytes, word count, CC and PageRank at 1,000 and 4,000 ranks).
pub(crate) const MAPREDUCE_RANK: (u64, u64) = (48 << 10, 24);

/// An input as the job reads it.
#[derive(Debug)]
pub(crate) struct ReadInput {
    /// The option that named it.
    pub(crate) arg: &'static str,
    /// The path as given.
    pub(crate) given: PathBuf,
    /// The file to read: the given one, or its copy in the spill directory.
    pub(crate) path: PathBuf,
    /// Its size in bytes.
    pub(crate) bytes: u64,
    /// The copy, removed when the plan is dropped (or by the signal handler).
    _spool: Option<AtomicFile>,
}

impl ReadInput {
    /// The name of the input in messages and reports.
    pub(crate) fn name(&self) -> String {
        if self.given.as_os_str() == "-" {
            "<stdin>".into()
        } else {
            self.given.display().to_string()
        }
    }
}

/// The inputs of a job by the name they were given.
#[derive(Clone, Copy)]
pub(crate) struct Inputs<'a>(pub(crate) &'a [ReadInput]);

impl Inputs<'_> {
    fn find(&self, given: &Path) -> Option<&ReadInput> {
        self.0.iter().find(|i| i.given == given)
    }

    /// The file to read for the input given as `given` (its copy, for a stream).
    pub(crate) fn path(&self, given: &Path) -> PathBuf {
        self.find(given)
            .map_or_else(|| given.to_path_buf(), |i| i.path.clone())
    }

    /// The size in bytes of the input given as `given`.
    pub(crate) fn bytes(&self, given: &Path) -> u64 {
        self.find(given).map_or(0, |i| i.bytes)
    }
}

/// The runtime configuration of `rt`, each option checked when it is added so that an error
/// names the option.
pub(crate) fn config_of(rt: &RuntimeArgs, spill_dir: Option<&Path>) -> Result<Config, Failure> {
    let check = |config: &Config, arg: String| -> Result<(), Failure> {
        match config.layout() {
            Ok(_) => Ok(()),
            Err(JobError::Config(why)) => Err(Failure::usage(format!("{arg}: {why}"))),
            Err(e) => Err(Failure::usage(format!("{arg}: {e}"))),
        }
    };
    let mut config = Config::new(rt.ranks)
        .nodes(rt.nodes)
        .backend(rt.backend)
        .policy(rt.policy)
        .resume_policy(rt.resume_policy);
    check(
        &config,
        format!("--ranks {} --nodes {}", rt.ranks, rt.nodes),
    )?;
    match rt.running {
        // Under a budget, by default the number of running ranks adapts to memory (SBMA).
        None => config = config.dynamic_running(rt.mem_budget.is_some()),
        Some(Running::Dynamic) => config = config.dynamic_running(true),
        Some(Running::Count(n)) => config = config.running(n),
    }
    if let Some(size) = rt.stack_size {
        let bytes = size.to_usize().unwrap_or(usize::MAX);
        config = config.stack_size(bytes);
        check(&config, format!("--stack-size {size}"))?;
    }
    if let Some(budget) = rt.mem_budget {
        config = config.mem_budget(budget.bytes());
        check(&config, format!("--mem-budget {budget}"))?;
    }
    if let Some(path) = &rt.trace {
        config = config.trace(path);
    }
    if let Some(dir) = spill_dir {
        config = config.spill_dir(dir);
    }
    Ok(config)
}

/// The spill directory: `--spill-dir`, or the system's temporary directory.
pub(crate) fn spill_dir(common: &CommonArgs) -> PathBuf {
    common.spill_dir.clone().unwrap_or_else(std::env::temp_dir)
}

/// Makes every input readable as a file: regular files as they are, standard input and
/// streams copied into `spill` (at most `--input-limit` bytes each).
pub(crate) fn read_inputs(
    inputs: &[CheckedInput],
    common: &CommonArgs,
    spill: &Path,
) -> Result<Vec<ReadInput>, Failure> {
    let limit = common.input_limit.map_or_else(
        || free_space(spill).map_or(DEFAULT_INPUT_LIMIT, |f| f.min(DEFAULT_INPUT_LIMIT)),
        ByteSize::bytes,
    );
    inputs
        .iter()
        .map(|i| match i.source {
            Source::File { bytes } => Ok(ReadInput {
                arg: i.arg,
                given: i.path.clone(),
                path: i.path.clone(),
                bytes,
                _spool: None,
            }),
            Source::Stdin | Source::Stream => spool(i, spill, limit),
        })
        .collect()
}

/// Copies a stream into a temporary file of `dir`, refusing more than `limit` bytes and an
/// empty stream.
fn spool(input: &CheckedInput, dir: &Path, limit: u64) -> Result<ReadInput, Failure> {
    let name = if input.path.as_os_str() == "-" {
        "<stdin>".to_string()
    } else {
        input.path.display().to_string()
    };
    let mut file = AtomicFile::create(&dir.join(".spillway-input"))
        .map_err(|e| Failure::path("--spill-dir", dir, format!("cannot copy {name} there: {e}")))?;
    let mut reader: Box<dyn Read> = if input.path.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(&input.path)
                .map_err(|e| Failure::path(input.arg, &input.path, format!("cannot open: {e}")))?,
        )
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(Failure::failed(format!(
                    "{} {name}: cannot read: {e}",
                    input.arg
                )))
            }
        };
        bytes += n as u64;
        if bytes > limit {
            return Err(Failure::usage(format!(
                "{} {name}: more than {} (--input-limit {}); an endless source such as a device?",
                input.arg,
                human_bytes(limit),
                ByteSize(limit)
            )));
        }
        file.writer().write_all(&buf[..n]).map_err(|e| {
            Failure::failed(format!(
                "cannot copy {name} to the spill directory {}: {e}",
                dir.display()
            ))
        })?;
    }
    file.writer()
        .flush()
        .map_err(|e| Failure::failed(format!("cannot copy {name} to {}: {e}", dir.display())))?;
    if bytes == 0 {
        return Err(Failure::usage(format!(
            "{} {name}: no data (the stream was empty)",
            input.arg
        )));
    }
    Ok(ReadInput {
        arg: input.arg,
        given: input.path.clone(),
        path: file.temp_path().to_path_buf(),
        bytes,
        _spool: Some(file),
    })
}

/// The note on the control group's memory limit, if there is one.
fn limit_note() -> String {
    match spillway::cgroup_memory() {
        Some(c) => format!(" (the control group's limit is {})", human_bytes(c.limit)),
        None => String::new(),
    }
}

/// Refuses (exit 2) `bytes` of memory that this process does not have available (the
/// control group's limit counts): for a command that learns what it needs from a header.
/// `what` says who asks, e.g. "INPUT f.spz: the header announces 10 f64 values".
pub(crate) fn check_memory(bytes: u64, what: &str) -> Result<(), Failure> {
    match spillway::available_memory() {
        Some(avail) if bytes > avail => Err(Failure::usage(format!(
            "{what}: they need {} ({bytes} bytes) of memory, more than the {} available{}",
            human_bytes(bytes),
            human_bytes(avail),
            limit_note()
        ))),
        _ => Ok(()),
    }
}

/// What [`check_resources`] checks against: the memory available, the swap beyond it,
/// whether the job keeps copies of its data to survive lost processes.
#[derive(Clone, Copy)]
pub(crate) struct Machine {
    available: Option<u64>,
    swap: u64,
    copied: bool,
}

impl Machine {
    /// This process, for a job of `config`: under MPI with ULFM the direct engines copy their
    /// data to other ranks.
    pub(crate) fn here(config: Option<&Config>) -> Machine {
        Machine {
            available: spillway::available_memory(),
            swap: spillway::available_swap().unwrap_or(0),
            copied: config.is_some_and(|c| c.backend_kind() == spillway::Backend::Mpi)
                && survives_lost_processes(),
        }
    }
}

/// The resident memory a job of `config` (or a command without one) is expected to need in
/// this process at its peak: the process itself, the data (or the budget, when smaller), and
/// what its ranks cost, alone and per pair of ranks.
pub(crate) fn resident_estimate(
    machine: &Machine,
    estimate: &Estimate,
    config: Option<&Config>,
) -> u64 {
    let data = estimate
        .data
        .saturating_add(if machine.copied { estimate.copies } else { 0 });
    let Some(c) = config.filter(|_| !estimate.no_ranks) else {
        return PROCESS_BYTES.saturating_add(data);
    };
    let ranks = u64::from(c.ranks_total());
    let local = local_ranks(c);
    let data = match c.mem_budget_bytes() {
        Some(b) => data.min(b.saturating_mul(local_nodes(c))),
        None => data,
    };
    let peers = estimate.peers.map_or(ranks, |p| p.min(ranks));
    let per_rank = (RANK_RESIDENT_BYTES + estimate.per_rank)
        .saturating_add(peers.saturating_mul(estimate.per_pair));
    PROCESS_BYTES
        .saturating_add(data)
        .saturating_add(local.saturating_mul(per_rank))
}

/// The nodes this process runs: all with the local backend, one with MPI.
fn local_nodes(c: &Config) -> u64 {
    match c.backend_kind() {
        spillway::Backend::Mpi => 1,
        _ => u64::from(c.nodes_total()),
    }
}

/// The ranks this process runs.
fn local_ranks(c: &Config) -> u64 {
    u64::from(c.ranks_total()).div_ceil(u64::from(c.nodes_total())) * local_nodes(c)
}

/// Refuses a job whose memory, storage, ranks or outputs do not fit on `machine`; returns
/// the job's [`resident_estimate`].
pub(crate) fn check_resources(
    machine: &Machine,
    estimate: &Estimate,
    config: Option<&Config>,
    input_bytes: u64,
    outputs: &[CheckedOutput],
    spill: &Path,
) -> Result<u64, Failure> {
    let Machine {
        available,
        swap,
        copied,
    } = *machine;
    let (ranks, budget) = match config {
        Some(c) => (u64::from(c.ranks_total()), c.mem_budget_bytes()),
        None => (0, None),
    };
    // Ranks beyond what the data can keep busy cost memory and time and do nothing.
    let items = (input_bytes / BYTES_PER_RANK).max(estimate.items / 8);
    let useful = FREE_RANKS.max(items);
    if ranks > useful {
        return Err(Failure::usage(format!(
            "--ranks {ranks}: far more ranks than the data can use ({} of input; at most \
             {useful} ranks here, each costing about {} of memory{})",
            human_bytes(input_bytes.max(estimate.items)),
            human_bytes(RANK_RESIDENT_BYTES),
            if budget.is_some() {
                format!(" and {} of storage", human_bytes(RANK_STORAGE_BYTES))
            } else {
                String::new()
            }
        )));
    }
    // Each rank's stack is two memory mappings (the stack and its guard page) in the process
    // that runs it: more than the system maps cannot start.
    let local_ranks = config.map_or(0, local_ranks);
    if let Some(max_maps) = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
    {
        let needed = local_ranks * 2 + 1024;
        if needed > max_maps {
            return Err(Failure::usage(format!(
                "--ranks {ranks}: this process's {local_ranks} ranks need about {needed} memory \
                 mappings for their stacks but the system allows {max_maps} (vm.max_map_count): \
                 use fewer ranks per node (more --nodes with the MPI backend) or raise the limit"
            )));
        }
    }
    if let (Some(c), Some(avail)) = (config, available) {
        let stack = c.stack_size_bytes() as u64;
        if stack > avail {
            return Err(Failure::usage(format!(
                "--stack-size {}: each rank's stack would be larger than the {} of memory \
                 available{}",
                ByteSize(stack),
                human_bytes(avail),
                limit_note()
            )));
        }
    }
    let data = estimate
        .data
        .saturating_add(if copied { estimate.copies } else { 0 });
    let resident = resident_estimate(machine, estimate, config);
    if let Some(avail) = available.filter(|&a| resident > a) {
        let what = match (budget, config) {
            (Some(b), Some(c)) => format!(
                "--mem-budget {}: {} node(s) of this process hold {}",
                ByteSize(b),
                local_nodes(c),
                human_bytes(resident)
            ),
            _ => format!(
                "{}: the job needs about {}{}",
                // What asks for it: the data, and the ranks when their own costs weigh.
                match (
                    config.is_some() && data < resident / 2,
                    estimate.because.as_str()
                ) {
                    (false, because) => because.to_string(),
                    (true, "") => format!("--ranks {ranks}"),
                    (true, because) => format!("{because} on --ranks {ranks}"),
                },
                human_bytes(resident),
                if copied && estimate.copies > 0 {
                    " (with the copies it keeps to survive lost processes)"
                } else {
                    ""
                }
            ),
        };
        // A budget keeps the data in storage-backed memory: what to tell the user.
        let hint = match budget {
            None if config.is_some() => format!(
                "; --mem-budget {} keeps its data in storage-backed memory, read at the \
                 disk's speed",
                ByteSize(((avail.saturating_sub(PROCESS_BYTES) / 2) >> 20) << 20)
            ),
            _ => String::new(),
        };
        if budget.is_some() || resident > avail.saturating_add(swap) {
            return Err(Failure::usage(format!(
                "{what}, more than the {} of memory available{}{}{hint}",
                human_bytes(avail),
                limit_note(),
                match swap {
                    0 => String::new(),
                    s => format!(" and the {} of swap", human_bytes(s)),
                }
            )));
        }
        // It fits with swap: the job runs, paging, as the user may want to see.
        eprintln!(
            "spillway: warning: {what}, more than the {} of memory available{}: it will page \
             through swap{hint}",
            human_bytes(avail),
            limit_note()
        );
    }
    if budget.is_some() {
        let storage = data.saturating_add(ranks.saturating_mul(RANK_STORAGE_BYTES));
        if let Some(free) = free_space(spill) {
            if storage > free {
                return Err(Failure::usage(format!(
                    "{}: the job needs about {} of storage-backed memory, more than the {} free \
                     in the spill directory {}",
                    estimate.because,
                    human_bytes(storage),
                    human_bytes(free),
                    spill.display()
                )));
            }
        }
    }
    for (arg, bytes) in &estimate.outputs {
        if let Some(out) = outputs.iter().find(|o| o.arg == *arg) {
            output_space(out, *bytes)?;
        }
    }
    Ok(resident)
}

/// Refuses an output of `bytes` that the free space of its directory cannot hold.
pub(crate) fn output_space(out: &CheckedOutput, bytes: u64) -> Result<(), Failure> {
    let Some(dir) = &out.dir else { return Ok(()) };
    match free_space(dir) {
        Some(free) if bytes > free => Err(Failure::usage(format!(
            "{} {}: the output will take about {}, more than the {} free in {}",
            out.arg,
            out.path.display(),
            human_bytes(bytes),
            human_bytes(free),
            dir.display()
        ))),
        _ => Ok(()),
    }
}

/// Whether a job of this process survives lost processes (MPI with ULFM, started with it on),
/// known before MPI starts.
fn survives_lost_processes() -> bool {
    #[cfg(feature = "mpi")]
    {
        spillway::mpi::survives_lost_processes()
    }
    #[cfg(not(feature = "mpi"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The copies a job keeps to survive lost processes count against the memory available
    /// when it keeps them, and only then.
    #[test]
    fn copies_count_against_memory_only_when_kept() {
        let spill = tempfile::tempdir().unwrap();
        let gib = 1u64 << 30;
        let estimate = Estimate {
            data: 10 * gib,
            because: "--generate blobs".into(),
            copies: 8 * gib,
            ..Default::default()
        };
        let check = |copied| {
            let machine = Machine {
                available: Some(15 * gib),
                swap: 0,
                copied,
            };
            check_resources(&machine, &estimate, None, 0, &[], spill.path())
        };
        assert!(check(false).is_ok(), "10 GiB of data fit in 15");
        let refused = check(true).expect_err("18 GiB with the copies do not fit in 15");
        assert_eq!(refused.code, 2, "{}", refused.message);
        assert!(
            refused.message.contains("18.0 GiB")
                && refused
                    .message
                    .contains("copies it keeps to survive lost processes"),
            "{}",
            refused.message
        );
    }

    /// Swap counts: a job beyond memory but within memory and swap runs (paging, with a
    /// warning); beyond both it is refused, and the message says what a budget would do.
    #[test]
    fn swap_lets_a_job_page_and_the_refusal_suggests_a_budget() {
        let spill = tempfile::tempdir().unwrap();
        let gib = 1u64 << 30;
        let config = Config::new(4);
        let check = |data: u64| {
            let estimate = Estimate {
                data,
                because: "--generate rmat:30:16".into(),
                ..Default::default()
            };
            let machine = Machine {
                available: Some(8 * gib),
                swap: 8 * gib,
                copied: false,
            };
            check_resources(&machine, &estimate, Some(&config), 0, &[], spill.path())
        };
        assert!(
            check(12 * gib).is_ok(),
            "12 GiB fit in 8 of memory and 8 of swap"
        );
        let refused = check(20 * gib).expect_err("20 GiB do not fit in 8 + 8");
        assert_eq!(refused.code, 2, "{}", refused.message);
        for says in ["rmat:30:16", "of swap", "--mem-budget"] {
            assert!(refused.message.contains(says), "{}", refused.message);
        }
    }
}
