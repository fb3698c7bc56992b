//! One driver for every command.
//!
//! A command is a small module that declares what it reads, writes and uses ([`Declared`]),
//! checks its option values, estimates what it needs and does its work ([`Command`]).
//! [`drive`] takes every command through the same steps in the same order:
//!
//! 1. **parse**: clap, with typed value parsers (done before `drive`);
//! 2. **check** everything that can be checked before work starts: option values, every path
//!    (inputs readable, outputs writable, directories usable, no output the same file as an
//!    input or another output);
//! 3. **plan**: the runtime configuration, streams copied to the spill directory, and the
//!    memory, storage and ranks the job needs against what there is;
//! 4. **run** the work, writing regular-file outputs to temporary files;
//! 5. **commit** the outputs, all together (or none);
//! 6. **report**, for people or as JSON, from the command's typed facts.
//!
//! Steps 2 and 3 end with exit code 2 and a message naming the option or file; a failure
//! while running is exit code 1; a signal is 130 (SIGINT) or 143 (SIGTERM).

pub(crate) mod args;
pub(crate) mod failure;
mod job;
mod paths;
pub(crate) mod plan;
pub(crate) mod report;
mod signals;
mod stdio;

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;

pub(crate) use args::{CheckpointArgs, CommonArgs, RuntimeArgs};
pub(crate) use failure::{Failure, HELP};
pub(crate) use job::{Bar, Job, RankOut};
pub(crate) use plan::{Estimate, Inputs, MAPREDUCE_RANK};
pub(crate) use report::{LossNotice, Recovery, Timing};
pub(crate) use signals::handle_signals;

use report::Report;

/// What a command reads, writes and uses, declared before anything is checked.
pub(crate) struct Declared<'a> {
    common: &'a CommonArgs,
    runtime: Option<&'a RuntimeArgs>,
    inputs: Vec<(&'static str, &'a Path)>,
    outputs: Vec<(&'static str, &'a Path)>,
    dirs: Vec<(&'static str, &'a Path, bool)>,
    label: Option<String>,
}

impl<'a> Declared<'a> {
    /// A command with the options every command has.
    pub(crate) fn new(common: &'a CommonArgs) -> Self {
        Declared {
            common,
            runtime: None,
            inputs: Vec::new(),
            outputs: Vec::new(),
            dirs: Vec::new(),
            label: None,
        }
    }

    /// The input's name in the report when it is generated (the generator spec).
    pub(crate) fn generated(mut self, spec: Option<String>) -> Self {
        self.label = spec;
        self
    }

    /// A command that runs a job with these runtime options (their `--trace` is an output).
    pub(crate) fn job(rt: &'a RuntimeArgs) -> Self {
        let mut d = Declared::new(&rt.common);
        d.runtime = Some(rt);
        d.outputs
            .extend(rt.trace.as_deref().map(|t| ("--trace", t)));
        d
    }

    /// The directory of checkpoints, if any (made if it does not exist).
    pub(crate) fn checkpoints(self, ck: &'a CheckpointArgs) -> Self {
        self.dir("--checkpoint-dir", ck.checkpoint_dir.as_deref(), true)
    }

    /// An input file given by option `arg` (`-` is standard input).
    pub(crate) fn input(mut self, arg: &'static str, path: Option<&'a Path>) -> Self {
        self.inputs.extend(path.map(|p| (arg, p)));
        self
    }

    /// An output file given by option `arg` (`-` is standard output).
    pub(crate) fn output(mut self, arg: &'static str, path: Option<&'a Path>) -> Self {
        self.outputs.extend(path.map(|p| (arg, p)));
        self
    }

    /// A directory the job writes into; with `create`, made if it does not exist.
    pub(crate) fn dir(mut self, arg: &'static str, path: Option<&'a Path>, create: bool) -> Self {
        self.dirs.extend(path.map(|p| (arg, p, create)));
        self
    }
}

