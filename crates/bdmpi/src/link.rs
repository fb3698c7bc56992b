//! The rank's link to its node: one `SOCK_SEQPACKET` socket, one message per call and one per
//! answer.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

use crate::proto::{self, Msg, MSG_BYTES};
pub(crate) use crate::report::report;

/// The socket (-1 before `BDMPI_Init`).
static SOCKET: AtomicI32 = AtomicI32::new(-1);
/// Whether `BDMPI_Finalize` was called.
static FINALIZED: AtomicI32 = AtomicI32::new(0);
/// Calls of several threads go one at a time.
static CALLS: Mutex<()> = Mutex::new(());

/// The socket if `BDMPI_Init` was called and `BDMPI_Finalize` was not; otherwise reports
/// `call` and gives the error code to return.
pub(crate) fn socket(call: &str) -> Result<RawFd, i32> {
    let fd = SOCKET.load(Ordering::Acquire);
    if fd < 0 {
        report(call, format_args!("BDMPI_Init has not been called"));
        return Err(proto::ERR_UNKNOWN);
    }
    if FINALIZED.load(Ordering::Acquire) != 0 {
        report(call, format_args!("called after BDMPI_Finalize"));
        return Err(proto::ERR_UNKNOWN);
    }
    Ok(fd)
}

/// The socket if `BDMPI_Init` has connected.
pub(crate) fn socket_if_connected() -> Option<RawFd> {
    let fd = SOCKET.load(Ordering::Acquire);
    (fd >= 0).then_some(fd)
}

/// Takes the socket that `bdmprun` passed in the environment.
pub(crate) fn connect() -> Result<RawFd, String> {
    let v = std::env::var(proto::ENV_SOCKET).map_err(|_| {
        "this program was not started by bdmprun (run it as: bdmprun -ns RANKS program ...)"
            .to_string()
    })?;
    let fd: RawFd = v
        .parse()
        .map_err(|_| format!("{} is not a descriptor: {v}", proto::ENV_SOCKET))?;
    // SAFETY: F_GETFD only queries the descriptor's flags.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(format!("descriptor {fd} from bdmprun is not open"));
    }
    // The rank's own children must not inherit its link.
    // SAFETY: sets close-on-exec on a descriptor this process owns.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    Ok(fd)
}

/// Records the link after a successful `BDMPI_Init`.
pub(crate) fn set_connected(fd: RawFd, rank: i32) {
    crate::report::set_rank(rank);
    SOCKET.store(fd, Ordering::Release);
}

/// Records `BDMPI_Finalize`.
pub(crate) fn set_finalized() {
    FINALIZED.store(1, Ordering::Release);
}

fn send(fd: RawFd, msg: &Msg) -> bool {
    let bytes = msg.to_bytes();
    loop {
        // SAFETY: sends MSG_BYTES bytes from a local array.
        let n = unsafe { libc::send(fd, bytes.as_ptr().cast(), MSG_BYTES, libc::MSG_NOSIGNAL) };
        if n == MSG_BYTES as isize {
            return true;
        }
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return false;
    }
}

fn recv(fd: RawFd) -> Option<Msg> {
    let mut bytes = [0u8; MSG_BYTES];
    loop {
        // SAFETY: receives at most MSG_BYTES bytes into a local array.
        let n = unsafe { libc::recv(fd, bytes.as_mut_ptr().cast(), MSG_BYTES, 0) };
        if n == MSG_BYTES as isize {
            return Some(Msg::from_bytes(&bytes));
        }
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

/// The node is gone: the job is over (another rank failed, or bdmprun was stopped). The rank
/// ends at once, without running the program's exit handlers (which might call the library).
fn lost(call: &str) -> ! {
    report(
        call,
        format_args!("the connection to bdmprun was lost (the job was aborted); exiting"),
    );
    // SAFETY: _exit ends the process; nothing runs after it.
    unsafe { libc::_exit(1) }
}

/// Sends `call` and waits for its answer, releasing storage-backed memory when the node asks
/// (the rank is blocked meanwhile) and loading it again when the answer comes.
pub(crate) fn call(fd: RawFd, msg: Msg) -> Msg {
    let _one = CALLS.lock().unwrap_or_else(|e| e.into_inner());
    let name = proto::op::name(msg.op);
    if !send(fd, &msg) {
        lost(name);
    }
    let mut unloaded = false;
    loop {
        let Some(m) = recv(fd) else { lost(name) };
        match m.kind {
            proto::KIND_REPLY => {
                if unloaded {
                    crate::sb::resume();
                }
                return m;
            }
            proto::KIND_UNLOAD => {
                let released = crate::sb::unload_for_block();
                unloaded = true;
                let mut ack = Msg {
                    kind: proto::KIND_UNLOADED,
                    ..Msg::default()
                };
                ack.a[0] = released;
                if !send(fd, &ack) {
                    lost(name);
                }
            }
            other => {
                report(
                    name,
                    format_args!("unexpected message of kind {other} from bdmprun"),
                );
                lost(name)
            }
        }
    }
}

/// Runs when the library is loaded: a rank process started by `bdmprun` dies with it (a
/// process whose `bdmprun` was killed would otherwise compute on until its next call).
extern "C" fn on_load() {
    let Some(parent) = std::env::var(proto::ENV_PARENT)
        .ok()
        .and_then(|p| p.parse::<i32>().ok())
    else {
        return;
    };
    // SAFETY: prctl and getppid only concern this process; _exit ends it.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(1);
        }
    }
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;
