//! Turning typed data into payloads and back.

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
    Payload::copy_of(bytemuck::cast_slice(data))
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
    let mut buf = AlignedBuf::for_overwrite(total);
    let out = buf.as_bytes_mut();
    out[..header].fill(0);
    out[..8].copy_from_slice(&(n as u64).to_le_bytes());
    let mut offset = header;
    for (i, (rank, bytes)) in items.enumerate() {
        let h = 8 * (1 + HEADER_WORDS * i);
        out[h..h + 8].copy_from_slice(&(rank as u64).to_le_bytes());
        out[h + 8..h + 16].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
        let start = align16(offset);
        out[offset..start].fill(0);
        offset = start;
        out[offset..offset + bytes.len()].copy_from_slice(bytes);
        offset += bytes.len();
    }
    Payload::Owned(buf)
}

/// The items `(comm rank, bytes)` of a bundle, in order.
pub(crate) fn bundle_items(bytes: &[u8]) -> Result<Vec<(usize, &[u8])>> {
    let malformed = || Error::TypeMismatch {
        expected: "a collective bundle",
        message_bytes: bytes.len(),
    };
    let word = |at: usize| -> Result<usize> {
        let w = bytes.get(at..at + 8).ok_or_else(malformed)?;
        Ok(u64::from_le_bytes(w.try_into().expect("8 bytes")) as usize)
    };
    let n = word(0)?;
    let mut offset = (8 * (1 + 2 * n)).next_multiple_of(16);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let rank = word(8 * (1 + 2 * i))?;
        let len = word(8 * (2 + 2 * i))?;
        offset = offset.next_multiple_of(16);
        out.push((rank, bytes.get(offset..offset + len).ok_or_else(malformed)?));
        offset += len;
    }
    Ok(out)
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
        let out = bundle_items(p.as_bytes()).unwrap();
        assert_eq!(out.len(), 3);
        for ((r, bytes), (r2, piece)) in items.iter().zip(&out) {
            assert_eq!(r, r2);
            assert_eq!(bytes, piece);
            assert_eq!(piece.as_ptr() as usize % 16, 0);
        }
        assert!(bundle_items(&p.as_bytes()[..20]).is_err());
    }

    #[test]
    fn views_reject_ragged_lengths() {
        let p = encode(&[1u32, 2, 3]);
        assert_eq!(view::<u32>(p.as_bytes()).unwrap(), &[1, 2, 3]);
        assert!(view::<u64>(p.as_bytes()).is_err());
        assert!(view::<()>(p.as_bytes()).is_err());
    }
}
