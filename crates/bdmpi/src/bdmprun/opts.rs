//! `bdmprun`'s command line: BDMPI's options (`-ns 4` or `-ns=4`), then the program and its
//! arguments.

use std::path::PathBuf;

/// `-sbma`: when a rank's storage-backed memory is released and how it is read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sbma {
    /// Storage-backed allocations are ordinary memory (BDMPI's default).
    None,
    /// Aggressive read, aggressive write: released whenever the rank blocks, read back whole
    /// when it resumes.
    Araw,
    /// Aggressive read, lazy write: released only when the node's `-rm` needs room.
    Arlw,
    /// Lazy read, aggressive write: released whenever the rank blocks, read back as touched.
    Lraw,
    /// Lazy read, lazy write.
    Lrlw,
}

impl Sbma {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Sbma::None => "none",
            Sbma::Araw => "araw",
            Sbma::Arlw => "arlw",
            Sbma::Lraw => "lraw",
            Sbma::Lrlw => "lrlw",
        }
    }

    /// Whether a rank releases its memory every time it blocks.
    pub(crate) fn aggressive_write(self) -> bool {
        matches!(self, Sbma::Araw | Sbma::Lraw)
    }
}

/// What `bdmprun` was asked to do.
#[derive(Debug, Clone)]
pub(crate) struct Opts {
    /// Ranks per node (`-ns`).
    pub(crate) ns: u32,
    /// Ranks of a node running at once (`-nr`).
    pub(crate) nr: u32,
    /// Ranks of a node inside critical sections at once (`-nc`).
    pub(crate) nc: u32,
    /// Messages of at least this many bytes may go to files in the working directory (`-im`,
    /// given in pages).
    pub(crate) im_bytes: usize,
    /// The node's resident memory limit in bytes (`-rm`, given in pages).
    pub(crate) rm_bytes: u64,
    /// Whether `-rm` was given.
    pub(crate) rm_given: bool,
    /// Pages per storage-backed page (`-pg`).
    pub(crate) pg: u32,
    /// Working directory (`-wd`).
    pub(crate) wd: PathBuf,
    /// `-sbma`.
    pub(crate) sbma: Sbma,
    /// Debug level (`-dl`).
    pub(crate) dl: u32,
    /// The program and its arguments.
    pub(crate) program: Vec<String>,
}

pub(crate) const USAGE: &str = "\
Usage: bdmprun [options] program [arguments]

Runs `program` (a BDMPI program linked with libbdmpi) as -ns ranks on this node, one process
each, at most -nr of them running at once. Under `mpirun -np N bdmprun ...` each of the N
processes is a node and the job has N x ns ranks.

