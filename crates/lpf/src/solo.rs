//! The one-process context: `LPF_ROOT` outside SPMD sections, and a nested `lpf_exec` that
//! gets one process. Puts and gets are copies within the process, done at `lpf_sync` in the
//! order they were issued (so overlapping writes resolve in that sequential order). As in a
//! section, a superstep that reads and writes the same bytes is reported and the context
//! enters LPF's failure state.

use std::collections::HashMap;
use std::ffi::c_void;

use crate::ctx::{misuse, Context, Fail, Res};
use crate::ffi::{lpf_memslot_t, lpf_pid_t};

struct Area {
    ptr: *mut u8,
    len: usize,
    global: bool,
    generation: u32,
    /// First superstep in which the area may be named as a remote slot (global areas).
    active_from: u64,
}

struct Copy {
    src: *const u8,
    dst: *mut u8,
    len: usize,
}

/// A context of one process.
pub(crate) struct Solo {
    areas: Vec<Option<Area>>,
    free: Vec<u32>,
    generation: u32,
    registered: usize,
    reg_capacity: usize,
    reg_pending: Option<usize>,
    queue_capacity: usize,
    queue_pending: Option<usize>,
    queue: Vec<Copy>,
    superstep: u64,
    processors: (u32, u32),
    allocs: HashMap<usize, Box<[u8]>>,
    warned: bool,
    /// LPF's failure state, entered at the first fatal error.
    failed: bool,
}

// SAFETY: the raw pointers are addresses of memory the C program registered with this
// context; the root context moves between threads only behind a mutex, and LPF's contract
// makes the program keep that memory valid while registered.
unsafe impl Send for Solo {}

impl Solo {
    /// A fresh context on `processors.0` processors of which `processors.1` are free.
    pub(crate) fn new(processors: (u32, u32)) -> Solo {
        Solo {
            areas: Vec::new(),
            free: Vec::new(),
            generation: 0,
            registered: 0,
            reg_capacity: 0,
            reg_pending: None,
            queue_capacity: 0,
            queue_pending: None,
            queue: Vec::new(),
            superstep: 0,
            processors,
            allocs: HashMap::new(),
            warned: false,
            failed: false,
        }
    }

    fn area(&self, call: &str, slot: lpf_memslot_t) -> Res<&Area> {
        let index = slot as u32 as usize;
        let generation = (slot >> 32) as u32;
        match self.areas.get(index).and_then(Option::as_ref) {
            Some(a) if a.generation == generation => Ok(a),
            _ => Err(misuse(
                call,
                format!("memory slot {slot:#x} is not registered"),
            )),
        }
    }

    fn range(call: &str, a: &Area, off: usize, size: usize, what: &str) -> Res<usize> {
        match off.checked_add(size) {
            Some(end) if end <= a.len => Ok(off),
            _ => Err(misuse(
                call,
                format!(
                    "{what}: {size} bytes at offset {off} of a slot of {} bytes",
                    a.len
                ),
            )),
        }
    }

    fn remote(&self, call: &str, a: &Area, slot: lpf_memslot_t) -> Res<()> {
        if !a.global || a.active_from > self.superstep {
            return Err(misuse(
                call,
                format!(
                    "memory slot {slot:#x} cannot be named remotely {}",
                    if a.global {
                        "before the lpf_sync after its registration"
                    } else {
                        "(it is local)"
                    }
                ),
            ));
        }
        Ok(())
    }

    /// The address of `size` bytes at `off` in `slot`, checked; `remote`: the side on the
    /// other process (a put's destination, a get's source), which must be a global slot
    /// active in this superstep.
    fn locate(
        &self,
        call: &str,
        (slot, off): (lpf_memslot_t, usize),
        size: usize,
        what: &str,
        remote: bool,
    ) -> Res<*mut u8> {
        let a = self.area(call, slot)?;
        if remote {
            self.remote(call, a, slot)?;
        }
        let o = Self::range(call, a, off, size, what)?;
        Ok(a.ptr.wrapping_add(o))
    }

