//! `spillway-mpi-check`: checks of the MPI backend, run under `mpirun`.
//!
//! ```text
//! mpirun -np K spillway-mpi-check <case> [ranks]
//! ```
//!
//! Cases:
//! * `comm`: point-to-point and every collective on the world, node and split communicators,
//!   with messages inline, chunked and large, checked against sequential computations; then a
//!   second job in the same process. Prints `ok` on the process of rank 0.
//! * `deadlock`: every rank receives from its right neighbour; the job must end with a
//!   deadlock report on every process (exit code 3).
//! * `fail`: the last rank fails while the others wait in a receive; every process must end
//!   with an error naming that rank (exit code 4).
//! * `hook`: an rsmpi program that uses its communicator, runs a spillway job on it with
//!   `spillway::mpi::hook`, then uses the communicator again.
//! * `lost`: the process of the last node aborts in the middle of the job (a lost process);
//!   the survivors must end within the peer timeout (3 s here) naming it (exit code 5). Run
//!   it with `mpirun --mca orte_abort_on_non_zero_status 0` (Open MPI 4) or
//!   `mpirun --with-ft ulfm` (Open MPI 5), else `mpirun` kills them first.
//! * `lost-after-end` (ULFM): the ranks of node 0 end at once, the process of the last node
//!   aborts 300 ms later while the other ranks still run, so node 0 is in the end agreement
//!   while the others, waiting for a message from it, find the loss and shrink their
//!   collectives. Every surviving process must end (no hang) and say how: `process N ended:
//!   ...` on stderr (exit code 6).
//! * `lost-at-start` (ULFM; `[ranks] [delay in us]`): after a first job, the process of the
//!   last node aborts `delay` microseconds after it starts a second one, so that with small
//!   delays it dies while the others are still in the job's start-up calls (duplicating
//!   communicators, measuring the link). Every surviving process must end and say how, as
//!   `lost-after-end` (exit code 6); all of them with "while the job started", or none.
//!
//! Exit codes: 0 success, 1 check failed, 2 usage, 3 deadlock reported, 4 rank failure
//! reported, 5 lost process reported, 6 ended after a loss at the end.

use std::process::ExitCode;

use spillway::mpi::rsmpi;
use spillway::mpi::rsmpi::traits::{Communicator, CommunicatorCollectives};
use spillway::prelude::*;
use spillway::{Backend, JobError};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Writes `text` and a newline to stderr in one `write`, so that the lines of several MPI
/// processes, forwarded by `mpirun`, do not interleave.
fn say(text: impl std::fmt::Display) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{text}\n").as_bytes());
}

fn data_of(r: usize, len: usize) -> Vec<i64> {
    (0..len)
        .map(|i| (r as i64 + 1) * 1_000_003 + i as i64 * 7 - 50)
        .collect()
}

fn ensure(ok: bool, what: &str) -> Result<(), BoxError> {
    if ok {
        Ok(())
    } else {
        Err(format!("check failed: {what}").into())
    }
}

