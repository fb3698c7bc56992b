//! One-sided communication requests (LPF's `lpf_put` and `lpf_get`): checked and queued now,
//! carried out at the next sync.

use std::panic::Location;

use bytemuck::Pod;

use crate::context::{Bsp, GetReq, PutReq, PutSource};
use crate::error::{Capacity, Error, Misuse, Result};
use crate::memory::Slot;

impl<'r> Bsp<'r> {
    #[track_caller]
    fn check_pid(&self, pid: usize) -> Result<()> {
        if pid >= self.nprocs() {
            return Err(Error::misuse(
                Misuse::InvalidPid,
                format!("pid {pid} outside 0..{}", self.nprocs()),
                Some(Location::caller()),
            ));
        }
        Ok(())
    }

    #[track_caller]
    fn check_queue(&self) -> Result<()> {
        if self.puts.len() + self.gets.len() >= self.queue_capacity {
            return Err(Error::CapacityExceeded {
                what: Capacity::MessageQueue,
                capacity: self.queue_capacity,
                location: Location::caller(),
            });
        }
        Ok(())
    }

    /// Bounds of `len` elements at `off` in a local area, in bytes.
    #[track_caller]
    fn local_range<T: Pod>(&self, slot: Slot<T>, off: usize, len: usize) -> Result<usize> {
        let area = self.area_index(slot)?;
        let size = std::mem::size_of::<T>();
        let end = off.checked_add(len).and_then(|e| e.checked_mul(size));
        match end {
            Some(e) if e <= area.bytes => Ok(off * size),
            _ => Err(Error::misuse(
                Misuse::OutOfBounds,
                format!(
                    "{len} elements at offset {off} of {slot:?}, which holds {}",
                    area.bytes / size.max(1)
                ),
                Some(Location::caller()),
            )),
        }
    }

    /// Remote slots must be global and registered before the last sync (checked locally: the
    /// corresponding area on the other rank was registered in the same order).
    #[track_caller]
    fn check_remote_slot<T: Pod>(&self, slot: Slot<T>) -> Result<()> {
        let area = self.area_index(slot)?;
        if !slot.global || area.active_from > self.superstep {
            return Err(Error::misuse(
                Misuse::UnknownSlot,
                format!(
                    "{slot:?} cannot be named on another rank {}",
                    if slot.global {
                        "before the sync after its registration"
                    } else {
                        "(it is local)"
                    }
                ),
                Some(Location::caller()),
            ));
        }
        Ok(())
    }

    /// Copies `len` elements from offset `src_off` of this rank's `src` to offset `dst_off`
    /// of rank `dst_pid`'s area of the global slot `dst` (LPF's `lpf_put`).
    ///
    /// # Semantics
    /// Nothing moves now: the source is read and the destination written during the next
    /// [`sync`](Self::sync), so the source must hold the data to send at the sync. Writes of
    /// several puts (and gets) to the same place land in some sequential order, element by
    /// element whole (CRCW); reading and writing the same place in one superstep is illegal.
    /// The destination's bounds are checked at the sync, the source's now.
    ///
    /// # Cost
    /// `O(1)` now; at the sync it adds `len * size_of::<T>()` bytes to this rank's outgoing and
    /// the destination's incoming h-relation.
    ///
    /// # Errors
    /// [`Error::CapacityExceeded`] when the message queue is full; [`Misuse`] for a source out
    /// of bounds, an unknown slot or an invalid pid. On error nothing is queued.
    #[track_caller]
    pub fn put<T: Pod>(
        &mut self,
        src: Slot<T>,
        src_off: usize,
        dst_pid: usize,
        dst: Slot<T>,
        dst_off: usize,
        len: usize,
    ) -> Result<()> {
        self.check_queue()?;
        self.check_pid(dst_pid)?;
        let off = self.local_range(src, src_off, len)?;
        self.check_remote_slot(dst)?;
        let size = std::mem::size_of::<T>();
        self.puts.push(PutReq {
            src: PutSource::Slot {
                index: src.index,
                global: src.global,
                off,
            },
            dst_pid,
            dst_slot: dst.index,
            dst_off: dst_off.saturating_mul(size),
            len: len * size,
            loc: Location::caller(),
        });
        Ok(())
    }

    /// Like [`put`](Self::put) from unregistered memory: `data` is copied into the context
    /// now (BSPlib's buffered `bsp_put`), so the caller may reuse it at once.
    ///
    /// # Cost
    /// A local copy of `data` now, and as [`put`](Self::put) at the sync.
    ///
    /// # Errors
    /// As [`put`](Self::put), and [`Error::OutOfMemory`] when the copy cannot be made.
    #[track_caller]
    pub fn put_from<T: Pod>(
        &mut self,
        data: &[T],
        dst_pid: usize,
        dst: Slot<T>,
        dst_off: usize,
    ) -> Result<()> {
        self.check_queue()?;
        self.check_pid(dst_pid)?;
        self.check_remote_slot(dst)?;
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let at = self.buffer.len();
        if self.buffer.try_reserve(bytes.len()).is_err() {
            return Err(Error::OutOfMemory {
                bytes: bytes.len(),
                location: Location::caller(),
            });
        }
        self.buffer.extend_from_slice(bytes);
        self.puts.push(PutReq {
            src: PutSource::Buffer(at),
            dst_pid,
            dst_slot: dst.index,
            dst_off: dst_off.saturating_mul(std::mem::size_of::<T>()),
            len: bytes.len(),
            loc: Location::caller(),
        });
        Ok(())
    }

    /// Copies `len` elements from offset `src_off` of rank `src_pid`'s area of the global
    /// slot `src` to offset `dst_off` of this rank's `dst` (LPF's `lpf_get`).
    ///
    /// # Semantics
    /// Nothing moves now: the remote area is read and `dst` written during the next
    /// [`sync`](Self::sync), with the same rules as [`put`](Self::put).
    ///
    /// # Cost
    /// `O(1)` now; at the sync `len * size_of::<T>()` bytes in the source's outgoing and this
    /// rank's incoming h-relation.
    ///
    /// # Errors
    /// As [`put`](Self::put): the destination's bounds are checked now, the source's at the
    /// sync.
    #[track_caller]
    pub fn get<T: Pod>(
        &mut self,
        src_pid: usize,
        src: Slot<T>,
        src_off: usize,
        dst: Slot<T>,
        dst_off: usize,
        len: usize,
    ) -> Result<()> {
        self.check_queue()?;
        self.check_pid(src_pid)?;
        self.check_remote_slot(src)?;
        let off = self.local_range(dst, dst_off, len)?;
        let size = std::mem::size_of::<T>();
        self.gets.push(GetReq {
            src_pid,
            src_slot: src.index,
            src_off: src_off.saturating_mul(size),
            dst_index: dst.index,
            dst_global: dst.global,
            dst_off: off,
            len: len * size,
            loc: Location::caller(),
        });
        Ok(())
    }
}
