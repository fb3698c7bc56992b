//! Framing: the header of a message between processes, and control messages.

use std::ffi::c_int;

use crate::outbox::Outgoing;
use crate::AlignedBuf;

/// Tag of message headers (with payloads up to [`INLINE`] bytes inside).
pub(super) const TAG_HEADER: c_int = 1;
/// Tag of payload chunks that follow a header.
pub(super) const TAG_DATA: c_int = 2;
/// Tag of control messages (aborts, tokens, heartbeats).
pub(super) const TAG_CONTROL: c_int = 3;
/// Payloads up to this size travel inside the header message.
pub(super) const INLINE: usize = 8 << 10;
/// Largest chunk of one MPI message (counts are `int`).
pub(super) const CHUNK: usize = 1 << 30;
pub(super) const HEADER_WORDS: usize = 5;
pub(super) const HEADER_BYTES: usize = HEADER_WORDS * 8;

pub(super) const CONTROL_ABORT: u64 = 1;
pub(super) const CONTROL_TOKEN: u64 = 2;
pub(super) const CONTROL_DEADLOCK: u64 = 3;
pub(super) const CONTROL_HEARTBEAT: u64 = 4;

/// A message header: context, source rank, destination rank, tag, payload length.
pub(super) fn header(o: &Outgoing) -> [u64; HEADER_WORDS] {
    [
        o.context,
        o.source as u64,
        o.dest as u64,
        o.tag as u32 as u64,
        o.payload.len() as u64,
    ]
}

/// A header (or control words) followed by `body`, as one buffer.
pub(super) fn framed(head: [u64; HEADER_WORDS], body: &[u8]) -> AlignedBuf {
    let mut buf = AlignedBuf::for_overwrite(HEADER_BYTES + body.len());
    let bytes = buf.as_bytes_mut();
    bytes[..HEADER_BYTES].copy_from_slice(bytemuck::cast_slice(&head));
    bytes[HEADER_BYTES..].copy_from_slice(body);
    buf
}

/// The header words and the rest of a framed message from process `source`.
pub(super) fn unframe<'b>(
    bytes: &'b [u8],
    what: &str,
    source: c_int,
) -> Result<([u64; HEADER_WORDS], &'b [u8]), String> {
    if bytes.len() < HEADER_BYTES {
        return Err(format!(
            "a {what} of {} bytes from process {source}",
            bytes.len()
        ));
    }
    let mut head = [0u64; HEADER_WORDS];
    bytemuck::cast_slice_mut(&mut head).copy_from_slice(&bytes[..HEADER_BYTES]);
    Ok((head, &bytes[HEADER_BYTES..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Payload;

    #[test]
    fn frames_round_trip() {
        let out = Outgoing {
            dest: 7,
            context: 0xabcd,
            source: 3,
            tag: -5,
            payload: Payload::copy_of(b"hi"),
        };
        let buf = framed(header(&out), b"hi");
        let (head, rest) = unframe(buf.as_bytes(), "header", 0).unwrap();
        assert_eq!(head, [0xabcd, 3, 7, (-5i32) as u32 as u64, 2]);
        assert_eq!(rest, b"hi");
        assert!(unframe(&[0u8; 3], "header", 1).is_err());
    }
}
