//! Memory registered by address (the C interface's registration): puts and gets into memory
//! the caller owns, within a node and between nodes, and the slot handles as integers.

use spillway_bsp::{exec, Options, Slot};
use spillway_runtime::{Config, SbVec};

/// Every rank registers a buffer it owns by address; rank r puts bytes of its own buffer into
/// rank r+1's and gets from rank r-1's; the results are compared with a formula.
fn ring(ranks: u32, nodes: u32) {
    let got = exec(
        &Config::new(ranks).nodes(nodes),
        Options::checked(true),
        |bsp| {
            let p = bsp.nprocs();
            let me = bsp.pid();
            let mut mine: Vec<u8> = (0..64).map(|i| (me * 64 + i) as u8).collect();
            let mut from_prev = vec![0u8; 64];
            let mut fetched = vec![0u8; 16];
            bsp.resize_memory_register(3)?;
            bsp.resize_message_queue(2)?;
            bsp.sync()?;
            // SAFETY: the vectors outlive their registration (deregistered below) and are not
            // touched while registered except between syncs through the context's slices.
            let (a, b, c) = unsafe {
                (
                    bsp.register_global_raw(mine.as_mut_ptr(), mine.len())?,
                    bsp.register_global_raw(from_prev.as_mut_ptr(), from_prev.len())?,
                    bsp.register_local_raw(fetched.as_mut_ptr(), fetched.len())?,
                )
            };
            assert_eq!(Slot::<u8>::from_bits(a.to_bits()), a);
            assert_ne!(a.to_bits(), u64::MAX);
            bsp.sync()?;
            bsp.put(a, 8, (me + 1) % p, b, 32, 24)?;
            bsp.get((me + p - 1) % p, a, 40, c, 0, 16)?;
            bsp.sync()?;
            bsp.deregister_raw(c)?;
            bsp.deregister_raw(b)?;
            bsp.deregister_raw(a)?;
            Ok((from_prev, fetched))
        },
    )
    .unwrap();
    let p = ranks as usize;
    for (r, (from_prev, fetched)) in got.iter().enumerate() {
        let prev = (r + p - 1) % p;
        let want_put: Vec<u8> = (8..32).map(|i| (prev * 64 + i) as u8).collect();
        let want_get: Vec<u8> = (40..56).map(|i| (prev * 64 + i) as u8).collect();
        assert_eq!(&from_prev[32..56], &want_put[..], "rank {r}");
        assert!(from_prev[..32].iter().all(|&x| x == 0), "rank {r}");
        assert_eq!(fetched, &want_get, "rank {r}");
    }
}

#[test]
fn raw_ring_one_node() {
    ring(5, 1);
}

#[test]
fn raw_ring_two_nodes() {
    ring(5, 2);
}

/// Storage-backed memory registered by address is recognised and read in place.
#[test]
fn raw_storage_backed() {
    let spill = tempfile::tempdir().unwrap();
    let config = Config::new(4).mem_budget(8 << 20).spill_dir(spill.path());
    let sums = exec(&config, Options::checked(true), |bsp| {
        let rank = bsp.comm().runtime();
        let n = 1 << 18;
        let mut v = SbVec::<u8>::zeroed(rank, n)?;
        let me = bsp.pid();
        v.as_mut_slice().iter_mut().for_each(|x| *x = me as u8 + 1);
        let ptr = v.as_mut_slice().as_mut_ptr();
        let mut got = vec![0u8; n];
        bsp.resize_memory_register(2)?;
        bsp.resize_message_queue(1)?;
        bsp.sync()?;
        // SAFETY: `v` and `got` outlive the registrations and are not otherwise accessed
        // while registered.
        let (a, b) = unsafe {
            (
                bsp.register_global_raw(ptr, n)?,
                bsp.register_local_raw(got.as_mut_ptr(), n)?,
            )
        };
        bsp.sync()?;
        bsp.get((me + 1) % bsp.nprocs(), a, 0, b, 0, n)?;
        bsp.sync()?;
        bsp.deregister_raw(b)?;
        bsp.deregister_raw(a)?;
        drop(v);
        Ok(got.iter().map(|&x| x as u64).sum::<u64>())
    })
    .unwrap();
    for (r, s) in sums.iter().enumerate() {
        assert_eq!(*s, ((r + 1) % 4 + 1) as u64 * (1 << 18), "rank {r}");
    }
}

/// A slot registered by address cannot be deregistered as owned memory, and the other way
/// round.
#[test]
fn raw_and_owned_slots_do_not_mix() {
    let r = exec(&Config::new(1), Options::checked(true), |bsp| {
        bsp.resize_memory_register(2)?;
        bsp.sync()?;
        let mut buf = [0u8; 4];
        // SAFETY: `buf` outlives the registration.
        let raw = unsafe { bsp.register_local_raw(buf.as_mut_ptr(), 4)? };
        let owned = bsp.register_local(vec![0u8; 4])?;
        let e1 = bsp.deregister(raw).unwrap_err();
        let e2 = bsp.deregister_raw(owned).unwrap_err();
        bsp.deregister_raw(raw)?;
        bsp.deregister(owned)?;
        Ok((e1.to_string(), e2.to_string()))
    })
    .unwrap();
    let (e1, e2) = &r[0];
    assert!(e1.contains("registered by address"), "{e1}");
    assert!(e2.contains("owns its memory"), "{e2}");
}
