//! Reductions on BDMPI's datatypes: the datatype and operation codes of a call chosen into
//! spillway's typed reductions (`Operation<T>` on plain-data `T`), including `MAXLOC` and
//! `MINLOC` on the (value, location) pair types.

use bytemuck::{Pod, Zeroable};
use spillway_comm::{
    BitAnd, BitOr, BitXor, Collectives, Comm, LogicalAnd, LogicalOr, LogicalXor, Max, Min,
    Operation, Prod, Sum, UserOp,
};

use crate::proto::{ops, types};

/// Which reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The result at `root` only.
    Reduce(usize),
    /// The result everywhere.
    All,
    /// Inclusive prefix.
    Scan,
    /// Exclusive prefix (nothing on rank 0).
    Exscan,
}

/// Why a reduction did not happen.
#[derive(Debug)]
pub(crate) enum Fail {
    /// A wrong request: BDMPI's code and what was wrong.
    Code(i32, String),
    /// The job is ending.
    Aborted,
}

impl From<spillway_comm::Error> for Fail {
    fn from(e: spillway_comm::Error) -> Fail {
        use spillway_comm::Error as E;
        match e {
            E::Aborted => Fail::Aborted,
            E::InvalidRank { .. } => Fail::Code(crate::proto::ERR_RANK, e.to_string()),
            E::Truncated { .. } => Fail::Code(crate::proto::ERR_TRUNCATE, e.to_string()),
            E::TypeMismatch { .. } => Fail::Code(crate::proto::ERR_TYPE, e.to_string()),
            E::InvalidArgument(_) => Fail::Code(crate::proto::ERR_ARG, e.to_string()),
            other => Fail::Code(crate::proto::ERR_UNKNOWN, other.to_string()),
        }
    }
}

macro_rules! pair {
    ($name:ident, $v:ty, $($pad:ident: $pt:ty),*; $($pad2:ident: $pt2:ty),*) => {
        /// A (value, location) pair with C's layout.
        #[repr(C)]
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub(crate) struct $name {
            val: $v,
            $($pad: $pt,)*
            loc: i32,
            $($pad2: $pt2,)*
        }
        // SAFETY: repr(C) with every byte covered by a field (the padding C would insert is an
        // explicit field), all fields plain integers or floats: any bit pattern is valid and
        // all-zero is a valid value.
        unsafe impl Zeroable for $name {}
        // SAFETY: as above; the type is Copy and 'static.
        unsafe impl Pod for $name {}
        impl Loc for $name {
            fn better(&self, other: &Self, max: bool) -> bool {
                if max { other.val > self.val } else { other.val < self.val }
            }
            fn tie(&self, other: &Self) -> bool {
                #[allow(clippy::float_cmp)]
                { other.val == self.val }
            }
            fn loc(&self) -> i32 { self.loc }
        }
    };
}

/// What MAXLOC and MINLOC need of a pair.
pub(crate) trait Loc: Pod {
    /// Whether `other`'s value wins over this one's (larger for max, smaller for min).
    fn better(&self, other: &Self, max: bool) -> bool;
    /// Whether the values are equal.
    fn tie(&self, other: &Self) -> bool;
    fn loc(&self) -> i32;
}

pair!(FloatInt, f32, ; );
pair!(DoubleInt, f64, ; _pad: i32);
pair!(LongInt, i64, ; _pad: i32);
pair!(ShortInt, i16, _pad: i16; );
pair!(TwoInt, i32, ; );

/// MAXLOC (`max`) or MINLOC: the better value; on a tie, the lower location.
fn loc_op<T: Loc>(max: bool) -> UserOp<impl Fn(&T, &T) -> T + Sync> {
    UserOp::commutative(move |a: &T, b: &T| {
        if a.better(b, max) || (a.tie(b) && b.loc() < a.loc()) {
            *b
        } else {
            *a
        }
    })
}

fn apply<T: Pod, O: Operation<T>>(
    kind: Kind,
    comm: &Comm<'_>,
    data: &[T],
    op: O,
) -> Result<Option<Vec<T>>, Fail> {
    Ok(match kind {
        Kind::Reduce(root) => comm.reduce(root, data, op)?,
        Kind::All => Some(comm.allreduce(data, op)?),
        Kind::Scan => Some(comm.scan(data, op)?),
        Kind::Exscan => comm.exscan(data, op)?,
    })
}

/// Where a reduction's input comes from and where its result goes.
pub(crate) struct Io<'a> {
    /// Fills the input bytes (as many as `count` elements).
    pub(crate) input: &'a mut dyn FnMut(&mut [u8]) -> Result<(), Fail>,
    /// Takes the result bytes.
    pub(crate) output: &'a mut dyn FnMut(&[u8]) -> Result<(), Fail>,
}

fn bad_op(op: i32, datatype: i32) -> Fail {
    Fail::Code(
        crate::proto::ERR_OP,
        format!("operation {op} does not apply to datatype {datatype}"),
    )
}