/// Point-to-point and collectives on `comm`, against sequential results.
fn check_comm(comm: &Comm) -> Result<(), BoxError> {
    let p = comm.size();
    let me = comm.rank();
    // Ring with lengths below and above the inline limit, non-overtaking per tag.
    for len in [0usize, 1, 3000, 400_000] {
        let right = (me + 1) % p;
        let left = (me + p - 1) % p;
        comm.send(right, 5, &data_of(me, len))?;
        comm.send(right, 5, &data_of(me + 100, len))?;
        let (a, _) = comm.recv::<i64>(left, 5)?;
        let (b, _) = comm.recv::<i64>(left, 5)?;
        ensure(a == data_of(left, len), "ring message order")?;
        ensure(b == data_of(left + 100, len), "ring second message")?;
    }
    // Large messages whose receiver is not ready when they arrive: it computes first and
    // then receives into its own buffer; it first waits for a small message sent after the
    // large one; it polls with iprobe; it probes, then receives.
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    let len = 300_000;
    comm.send(right, 6, &data_of(me, len))?;
    std::thread::sleep(std::time::Duration::from_millis(3));
    let mut into = vec![0i64; len];
    comm.recv_into(left, 6, &mut into)?;
    ensure(into == data_of(left, len), "delayed receive into a buffer")?;
    comm.send(right, 7, &data_of(me + 1, len))?;
    comm.send(right, 8, &[me as u64])?;
    let (small, _) = comm.recv::<u64>(left, 8)?;
    ensure(
        small == vec![left as u64],
        "small message behind a large one",
    )?;
    comm.recv_into(left, 7, &mut into)?;
    ensure(
        into == data_of(left + 1, len),
        "large message ahead of a small one",
    )?;
    comm.send(right, 9, &data_of(me + 2, len))?;
    // Polling holds the node slot (scheduling is cooperative): only while every member runs.
    if p <= 2 {
        let status = loop {
            if let Some(status) = comm.iprobe(left, 9)? {
                break status;
            }
            std::thread::yield_now();
        };
        ensure(status.bytes == len * 8, "iprobe of a large message")?;
    }
    comm.recv_into(left, 9, &mut into)?;
    ensure(into == data_of(left + 2, len), "large message after iprobe")?;
    comm.send(right, 10, &data_of(me + 3, len))?;
    let status = comm.probe(Source::Any, 10)?;
    ensure(status.source == left && status.bytes == len * 8, "probe")?;
    let (got, _) = comm.recv::<i64>(left, 10)?;
    ensure(got == data_of(left + 3, len), "large message after probe")?;
    // Any-source receives get every sender once.
    if me == 0 {
        let mut seen = vec![false; p];
        for _ in 1..p {
            let (v, status) = comm.recv::<u64>(Source::Any, Tag::Any)?;
            ensure(v == vec![status.source as u64], "any-source payload")?;
            seen[status.source] = true;
        }
        ensure(seen[1..].iter().all(|&s| s), "any-source senders")?;
    } else {
        comm.send(0, me as i32, &[me as u64])?;
    }
    for len in [1usize, 2000, 300_000, 3_000_000] {
        for root in [0, p - 1] {
            let mut data = if me == root {
                data_of(root, len)
            } else {
                Vec::new()
            };
            comm.bcast(root, &mut data)?;
            ensure(data == data_of(root, len), "bcast")?;
            let mut into = if me == root {
                data_of(root + 3, len)
            } else {
                vec![0; len]
            };
            comm.bcast_into(root, &mut into)?;
            ensure(into == data_of(root + 3, len), "bcast_into")?;
        }
        let got = comm.allreduce(&data_of(me, len), Sum)?;
        let mut want = vec![0i64; len];
        for r in 0..p {
            for (w, x) in want.iter_mut().zip(data_of(r, len)) {
                *w += x;
            }
        }
        ensure(got == want, "allreduce sum")?;
        let got = comm.allreduce(&data_of(me, len), Min)?;
        ensure(got == data_of(0, len), "allreduce min")?;
    }
    let scan = comm.scan(&[me as u64 + 1], Sum)?;
    ensure(scan[0] == ((me + 1) * (me + 2) / 2) as u64, "scan")?;
    let gathered = comm.allgatherv(&data_of(me, me % 3 + 1))?;
    let want: Vec<i64> = (0..p).flat_map(|r| data_of(r, r % 3 + 1)).collect();
    ensure(gathered.0 == want, "allgatherv")?;
    let parts: Vec<Vec<i64>> = (0..p).map(|d| data_of(me * 100 + d, d + 1)).collect();
    let got = comm.alltoallv_vecs(parts)?;
    for (s, part) in got.iter().enumerate() {
        ensure(*part == data_of(s * 100 + me, me + 1), "alltoallv")?;
    }
    let at_root = comm.gather(0, &[me as u32])?;
    if me == 0 {
        ensure(
            at_root == Some((0..p as u32).collect()),
            "gather at the root",
        )?;
    }
    comm.barrier()?;
    Ok(())
}

fn config(ranks: u32) -> Config {
    Config::new(ranks).backend(Backend::Mpi).running(2)
}

