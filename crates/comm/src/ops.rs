//! Reduction operations.
//!
//! An [`Operation`] combines two equally long slices element by element. Every operation must
//! be associative; reductions may regroup operands freely only when it is also commutative
//! (all built-in ones are). Results are deterministic: for a given communicator the operands
//! are always combined in the same order.

use std::ops::{Add, Mul};

/// An associative element-wise operation for reductions and scans.
pub trait Operation<T>: Sync {
    /// `acc[i] = acc[i] op other[i]`, where `acc` holds the lower-ranked operands.
    fn combine(&self, acc: &mut [T], other: &[T]);

    /// Whether `a op b == b op a`. Non-commutative operations are combined strictly in rank
    /// order.
    fn commutative(&self) -> bool {
        true
    }
}

/// Sum (`MPI_SUM`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sum;
/// Product (`MPI_PROD`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Prod;
/// Minimum (`MPI_MIN`); for floats, a NaN operand is kept only if it comes first.
#[derive(Debug, Clone, Copy, Default)]
pub struct Min;
/// Maximum (`MPI_MAX`); for floats, a NaN operand is kept only if it comes first.
#[derive(Debug, Clone, Copy, Default)]
pub struct Max;
/// Logical and of integers, non-zero meaning true; the result is 0 or 1 (`MPI_LAND`).
#[derive(Debug, Clone, Copy, Default)]
pub struct LogicalAnd;
/// Logical or (`MPI_LOR`).
#[derive(Debug, Clone, Copy, Default)]
pub struct LogicalOr;
/// Logical exclusive or (`MPI_LXOR`).
#[derive(Debug, Clone, Copy, Default)]
pub struct LogicalXor;
/// Bitwise and (`MPI_BAND`).
#[derive(Debug, Clone, Copy, Default)]
pub struct BitAnd;
/// Bitwise or (`MPI_BOR`).
#[derive(Debug, Clone, Copy, Default)]
pub struct BitOr;
/// Bitwise exclusive or (`MPI_BXOR`).
#[derive(Debug, Clone, Copy, Default)]
pub struct BitXor;

impl<T: Copy + Add<Output = T>> Operation<T> for Sum {
    fn combine(&self, acc: &mut [T], other: &[T]) {
        acc.iter_mut().zip(other).for_each(|(a, &b)| *a = *a + b);
    }
}

impl<T: Copy + Mul<Output = T>> Operation<T> for Prod {
    fn combine(&self, acc: &mut [T], other: &[T]) {
        acc.iter_mut().zip(other).for_each(|(a, &b)| *a = *a * b);
    }
}

impl<T: Copy + PartialOrd> Operation<T> for Min {
    fn combine(&self, acc: &mut [T], other: &[T]) {
        acc.iter_mut().zip(other).for_each(|(a, &b)| {
            if b < *a {
                *a = b
            }
        });
    }
}

impl<T: Copy + PartialOrd> Operation<T> for Max {
    fn combine(&self, acc: &mut [T], other: &[T]) {
        acc.iter_mut().zip(other).for_each(|(a, &b)| {
            if b > *a {
                *a = b
            }
        });
    }
}

impl<T: Copy + std::ops::BitAnd<Output = T>> Operation<T> for BitAnd {
    fn combine(&self, acc: &mut [T], other: &[T]) {
        acc.iter_mut().zip(other).for_each(|(a, &b)| *a = *a & b);
    }
}

impl<T: Copy + std::ops::BitOr<Output = T>> Operation<T> for BitOr {
    fn combine(&self, acc: &mut [T], other: &[T]) {
        acc.iter_mut().zip(other).for_each(|(a, &b)| *a = *a | b);
    }
}

impl<T: Copy + std::ops::BitXor<Output = T>> Operation<T> for BitXor {
    fn combine(&self, acc: &mut [T], other: &[T]) {
        acc.iter_mut().zip(other).for_each(|(a, &b)| *a = *a ^ b);
    }
}

/// Integer types that logical operations treat as truth values (non-zero is true).
pub trait Logical: Copy {
    /// Whether the value counts as true.
    fn truth(self) -> bool;
    /// 1 for true, 0 for false.
    fn from_truth(b: bool) -> Self;
}

macro_rules! logical {
    ($($t:ty),*) => {$(
        impl Logical for $t {
            fn truth(self) -> bool { self != 0 }
            fn from_truth(b: bool) -> Self { <$t>::from(b) }
        }
    )*};
}
logical!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize);

impl<T: Logical> Operation<T> for LogicalAnd {
    fn combine(&self, acc: &mut [T], other: &[T]) {
        acc.iter_mut()
            .zip(other)
            .for_each(|(a, &b)| *a = T::from_truth(a.truth() && b.truth()));
    }
}

impl<T: Logical> Operation<T> for LogicalOr {
    fn combine(&self, acc: &mut [T], other: &[T]) {
        acc.iter_mut()
            .zip(other)
            .for_each(|(a, &b)| *a = T::from_truth(a.truth() || b.truth()));
    }
}

impl<T: Logical> Operation<T> for LogicalXor {
    fn combine(&self, acc: &mut [T], other: &[T]) {
        acc.iter_mut()
            .zip(other)
            .for_each(|(a, &b)| *a = T::from_truth(a.truth() != b.truth()));
    }
}

/// A user-defined element-wise operation, `f(lower, higher)`.
///
/// ```
/// use spillway_comm::{Operation, UserOp};
/// let absmax = UserOp::commutative(|a: &f64, b: &f64| a.abs().max(b.abs()));
/// let mut acc = [1.0, -5.0];
/// absmax.combine(&mut acc, &[-3.0, 2.0]);
/// assert_eq!(acc, [3.0, 5.0]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct UserOp<F> {
    f: F,
    commutative: bool,
}

impl<F> UserOp<F> {
    /// An associative and commutative operation.
    pub fn commutative(f: F) -> UserOp<F> {
        UserOp {
            f,
            commutative: true,
        }
    }

    /// An associative operation that is applied strictly in rank order.
    pub fn non_commutative(f: F) -> UserOp<F> {
        UserOp {
            f,
            commutative: false,
        }
    }
}

impl<T: Copy, F: Fn(&T, &T) -> T + Sync> Operation<T> for UserOp<F> {
    fn combine(&self, acc: &mut [T], other: &[T]) {
        acc.iter_mut()
            .zip(other)
            .for_each(|(a, b)| *a = (self.f)(a, b));
    }

    fn commutative(&self) -> bool {
        self.commutative
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_ops_combine_elementwise() {
        let mut a = [1i32, 5, -2];
        Sum.combine(&mut a, &[2, 2, 2]);
        assert_eq!(a, [3, 7, 0]);
        Min.combine(&mut a, &[4, 4, 4]);
        assert_eq!(a, [3, 4, 0]);
        Max.combine(&mut a, &[0, 9, 1]);
        assert_eq!(a, [3, 9, 1]);
        LogicalAnd.combine(&mut a, &[1, 0, 7]);
        assert_eq!(a, [1, 0, 1]);
        LogicalXor.combine(&mut a, &[1, 1, 0]);
        assert_eq!(a, [0, 1, 1]);
        let mut b = [0b1100u8];
        BitXor.combine(&mut b, &[0b1010]);
        assert_eq!(b, [0b0110]);
        let mut p = [1.5f64];
        Prod.combine(&mut p, &[2.0]);
        assert_eq!(p, [3.0]);
    }
}
