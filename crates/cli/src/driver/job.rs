//! What a command sees while it runs: its inputs as files, its outputs as writers (staged until
//! the whole job succeeded, or written through for streams), and one way to run ranks.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use spillway::algorithms::io::in_rank_order;
use spillway::algorithms::io::AtomicFile;
use spillway::algorithms::AlgoError;
use spillway::{run_with_stats, Collectives, Comm, Config, Rank};

use super::failure::Failure;
use super::paths::{CheckedOutput, Sink};
use super::plan::{Inputs, ReadInput};
use super::report::{RunSection, Timing};

/// One rank's part of a job's result: the facts, its timing, and whether it is the rank that
/// reports (rank 0 of the ranks that survived).
pub(crate) struct RankOut<T> {
    /// What the command reports.
    pub(crate) facts: T,
    /// Iterations and times.
    pub(crate) timing: Timing,
    /// Whether this is the reporting rank (rank 0 of the surviving ranks).
    pub(crate) lead: bool,
}

impl<T> RankOut<T> {
    /// A rank's part of a job run by the ranks of `comm`, of which rank 0 reports.
    pub(crate) fn of(comm: &Comm, facts: T, timing: Timing) -> Self {
        RankOut {
            facts,
            timing,
            lead: comm.rank() == 0,
        }
    }
}

/// A progress bar on a terminal, moved by rank 0.
pub(crate) struct Bar(Option<ProgressBar>);

impl Bar {
    /// Moves the bar to `iteration` with `message` (on rank 0 only).
    pub(crate) fn tick(&self, comm: &Comm, iteration: usize, message: String) {
        if let (Some(bar), 0) = (&self.0, comm.rank()) {
            bar.set_position(iteration as u64);
            bar.set_message(message);
        }
    }
}

/// An output being written: its checked path and, for [`Sink::Through`] and
/// [`Sink::Stdout`], the descriptor held open for the whole job (a FIFO keeps a writer, so
/// its reader does not see an end between two ranks' parts).
struct OpenOutput {
    checked: CheckedOutput,
    held: Option<File>,
}

/// The running job of a command.
pub(crate) struct Job<'p> {
    inputs: &'p [ReadInput],
    outputs: Vec<OpenOutput>,
    config: Option<&'p Config>,
    interactive: bool,
    /// Staged regular-file outputs (in the process that wrote them), committed together.
    staged: Mutex<Vec<(PathBuf, AtomicFile)>>,
    /// The run's section of the report, once a job ran.
    run: Mutex<Option<RunSection>>,
    start: Instant,
}

