//! The wire format between a rank's process (`libbdmpi`) and its node process (`bdmprun`),
//! and the constants of BDMPI's C API that both sides need.
//!
//! A rank talks to its node over one `SOCK_SEQPACKET` socket: every message is one [`Msg`]
//! of fixed size. A call is a [`KIND_CALL`] message answered by a [`KIND_REPLY`]; while a call
//! waits, the node may ask the rank to release its storage-backed memory ([`KIND_UNLOAD`],
//! acknowledged by [`KIND_UNLOADED`]). Buffers are never copied into messages: the node reads
//! and writes the rank's memory directly (`process_vm_readv`/`process_vm_writev`), given the
//! addresses and lengths in the call's arguments.

#![allow(dead_code)]

/// Environment: the rank's end of its socket (a file descriptor number).
pub const ENV_SOCKET: &str = "BDMPI_SOCKET";
/// Environment: the pid of `bdmprun` (a rank process started after it died exits at once).
pub const ENV_PARENT: &str = "BDMPI_PARENT";
/// Environment: the rank's global number (for messages before `BDMPI_Init`).
pub const ENV_RANK: &str = "BDMPI_RANK";
/// Environment: the directory for the rank's storage-backed memory (`-wd`).
pub const ENV_WORKDIR: &str = "BDMPI_WORKDIR";
/// Environment: the storage-backed memory policy (`-sbma`).
pub const ENV_SBMA: &str = "BDMPI_SBMA";
/// Environment: the debug level (`-dl`).
pub const ENV_DEBUG: &str = "BDMPI_DEBUG";

/// A call of the rank.
pub const KIND_CALL: u32 = 1;
/// The node's answer to a call.
pub const KIND_REPLY: u32 = 2;
/// The node asks the rank to unload its storage-backed memory (the rank is blocked).
pub const KIND_UNLOAD: u32 = 3;
/// The rank has unloaded; `a[0]` holds the bytes it released from memory.
pub const KIND_UNLOADED: u32 = 4;

/// One message. Calls carry their arguments in `a` (see [`op`]); replies carry the return
/// code in `code` and results in `a`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Msg {
    /// `KIND_*`.
    pub kind: u32,
    /// `op::*` of a call (echoed in the reply).
    pub op: u32,
    /// Return code of a reply (`SUCCESS` or an `ERR_*`).
    pub code: i32,
    /// The communicator of a call (its node-side id).
    pub comm: i32,
    /// Arguments or results.
    pub a: [u64; 12],
}

/// Size of a [`Msg`] on the wire.
pub const MSG_BYTES: usize = std::mem::size_of::<Msg>();

impl Msg {
    /// A call of `op` on communicator `comm`.
    pub fn call(op: u32, comm: i32) -> Msg {
        Msg {
            kind: KIND_CALL,
            op,
            comm,
            ..Msg::default()
        }
    }

    /// The bytes of the message.
    pub fn to_bytes(self) -> [u8; MSG_BYTES] {
        let mut out = [0u8; MSG_BYTES];
        out[0..4].copy_from_slice(&self.kind.to_ne_bytes());
        out[4..8].copy_from_slice(&self.op.to_ne_bytes());
        out[8..12].copy_from_slice(&self.code.to_ne_bytes());
        out[12..16].copy_from_slice(&self.comm.to_ne_bytes());
        for (i, v) in self.a.iter().enumerate() {
            out[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_ne_bytes());
        }
        out
    }

    /// The message in `bytes` (exactly [`MSG_BYTES`] long).
    pub fn from_bytes(bytes: &[u8; MSG_BYTES]) -> Msg {
        let u32_at = |o: usize| u32::from_ne_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
        let mut a = [0u64; 12];
        for (i, v) in a.iter_mut().enumerate() {
            *v = u64::from_ne_bytes(bytes[16 + 8 * i..24 + 8 * i].try_into().expect("8 bytes"));
        }
        Msg {
            kind: u32_at(0),
            op: u32_at(4),
            code: u32_at(8) as i32,
            comm: u32_at(12) as i32,
            a,
        }
    }
}

/// What a communicator looks like from one member: the fields of BDMPI's `bdscomm_t` that the
/// node computes (written by the node straight into the rank's memory).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommInfo {
    /// The node-side id (`mcomm`).
    pub id: i32,
    /// Members.
    pub size: i32,
    /// The caller's rank.
    pub rank: i32,
    /// Members on the caller's node.
    pub lsize: i32,
    /// The caller's index among them.
    pub lrank: i32,
    /// Nodes holding members.
    pub nsize: i32,
    /// The index of the caller's node among them.
    pub nrank: i32,
    /// The lowest rank on the caller's node.
    pub rrank: i32,
}

