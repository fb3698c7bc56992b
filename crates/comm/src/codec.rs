//! Turning typed data into payloads and back.

use std::sync::Arc;

use bytemuck::Pod;
use serde::de::DeserializeOwned;
use serde::Serialize;
use spillway_transport::{AlignedBuf, Payload};

use crate::{Error, Result};

pub(crate) fn check_type<T>() -> Result<()> {
    if std::mem::size_of::<T>() == 0 {
        return Err(Error::InvalidArgument(
            "zero-sized element types cannot be sent",
        ));
    }
    Ok(())
}

pub(crate) fn encode<T: Pod>(data: &[T]) -> Payload {
    Payload::Owned(AlignedBuf::from_bytes(bytemuck::cast_slice(data)))
}

pub(crate) fn view<T: Pod>(bytes: &[u8]) -> Result<&[T]> {
    check_type::<T>()?;
    bytemuck::try_cast_slice(bytes).map_err(|_| Error::TypeMismatch {
        expected: std::any::type_name::<T>(),
        message_bytes: bytes.len(),
    })
}

pub(crate) fn encode_obj<T: Serialize + ?Sized>(value: &T) -> Result<Payload> {
    let bytes = bincode::serialize(value)
        .map_err(|_| Error::InvalidArgument("value cannot be serialised"))?;
    Ok(Payload::Owned(AlignedBuf::from_bytes(&bytes)))
}

pub(crate) fn decode_obj<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    bincode::deserialize(bytes).map_err(|_| Error::TypeMismatch {
        expected: std::any::type_name::<T>(),
        message_bytes: bytes.len(),
    })
}

/// A 16-byte-aligned byte range of a shared buffer: one rank's part of a bundle.
#[derive(Clone, Debug)]
pub(crate) struct Piece {
    buf: Arc<AlignedBuf>,
    start: usize,
    len: usize,
}

impl Piece {
    pub(crate) fn whole(payload: Payload) -> Piece {
        let buf = payload.into_shared();
        let len = buf.len();
        Piece { buf, start: 0, len }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf.as_bytes()[self.start..self.start + self.len]
    }

    pub(crate) fn into_payload(self) -> Payload {
        if self.start == 0 && self.len == self.buf.len() {
            Payload::Shared(self.buf)
        } else {
            Payload::Owned(AlignedBuf::from_bytes(self.as_bytes()))
        }
    }
}

const HEADER_WORDS: usize = 2;

fn align16(x: usize) -> usize {
    x.div_ceil(16) * 16
}

/// Packs `(rank, bytes)` items into one buffer: `[n][rank, len]*n` as u64 words, then each
/// item's bytes at a 16-byte-aligned offset.
pub(crate) fn bundle<'a>(items: impl Iterator<Item = (usize, &'a [u8])> + Clone) -> Payload {
    let n = items.clone().count();
    let header = align16(8 * (1 + HEADER_WORDS * n));
    let total = items
        .clone()
        .fold(header, |acc, (_, b)| align16(acc) + b.len());
    let mut buf = AlignedBuf::zeroed(total);
    let out = buf.as_bytes_mut();
    out[..8].copy_from_slice(&(n as u64).to_le_bytes());
    let mut offset = header;
    for (i, (rank, bytes)) in items.enumerate() {
        let h = 8 * (1 + HEADER_WORDS * i);
        out[h..h + 8].copy_from_slice(&(rank as u64).to_le_bytes());
        out[h + 8..h + 16].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
        offset = align16(offset);
        out[offset..offset + bytes.len()].copy_from_slice(bytes);
        offset += bytes.len();
    }
    Payload::Owned(buf)
}

fn word(bytes: &[u8], at: usize) -> Result<usize> {
    let w = bytes.get(at..at + 8).ok_or(Error::TypeMismatch {
        expected: "a collective bundle",
        message_bytes: bytes.len(),
    })?;
    Ok(u64::from_le_bytes(w.try_into().expect("8 bytes")) as usize)
}

/// Splits a bundle into its items without copying.
pub(crate) fn unbundle(payload: Payload) -> Result<Vec<(usize, Piece)>> {
    let buf = payload.into_shared();
    let bytes = buf.as_bytes();
    let n = word(bytes, 0)?;
    let header = align16(8 * (1 + HEADER_WORDS * n));
    let mut offset = header;
    let mut items = Vec::with_capacity(n);
    for i in 0..n {
        let h = 8 * (1 + HEADER_WORDS * i);
        let rank = word(bytes, h)?;
        let len = word(bytes, h + 8)?;
        offset = align16(offset);
        if offset + len > bytes.len() {
            return Err(Error::TypeMismatch {
                expected: "a collective bundle",
                message_bytes: bytes.len(),
            });
        }
        items.push((
            rank,
            Piece {
                buf: Arc::clone(&buf),
                start: offset,
                len,
            },
        ));
        offset += len;
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundles_round_trip_with_aligned_items() {
        let a = [1u8, 2, 3];
        let b: [u8; 0] = [];
        let c = [9u8; 40];
        let items = [(4usize, &a[..]), (0, &b[..]), (7, &c[..])];
        let p = bundle(items.iter().copied());
        let out = unbundle(p).unwrap();
        assert_eq!(out.len(), 3);
        for ((r, bytes), (r2, piece)) in items.iter().zip(&out) {
            assert_eq!(r, r2);
            assert_eq!(*bytes, piece.as_bytes());
            assert_eq!(piece.as_bytes().as_ptr() as usize % 16, 0);
        }
    }

    #[test]
    fn views_reject_ragged_lengths() {
        let p = encode(&[1u32, 2, 3]);
        assert_eq!(view::<u32>(p.as_bytes()).unwrap(), &[1, 2, 3]);
        assert!(view::<u64>(p.as_bytes()).is_err());
        assert!(view::<()>(p.as_bytes()).is_err());
    }
}
