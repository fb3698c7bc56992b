//! `lpf_probe`: the machine parameters `g` and `l` as C function pointers, from spillway's
//! probe cache (`spillway probe`) for the layout the program runs on, or a conservative
//! estimate when that layout was not measured.

use std::collections::HashMap;
use std::sync::Mutex;

use spillway_transport::lock;

use crate::ffi::{lpf_machine_t, lpf_pid_t, lpf_sync_attr_t};

/// Nodes and backend of the outermost running section (what `g` and `l` look up).
static LAYOUT: Mutex<(usize, &str)> = Mutex::new((1, "local"));
/// `(g, l)` per (p, nodes, backend).
type Params = HashMap<(u32, usize, &'static str), (f64, f64)>;
/// Looked-up parameters.
static CACHE: Mutex<Option<Params>> = Mutex::new(None);

/// Records the layout of a top-level section.
pub(crate) fn set_layout(nodes: usize, backend: &'static str) {
    *lock(&LAYOUT) = (nodes, backend);
}

fn params(p: lpf_pid_t) -> (f64, f64) {
    let (nodes, backend) = *lock(&LAYOUT);
    let p = p.max(1);
    let nodes = nodes.min(p as usize);
    let mut cache = lock(&CACHE);
    *cache
        .get_or_insert_with(HashMap::new)
        .entry((p, nodes, backend))
        .or_insert_with(|| {
            let m = spillway_bsp::machine(p as usize, nodes, backend);
            // LPF promises positive values; a fit on a noisy machine may give l <= 0.
            (m.g.max(1e-12), m.l.max(1e-7))
        })
}

unsafe extern "C" fn g(p: lpf_pid_t, _min_msg_size: usize, _attr: lpf_sync_attr_t) -> f64 {
    std::panic::catch_unwind(|| params(p).0).unwrap_or(f64::INFINITY)
}

unsafe extern "C" fn l(p: lpf_pid_t, _min_msg_size: usize, _attr: lpf_sync_attr_t) -> f64 {
    std::panic::catch_unwind(|| params(p).1).unwrap_or(f64::INFINITY)
}

/// The machine of a context on `processors.0` processors of which `processors.1` are free.
pub(crate) fn machine(processors: (u32, u32)) -> lpf_machine_t {
    lpf_machine_t {
        p: processors.0,
        free_p: processors.1.max(1),
        g,
        l,
    }
}
