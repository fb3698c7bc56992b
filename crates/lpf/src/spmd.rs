//! The context of one process of an SPMD section ([`Spmd`], over a [`Bsp`] context of
//! spillway's BSP layer); sections are launched in `section.rs`.
//!
//! # Leaving early
//! LPF requires that when some processes return from the SPMD function while others still
//! call `lpf_sync`, those syncs return `LPF_ERR_FATAL` instead of hanging. Every `lpf_sync`
//! therefore starts with a sum over the processes of "has returned" (0 while in the SPMD
//! function), and a process that returns takes part in one last such sum with 1: a sync that
//! sees a non-zero sum fails (the context is dead from then on, its calls return
//! `LPF_ERR_FATAL` without communicating), and the section succeeds only if that last sum
//! counted every process.

use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr::NonNull;

use spillway_bsp::{Bsp, Error, Slot};
use spillway_runtime::SbVec;

use crate::ctx::{Context, Fail, Res};
use crate::ffi::{lpf_memslot_t, lpf_pid_t};

/// The context of one process of an SPMD section.
pub(crate) struct Spmd {
    /// The BSP context, alive for the whole SPMD call (see `run_process` in `section.rs`).
    bsp: NonNull<Bsp<'static>>,
    pub(crate) processors: (u32, u32),
    pub(crate) checked: bool,
    pub(crate) dead: bool,
    allocs: HashMap<usize, SbVec<u8>>,
    warned: bool,
}

impl Spmd {
    /// The context of the process that runs on `bsp` (which must outlive it: see
    /// [`run_process`](crate::section)).
    pub(crate) fn new(bsp: &mut Bsp<'_>, processors: (u32, u32), checked: bool) -> Spmd {
        Spmd {
            bsp: NonNull::from(bsp).cast(),
            processors,
            checked,
            dead: false,
            allocs: HashMap::new(),
            warned: false,
        }
    }

    pub(crate) fn bsp(&mut self) -> &mut Bsp<'static> {
        // SAFETY: `run_process` creates the context from a `&mut Bsp` that outlives it (the
        // context is dropped before `run_process` returns), and only this process's thread
        // uses it (LPF contexts are not shared between processes).
        unsafe { self.bsp.as_mut() }
    }

    /// Maps an error of the BSP layer: mitigable errors go back to the caller; anything else
    /// is reported (it ends the section, see `enter_failure`), unless the job ended already.
    fn fail(&mut self, call: &str, e: Error) -> Fail {
        if e.is_mitigable() {
            return Fail::Mitigable(e.describe());
        }
        if matches!(e, Error::Runtime(spillway_runtime::Error::Aborted)) {
            self.dead = true;
            return Fail::Fatal;
        }
        Fail::Report(format!("{call}: {}", e.describe()))
    }

    /// `f` on the BSP context of a live process; an error of it fails the call `call`.
    fn with_bsp<T>(
        &mut self,
        call: &str,
        f: impl FnOnce(&mut Bsp<'static>) -> Result<T, Error>,
    ) -> Res<T> {
        self.alive()?;
        let r = f(self.bsp());
        r.map_err(|e| self.fail(call, e))
    }

    fn alive(&self) -> Res<()> {
        if self.dead {
            Err(Fail::Fatal)
        } else {
            Ok(())
        }
    }

    /// The last sync of a process that returned: whether every process returned with it.
    pub(crate) fn finish(&mut self) -> bool {
        if self.dead {
            return false;
        }
        let n = self.bsp().nprocs() as u64;
        matches!(self.bsp().sync_or_leave(true), Ok(k) if k == n)
    }

    /// Loads this process's storage-backed memory (it is about to run and use it).
    fn load(&mut self) {
        for v in self.allocs.values_mut() {
            let _ = v.as_mut_slice();
        }
    }
}

fn slot(s: lpf_memslot_t) -> Slot<u8> {
    Slot::from_bits(s as u64)
}