    /// Queues a put (`remote_src` false) or a get (true) of `size` bytes from `src` to `dst`
    /// (slot, offset) with process `pid`, which must be this one.
    fn queue_copy(
        &mut self,
        call: &str,
        pid: lpf_pid_t,
        src: (lpf_memslot_t, usize),
        dst: (lpf_memslot_t, usize),
        size: usize,
        remote_src: bool,
    ) -> Res<()> {
        if pid != 0 {
            return Err(misuse(call, format!("pid {pid} outside 0..1")));
        }
        let src = self.locate(call, src, size, "source", remote_src)?;
        let dst = self.locate(call, dst, size, "destination", !remote_src)?;
        self.enqueue(Copy {
            src,
            dst,
            len: size,
        })
    }

    fn enqueue(&mut self, copy: Copy) -> Res<()> {
        if self.queue.len() >= self.queue_capacity {
            return Err(Fail::Mitigable(format!(
                "the message queue is full ({} requests; call lpf_resize_message_queue and lpf_sync first)",
                self.queue_capacity
            )));
        }
        self.queue.push(copy);
        Ok(())
    }
}

/// Whether a copy reads a byte that a copy (the same or another) writes.
fn read_write_conflict(copies: &[Copy]) -> bool {
    let range = |at: *const u8, len: usize| (at as usize, at as usize + len);
    let mut writes: Vec<(usize, usize)> = copies
        .iter()
        .filter(|c| c.len > 0)
        .map(|c| range(c.dst, c.len))
        .collect();
    writes.sort_unstable();
    // reach[i]: the furthest end of writes[..=i].
    let reach: Vec<usize> = writes
        .iter()
        .scan(0, |end, w| {
            *end = w.1.max(*end);
            Some(*end)
        })
        .collect();
    copies.iter().filter(|c| c.len > 0).any(|c| {
        let (start, end) = range(c.src, c.len);
        // Of the writes that start before the read ends, one reaches past its start.
        let n = writes.partition_point(|w| w.0 < end);
        n > 0 && reach[n - 1] > start
    })
}

impl Context for Solo {
    fn processors(&self) -> (u32, u32) {
        self.processors
    }

    fn resize_memory_register(&mut self, n: usize) -> Res<()> {
        self.areas
            .try_reserve(n.saturating_sub(self.areas.len()))
            .map_err(|_| Fail::Mitigable(format!("no memory for {n} memory slots")))?;
        self.reg_pending = Some(n);
        Ok(())
    }

    fn resize_message_queue(&mut self, n: usize) -> Res<()> {
        self.queue
            .try_reserve(n.saturating_sub(self.queue.len()))
            .map_err(|_| Fail::Mitigable(format!("no memory for {n} messages")))?;
        self.queue_pending = Some(n);
        Ok(())
    }