fn case_comm(ranks: u32) -> Result<(), BoxError> {
    let (results, stats) = spillway::run_with_stats(&config(ranks), |rank| {
        let world = Comm::world(rank);
        check_comm(&world)?;
        check_comm(&Comm::node(rank))?;
        let halves = world.split(Some((world.rank() % 2) as u32), world.rank() as i64)?;
        check_comm(&halves.ok_or("split returned no communicator")?)?;
        let cyclic = Comm::cyclic_world(rank);
        check_comm(&cyclic)?;
        Ok::<_, BoxError>(rank.rank())
    })?;
    ensure(
        results == stats.local_ranks.clone().collect::<Vec<_>>(),
        "results are this process's ranks",
    )?;
    ensure(stats.ranks.len() == ranks as usize, "stats of every rank")?;
    // A second job in the same process reuses MPI.
    let sums = spillway::run(&config(ranks), |rank| {
        Comm::world(rank).allreduce(&[rank.rank() as u64], Sum)
    })?;
    let want = (ranks as u64 * (ranks as u64 - 1)) / 2;
    ensure(sums.iter().all(|s| s[0] == want), "second job")?;
    if stats.local_ranks.start == 0 {
        println!("ok: {ranks} ranks on {} nodes", stats.nodes);
    }
    Ok(())
}

/// Exit code 3 with the report of a job that ended in a deadlock; 1 for any other outcome.
fn expect_deadlock<T: std::fmt::Debug>(outcome: Result<T, JobError>) -> ExitCode {
    match outcome {
        Err(JobError::Deadlock(report)) => {
            say(report);
            ExitCode::from(3)
        }
        other => {
            say(format!("expected a deadlock, got {other:?}"));
            ExitCode::from(1)
        }
    }
}

fn case_deadlock(ranks: u32) -> ExitCode {
    let outcome = spillway::run(&config(ranks), |rank| {
        let world = Comm::world(rank);
        world.barrier()?;
        let right = (world.rank() + 1) % world.size();
        world.recv::<u8>(right, 9).map(drop)
    });
    expect_deadlock(outcome)
}

/// Rank 0 enters a barrier while every other rank waits for a message from rank 0: with one
/// rank per process the barrier's steps are direct exchanges between processes.
fn case_deadlock_collective(ranks: u32) -> ExitCode {
    let outcome = spillway::run(&config(ranks), |rank| {
        let world = Comm::world(rank);
        if world.rank() == 0 {
            world.barrier()
        } else {
            world.recv::<u8>(0, 9).map(drop)
        }
    });
    expect_deadlock(outcome)
}

fn case_fail(ranks: u32) -> ExitCode {
    let outcome = spillway::run(&config(ranks), |rank| -> Result<(), BoxError> {
        let world = Comm::world(rank);
        world.barrier()?;
        if world.rank() + 1 == world.size() {
            return Err("deliberate failure".into());
        }
        world.recv::<u8>(Source::Any, Tag::Any)?;
        Ok(())
    });
    match outcome {
        Err(e) => {
            say(format!("job failed: {e}"));
            let named = e
                .to_string()
                .contains(&format!("rank {} failed", ranks - 1));
            ExitCode::from(if named { 4 } else { 1 })
        }
        Ok(_) => ExitCode::from(1),
    }
}

fn case_hook(ranks: u32) -> Result<(), BoxError> {
    let (universe, _) = rsmpi::initialize_with_threading(rsmpi::Threading::Funneled)
        .ok_or("MPI was already initialised")?;
    let world = universe.world();
    let mut before = 0i32;
    world.all_reduce_into(
        &world.rank(),
        &mut before,
        rsmpi::collective::SystemOperation::sum(),
    );
    let config = Config::new(ranks).backend(Backend::Mpi);
    let results = spillway::mpi::hook(&world, &config, |rank| {
        let comm = Comm::world(rank);
        comm.allreduce(&[rank.rank() as u64 + 1], Sum)
    })?;
    let want = ranks as u64 * (ranks as u64 + 1) / 2;
    ensure(results.iter().all(|v| v[0] == want), "job in the hook")?;
    let mut after = 0i32;
    world.all_reduce_into(
        &world.rank(),
        &mut after,
        rsmpi::collective::SystemOperation::sum(),
    );
    ensure(before == after, "the communicator after the hook")?;
    if world.rank() == 0 {
        println!("ok: hook on {} processes", world.size());
    }
    Ok(())
}

fn case_lost(ranks: u32) -> ExitCode {
    let config = config(ranks).peer_timeout(std::time::Duration::from_secs(3));
    let outcome = spillway::run(&config, |rank| -> Result<(), BoxError> {
        let world = Comm::world(rank);
        world.barrier()?;
        if rank.node() + 1 == rank.nodes() && rank.local_rank() == 0 {
            std::thread::sleep(std::time::Duration::from_millis(200));
            std::process::abort();
        }
        for _ in 0..1000 {
            world.allreduce(&[1u64], Sum)?;
        }
        Ok(())
    });
    match outcome {
        Err(e) => {
            say(format!("job failed: {e}"));
            // Without ULFM the heartbeats find the lost process; with it, MPI does.
            let text = e.to_string();
            let named = text.contains("probably lost") || text.contains("was lost");
            ExitCode::from(if named { 5 } else { 1 })
        }
        Ok(_) => {
            say("the job ended normally although a process was lost");
            ExitCode::from(1)
        }
    }
}