Options (`-ns 4` or `-ns=4`):
  -ns=int     ranks per node [1]
  -nr=int     ranks of a node running at once [1]
  -nc=int     ranks of a node inside critical sections at once [1]
  -im=int     messages of at least this many pages may go to files in -wd when the node
              needs the memory [4]
  -rm=int     the node's resident memory limit for messages and storage-backed memory, in
              pages [786432 = 3 GiB, at most this machine's memory]
  -pg=int     system pages per storage-backed page [4] (accepted; memory is read back whole
              or by the kernel's page faults)
  -wd=path    working directory for message and storage-backed memory files [/tmp/bdmpi]
  -sbma=name  storage-backed memory policy: none, araw, arlw, lraw, lrlw [none]
  -dl=int     debug level: 1 prints every call [0]
  -sm=int, -mm=int, -nlm, -sa
              accepted for compatibility with BDMPI's bdmprun; they size or tune BDMPI's
              shared-memory and MPI buffers, which this implementation does not have
  -h          this help

Exit status: 0 when every rank ended with status 0; a rank's non-zero status; 1 when a rank
failed (crashed, or exited without BDMPI_Finalize) or the job deadlocked; 2 for a wrong
request; 130/143 when interrupted.";

const PAGE: u64 = 4096;

fn number(flag: &str, value: &str) -> Result<u64, String> {
    value
        .trim()
        .parse::<u64>()
        .map_err(|_| format!("{flag}: '{value}' is not a non-negative integer"))
}

/// Parses the arguments after the program name. `Ok(None)` for `-h`.
pub(crate) fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        ns: 1,
        nr: 1,
        nc: 1,
        im_bytes: (4 * PAGE) as usize,
        rm_bytes: 786_432 * PAGE,
        rm_given: false,
        pg: 4,
        wd: PathBuf::from("/tmp/bdmpi"),
        sbma: Sbma::None,
        dl: 0,
        program: Vec::new(),
    };
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if !arg.starts_with('-') || arg == "-" {
            o.program = args[i..].to_vec();
            break;
        }
        let body = arg.trim_start_matches('-');
        let (flag, inline) = match body.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (body, None),
        };
        let takes_value = matches!(
            flag,
            "ns" | "nr" | "nc" | "im" | "rm" | "pg" | "wd" | "sbma" | "dl" | "sm" | "mm"
        );
        let value = if takes_value {
            match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    args.get(i)
                        .cloned()
                        .ok_or_else(|| format!("-{flag} needs a value"))?
                }
            }
        } else {
            if inline.is_some() {
                return Err(format!("-{flag} takes no value"));
            }
            String::new()
        };
        let f = format!("-{flag}");
        match flag {
            "ns" => o.ns = number(&f, &value)? as u32,
            "nr" => o.nr = number(&f, &value)? as u32,
            "nc" => o.nc = number(&f, &value)? as u32,
            "im" => o.im_bytes = (number(&f, &value)? * PAGE) as usize,
            "rm" => {
                o.rm_bytes = number(&f, &value)? * PAGE;
                o.rm_given = true;
            }
            "pg" => o.pg = number(&f, &value)? as u32,
            "wd" => o.wd = PathBuf::from(value),
            "dl" => o.dl = number(&f, &value)? as u32,
            "sm" | "mm" => {
                number(&f, &value)?;
            }
            "nlm" | "sa" => {}
            "sbma" => {
                o.sbma = match value.as_str() {
                    "none" => Sbma::None,
                    "araw" => Sbma::Araw,
                    "arlw" => Sbma::Arlw,
                    "lraw" => Sbma::Lraw,
                    "lrlw" => Sbma::Lrlw,
                    other => {
                        return Err(format!(
                            "-sbma: unknown policy '{other}' (none, araw, arlw, lraw, lrlw)"
                        ))
                    }
                }
            }
            "h" | "help" => return Ok(None),
            other => return Err(format!("unknown option -{other} (see bdmprun -h)")),
        }
        i += 1;
    }
    if o.program.is_empty() {
        return Err("no program given (see bdmprun -h)".into());
    }
    if o.ns < 1 {
        return Err("-ns must be at least 1".into());
    }
    if o.nr < 1 {
        return Err("-nr must be at least 1".into());
    }
    if o.nr > o.ns {
        return Err(format!(
            "-nr ({}) must not be larger than -ns ({})",
            o.nr, o.ns
        ));
    }
    if o.nc < 1 {
        return Err("-nc must be at least 1".into());
    }
    if o.im_bytes == 0 {
        return Err("-im must be at least 1".into());
    }
    if o.pg < 1 {
        return Err("-pg must be at least 1".into());
    }
    Ok(Some(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn both_forms_of_options_and_the_program_with_its_arguments() {
        let o = parse(&args("-ns=8 -nr 2 -sbma araw -rm=1024 -wd /x prog -ns 3"))
            .unwrap()
            .unwrap();
        assert_eq!((o.ns, o.nr, o.nc), (8, 2, 1));
        assert_eq!(o.sbma, Sbma::Araw);
        assert_eq!(o.rm_bytes, 1024 * 4096);
        assert!(o.rm_given);
        assert_eq!(o.wd, PathBuf::from("/x"));
        assert_eq!(o.program, args("prog -ns 3"));
    }

    #[test]
    fn wrong_requests_are_refused() {
        assert!(parse(&args("-ns 0 p")).is_err());
        assert!(parse(&args("-ns 2 -nr 3 p")).is_err());
        assert!(parse(&args("-sbma fast p")).is_err());
        assert!(parse(&args("-ns")).is_err());
        assert!(parse(&args("-ns 2")).is_err());
        assert!(parse(&args("-bogus 1 p")).is_err());
        assert!(parse(&args("-h")).unwrap().is_none());
    }
}