fn run<T: Pod>(
    count: usize,
    io: &mut Io<'_>,
    f: impl FnOnce(&[T]) -> Result<Option<Vec<T>>, Fail>,
) -> Result<(), Fail> {
    let mut data = vec![T::zeroed(); count];
    (io.input)(bytemuck::cast_slice_mut(&mut data))?;
    if let Some(out) = f(&data)? {
        (io.output)(bytemuck::cast_slice(&out))?;
    }
    Ok(())
}

macro_rules! integer {
    ($T:ty, $kind:expr, $comm:expr, $count:expr, $op:expr, $dt:expr, $io:expr) => {
        run::<$T>($count, $io, |d| match $op {
            ops::SUM => apply($kind, $comm, d, Sum),
            ops::PROD => apply($kind, $comm, d, Prod),
            ops::MIN => apply($kind, $comm, d, Min),
            ops::MAX => apply($kind, $comm, d, Max),
            ops::LAND => apply($kind, $comm, d, LogicalAnd),
            ops::LOR => apply($kind, $comm, d, LogicalOr),
            ops::LXOR => apply($kind, $comm, d, LogicalXor),
            ops::BAND => apply($kind, $comm, d, BitAnd),
            ops::BOR => apply($kind, $comm, d, BitOr),
            ops::BXOR => apply($kind, $comm, d, BitXor),
            other => Err(bad_op(other, $dt)),
        })
    };
}

macro_rules! float {
    ($T:ty, $kind:expr, $comm:expr, $count:expr, $op:expr, $dt:expr, $io:expr) => {
        run::<$T>($count, $io, |d| match $op {
            ops::SUM => apply($kind, $comm, d, Sum),
            ops::PROD => apply($kind, $comm, d, Prod),
            ops::MIN => apply($kind, $comm, d, Min),
            ops::MAX => apply($kind, $comm, d, Max),
            other => Err(bad_op(other, $dt)),
        })
    };
}

macro_rules! located {
    ($T:ty, $kind:expr, $comm:expr, $count:expr, $op:expr, $dt:expr, $io:expr) => {
        run::<$T>($count, $io, |d| match $op {
            ops::MAXLOC => apply($kind, $comm, d, loc_op::<$T>(true)),
            ops::MINLOC => apply($kind, $comm, d, loc_op::<$T>(false)),
            other => Err(bad_op(other, $dt)),
        })
    };
}

/// Runs reduction `kind` of `count` elements of `datatype` with `op` on `comm`.
pub(crate) fn reduction(
    kind: Kind,
    comm: &Comm<'_>,
    count: usize,
    datatype: i32,
    op: i32,
    io: &mut Io<'_>,
) -> Result<(), Fail> {
    use types::*;
    match datatype {
        CHAR | SIGNED_CHAR | INT8_T => integer!(i8, kind, comm, count, op, datatype, io),
        UNSIGNED_CHAR | BYTE | UINT8_T => integer!(u8, kind, comm, count, op, datatype, io),
        SHORT | INT16_T => integer!(i16, kind, comm, count, op, datatype, io),
        UNSIGNED_SHORT | UINT16_T => integer!(u16, kind, comm, count, op, datatype, io),
        WCHAR | INT | INT32_T => integer!(i32, kind, comm, count, op, datatype, io),
        UNSIGNED | UINT32_T => integer!(u32, kind, comm, count, op, datatype, io),
        LONG | LONG_LONG_INT | INT64_T | SSIZE_T => {
            integer!(i64, kind, comm, count, op, datatype, io)
        }
        UNSIGNED_LONG | UNSIGNED_LONG_LONG | UINT64_T | SIZE_T => {
            integer!(u64, kind, comm, count, op, datatype, io)
        }
        FLOAT => float!(f32, kind, comm, count, op, datatype, io),
        DOUBLE => float!(f64, kind, comm, count, op, datatype, io),
        FLOAT_INT => located!(FloatInt, kind, comm, count, op, datatype, io),
        DOUBLE_INT => located!(DoubleInt, kind, comm, count, op, datatype, io),
        LONG_INT => located!(LongInt, kind, comm, count, op, datatype, io),
        SHORT_INT => located!(ShortInt, kind, comm, count, op, datatype, io),
        TWO_INT => located!(TwoInt, kind, comm, count, op, datatype, io),
        other => Err(Fail::Code(
            crate::proto::ERR_TYPE,
            format!("{other} is not a BDMPI datatype"),
        )),
    }
}

