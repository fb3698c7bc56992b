//! Checked mode: one test per misuse, each verifying the kind and the caller's location that
//! the error reports (LPF's debug layer has one test per misuse too).

use spillway_bsp::{exec, Bsp, Capacity, Error, Misuse, Options};
use spillway_runtime::{Config, JobError};

fn setup(bsp: &mut Bsp<'_>, slots: usize, queue: usize) -> spillway_bsp::Result<()> {
    bsp.resize_memory_register(slots)?;
    bsp.resize_message_queue(queue)?;
    bsp.sync()
}

/// Where a call on line `line` of this file is reported.
fn at(line: u32) -> String {
    format!("{}:{line}:", file!())
}

/// Runs `f` in checked mode on `ranks` ranks over `nodes` nodes and returns the message the
/// job failed with.
fn failure<F>(ranks: u32, nodes: u32, f: F) -> String
where
    F: Fn(&mut Bsp<'_>) -> spillway_bsp::Result<()> + Sync,
{
    let config = Config::new(ranks).nodes(nodes);
    match exec(&config, Options::checked(true), f) {
        Ok(_) => panic!("the misuse was not reported"),
        Err(JobError::RankFailed { error, .. }) => error.to_string(),
        Err(e) => panic!("unexpected failure: {e}"),
    }
}

fn assert_reported(message: &str, what: &str, line: u32) {
    assert!(message.contains(what), "{message:?} does not say {what:?}");
    assert!(
        message.contains(&at(line)),
        "{message:?} does not name {}",
        at(line)
    );
}

#[test]
fn put_with_source_out_of_bounds() {
    let line = std::sync::Mutex::new(0);
    let msg = failure(2, 1, |bsp| {
        setup(bsp, 2, 1)?;
        let src = bsp.register_local(vec![0u32; 4])?;
        let dst = bsp.register_global(vec![0u32; 8])?;
        bsp.sync()?;
        *line.lock().unwrap() = line!() + 1;
        let e = bsp.put(src, 2, 0, dst, 0, 3).unwrap_err();
        assert!(matches!(
            e,
            Error::Misuse {
                kind: Misuse::OutOfBounds,
                ..
            }
        ));
        Err(e)
    });
    assert_reported(&msg, "out of bounds", *line.lock().unwrap());
}

#[test]
fn put_with_destination_out_of_bounds_fails_the_sync() {
    for nodes in [1, 2] {
        let line = std::sync::Mutex::new(0);
        let msg = failure(2, nodes, |bsp| {
            setup(bsp, 1, 1)?;
            let dst = bsp.register_global(vec![0u32; 8])?;
            bsp.sync()?;
            if bsp.pid() == 0 {
                *line.lock().unwrap() = line!() + 1;
                bsp.put_from(&[1u32, 2, 3], 1, dst, 6)?;
            }
            bsp.sync()
        });
        assert!(msg.contains("out of bounds"), "{msg}");
        assert!(
            msg.contains(&at(*line.lock().unwrap())),
            "{nodes} nodes: {msg}"
        );
    }
}

#[test]
fn get_with_source_out_of_bounds_fails_the_sync() {
    for nodes in [1, 2] {
        let line = std::sync::Mutex::new(0);
        let msg = failure(2, nodes, |bsp| {
            setup(bsp, 2, 1)?;
            let src = bsp.register_global(vec![0u32; 8])?;
            let dst = bsp.register_local(vec![0u32; 8])?;
            bsp.sync()?;
            if bsp.pid() == 1 {
                *line.lock().unwrap() = line!() + 1;
                bsp.get(0, src, 7, dst, 0, 2)?;
            }
            bsp.sync()
        });
        assert!(msg.contains("out of bounds"), "{msg}");
        assert!(
            msg.contains(&at(*line.lock().unwrap())),
            "{nodes} nodes: {msg}"
        );
    }
}

#[test]
fn deregistered_slot() {
    let line = std::sync::Mutex::new(0);
    let msg = failure(1, 1, |bsp| {
        setup(bsp, 1, 1)?;
        let slot = bsp.register_global(vec![0u8; 8])?;
        bsp.sync()?;
        bsp.deregister(slot)?;
        *line.lock().unwrap() = line!() + 1;
        let e = bsp.put_from(&[1u8], 0, slot, 0).unwrap_err();
        assert!(matches!(
            e,
            Error::Misuse {
                kind: Misuse::UnknownSlot,
                ..
            }
        ));
        Err(e)
    });
    assert_reported(&msg, "unknown slot", *line.lock().unwrap());
}

#[test]
fn global_slot_named_remotely_before_the_next_sync() {
    let line = std::sync::Mutex::new(0);
    let msg = failure(2, 1, |bsp| {
        setup(bsp, 1, 1)?;
        let slot = bsp.register_global(vec![0u8; 8])?;
        *line.lock().unwrap() = line!() + 1;
        let e = bsp.put_from(&[1u8], 1 - bsp.pid(), slot, 0).unwrap_err();
        assert!(matches!(
            e,
            Error::Misuse {
                kind: Misuse::UnknownSlot,
                ..
            }
        ));
        Err(e)
    });
    assert_reported(
        &msg,
        "before the sync after its registration",
        *line.lock().unwrap(),
    );
}

#[test]
fn read_write_conflict_in_one_superstep() {
    for nodes in [1, 2] {
        let line = std::sync::Mutex::new(0);
        let msg = failure(2, nodes, |bsp| {
            setup(bsp, 1, 1)?;
            let slot = bsp.register_global(vec![0u64; 8])?;
            bsp.sync()?;
            if bsp.pid() == 0 {
                // Reads bytes of rank 1's slot that rank 1's put below writes.
                *line.lock().unwrap() = line!() + 1;
                bsp.put(slot, 0, 1, slot, 0, 4)?;
            } else {
                bsp.put(slot, 2, 1, slot, 4, 2)?;
            }
            bsp.sync()
        });
        assert!(msg.contains("read-write conflict"), "{nodes} nodes: {msg}");
    }
}

#[test]
fn get_reading_what_a_put_writes_is_a_conflict() {
    let line = std::sync::Mutex::new(0);
    let msg = failure(3, 1, |bsp| {
        setup(bsp, 2, 1)?;
        let slot = bsp.register_global(vec![0u64; 8])?;
        let local = bsp.register_local(vec![0u64; 8])?;
        bsp.sync()?;
        match bsp.pid() {
            0 => bsp.put_from(&[1u64, 2], 2, slot, 3)?,
            1 => {
                *line.lock().unwrap() = line!() + 1;
                bsp.get(2, slot, 4, local, 0, 2)?
            }
            _ => {}
        }
        bsp.sync()
    });
    assert_reported(&msg, "read-write conflict", *line.lock().unwrap());
}

#[test]
fn message_queue_capacity_exceeded() {
    let line = std::sync::Mutex::new(0);
    let msg = failure(1, 1, |bsp| {
        setup(bsp, 1, 2)?;
        let slot = bsp.register_global(vec![0u8; 8])?;
        bsp.sync()?;
        bsp.put_from(&[1u8], 0, slot, 0)?;
        bsp.put_from(&[1u8], 0, slot, 1)?;
        *line.lock().unwrap() = line!() + 1;
        let e = bsp.put_from(&[1u8], 0, slot, 2).unwrap_err();
        assert!(matches!(
            e,
            Error::CapacityExceeded {
                what: Capacity::MessageQueue,
                capacity: 2,
                ..
            }
        ));
        Err(e)
    });
    assert_reported(&msg, "message queue holds 2", *line.lock().unwrap());
}

#[test]
fn memory_register_capacity_exceeded() {
    let line = std::sync::Mutex::new(0);
    let msg = failure(1, 1, |bsp| {
        setup(bsp, 1, 0)?;
        bsp.register_local(vec![0u8; 8])?;
        *line.lock().unwrap() = line!() + 1;
        let e = bsp.register_local(vec![0u8; 8]).unwrap_err();
        assert!(matches!(
            e,
            Error::CapacityExceeded {
                what: Capacity::MemoryRegister,
                ..
            }
        ));
        Err(e)
    });
    assert_reported(&msg, "memory register holds 1", *line.lock().unwrap());
}

#[test]
fn mismatched_syncs() {
    for nodes in [1, 2] {
        let line = std::sync::Mutex::new(0);
        let msg = failure(2, nodes, |bsp| {
            setup(bsp, 0, 0)?;
            if bsp.pid() == 0 {
                *line.lock().unwrap() = line!() + 1;
                bsp.sync()?;
            }
            Ok(())
        });
        assert!(msg.contains("mismatched syncs"), "{msg}");
        assert!(msg.contains("the end of its SPMD function"), "{msg}");
        assert!(
            msg.contains(&at(*line.lock().unwrap())),
            "{nodes} nodes: {msg}"
        );
    }
}

#[test]
fn mismatched_global_registrations() {
    let msg = failure(2, 1, |bsp| {
        setup(bsp, 1, 0)?;
        if bsp.pid() == 1 {
            bsp.register_global(vec![0u8; 1])?;
        }
        bsp.sync()
    });
    assert!(msg.contains("mismatched syncs"), "{msg}");
    assert!(msg.contains("global (de)registrations"), "{msg}");
}
