//! Ranks as fibers: thousands of them on one node, and a rank that overflows its stack.

use spillway_runtime::{run, Config, Error};

/// Recurses `depth` times with a page of stack per frame.
#[inline(never)]
fn deep(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth as u8; 4096]);
    if depth == 0 {
        return u64::from(frame[0]);
    }
    deep(depth - 1) + u64::from(frame[4095])
}

#[test]
fn a_rank_that_overflows_its_stack_is_named_and_the_process_aborts() {
    if std::env::var_os("SPILLWAY_OVERFLOW_CHILD").is_some() {
        // The child: rank 1 recurses far beyond a 256 KiB stack.
        let config = Config::new(3).stack_size(256 << 10);
        let _ = run(&config, |rank| {
            if rank.rank() == 1 {
                std::hint::black_box(deep(10_000));
            }
            Ok::<_, Error>(())
        });
        unreachable!("the overflow aborts the process");
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_rank_that_overflows_its_stack_is_named_and_the_process_aborts",
            "--nocapture",
        ])
        .env("SPILLWAY_OVERFLOW_CHILD", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rank 1 overflowed its stack of 256 KiB"),
        "stderr: {err}"
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{:?}", out.status);
}

#[test]
fn a_deep_but_sufficient_stack_is_fine() {
    // 64 frames of a page each fit in 1 MiB.
    let sums = run(&Config::new(4), |_| Ok::<_, Error>(deep(64))).unwrap();
    assert_eq!(sums.len(), 4);
}