impl Context for Spmd {
    fn processors(&self) -> (u32, u32) {
        self.processors
    }

    fn resize_memory_register(&mut self, n: usize) -> Res<()> {
        self.alive()?;
        self.bsp()
            .resize_memory_register(n)
            .map_err(|e| Fail::Mitigable(e.describe()))
    }

    fn resize_message_queue(&mut self, n: usize) -> Res<()> {
        self.alive()?;
        self.bsp()
            .resize_message_queue(n)
            .map_err(|e| Fail::Mitigable(e.describe()))
    }

    unsafe fn register(&mut self, global: bool, ptr: *mut u8, size: usize) -> Res<lpf_memslot_t> {
        self.alive()?;
        // LPF allows NULL with zero bytes. The BSP layer publishes a null address as "no area
        // here", so a zero-byte get from such a slot would be reported as naming an unknown
        // slot: give the empty area an address that is not null (nothing is ever read or
        // written through it).
        let ptr = if size == 0 && ptr.is_null() {
            NonNull::<u8>::dangling().as_ptr()
        } else {
            ptr
        };
        // SAFETY: forwarded from the caller (LPF's contract on registered memory); an empty
        // area allows any address.
        let r = unsafe {
            if global {
                self.bsp().register_global_raw(ptr, size)
            } else {
                self.bsp().register_local_raw(ptr, size)
            }
        };
        let call = if global {
            "lpf_register_global"
        } else {
            "lpf_register_local"
        };
        r.map(|s| s.to_bits() as lpf_memslot_t)
            .map_err(|e| self.fail(call, e))
    }

    fn deregister(&mut self, s: lpf_memslot_t) -> Res<()> {
        self.with_bsp("lpf_deregister", |b| b.deregister_raw(slot(s)))
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
        self.with_bsp("lpf_put", |b| {
            b.put(slot(src), src_off, pid as usize, slot(dst), dst_off, size)
        })
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
        self.with_bsp("lpf_get", |b| {
            b.get(pid as usize, slot(src), src_off, slot(dst), dst_off, size)
        })
    }

    fn sync(&mut self) -> Res<()> {
        self.alive()?;
        match self.bsp().sync_or_leave(false) {
            Ok(0) => {}
            Ok(_) => {
                // Some process has returned from the SPMD function: this sync can never
                // complete.
                self.dead = true;
                return Err(Fail::Fatal);
            }
            Err(e) => return Err(self.fail("lpf_sync", e)),
        }
        self.load();
        Ok(())
    }

    fn alloc(&mut self, size: usize) -> Res<*mut c_void> {
        self.alive()?;
        let rank = self.bsp().comm().runtime();
        // At least one byte, so that every allocation has its own address.
        let mut v = SbVec::<u8>::zeroed(rank, size.max(1))
            .map_err(|e| Fail::Mitigable(format!("no storage for {size} bytes: {e}")))?;
        let p = v.as_mut_slice().as_mut_ptr();
        self.allocs.insert(p as usize, v);
        Ok(p.cast())
    }

    fn free(&mut self, ptr: *mut c_void) -> Res<()> {
        match self.allocs.remove(&(ptr as usize)) {
            Some(_) => Ok(()),
            None => Err(crate::ctx::misuse(
                "spillway_lpf_free",
                format!("{ptr:p} was not allocated by spillway_lpf_alloc of this context"),
            )),
        }
    }

    fn warned(&mut self) -> &mut bool {
        &mut self.warned
    }

    /// Ends the section with `message` (it reaches the report of the `lpf_exec`, `lpf_hook`
    /// or `lpf_rehook` that started it): every other process's next `lpf_sync` returns
    /// `LPF_ERR_FATAL` instead of waiting for this one.
    fn enter_failure(&mut self, message: String) {
        if !self.dead {
            self.bsp().comm().runtime().fail_job(message);
        }
        self.dead = true;
    }

    fn failed(&self) -> bool {
        self.dead
    }
}