/// Combines one element `other` into `acc` (both the bytes of one element of `datatype`) with
/// `op`: the merge of `BDMPI_Merge`.
pub(crate) fn combine_one(
    datatype: i32,
    op: i32,
    acc: &mut [u8],
    other: &[u8],
) -> Result<(), Fail> {
    fn one<T: Pod, O: Operation<T>>(acc: &mut [u8], other: &[u8], op: O) -> Result<(), Fail> {
        let mut a: T = bytemuck::pod_read_unaligned(acc);
        let b: T = bytemuck::pod_read_unaligned(other);
        op.combine(std::slice::from_mut(&mut a), std::slice::from_ref(&b));
        acc.copy_from_slice(bytemuck::bytes_of(&a));
        Ok(())
    }
    macro_rules! int_one {
        ($T:ty) => {
            match op {
                ops::SUM => one::<$T, _>(acc, other, Sum),
                ops::PROD => one::<$T, _>(acc, other, Prod),
                ops::MIN => one::<$T, _>(acc, other, Min),
                ops::MAX => one::<$T, _>(acc, other, Max),
                ops::LAND => one::<$T, _>(acc, other, LogicalAnd),
                ops::LOR => one::<$T, _>(acc, other, LogicalOr),
                ops::LXOR => one::<$T, _>(acc, other, LogicalXor),
                ops::BAND => one::<$T, _>(acc, other, BitAnd),
                ops::BOR => one::<$T, _>(acc, other, BitOr),
                ops::BXOR => one::<$T, _>(acc, other, BitXor),
                o => Err(bad_op(o, datatype)),
            }
        };
    }
    macro_rules! float_one {
        ($T:ty) => {
            match op {
                ops::SUM => one::<$T, _>(acc, other, Sum),
                ops::PROD => one::<$T, _>(acc, other, Prod),
                ops::MIN => one::<$T, _>(acc, other, Min),
                ops::MAX => one::<$T, _>(acc, other, Max),
                o => Err(bad_op(o, datatype)),
            }
        };
    }
    macro_rules! loc_one {
        ($T:ty) => {
            match op {
                ops::MAXLOC => one::<$T, _>(acc, other, loc_op::<$T>(true)),
                ops::MINLOC => one::<$T, _>(acc, other, loc_op::<$T>(false)),
                o => Err(bad_op(o, datatype)),
            }
        };
    }
    use types::*;
    match datatype {
        CHAR | SIGNED_CHAR | INT8_T => int_one!(i8),
        UNSIGNED_CHAR | BYTE | UINT8_T => int_one!(u8),
        SHORT | INT16_T => int_one!(i16),
        UNSIGNED_SHORT | UINT16_T => int_one!(u16),
        WCHAR | INT | INT32_T => int_one!(i32),
        UNSIGNED | UINT32_T => int_one!(u32),
        LONG | LONG_LONG_INT | INT64_T | SSIZE_T => int_one!(i64),
        UNSIGNED_LONG | UNSIGNED_LONG_LONG | UINT64_T | SIZE_T => int_one!(u64),
        FLOAT => float_one!(f32),
        DOUBLE => float_one!(f64),
        FLOAT_INT => loc_one!(FloatInt),
        DOUBLE_INT => loc_one!(DoubleInt),
        LONG_INT => loc_one!(LongInt),
        SHORT_INT => loc_one!(ShortInt),
        TWO_INT => loc_one!(TwoInt),
        other => Err(Fail::Code(
            crate::proto::ERR_TYPE,
            format!("{other} is not a BDMPI datatype"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_types_have_the_c_layouts() {
        assert_eq!(
            std::mem::size_of::<FloatInt>(),
            types::size(types::FLOAT_INT).unwrap()
        );
        assert_eq!(
            std::mem::size_of::<DoubleInt>(),
            types::size(types::DOUBLE_INT).unwrap()
        );
        assert_eq!(
            std::mem::size_of::<LongInt>(),
            types::size(types::LONG_INT).unwrap()
        );
        assert_eq!(
            std::mem::size_of::<ShortInt>(),
            types::size(types::SHORT_INT).unwrap()
        );
        assert_eq!(
            std::mem::size_of::<TwoInt>(),
            types::size(types::TWO_INT).unwrap()
        );
        assert_eq!(std::mem::offset_of!(DoubleInt, loc), 8);
        assert_eq!(std::mem::offset_of!(ShortInt, loc), 4);
    }

    #[test]
    fn maxloc_and_minloc_break_ties_by_the_lowest_location() {
        let a = TwoInt { val: 5, loc: 3 };
        let b = TwoInt { val: 5, loc: 1 };
        let c = TwoInt { val: 7, loc: 9 };
        let mut acc = [a];
        loc_op::<TwoInt>(true).combine(&mut acc, &[b]);
        assert_eq!(acc[0].loc, 1);
        loc_op::<TwoInt>(true).combine(&mut acc, &[c]);
        assert_eq!((acc[0].val, acc[0].loc), (7, 9));
        let mut acc = [c];
        loc_op::<TwoInt>(false).combine(&mut acc, &[a]);
        assert_eq!((acc[0].val, acc[0].loc), (5, 3));
    }

    #[test]
    fn combine_one_sums_doubles_and_rejects_bitwise_on_floats() {
        let mut acc = 1.5f64.to_ne_bytes();
        combine_one(types::DOUBLE, ops::SUM, &mut acc, &2.25f64.to_ne_bytes()).unwrap();
        assert_eq!(f64::from_ne_bytes(acc), 3.75);
        assert!(combine_one(types::DOUBLE, ops::BAND, &mut acc, &[0; 8]).is_err());
    }
}