    unsafe fn register(&mut self, global: bool, ptr: *mut u8, size: usize) -> Res<lpf_memslot_t> {
        if self.registered >= self.reg_capacity {
            return Err(Fail::Mitigable(format!(
                "the memory register is full ({} slots; call lpf_resize_memory_register and lpf_sync first)",
                self.reg_capacity
            )));
        }
        let index = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                self.areas.push(None);
                self.areas.len() - 1
            }
        };
        self.generation = self.generation.wrapping_add(1) & 0x7fff_ffff;
        self.areas[index] = Some(Area {
            ptr,
            len: size,
            global,
            generation: self.generation,
            active_from: if global {
                self.superstep + 1
            } else {
                self.superstep
            },
        });
        self.registered += 1;
        Ok(((self.generation as usize) << 32) | index)
    }

    fn deregister(&mut self, slot: lpf_memslot_t) -> Res<()> {
        let call = "lpf_deregister";
        let a = self.area(call, slot)?;
        let (start, end) = (a.ptr as usize, a.ptr as usize + a.len);
        let in_use = self.queue.iter().any(|c| {
            let (s, d) = (c.src as usize, c.dst as usize);
            (s >= start && s < end) || (d >= start && d < end)
        });
        if in_use && a.len > 0 {
            return Err(misuse(
                call,
                "the slot is used by a put or get of this superstep",
            ));
        }
        let index = slot as u32;
        self.areas[index as usize] = None;
        self.free.push(index);
        self.registered -= 1;
        Ok(())
    }

    fn put(
        &mut self,
        src: lpf_memslot_t,
        src_off: usize,
        pid: lpf_pid_t,
        dst: lpf_memslot_t,
        dst_off: usize,
        size: usize,
    ) -> Res<()> {
        self.queue_copy("lpf_put", pid, (src, src_off), (dst, dst_off), size, false)
    }

    fn get(
        &mut self,
        pid: lpf_pid_t,
        src: lpf_memslot_t,
        src_off: usize,
        dst: lpf_memslot_t,
        dst_off: usize,
        size: usize,
    ) -> Res<()> {
        self.queue_copy("lpf_get", pid, (src, src_off), (dst, dst_off), size, true)
    }

    fn sync(&mut self) -> Res<()> {
        if read_write_conflict(&self.queue) {
            self.queue.clear();
            return Err(misuse(
                "lpf_sync",
                "read-write conflict: a put or get of this superstep reads bytes that a put or get of it writes",
            ));
        }
        for c in self.queue.drain(..) {
            if c.len > 0 {
                // SAFETY: both ranges were checked against registered areas when queued, and
                // LPF's contract keeps registered memory valid until it is deregistered (which
                // is refused while a request uses it). `copy` allows overlap.
                unsafe { std::ptr::copy(c.src, c.dst, c.len) };
            }
        }
        if let Some(n) = self.reg_pending.take() {
            self.reg_capacity = n;
        }
        if let Some(n) = self.queue_pending.take() {
            self.queue_capacity = n;
        }
        self.superstep += 1;
        Ok(())
    }

    fn alloc(&mut self, size: usize) -> Res<*mut c_void> {
        let mut v = Vec::new();
        // At least one byte, so that every allocation has its own address.
        v.try_reserve_exact(size.max(1))
            .map_err(|_| Fail::Mitigable(format!("no memory for {size} bytes")))?;
        v.resize(size.max(1), 0u8);
        let mut b = v.into_boxed_slice();
        let p = b.as_mut_ptr();
        self.allocs.insert(p as usize, b);
        Ok(p.cast())
    }

    fn free(&mut self, ptr: *mut c_void) -> Res<()> {
        match self.allocs.remove(&(ptr as usize)) {
            Some(_) => Ok(()),
            None => Err(misuse(
                "spillway_lpf_free",
                format!("{ptr:p} was not allocated by spillway_lpf_alloc of this context"),
            )),
        }
    }

    fn warned(&mut self) -> &mut bool {
        &mut self.warned
    }

    fn enter_failure(&mut self, message: String) {
        if !self.failed {
            eprintln!("spillway-lpf: {message}");
        }
        self.failed = true;
    }

    fn failed(&self) -> bool {
        self.failed
    }
}

#[cfg(test)]
mod tests {
    use super::{read_write_conflict, Copy};

    #[test]
    fn conflicts_are_found_exactly_when_a_read_overlaps_a_write() {
        // Small random sets of copies against the quadratic definition.
        let mut x: u64 = 0x9E37_79B9;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m) as usize
        };
        for _ in 0..20_000 {
            let copies: Vec<Copy> = (0..next(5))
                .map(|_| Copy {
                    src: (0x1000 + next(40)) as *const u8,
                    dst: (0x1000 + next(40)) as *mut u8,
                    len: next(6),
                })
                .collect();
            let overlap = copies.iter().any(|r| {
                copies.iter().any(|w| {
                    let (rs, ws) = (r.src as usize, w.dst as usize);
                    r.len > 0 && w.len > 0 && rs < ws + w.len && ws < rs + r.len
                })
            });
            assert_eq!(read_write_conflict(&copies), overlap);
        }
    }
}