// SAFETY: repr(C), eight i32 fields and no padding: every bit pattern is a valid value.
unsafe impl bytemuck::Zeroable for CommInfo {}
// SAFETY: as above; Copy and 'static.
unsafe impl bytemuck::Pod for CommInfo {}

/// Calls. Arguments (`a[i]`) are listed per call; addresses are the rank's.
pub mod op {
    /// `a0`: address of `[CommInfo; 4]` to fill (world, node, self, cyclic world).
    pub const INIT: u32 = 1;
    /// No arguments; the node lets the rank go.
    pub const FINALIZE: u32 = 2;
    /// `a0`: address of a `CommInfo` to fill.
    pub const COMM_DUP: u32 = 3;
    /// `a0`: color (i64; `UNDEFINED` joins none), `a1`: key (i64), `a2`: address of a
    /// `CommInfo` (id -1 when the rank joined none).
    pub const COMM_SPLIT: u32 = 4;
    /// No arguments.
    pub const COMM_FREE: u32 = 5;
    /// `a0` buf, `a1` count, `a2` datatype, `a3` dest, `a4` tag.
    pub const SEND: u32 = 6;
    /// `a0` buf, `a1` count, `a2` datatype, `a3` source, `a4` tag. Reply: `a0` source,
    /// `a1` tag, `a2` bytes received, `a3` bytes of the message.
    pub const RECV: u32 = 7;
    /// As `RECV`; reply: `a0` the request's node-side id.
    pub const IRECV: u32 = 8;
    /// `a0` request id; reply as `RECV`.
    pub const WAIT: u32 = 9;
    /// `a0` request id; reply as `RECV`, and `a4` = 1 if it completed.
    pub const TEST: u32 = 10;
    /// `a0` source, `a1` tag. Reply: `a0` source, `a1` tag, `a2` bytes, `a3` the sender's
    /// datatype.
    pub const PROBE: u32 = 11;
    /// As `PROBE`; reply `a4` = 1 if a message is there.
    pub const IPROBE: u32 = 12;
    /// No arguments.
    pub const BARRIER: u32 = 13;
    /// `a0` buf, `a1` count, `a2` datatype, `a3` root.
    pub const BCAST: u32 = 14;
    /// `a0` sendbuf, `a1` recvbuf, `a2` count, `a3` datatype, `a4` op, `a5` root.
    pub const REDUCE: u32 = 15;
    /// As `REDUCE` without the root.
    pub const ALLREDUCE: u32 = 16;
    /// As `ALLREDUCE`.
    pub const SCAN: u32 = 17;
    /// As `ALLREDUCE`.
    pub const EXSCAN: u32 = 18;
    /// `a0` sendbuf, `a1` sendcount, `a2` sendtype, `a3` recvbuf, `a4` recvcounts (address,
    /// or the count with `FLAG_UNIFORM`), `a5` displs (address), `a6` recvtype, `a7` root,
    /// `a8` flags.
    pub const GATHERV: u32 = 19;
    /// `a0` sendbuf, `a1` sendcounts (address, or the count with `FLAG_UNIFORM`), `a2`
    /// displs, `a3` sendtype, `a4` recvbuf, `a5` recvcount, `a6` recvtype, `a7` root, `a8`
    /// flags.
    pub const SCATTERV: u32 = 20;
    /// As `GATHERV` without the root.
    pub const ALLGATHERV: u32 = 21;
    /// `a0` sendbuf, `a1` sendcounts, `a2` sdispls, `a3` sendtype, `a4` recvbuf, `a5`
    /// recvcounts, `a6` rdispls, `a7` recvtype, `a8` flags.
    pub const ALLTOALLV: u32 = 22;
    /// `a0` sendbuf, `a1` recvbuf, `a2` count, `a3` datatype, `a4` op, `a5` root. Reply `a0`:
    /// the node-side id of the reduction.
    pub const REDUCE_INIT: u32 = 23;
    /// `a0` recvbuf, `a1` count, `a2` datatype, `a3` op, `a4` root, `a5` the id.
    pub const REDUCE_FINE: u32 = 24;
    /// `a0` sendbuf, `a1` sendids, `a2` sendcount, `a3` recvbuf, `a4` recvids, `a5` address of
    /// the receive capacity/count, `a6` datatype, `a7` op, `a8` root, `a9` flags
    /// (`FLAG_INT_ARRAYS`: the count is an `int`).
    pub const MERGE: u32 = 25;
    /// No arguments.
    pub const ENTER_CRITICAL: u32 = 26;
    /// No arguments.
    pub const EXIT_CRITICAL: u32 = 27;
    /// `a0` request id: withdraws a posted receive (a request freed unfinished).
    pub const CANCEL: u32 = 28;

