//! How keys and values become bytes: plain data by copy, everything else through serde.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// A type that can be a key or a value of a [`Dataset`](crate::Dataset).
///
/// The encoding is what travels in the shuffle and what the partitioning hash is computed
/// on, so two keys are equal for MapReduce exactly when their encodings are equal.
/// Plain-data types (integers, floats, arrays and tuples of them) are copied byte for byte
/// and have a fixed size, so they travel without a length prefix; byte strings and vectors
/// of plain data are their bytes; any other `serde` type goes through [`Serde`].
pub trait Data: Sized + Send + 'static {
    /// The size of every encoding, if it is fixed (then no length prefix is stored).
    const SIZE: Option<usize>;

    /// Appends the encoding of `self` to `out`.
    fn write(&self, out: &mut Vec<u8>);

    /// Decodes a value from exactly the bytes [`write`](Data::write) produced.
    ///
    /// # Panics
    /// If the bytes are not such an encoding (the shuffle only hands back what was written).
    fn read(bytes: &[u8]) -> Self;
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl Data for $t {
            const SIZE: Option<usize> = Some(std::mem::size_of::<$t>());
            #[inline]
            fn write(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn read(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("a fixed-size encoding"))
            }
        }

        impl<const N: usize> Data for [$t; N] {
            const SIZE: Option<usize> = Some(N * std::mem::size_of::<$t>());
            fn write(&self, out: &mut Vec<u8>) {
                for x in self {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
            fn read(bytes: &[u8]) -> Self {
                let w = std::mem::size_of::<$t>();
                std::array::from_fn(|i| {
                    <$t>::from_le_bytes(bytes[i * w..(i + 1) * w].try_into().expect("an element"))
                })
            }
        }

        impl Data for Vec<$t> {
            const SIZE: Option<usize> = None;
            fn write(&self, out: &mut Vec<u8>) {
                out.reserve(self.len() * std::mem::size_of::<$t>());
                for x in self {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
            fn read(bytes: &[u8]) -> Self {
                bytes
                    .chunks_exact(std::mem::size_of::<$t>())
                    .map(|c| <$t>::from_le_bytes(c.try_into().expect("an element")))
                    .collect()
            }
        }
    )*};
}

plain!(u16, u32, u64, u128, i8, i16, i32, i64, i128, f32, f64);

impl Data for u8 {
    const SIZE: Option<usize> = Some(1);
    fn write(&self, out: &mut Vec<u8>) {
        out.push(*self);
    }
    fn read(bytes: &[u8]) -> Self {
        bytes[0]
    }
}

impl Data for () {
    const SIZE: Option<usize> = Some(0);
    fn write(&self, _: &mut Vec<u8>) {}
    fn read(_: &[u8]) -> Self {}
}

/// Byte strings are their bytes (words of a text need not be UTF-8).
impl Data for Vec<u8> {
    const SIZE: Option<usize> = None;
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
    fn read(bytes: &[u8]) -> Self {
        bytes.to_vec()
    }
}

impl Data for String {
    const SIZE: Option<usize> = None;
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_bytes());
    }
    fn read(bytes: &[u8]) -> Self {
        String::from_utf8(bytes.to_vec()).expect("a string's encoding is UTF-8")
    }
}

impl<A: Data, B: Data> Data for (A, B) {
    const SIZE: Option<usize> = match (A::SIZE, B::SIZE) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    };
    fn write(&self, out: &mut Vec<u8>) {
        put(&self.0, out);
        put(&self.1, out);
    }
    fn read(bytes: &[u8]) -> Self {
        let mut at = 0;
        let a = take(bytes, &mut at);
        let b = take(bytes, &mut at);
        (a, b)
    }
}

impl<A: Data, B: Data, C: Data> Data for (A, B, C) {
    const SIZE: Option<usize> = match (A::SIZE, B::SIZE, C::SIZE) {
        (Some(a), Some(b), Some(c)) => Some(a + b + c),
        _ => None,
    };
    fn write(&self, out: &mut Vec<u8>) {
        put(&self.0, out);
        put(&self.1, out);
        put(&self.2, out);
    }
    fn read(bytes: &[u8]) -> Self {
        let mut at = 0;
        let a = take(bytes, &mut at);
        let b = take(bytes, &mut at);
        let c = take(bytes, &mut at);
        (a, b, c)
    }
}

