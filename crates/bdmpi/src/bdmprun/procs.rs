//! The ranks' processes: started with `posix_spawn` by one spawner thread (which lives until
//! every rank process has exited: the parent-death signal that libbdmpi asks for when it is
//! loaded refers to that thread, so the processes die with `bdmprun`, not with a worker),
//! reaped by one reaper thread, their output copied by one thread, and killed together when
//! the job fails.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    Code(i32),
    Signal(i32),
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exited with status {c}"),
            Exit::Signal(s) => {
                // SAFETY: strsignal returns a pointer to a static or thread-local string.
                let name = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(*s)) };
                write!(f, "was killed by signal {s} ({})", name.to_string_lossy())
            }
        }
    }
}

#[derive(Default)]
struct Table {
    /// pid -> global rank.
    ranks: HashMap<i32, u32>,
    /// Live processes.
    alive: usize,
    /// Global rank -> how its process ended.
    exits: HashMap<u32, (i32, Exit)>,
    /// Global ranks that called BDMPI_Finalize.
    finalized: std::collections::HashSet<u32>,
    /// The first rank process that ended before BDMPI_Finalize.
    failure: Option<String>,
    /// No more processes will be started.
    closed: bool,
}

/// What the spawner is asked: start the process of a rank.
struct Request {
    rank: u32,
    env: Vec<(String, String)>,
    reply: mpsc::Sender<std::io::Result<(i32, OwnedFd)>>,
}

/// The rank processes of this node.
pub(crate) struct Procs {
    table: Mutex<Table>,
    changed: Condvar,
    spawner: Mutex<Option<mpsc::Sender<Request>>>,
    program: Vec<CString>,
    /// Set once the job has failed: exits are expected from then on.
    ending: AtomicBool,
    /// The output streams of started processes not yet taken up by the forwarder.
    streams: Mutex<Vec<Stream>>,
    /// The forwarder thread (joined by `finish`).
    forwarder: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// One output stream of a rank process: the read end of its pipe and the start of a line.
struct Stream {
    fd: OwnedFd,
    err: bool,
    line: Vec<u8>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn decode(status: i32) -> Exit {
    if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        Exit::Code(libc::WEXITSTATUS(status))
    }
}

impl Procs {
    /// Starts the spawner and reaper threads for `program` (already resolved to a path).
    pub(crate) fn start(program: &[String]) -> std::io::Result<Arc<Procs>> {
        let program: Vec<CString> = program
            .iter()
            .map(|a| CString::new(a.as_str()))
            .collect::<Result<_, _>>()
            .map_err(|_| std::io::Error::other("an argument contains a NUL byte"))?;
        let (tx, rx) = mpsc::channel::<Request>();
        let procs = Arc::new(Procs {
            table: Mutex::new(Table::default()),
            changed: Condvar::new(),
            spawner: Mutex::new(Some(tx)),
            program,
            ending: AtomicBool::new(false),
            streams: Mutex::new(Vec::new()),
            forwarder: Mutex::new(None),
        });
        let p = Arc::clone(&procs);
        std::thread::Builder::new()
            .name("spawner".into())
            .spawn(move || p.spawner(rx))?;
        let p = Arc::clone(&procs);
        std::thread::Builder::new()
            .name("reaper".into())
            .spawn(move || p.reaper())?;
        let p = Arc::clone(&procs);
        let forwarder = std::thread::Builder::new()
            .name("output".into())
            .spawn(move || p.forward())?;
        *lock(&procs.forwarder) = Some(forwarder);
        Ok(procs)
    }