/// A command: its declarations, checks, estimate and work.
pub(crate) trait Command {
    /// The name in reports.
    const NAME: &'static str;
    /// The facts of its report.
    type Facts: Serialize;
    /// What it reads, writes and uses.
    fn declare(&self) -> Declared<'_>;
    /// Checks of option values and their combinations that need no file.
    fn check(&self) -> Result<(), Failure> {
        Ok(())
    }
    /// What it needs, from its options and its inputs (their sizes, and headers it may read).
    fn estimate(&self, _inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        Ok(Estimate::default())
    }
    /// The work. `Ok(None)`: this process has nothing to report (its ranks were lost, or
    /// another MPI process reports).
    fn run(&self, job: &Job<'_>) -> Result<Option<Self::Facts>, Failure>;
    /// The report for people, when the facts read better in a form of their own.
    fn human(_facts: &Self::Facts) -> Option<String> {
        None
    }
}

/// Runs a command through every step; returns the exit code.
pub(crate) fn drive<C: Command>(command: &C) -> ExitCode {
    let declared = command.declare();
    let outcome = steps(command, &declared);
    if let Err(f) = outcome {
        if !f.message.is_empty() {
            // One write, so that the messages of several MPI processes do not interleave.
            let line = format!("spillway: error: {}\n", f.message);
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
        return ExitCode::from(f.code);
    }
    ExitCode::SUCCESS
}

fn steps<C: Command>(command: &C, d: &Declared<'_>) -> Result<(), Failure> {
    // 2. Check.
    command.check()?;
    let inputs = d
        .inputs
        .iter()
        .map(|&(arg, path)| paths::check_input(arg, path))
        .collect::<Result<Vec<_>, _>>()?;
    let outputs = d
        .outputs
        .iter()
        .map(|&(arg, path)| paths::check_output(arg, path))
        .collect::<Result<Vec<_>, _>>()?;
    paths::check_distinct(&inputs, &outputs)?;
    if stdio::stdout_was_closed() {
        let what = match outputs.iter().find(|o| o.sink == paths::Sink::Stdout) {
            Some(o) => format!("{} {}", o.arg, o.path.display()),
            None => "the report".into(),
        };
        return Err(Failure::failed(format!(
            "standard output is closed: {what} would be lost (send it to a file or to \
             /dev/null)"
        )));
    }
    if let Some(dir) = &d.common.spill_dir {
        paths::check_dir("--spill-dir", dir, false)?;
    }
    for &(arg, dir, create) in &d.dirs {
        paths::check_dir(arg, dir, create)?;
    }
    let mpi = d
        .runtime
        .is_some_and(|rt| rt.backend == spillway::Backend::Mpi);
    if mpi {
        let stdio = inputs
            .iter()
            .map(|i| (i.arg, &i.path, i.source == paths::Source::Stdin))
            .chain(
                outputs
                    .iter()
                    .map(|o| (o.arg, &o.path, o.sink == paths::Sink::Stdout)),
            );
        for (arg, path, std_stream) in stdio {
            if std_stream {
                return Err(Failure::path(
                    arg,
                    path,
                    "standard input and output cannot be shared by the processes of \
                     --backend mpi; give a file",
                ));
            }
        }
    }
    // 3. Plan.
    let spill = plan::spill_dir(d.common);
    let config = d
        .runtime
        .map(|rt| plan::config_of(rt, d.common.spill_dir.as_deref()))
        .transpose()?;
    let read = plan::read_inputs(&inputs, d.common, &spill)?;
    let estimate = command.estimate(plan::Inputs(&read))?;
    let total_input: u64 = read.iter().map(|i| i.bytes).sum();
    let memory_estimate = plan::check_resources(
        &plan::Machine::here(config.as_ref()),
        &estimate,
        config.as_ref(),
        total_input,
        &outputs,
        &spill,
    )?;
    // 4. Run; messages name a copied stream as it was given.
    let job = Job::new(&read, &outputs, config.as_ref(), d.common.json)?;
    let facts = command.run(&job).map_err(|mut f| {
        for i in read.iter().filter(|i| i.path != i.given) {
            f.message = f.message.replace(&i.path.display().to_string(), &i.name());
        }
        f
    })?;
    // 5. Commit.
    job.commit()?;
    // 6. Report.
    let Some(facts) = facts else {
        return Ok(());
    };
    let report = Report {
        algorithm: C::NAME,
        input: match &d.label {
            Some(label) if read.is_empty() => label.clone(),
            // Every file of the first input option (not an --init or --test file).
            _ => read
                .iter()
                .filter(|i| Some(i.arg) == read.first().map(|f| f.arg))
                .map(|i| i.name())
                .collect::<Vec<_>>()
                .join(" "),
        },
        facts: &facts,
        memory_estimate_bytes: memory_estimate,
        run: job.take_run(),
        output: outputs
            .iter()
            .find(|o| o.arg != "--trace")
            .map(|o| o.path.display().to_string()),
        outputs: outputs
            .iter()
            .filter(|o| o.arg != "--trace")
            .map(|o| o.path.display().to_string())
            .collect(),
    };
    let text = match C::human(&facts) {
        Some(text) if !d.common.json => text,
        _ => report.render(d.common.json),
    };
    let (written, stream) = if job.stdout_taken() {
        (
            std::io::stderr().write_all(text.as_bytes()),
            "standard error",
        )
    } else {
        let mut out = std::io::stdout().lock();
        (
            out.write_all(text.as_bytes()).and_then(|()| out.flush()),
            "standard output",
        )
    };
    written.map_err(|e| Failure::failed(format!("cannot write the report to {stream}: {e}")))
}