    /// The C name of a call, for messages.
    pub fn name(op: u32) -> &'static str {
        match op {
            INIT => "BDMPI_Init",
            FINALIZE => "BDMPI_Finalize",
            COMM_DUP => "BDMPI_Comm_dup",
            COMM_SPLIT => "BDMPI_Comm_split",
            COMM_FREE => "BDMPI_Comm_free",
            SEND => "BDMPI_Send",
            RECV => "BDMPI_Recv",
            IRECV => "BDMPI_Irecv",
            WAIT => "BDMPI_Wait",
            TEST => "BDMPI_Test",
            PROBE => "BDMPI_Probe",
            IPROBE => "BDMPI_Iprobe",
            BARRIER => "BDMPI_Barrier",
            BCAST => "BDMPI_Bcast",
            REDUCE => "BDMPI_Reduce",
            ALLREDUCE => "BDMPI_Allreduce",
            SCAN => "BDMPI_Scan",
            EXSCAN => "BDMPI_Exscan",
            GATHERV => "BDMPI_Gather",
            SCATTERV => "BDMPI_Scatter",
            ALLGATHERV => "BDMPI_Allgather",
            ALLTOALLV => "BDMPI_Alltoall",
            REDUCE_INIT => "BDMPI_Reduce_init",
            REDUCE_FINE => "BDMPI_Reduce_fine",
            MERGE => "BDMPI_Merge",
            ENTER_CRITICAL => "BDMPI_Entercritical",
            EXIT_CRITICAL => "BDMPI_Exitcritical",
            CANCEL => "BDMPI_Request_free",
            _ => "an unknown call",
        }
    }
}

/// Counts and displacements are one value (`count`, displacements `i * count`), not arrays.
pub const FLAG_UNIFORM: u64 = 1;
/// Arrays (and the merge count) are `int`, not `size_t` (the `MPI_*` entry points).
pub const FLAG_INT_ARRAYS: u64 = 2;

// Wild cards and return codes of bdmpi.h.
/// `BDMPI_ANY_SOURCE`.
pub const ANY_SOURCE: i32 = -1;
/// `BDMPI_ANY_TAG`.
pub const ANY_TAG: i32 = -1;
/// `BDMPI_PROC_NULL`.
pub const PROC_NULL: i32 = -2;
/// `MPI_UNDEFINED`.
pub const UNDEFINED: i32 = -32766;
/// `BDMPI_SUCCESS`.
pub const SUCCESS: i32 = 1001;
/// `BDMPI_INPROGRESS`.
pub const INPROGRESS: i32 = 1002;
/// `BDMPI_ERR_UNKNOWN`.
pub const ERR_UNKNOWN: i32 = 1003;
/// `BDMPI_ERR_COMM`.
pub const ERR_COMM: i32 = 1004;
/// `BDMPI_ERR_ARG`.
pub const ERR_ARG: i32 = 1005;
/// `BDMPI_ERR_BUFFER`.
pub const ERR_BUFFER: i32 = 1006;
/// `BDMPI_ERR_COUNT`.
pub const ERR_COUNT: i32 = 1007;
/// `BDMPI_ERR_TYPE`.
pub const ERR_TYPE: i32 = 1008;
/// `BDMPI_ERR_TAG`.
pub const ERR_TAG: i32 = 1009;
/// `BDMPI_ERR_ROOT`.
pub const ERR_ROOT: i32 = 1010;
/// `BDMPI_ERR_RANK`.
pub const ERR_RANK: i32 = 1011;
/// `BDMPI_ERR_TRUNCATE`.
pub const ERR_TRUNCATE: i32 = 1012;
/// `BDMPI_ERR_OP`.
pub const ERR_OP: i32 = 1013;

/// Reduction operations (`BDMPI_Op`).
pub mod ops {
    /// `BDMPI_OP_NULL`.
    pub const NULL: i32 = -1;
    /// `BDMPI_MAX`.
    pub const MAX: i32 = 1001;
    /// `BDMPI_MIN`.
    pub const MIN: i32 = 1002;
    /// `BDMPI_SUM`.
    pub const SUM: i32 = 1003;
    /// `BDMPI_PROD`.
    pub const PROD: i32 = 1004;
    /// `BDMPI_LAND`.
    pub const LAND: i32 = 1005;
    /// `BDMPI_BAND`.
    pub const BAND: i32 = 1006;
    /// `BDMPI_LOR`.
    pub const LOR: i32 = 1007;
    /// `BDMPI_BOR`.
    pub const BOR: i32 = 1008;
    /// `BDMPI_LXOR`.
    pub const LXOR: i32 = 1009;
    /// `BDMPI_BXOR`.
    pub const BXOR: i32 = 1010;
    /// `BDMPI_MAXLOC`.
    pub const MAXLOC: i32 = 1011;
    /// `BDMPI_MINLOC`.
    pub const MINLOC: i32 = 1012;

    /// Whether `op` is one of the operations.
    pub fn valid(op: i32) -> bool {
        (MAX..=MINLOC).contains(&op)
    }
}