    /// The spawner thread: starts processes on request; once the job is over, stays until
    /// every process has exited (their parent-death signal refers to this thread).
    fn spawner(&self, rx: mpsc::Receiver<Request>) {
        for req in rx {
            let mut t = lock(&self.table);
            // Under the table's lock, so that the reaper cannot see the pid before it is known.
            let out = self.fork(&req.env);
            if let Ok((pid, _)) = &out {
                t.ranks.insert(*pid, req.rank);
                t.alive += 1;
            }
            drop(t);
            let _ = req.reply.send(out);
        }
        let mut t = lock(&self.table);
        while t.alive > 0 {
            t = self.changed.wait(t).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn fork(&self, env: &[(String, String)]) -> std::io::Result<(i32, OwnedFd)> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: socketpair writes two descriptors into the array; checked below.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned here.
        let (mine, theirs) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let mut env = env.to_vec();
        env.push((crate::proto::ENV_SOCKET.to_string(), SOCKET_FD.to_string()));
        env.push((
            crate::proto::ENV_PARENT.to_string(),
            std::process::id().to_string(),
        ));
        let env: Vec<CString> = env
            .iter()
            .map(|(k, v)| CString::new(format!("{k}={v}")))
            .chain(std::env::vars_os().filter_map(|(k, v)| {
                let k = k.into_string().ok()?;
                if env.iter().any(|(ek, _)| *ek == k) {
                    return None;
                }
                Some(CString::new(format!("{k}={}", v.into_string().ok()?)))
            }))
            .collect::<Result<_, _>>()
            .map_err(|_| std::io::Error::other("an environment variable contains a NUL byte"))?;
        let mut envp: Vec<*mut libc::c_char> = env.iter().map(|s| s.as_ptr().cast_mut()).collect();
        envp.push(std::ptr::null_mut());
        let mut argv: Vec<*mut libc::c_char> =
            self.program.iter().map(|s| s.as_ptr().cast_mut()).collect();
        argv.push(std::ptr::null_mut());
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let pid = spawn(
            &argv,
            &envp,
            &[
                (out_w.as_raw_fd(), 1),
                (err_w.as_raw_fd(), 2),
                (theirs.as_raw_fd(), SOCKET_FD),
            ],
        )?;
        drop((theirs, out_w, err_w));
        let mut streams = lock(&self.streams);
        for (fd, err) in [(out_r, false), (err_r, true)] {
            streams.push(Stream {
                fd,
                err,
                line: Vec::new(),
            });
        }
        Ok((pid, mine))
    }

    /// The output thread: copies the rank processes' standard output and error to this
    /// process's, a whole line at a time, so that the lines of different ranks never mix
    /// (a rank may write a line in several pieces). Ends when every process has exited and
    /// its streams are drained.
    fn forward(&self) {
        let mut open: Vec<Stream> = Vec::new();
        loop {
            open.append(&mut lock(&self.streams));
            if open.is_empty() {
                let t = lock(&self.table);
                if t.closed && t.alive == 0 && lock(&self.streams).is_empty() {
                    return;
                }
                drop(t);
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            let mut fds: Vec<libc::pollfd> = open
                .iter()
                .map(|s| libc::pollfd {
                    fd: s.fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // SAFETY: polls the descriptors of a local array of pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 50) };
            if n <= 0 {
                continue;
            }
            let mut closed = Vec::new();
            for (i, pfd) in fds.iter().enumerate() {
                if pfd.revents == 0 {
                    continue;
                }
                if !open[i].pump() {
                    closed.push(i);
                }
            }
            for i in closed.into_iter().rev() {
                open.swap_remove(i);
            }
        }
    }

    /// The reaper thread: records how every process ends; a rank process that ends before
    /// BDMPI_Finalize fails the job.
    fn reaper(&self) {
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes the status of a child of this process.
            let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
            if pid < 0 {
                let closed = {
                    let t = lock(&self.table);
                    t.closed && t.alive == 0
                };
                if closed {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            let exit = decode(status);
            let mut t = lock(&self.table);
            let Some(&rank) = t.ranks.get(&pid) else {
                continue;
            };
            t.alive -= 1;
            t.exits.insert(rank, (pid, exit));
            let premature = !t.finalized.contains(&rank);
            let first = premature && t.failure.is_none() && !self.ending.load(Ordering::Acquire);
            if first {
                let what = match exit {
                    Exit::Code(_) => {
                        format!("rank {rank} (pid {pid}) {exit} without calling BDMPI_Finalize")
                    }
                    Exit::Signal(_) => {
                        format!("rank {rank} (pid {pid}) {exit} before BDMPI_Finalize")
                    }
                };
                t.failure = Some(what);
            }
            drop(t);
            self.changed.notify_all();
            if first {
                // The job cannot go on: the ranks waiting for this one would wait forever.
                self.ending.store(true, Ordering::Release);
                spillway_runtime::interrupt(0);
                self.kill_all();
            }
        }
    }

    /// Starts the process of `rank`; returns its pid and the node's end of its socket.
    pub(crate) fn spawn(
        &self,
        rank: u32,
        env: Vec<(String, String)>,
    ) -> std::io::Result<(i32, OwnedFd)> {
        let (reply, rx) = mpsc::channel();
        let sent = lock(&self.spawner)
            .as_ref()
            .map(|tx| tx.send(Request { rank, env, reply }).is_ok())
            .unwrap_or(false);
        if !sent {
            return Err(std::io::Error::other("the job is ending"));
        }
        rx.recv()
            .unwrap_or_else(|_| Err(std::io::Error::other("the spawner has stopped")))
    }

    /// Records that `rank` called BDMPI_Finalize.
    pub(crate) fn finalized(&self, rank: u32) {
        lock(&self.table).finalized.insert(rank);
    }

    /// How the process of `rank` ended, waiting up to `limit` for the reaper to see it.
    pub(crate) fn exit_of(&self, rank: u32, limit: Duration) -> Option<(i32, Exit)> {
        let start = Instant::now();
        let mut t = lock(&self.table);
        loop {
            if let Some(&e) = t.exits.get(&rank) {
                return Some(e);
            }
            let left = limit.checked_sub(start.elapsed())?;
            t = self
                .changed
                .wait_timeout(t, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The first rank process that ended before BDMPI_Finalize, if any.
    pub(crate) fn failure(&self) -> Option<String> {
        lock(&self.table).failure.clone()
    }

    /// The job has failed: the exits that follow are its consequence, not new failures.
    pub(crate) fn set_ending(&self) {
        self.ending.store(true, Ordering::Release);
    }

    /// Kills every live rank process.
    pub(crate) fn kill_all(&self) {
        let t = lock(&self.table);
        for (&pid, rank) in &t.ranks {
            if !t.exits.contains_key(rank) {
                // SAFETY: a child of this process that has not been reaped (its pid cannot
                // have been reused).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }

    /// No more processes will start: waits until every one has exited and its output has been
    /// copied, and returns their exits by rank.
    pub(crate) fn finish(&self) -> HashMap<u32, (i32, Exit)> {
        lock(&self.spawner).take();
        let exits = {
            let mut t = lock(&self.table);
            t.closed = true;
            while t.alive > 0 {
                t = self.changed.wait(t).unwrap_or_else(|e| e.into_inner());
            }
            t.exits.clone()
        };
        // The output of the processes is copied before this process ends.
        if let Some(f) = lock(&self.forwarder).take() {
            let _ = f.join();
        }
        exits
    }
}

/// The descriptor of a rank process's socket.
const SOCKET_FD: RawFd = 3;

/// Starts `argv` with `envp` (both null-terminated) and the descriptors `dups` (from, to)
/// (every other descriptor of this process is closed on exec), with the default action for
/// every signal that this process ignores or handles (SIGPIPE is ignored here).
///
/// `posix_spawn` shares the address space until the exec (no copy of the page tables, which
/// would make starting the thousandth rank cost as much as the first thousand).
fn spawn(
    argv: &[*mut libc::c_char],
    envp: &[*mut libc::c_char],
    dups: &[(RawFd, RawFd)],
) -> std::io::Result<i32> {
    let check = |rc: libc::c_int| {
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::from_raw_os_error(rc))
        }
    };
    // SAFETY: the file actions and attributes are initialised before use and destroyed on
    // every path below; argv and envp are null-terminated arrays of C strings that outlive the
    // call; pid is written by posix_spawn.
    unsafe {
        let mut fa: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        check(libc::posix_spawn_file_actions_init(&mut fa))?;
        if let Err(e) = check(libc::posix_spawnattr_init(&mut attr)) {
            libc::posix_spawn_file_actions_destroy(&mut fa);
            return Err(e);
        }
        let result = (|| {
            for &(from, to) in dups {
                check(libc::posix_spawn_file_actions_adddup2(&mut fa, from, to))?;
            }
            let mut defaults: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut defaults);
            for sig in [libc::SIGPIPE, libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::sigaddset(&mut defaults, sig);
            }
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut mask);
            check(libc::posix_spawnattr_setsigdefault(&mut attr, &defaults))?;
            check(libc::posix_spawnattr_setsigmask(&mut attr, &mask))?;
            check(libc::posix_spawnattr_setflags(
                &mut attr,
                (libc::POSIX_SPAWN_SETSIGDEF | libc::POSIX_SPAWN_SETSIGMASK) as libc::c_short,
            ))?;
            let mut pid = 0;
            check(libc::posix_spawn(
                &mut pid,
                argv[0],
                &fa,
                &attr,
                argv.as_ptr(),
                envp.as_ptr(),
            ))?;
            Ok(pid)
        })();
        libc::posix_spawnattr_destroy(&mut attr);
        libc::posix_spawn_file_actions_destroy(&mut fa);
        result
    }
}

/// A pipe whose ends are closed on exec.
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into the array; checked below.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl Stream {
    /// Reads what is there and writes out the complete lines; false at the end of the stream
    /// (the rest of an unfinished line is written then).
    fn pump(&mut self) -> bool {
        let mut buf = [0u8; 65536];
        // SAFETY: reads into a local buffer from our own descriptor.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if matches!(
                e.kind(),
                std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
            ) {
                return true;
            }
        }
        if n <= 0 {
            let rest = std::mem::take(&mut self.line);
            self.emit(&rest);
            return false;
        }
        self.line.extend_from_slice(&buf[..n as usize]);
        if let Some(end) = self.line.iter().rposition(|&b| b == b'\n') {
            let lines: Vec<u8> = self.line.drain(..=end).collect();
            self.emit(&lines);
        }
        true
    }

    fn emit(&self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        use std::io::Write;
        let _ = if self.err {
            std::io::stderr().lock().write_all(bytes)
        } else {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes).and_then(|()| out.flush())
        };
    }
}