/// A value of any `serde` type, encoded with bincode.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Serde<T>(pub T);

impl<T: Serialize + DeserializeOwned + Send + 'static> Data for Serde<T> {
    const SIZE: Option<usize> = None;
    fn write(&self, out: &mut Vec<u8>) {
        bincode::serialize_into(out, &self.0).expect("bincode serialises into a vector");
    }
    fn read(bytes: &[u8]) -> Self {
        Serde(bincode::deserialize(bytes).expect("an encoding written by Serde::write"))
    }
}

/// Appends `value` with a 4-byte length prefix unless its type has a fixed size.
#[inline]
pub(crate) fn put<T: Data>(value: &T, out: &mut Vec<u8>) {
    if T::SIZE.is_some() {
        value.write(out);
    } else {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        value.write(out);
        let len = (out.len() - at - 4) as u32;
        out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }
}

/// Appends already-encoded bytes of a `T` as [`put`] would.
#[inline]
pub(crate) fn put_raw<T: Data>(raw: &[u8], out: &mut Vec<u8>) {
    if T::SIZE.is_none() {
        out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(raw);
}

/// The encoded bytes of the `T` at `*at` (as [`put`] wrote it); moves `*at` past it.
#[inline]
pub(crate) fn take_raw<'a, T: Data>(bytes: &'a [u8], at: &mut usize) -> &'a [u8] {
    let len = match T::SIZE {
        Some(n) => n,
        None => {
            let n = u32::from_le_bytes(bytes[*at..*at + 4].try_into().expect("a prefix"));
            *at += 4;
            n as usize
        }
    };
    let raw = &bytes[*at..*at + len];
    *at += len;
    raw
}

/// Decodes the `T` at `*at`; moves `*at` past it.
#[inline]
pub(crate) fn take<T: Data>(bytes: &[u8], at: &mut usize) -> T {
    T::read(take_raw::<T>(bytes, at))
}

/// The values of one key in a reduce: decoded one by one from the received bytes.
pub struct Values<'a, V> {
    parts: &'a [&'a [u8]],
    at: usize,
    _v: PhantomData<V>,
}

impl<'a, V: Data> Values<'a, V> {
    pub(crate) fn new(parts: &'a [&'a [u8]]) -> Values<'a, V> {
        Values {
            parts,
            at: 0,
            _v: PhantomData,
        }
    }
}

impl<V: Data> Iterator for Values<'_, V> {
    type Item = V;

    fn next(&mut self) -> Option<V> {
        while let Some((first, rest)) = self.parts.split_first() {
            if self.at < first.len() {
                return Some(take(first, &mut self.at));
            }
            self.parts = rest;
            self.at = 0;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Data + PartialEq + std::fmt::Debug>(v: T) {
        let mut out = Vec::new();
        put(&v, &mut out);
        put(&v, &mut out);
        let mut at = 0;
        assert_eq!(take::<T>(&out, &mut at), v);
        assert_eq!(take::<T>(&out, &mut at), v);
        assert_eq!(at, out.len());
        if let Some(n) = T::SIZE {
            assert_eq!(out.len(), 2 * n);
        }
    }

    #[test]
    fn encodings_round_trip() {
        round_trip(7u32);
        round_trip(-3i64);
        round_trip(1.5f64);
        round_trip([1u32, 2, 3]);
        round_trip(b"hello world".to_vec());
        round_trip(Vec::<u8>::new());
        round_trip(vec![1u64, 2, u64::MAX]);
        round_trip(String::from("zeta"));
        round_trip((3u32, vec![1u32, 2]));
        round_trip((1u8, 2u64, 0.25f32));
        round_trip(Serde(vec![Some("a".to_string()), None]));
    }

    #[test]
    fn values_iterate_over_parts() {
        let mut a = Vec::new();
        put(&1u32, &mut a);
        put(&2u32, &mut a);
        let mut b = Vec::new();
        put(&3u32, &mut b);
        let parts = [&a[..], &[][..], &b[..]];
        let got: Vec<u32> = Values::new(&parts).collect();
        assert_eq!(got, [1, 2, 3]);
    }
}