fn case_lost_after_end(ranks: u32) -> ExitCode {
    let config = config(ranks).peer_timeout(std::time::Duration::from_secs(20));
    let node = std::sync::OnceLock::new();
    let outcome = spillway::run(&config, |rank| -> Result<(), BoxError> {
        let _ = node.set(rank.node());
        let world = Comm::world(rank);
        world.barrier()?;
        if rank.node() == 0 {
            return Ok(());
        }
        if rank.node() + 1 == rank.nodes() {
            if rank.local_rank() == 0 {
                std::thread::sleep(std::time::Duration::from_millis(300));
                std::process::abort();
            }
            std::thread::sleep(std::time::Duration::from_secs(30));
            return Ok(());
        }
        // The other ranks wait for a message from the lost process: the loss ends the wait.
        let from = rank.layout().first_rank(rank.nodes() - 1);
        world.recv::<u8>(from as usize, 7)?;
        Ok(())
    });
    let node = node.get().map_or("?".to_string(), u32::to_string);
    match outcome {
        Ok(_) => say(format!("process {node} ended: ok")),
        Err(e) => say(format!("process {node} ended: {e}")),
    }
    ExitCode::from(6)
}

fn case_lost_at_start(ranks: u32, delay: std::time::Duration) -> ExitCode {
    let config = config(ranks).peer_timeout(std::time::Duration::from_secs(20));
    // A first job initialises MPI and shows that every process runs.
    if let Err(e) = spillway::run(&config, |rank| Comm::world(rank).barrier()) {
        say(format!("the first job failed: {e}"));
        return ExitCode::from(1);
    }
    let world = rsmpi::topology::SimpleCommunicator::world();
    if world.size() < 2 {
        say("lost-at-start: needs 2 MPI processes or more (mpirun -np N, N >= 2): the last one dies");
        return ExitCode::from(2);
    }
    let (me, last) = (world.rank(), world.size() - 1);
    if me == last {
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            std::process::abort();
        });
    }
    let outcome = spillway::run(&config, |rank| -> Result<(), BoxError> {
        let world = Comm::world(rank);
        for _ in 0..200 {
            world.allreduce(&[1u64], Sum)?;
        }
        Ok(())
    });
    match outcome {
        Ok(_) => say(format!("process {me} ended: ok")),
        Err(e) => say(format!("process {me} ended: {e}")),
    }
    if me == last {
        // The job ended before the abort: wait for it.
        std::thread::sleep(std::time::Duration::from_secs(30));
    }
    ExitCode::from(6)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ranks = match args.get(1).map(|r| r.parse::<u32>()) {
        None => 6,
        Some(Ok(r)) if r > 0 => r,
        _ => {
            say("usage: spillway-mpi-check <comm|deadlock|deadlock-collective|fail|hook|lost|lost-after-end|lost-at-start> [ranks]");
            return ExitCode::from(2);
        }
    };
    let result = match args.first().map(String::as_str) {
        Some("comm") => case_comm(ranks),
        Some("deadlock") => return case_deadlock(ranks),
        Some("deadlock-collective") => return case_deadlock_collective(ranks),
        Some("fail") => return case_fail(ranks),
        Some("hook") => case_hook(ranks),
        Some("lost") => return case_lost(ranks),
        Some("lost-after-end") => return case_lost_after_end(ranks),
        Some("lost-at-start") => {
            let Some(Ok(us)) = args.get(2).map(|d| d.parse::<u64>()) else {
                say("usage: spillway-mpi-check lost-at-start <ranks> <delay in us>");
                return ExitCode::from(2);
            };
            return case_lost_at_start(ranks, std::time::Duration::from_micros(us));
        }
        _ => {
            say("usage: spillway-mpi-check <comm|deadlock|deadlock-collective|fail|hook|lost|lost-after-end|lost-at-start> [ranks]");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say(format!("spillway-mpi-check: {e}"));
            ExitCode::from(1)
        }
    }
}
