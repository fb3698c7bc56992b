//! Chrome trace events ([`Config::trace`](crate::Config::trace)): what each rank did and when,
//! for Perfetto or `chrome://tracing`.
//!
//! # What is recorded
//! Complete events (`"ph": "X"`), one track per rank (`pid` = node, `tid` = rank):
//! * `running`: from the moment a worker resumes the rank's fiber until it blocks or returns;
//! * `blocked: <what>` (`recv`, `probe`, `wait`, `critical`, or the collective's name): from the
//!   moment the rank gave up its slot until a worker resumes it (queued time included);
//! * `load` and `unload` of storage-backed memory, with the bytes read or written (`args`),
//!   on the track of the rank that owns it (the node's own buffers: track `node I/O`).
//!
//! # Cost
//! Two clock reads per resumption and an event pushed to a per-thread buffer (moved to the
//! job's list every 4096 events and when a worker ends); the file is written when the job ends.
//! Nothing is recorded while no job traces. One job traces at a time in a process: events of
//! other jobs running at the same time (nested jobs) land in the same file.

use std::cell::RefCell;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Track id of a node's own I/O (not a rank's).
pub(crate) const NODE_TRACK: u32 = u32::MAX;

static ON: AtomicBool = AtomicBool::new(false);
static ANCHOR: OnceLock<Instant> = OnceLock::new();
static SINK: Mutex<Vec<Event>> = Mutex::new(Vec::new());

thread_local! {
    static BUF: RefCell<Vec<Event>> = const { RefCell::new(Vec::new()) };
}

const FLUSH_AT: usize = 4096;

struct Event {
    name: &'static str,
    cat: &'static str,
    node: u32,
    rank: u32,
    start: u64,
    end: u64,
    bytes: Option<u64>,
}

/// Whether a job is tracing.
#[inline]
pub(crate) fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Nanoseconds since the process's first trace.
#[inline]
pub(crate) fn now() -> u64 {
    ANCHOR.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Records an interval of `rank` on `node` (no-op when not tracing).
pub(crate) fn interval(
    name: &'static str,
    cat: &'static str,
    node: u32,
    rank: u32,
    start: u64,
    end: u64,
    bytes: Option<u64>,
) {
    if !enabled() {
        return;
    }
    let e = Event {
        name,
        cat,
        node,
        rank,
        start,
        end: end.max(start),
        bytes,
    };
    BUF.with(|b| {
        let mut b = b.borrow_mut();
        b.push(e);
        if b.len() >= FLUSH_AT {
            lock().append(&mut b);
        }
    });
}

fn lock() -> std::sync::MutexGuard<'static, Vec<Event>> {
    spillway_transport::lock(&SINK)
}

/// Moves this thread's events to the job's list (called when a worker ends).
pub(crate) fn flush_thread() {
    BUF.with(|b| {
        let mut b = b.borrow_mut();
        if !b.is_empty() {
            lock().append(&mut b);
        }
    });
}

/// Starts recording for a job; returns when it started.
pub(crate) fn begin() -> u64 {
    lock().clear();
    let t = now();
    ON.store(true, Ordering::Relaxed);
    t
}

/// Stops recording and writes the events since `start` to `path` as a Chrome trace (JSON
/// object format), with `nodes` named processes and their ranks' tracks named.
///
/// A regular file (or a new one) is written to a temporary file beside it and renamed over it
/// once complete, so that a trace that cannot be completed (a full disk, a file-size limit)
/// leaves nothing behind; anything else (a pipe, a device) is written through.
pub(crate) fn finish(path: &Path, start: u64, ranks: &[(u32, u32)]) -> io::Result<()> {
    ON.store(false, Ordering::Relaxed);
    flush_thread();
    let events = std::mem::take(&mut *lock());
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        return write_trace(&file, &events, start, ranks);
    }
    let mut temp = path.as_os_str().to_owned();
    temp.push(format!(".tmp-{}", std::process::id()));
    let temp = std::path::PathBuf::from(temp);
    let written = std::fs::File::create(&temp)
        .and_then(|file| write_trace(&file, &events, start, ranks).and_then(|()| file.sync_all()))
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// Writes `events` since `start` to `file` as a Chrome trace.
fn write_trace(
    file: &std::fs::File,
    events: &[Event],
    start: u64,
    ranks: &[(u32, u32)],
) -> io::Result<()> {
    let mut w = io::BufWriter::new(file);
    let us = |ns: u64| ns.saturating_sub(start) as f64 / 1000.0;
    writeln!(w, "{{\"displayTimeUnit\":\"ms\",\"traceEvents\":[")?;
    let mut first = true;
    let mut sep = |w: &mut io::BufWriter<&std::fs::File>| -> io::Result<()> {
        if !first {
            w.write_all(b",\n")?;
        }
        first = false;
        Ok(())
    };
    let mut nodes: Vec<u32> = ranks.iter().map(|&(n, _)| n).collect();
    nodes.sort_unstable();
    nodes.dedup();
    for n in &nodes {
        sep(&mut w)?;
        write!(
            w,
            "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{n},\"tid\":0,\"args\":{{\"name\":\"node {n}\"}}}}"
        )?;
        sep(&mut w)?;
        write!(
            w,
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{n},\"tid\":{NODE_TRACK},\"args\":{{\"name\":\"node I/O\"}}}}"
        )?;
    }
    for &(n, r) in ranks {
        sep(&mut w)?;
        write!(
            w,
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{n},\"tid\":{r},\"args\":{{\"name\":\"rank {r}\"}}}}"
        )?;
        sep(&mut w)?;
        write!(
            w,
            "{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{n},\"tid\":{r},\"args\":{{\"sort_index\":{r}}}}}"
        )?;
    }
    for e in events.iter().filter(|e| e.end >= start) {
        sep(&mut w)?;
        write!(
            w,
            "{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"X\",\"ts\":{:.3},\"dur\":{:.3},\"pid\":{},\"tid\":{}",
            e.name,
            e.cat,
            us(e.start),
            (e.end - e.start.max(start)) as f64 / 1000.0,
            e.node,
            e.rank
        )?;
        if let Some(b) = e.bytes {
            write!(w, ",\"args\":{{\"bytes\":{b}}}")?;
        }
        w.write_all(b"}")?;
    }
    writeln!(w, "\n]}}")?;
    w.flush()
}