/// Datatypes (`BDMPI_Datatype`).
pub mod types {
    /// `BDMPI_CHAR`.
    pub const CHAR: i32 = 1001;
    /// `BDMPI_SIGNED_CHAR`.
    pub const SIGNED_CHAR: i32 = 1002;
    /// `BDMPI_UNSIGNED_CHAR`.
    pub const UNSIGNED_CHAR: i32 = 1003;
    /// `BDMPI_BYTE`.
    pub const BYTE: i32 = 1004;
    /// `BDMPI_WCHAR`.
    pub const WCHAR: i32 = 1005;
    /// `BDMPI_SHORT`.
    pub const SHORT: i32 = 1006;
    /// `BDMPI_UNSIGNED_SHORT`.
    pub const UNSIGNED_SHORT: i32 = 1007;
    /// `BDMPI_INT`.
    pub const INT: i32 = 1008;
    /// `BDMPI_UNSIGNED`.
    pub const UNSIGNED: i32 = 1009;
    /// `BDMPI_LONG`.
    pub const LONG: i32 = 1010;
    /// `BDMPI_UNSIGNED_LONG`.
    pub const UNSIGNED_LONG: i32 = 1011;
    /// `BDMPI_LONG_LONG_INT`.
    pub const LONG_LONG_INT: i32 = 1012;
    /// `BDMPI_UNSIGNED_LONG_LONG`.
    pub const UNSIGNED_LONG_LONG: i32 = 1013;
    /// `BDMPI_INT8_T`.
    pub const INT8_T: i32 = 1014;
    /// `BDMPI_UINT8_T`.
    pub const UINT8_T: i32 = 1015;
    /// `BDMPI_INT16_T`.
    pub const INT16_T: i32 = 1016;
    /// `BDMPI_UINT16_T`.
    pub const UINT16_T: i32 = 1017;
    /// `BDMPI_INT32_T`.
    pub const INT32_T: i32 = 1018;
    /// `BDMPI_UINT32_T`.
    pub const UINT32_T: i32 = 1019;
    /// `BDMPI_INT64_T`.
    pub const INT64_T: i32 = 1020;
    /// `BDMPI_UINT64_T`.
    pub const UINT64_T: i32 = 1021;
    /// `BDMPI_SIZE_T`.
    pub const SIZE_T: i32 = 1022;
    /// `BDMPI_SSIZE_T`.
    pub const SSIZE_T: i32 = 1023;
    /// `BDMPI_FLOAT`.
    pub const FLOAT: i32 = 1024;
    /// `BDMPI_DOUBLE`.
    pub const DOUBLE: i32 = 1025;
    /// `BDMPI_FLOAT_INT`: `struct { float val; int loc; }`.
    pub const FLOAT_INT: i32 = 1026;
    /// `BDMPI_DOUBLE_INT`: `struct { double val; int loc; }`.
    pub const DOUBLE_INT: i32 = 1027;
    /// `BDMPI_LONG_INT`: `struct { long val; int loc; }`.
    pub const LONG_INT: i32 = 1028;
    /// `BDMPI_SHORT_INT`: `struct { short val; int loc; }`.
    pub const SHORT_INT: i32 = 1029;
    /// `BDMPI_2INT`: `struct { int val; int loc; }`.
    pub const TWO_INT: i32 = 1030;

    /// Bytes of one element of `datatype` (x86-64 / LP64 sizes), or `None` for an unknown
    /// datatype.
    pub fn size(datatype: i32) -> Option<usize> {
        Some(match datatype {
            CHAR | SIGNED_CHAR | UNSIGNED_CHAR | BYTE | INT8_T | UINT8_T => 1,
            SHORT | UNSIGNED_SHORT | INT16_T | UINT16_T => 2,
            WCHAR | INT | UNSIGNED | INT32_T | UINT32_T | FLOAT => 4,
            LONG | UNSIGNED_LONG | LONG_LONG_INT | UNSIGNED_LONG_LONG | INT64_T | UINT64_T
            | SIZE_T | SSIZE_T | DOUBLE => 8,
            FLOAT_INT | SHORT_INT | TWO_INT => 8,
            DOUBLE_INT | LONG_INT => 16,
            _ => return None,
        })
    }

    /// Whether `datatype` is a (value, location) pair for `MAXLOC`/`MINLOC`.
    pub fn is_pair(datatype: i32) -> bool {
        (FLOAT_INT..=TWO_INT).contains(&datatype)
    }

    /// Whether `datatype` is a floating-point type.
    pub fn is_float(datatype: i32) -> bool {
        datatype == FLOAT || datatype == DOUBLE
    }
}

/// Bytes of a message header: the sender's datatype travels with every point-to-point message
/// so that a probe reports the count in the sender's elements, as BDMPI does.
pub const MESSAGE_HEADER: usize = 8;