impl<'p> Job<'p> {
    /// Opens the outputs that are written through (a FIFO waits here for its reader, before
    /// any work; a signal still ends the program at once).
    pub(crate) fn new(
        inputs: &'p [ReadInput],
        outputs: &[CheckedOutput],
        config: Option<&'p Config>,
        json: bool,
    ) -> Result<Job<'p>, Failure> {
        let outputs = outputs
            .iter()
            .map(|o| {
                let held = match o.sink {
                    Sink::Replace => None,
                    Sink::Stdout => Some(
                        rustix::io::dup(std::io::stdout())
                            .map(File::from)
                            .map_err(|e| Failure::write(&o.path, &e.into()))?,
                    ),
                    Sink::Through => Some(
                        OpenOptions::new()
                            .append(true)
                            .open(&o.path)
                            .map_err(|e| Failure::path(o.arg, &o.path, e))?,
                    ),
                };
                Ok(OpenOutput {
                    checked: o.clone(),
                    held,
                })
            })
            .collect::<Result<Vec<_>, Failure>>()?;
        Ok(Job {
            inputs,
            outputs,
            config,
            interactive: !json && std::io::stderr().is_terminal(),
            staged: Mutex::new(Vec::new()),
            run: Mutex::new(None),
            start: Instant::now(),
        })
    }

    /// The file to read for the input given as `given` (its copy, for a stream).
    pub(crate) fn input(&self, given: &Path) -> PathBuf {
        Inputs(self.inputs).path(given)
    }

    /// The size in bytes of the input given as `given`.
    pub(crate) fn input_bytes(&self, given: &Path) -> u64 {
        Inputs(self.inputs).bytes(given)
    }

    /// The runtime configuration (commands that declared runtime options).
    pub(crate) fn config(&self) -> &Config {
        self.config
            .expect("the command declared its runtime options")
    }

    fn output(&self, path: &Path) -> &OpenOutput {
        self.outputs
            .iter()
            .find(|o| o.checked.path == path)
            .expect("the command declared this output")
    }

    /// Refuses (exit 2) an output of `bytes` that its directory cannot hold: for a command
    /// that learns the size of its output from its input, before writing it.
    pub(crate) fn ensure_space(&self, path: &Path, bytes: u64) -> Result<(), Failure> {
        super::plan::output_space(&self.output(path).checked, bytes)
    }

    /// A writer for `path` in this process: a staged temporary file (registered for the
    /// commit) or the held descriptor. `first` creates the staged file; later writers of the
    /// same output append to `staged_temp`.
    fn writer(&self, path: &Path, staged_temp: Option<&Path>) -> std::io::Result<BufWriter<File>> {
        let out = self.output(path);
        let file = match (&out.held, staged_temp) {
            (Some(held), _) => held.try_clone()?,
            (None, Some(temp)) => OpenOptions::new().append(true).open(temp)?,
            (None, None) => {
                let staged = AtomicFile::create(path)?;
                let file = OpenOptions::new().append(true).open(staged.temp_path())?;
                // Written again (after a recovery from lost processes): the new copy replaces
                // the first, whose temporary file goes when it is dropped.
                let mut all = self.lock_staged();
                all.retain(|(p, _)| p != path);
                all.push((path.to_path_buf(), staged));
                file
            }
        };
        Ok(BufWriter::new(file))
    }

    fn lock_staged(&self) -> std::sync::MutexGuard<'_, Vec<(PathBuf, AtomicFile)>> {
        self.staged.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the output `path` from this process alone.
    pub(crate) fn write(
        &self,
        path: &Path,
        f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<(), Failure> {
        let mut w = self
            .writer(path, None)
            .map_err(|e| Failure::write(path, &e))?;
        f(&mut w)
            .and_then(|()| w.flush())
            .map_err(|e| Failure::write(path, &e))
    }

    /// `e`, unless it is a lost process and an output goes to a pipe or device: what was
    /// written there cannot be taken back, so the outputs cannot be written again after a
    /// recovery and the loss ends the job (for the survivors' writes of their outputs).
    pub(crate) fn unrewritable_if_lost(&self, e: AlgoError) -> AlgoError {
        match self.outputs.iter().find(|o| o.held.is_some()) {
            Some(o) if e.is_process_lost() => AlgoError::Unrecoverable(format!(
                "{e} while the outputs were written; {} is written through (a pipe or \
                 device) and what went to it cannot be taken back, so the survivors cannot \
                 write it again",
                o.checked.path.display()
            )),
            _ => e,
        }
    }

    /// Writes the output `path` from every rank of `comm` in rank order (a collective).
    pub(crate) fn write_ordered(
        &self,
        comm: &Comm,
        path: &Path,
        mut f: impl FnMut(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<(), AlgoError> {
        let error = |e| AlgoError::Output {
            path: path.to_path_buf(),
            source: e,
        };
        let staged = self.output(path).held.is_none();
        let comm = comm.dup();
        // Rank 0 creates the staged file; the others append to it in their turn.
        let temp: Option<PathBuf> = if staged {
            let mine = if comm.rank() == 0 {
                drop(self.writer(path, None).map_err(error)?);
                self.lock_staged()
                    .iter()
                    .rev()
                    .find(|(p, _)| p == path)
                    .map(|(_, f)| f.temp_path().to_path_buf())
            } else {
                None
            };
            Some(comm.bcast_obj(0, mine)?)
        } else {
            None
        };
        in_rank_order(&comm, || {
            let mut w = self.writer(path, temp.as_deref()).map_err(error)?;
            f(&mut w).and_then(|()| w.flush()).map_err(error)
        })
    }

    /// Runs `f` on every rank of `comm`: rank 0 with a writer of the output `path`, the
    /// others with `None` (a collective; for outputs that rank 0 writes alone).
    pub(crate) fn write_root(
        &self,
        comm: &Comm,
        path: &Path,
        f: impl FnOnce(Option<&mut dyn Write>) -> Result<(), AlgoError>,
    ) -> Result<(), AlgoError> {
        let error = |e| AlgoError::Output {
            path: path.to_path_buf(),
            source: e,
        };
        if comm.rank() != 0 {
            return f(None);
        }
        let mut w = self.writer(path, None).map_err(error)?;
        f(Some(&mut w))?;
        w.flush().map_err(error)
    }

    /// Runs the ranks of the job: `f` returns the rank's part of the result, or `None` for a
    /// rank lost in a fault-tolerant job. Returns the facts of the reporting rank when this
    /// process holds it (`None` elsewhere: another MPI process, or no rank of it survived).
    pub(crate) fn spmd<T: Send>(
        &self,
        iterations: usize,
        label: &str,
        f: impl Fn(&Rank, &Bar) -> Result<Option<RankOut<T>>, AlgoError> + Sync,
    ) -> Result<Option<T>, Failure> {
        let config = self.config();
        let bar = Bar(self.interactive.then(|| {
            let bar = ProgressBar::new(iterations as u64);
            let style =
                ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} iterations  {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(label.to_string());
            bar
        }));
        let outcome = run_with_stats(config, |rank| f(rank, &bar));
        if let Some(b) = &bar.0 {
            b.finish_and_clear();
        }
        let (results, stats) = outcome?;
        let Some(lead) = results.into_iter().flatten().find(|out| out.lead) else {
            return Ok(None);
        };
        let section = RunSection::new(config, lead.timing, &stats, self.start.elapsed());
        *self.run.lock().unwrap_or_else(|e| e.into_inner()) = Some(section);
        Ok(Some(lead.facts))
    }

    /// The number of nodes of the job that ran (with the MPI backend: its processes).
    pub(crate) fn nodes(&self) -> u32 {
        let run = self.run.lock().unwrap_or_else(|e| e.into_inner());
        run.as_ref()
            .map_or_else(|| self.config().nodes_total(), |r| r.nodes)
    }

    /// The MapReduce operations of the job that ran.
    pub(crate) fn operations(&self) -> usize {
        let run = self.run.lock().unwrap_or_else(|e| e.into_inner());
        run.as_ref().map_or(0, |r| r.operations.len())
    }

    /// The run's section of the report, if a job ran.
    pub(crate) fn take_run(&self) -> Option<RunSection> {
        self.run.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Whether an output is standard output (the report then goes to stderr).
    pub(crate) fn stdout_taken(&self) -> bool {
        self.outputs.iter().any(|o| o.checked.sink == Sink::Stdout)
    }

    /// Commits every staged output: all are flushed and synced first, then renamed, so that
    /// a failure leaves none of them (a rename failing after others is reported by name).
    pub(crate) fn commit(&self) -> Result<(), Failure> {
        let mut staged = std::mem::take(&mut *self.lock_staged());
        for (path, file) in &mut staged {
            file.writer()
                .flush()
                .and_then(|()| file.writer().get_ref().sync_all())
                .map_err(|e| Failure::write(path, &e))?;
        }
        let mut done: Vec<PathBuf> = Vec::new();
        for (path, file) in staged {
            if let Err(e) = file.commit() {
                let note = if done.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({} already written)",
                        done.iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                return Err(Failure::failed(format!(
                    "cannot write {}: {e}{note}",
                    path.display()
                )));
            }
            done.push(path);
        }
        Ok(())
    }
}
