//! The node's end of a rank's socket, and direct access to the rank's memory.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::proto::{Msg, MSG_BYTES};

/// How long a wait for a rank's next call sleeps before it checks whether the job is ending.
const POLL_MS: i32 = 100;

/// The node's end of a rank's socket.
pub(crate) struct Chan {
    fd: OwnedFd,
}

impl Chan {
    pub(crate) fn new(fd: OwnedFd) -> Chan {
        Chan { fd }
    }

    /// Sends `msg`; false if the rank's process is gone.
    pub(crate) fn send(&self, msg: &Msg) -> bool {
        let bytes = msg.to_bytes();
        loop {
            // SAFETY: sends MSG_BYTES bytes from a local array on our own descriptor.
            let n = unsafe {
                libc::send(
                    self.fd.as_raw_fd(),
                    bytes.as_ptr().cast(),
                    MSG_BYTES,
                    libc::MSG_NOSIGNAL,
                )
            };
            if n == MSG_BYTES as isize {
                return true;
            }
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
    }

    /// The next message; `None` when the rank's process has closed its end (it exited).
    /// Waits as long as it takes, checking `stop` every so often: when it says so, returns
    /// `Err(())`.
    pub(crate) fn recv(&self, stop: &dyn Fn() -> bool) -> Result<Option<Msg>, ()> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: polls one descriptor described by a local pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, POLL_MS) };
            if n == 0 || (n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted)
            {
                if stop() {
                    return Err(());
                }
                continue;
            }
            return Ok(self.recv_now());
        }
    }

    /// Receives a message, blocking without checks (the rank answers at once).
    pub(crate) fn recv_now(&self) -> Option<Msg> {
        let mut bytes = [0u8; MSG_BYTES];
        loop {
            // SAFETY: receives at most MSG_BYTES bytes into a local array.
            let n =
                unsafe { libc::recv(self.fd.as_raw_fd(), bytes.as_mut_ptr().cast(), MSG_BYTES, 0) };
            if n == MSG_BYTES as isize {
                return Some(Msg::from_bytes(&bytes));
            }
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return None;
        }
    }
}

/// At most this many pieces per `process_vm_*` call (the system's `IOV_MAX`).
const IOV_MAX: usize = 1024;

/// Direct access to the memory of a rank's process (`process_vm_readv`/`writev`: one copy,
/// no staging through shared memory; allowed because `bdmprun` is the process's parent).
#[derive(Clone, Copy)]
pub(crate) struct Memory {
    pub(crate) pid: i32,
}

impl Memory {
    /// Copies the rank's `pieces` (address, length), one after the other, into `buf` (as long
    /// as their sum).
    pub(crate) fn read(&self, pieces: &[(u64, usize)], buf: &mut [u8]) -> io::Result<()> {
        self.transfer(pieces, buf.as_mut_ptr(), buf.len(), false)
    }

    /// Copies `data` into the rank's `pieces` (address, length), one after the other.
    pub(crate) fn write(&self, pieces: &[(u64, usize)], data: &[u8]) -> io::Result<()> {
        self.transfer(pieces, data.as_ptr() as *mut u8, data.len(), true)
    }

    fn transfer(
        &self,
        pieces: &[(u64, usize)],
        local: *mut u8,
        len: usize,
        write: bool,
    ) -> io::Result<()> {
        let total: usize = pieces.iter().map(|p| p.1).sum();
        assert_eq!(total, len, "the pieces must cover the local buffer");
        let mut done_local = 0usize;
        // Pieces and the offset into the current piece still to transfer.
        let mut idx = 0usize;
        let mut off = 0usize;
        while idx < pieces.len() {
            if pieces[idx].1 == off {
                idx += 1;
                off = 0;
                continue;
            }
            let mut remote: Vec<libc::iovec> = Vec::with_capacity(IOV_MAX.min(pieces.len() - idx));
            let mut want = 0usize;
            for (k, &(addr, plen)) in pieces[idx..].iter().enumerate() {
                if remote.len() == IOV_MAX {
                    break;
                }
                let skip = if k == 0 { off } else { 0 };
                if plen == skip {
                    continue;
                }
                remote.push(libc::iovec {
                    iov_base: (addr as usize + skip) as *mut libc::c_void,
                    iov_len: plen - skip,
                });
                want += plen - skip;
            }
            let local_iov = libc::iovec {
                // SAFETY: `done_local + want <= len`: the pieces cover the local buffer.
                iov_base: unsafe { local.add(done_local) }.cast(),
                iov_len: want,
            };
            // SAFETY: the local iovec lies in the caller's buffer; the remote ones are in the
            // rank's address space, which the kernel checks (EFAULT for a bad address).
            let n = unsafe {
                if write {
                    libc::process_vm_writev(
                        self.pid,
                        &local_iov,
                        1,
                        remote.as_ptr(),
                        remote.len() as libc::c_ulong,
                        0,
                    )
                } else {
                    libc::process_vm_readv(
                        self.pid,
                        &local_iov,
                        1,
                        remote.as_ptr(),
                        remote.len() as libc::c_ulong,
                        0,
                    )
                }
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 && want > 0 {
                return Err(io::Error::from_raw_os_error(libc::EFAULT));
            }
            // Advance over what was transferred.
            let mut n = n as usize;
            done_local += n;
            while n > 0 {
                let left = pieces[idx].1 - off;
                if n >= left {
                    n -= left;
                    idx += 1;
                    off = 0;
                } else {
                    off += n;
                    n = 0;
                }
            }
        }
        Ok(())
    }
}
