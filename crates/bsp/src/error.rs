//! Errors of the BSP primitives.

use std::fmt;
use std::panic::Location;

/// Which reserved capacity a call ran out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capacity {
    /// Registered slots ([`Bsp::resize_memory_register`](crate::Bsp::resize_memory_register)).
    MemoryRegister,
    /// Requests per superstep ([`Bsp::resize_message_queue`](crate::Bsp::resize_message_queue)).
    MessageQueue,
}

/// The kinds of misuse that the primitives detect (always, or in checked mode; see
/// [`Options::checked`](crate::Options::checked)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Misuse {
    /// A put or get reads or writes past the end of a registered area.
    OutOfBounds,
    /// A slot that was never registered, was deregistered, or is not yet usable remotely (a
    /// global registration takes effect at the next sync).
    UnknownSlot,
    /// One superstep both reads and writes the same bytes of a registered area.
    ReadWriteConflict,
    /// The ranks did not call sync (or register/deregister globally) the same number of times.
    MismatchedSync,
    /// A rank number outside the context.
    InvalidPid,
    /// A slot deregistered while requests of the current superstep still use it.
    PendingRequests,
}

impl Misuse {
    fn text(self) -> &'static str {
        match self {
            Misuse::OutOfBounds => "out of bounds",
            Misuse::UnknownSlot => "unknown slot",
            Misuse::ReadWriteConflict => "read-write conflict",
            Misuse::MismatchedSync => "mismatched syncs",
            Misuse::InvalidPid => "invalid pid",
            Misuse::PendingRequests => "slot in use",
        }
    }
}

/// An error of a BSP primitive.
///
/// [`CapacityExceeded`](Error::CapacityExceeded) and [`OutOfMemory`](Error::OutOfMemory) are
/// *mitigable*: the call that returned them had no effect, and the program may go on (after
/// resizing, for instance). [`Misuse`](Error::Misuse) from a put, get, register or deregister
/// is local and has no effect either; from [`sync`](crate::Bsp::sync) it is fatal, like
/// [`Runtime`](Error::Runtime): the job ends.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A reserved capacity is exhausted; the call had no effect.
    CapacityExceeded {
        /// Which capacity.
        what: Capacity,
        /// The capacity in force.
        capacity: usize,
        /// Where the call was made.
        location: &'static Location<'static>,
    },
    /// Memory for a new capacity could not be reserved; the call had no effect.
    OutOfMemory {
        /// Bytes that were requested.
        bytes: usize,
        /// Where the call was made.
        location: &'static Location<'static>,
    },
    /// A misuse of the primitives.
    Misuse {
        /// What went wrong.
        kind: Misuse,
        /// The details (slot, offsets, ranks).
        detail: String,
        /// Where the offending call was made, when known on the reporting rank.
        location: Option<&'static Location<'static>>,
    },
    /// A failure of the runtime or of communication (for instance the job was aborted).
    Runtime(spillway_runtime::Error),
}

impl Error {
    pub(crate) fn misuse(
        kind: Misuse,
        detail: String,
        location: Option<&'static Location<'static>>,
    ) -> Error {
        Error::Misuse {
            kind,
            detail,
            location,
        }
    }

    /// The message without the caller's location (for interfaces such as LPF's C API, where
    /// the Rust location of the call is not the user's).
    pub fn describe(&self) -> String {
        match self {
            Error::CapacityExceeded { location, .. } | Error::OutOfMemory { location, .. } => {
                let full = self.to_string();
                full.strip_prefix(&format!("{location}: "))
                    .unwrap_or(&full)
                    .to_owned()
            }
            Error::Misuse { kind, detail, .. } => format!("{}: {detail}", kind.text()),
            Error::Runtime(e) => e.to_string(),
        }
    }

    /// Whether the call that returned this error had no effect, so that the program can go on.
    pub fn is_mitigable(&self) -> bool {
        matches!(
            self,
            Error::CapacityExceeded { .. } | Error::OutOfMemory { .. }
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::CapacityExceeded {
                what,
                capacity,
                location,
            } => {
                let name = match what {
                    Capacity::MemoryRegister => "memory register",
                    Capacity::MessageQueue => "message queue",
                };
                write!(
                    f,
                    "{location}: capacity exceeded: the {name} holds {capacity} (resize it and sync first)"
                )
            }
            Error::OutOfMemory { bytes, location } => {
                write!(f, "{location}: out of memory reserving {bytes} bytes")
            }
            Error::Misuse {
                kind,
                detail,
                location,
            } => match location {
                Some(at) => write!(f, "{at}: {}: {detail}", kind.text()),
                None => write!(f, "{}: {detail}", kind.text()),
            },
            Error::Runtime(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Runtime(e) => Some(e),
            _ => None,
        }
    }
}

impl From<spillway_runtime::Error> for Error {
    fn from(e: spillway_runtime::Error) -> Error {
        Error::Runtime(e)
    }
}

/// Result of the BSP primitives.
pub type Result<T> = std::result::Result<T, Error>;
