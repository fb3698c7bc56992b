//! `Rank::on_block`: the hook runs each time its rank gives up its slot, and only then.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spillway_runtime::{run, Config, Error, Pattern, Payload, WaitKind};

#[test]
fn the_hook_runs_each_time_its_rank_blocks_and_not_otherwise() {
    // One slot, no spinning. Each round rank 0 receives from rank 1 and answers; rank 1 sends
    // and then receives the answer. Rank 0 runs first and finds nothing, so it blocks; rank 1
    // sends, finds no answer yet (rank 0 has not run since) and blocks; rank 0 resumes,
    // answers and blocks on the next round's receive; and so on: each blocks once per round.
    // Rank 2 only computes and never blocks.
    for rounds in [1u32, 3] {
        let calls: Vec<Arc<AtomicU32>> = (0..3).map(|_| Arc::new(AtomicU32::new(0))).collect();
        let config = Config::new(3).running(1).spin(Duration::ZERO);
        run(&config, |rank| {
            let c = Arc::clone(&calls[rank.rank() as usize]);
            rank.on_block(move || {
                c.fetch_add(1, Ordering::Relaxed);
            });
            if rank.rank() == 2 {
                return Ok::<_, Error>(());
            }
            let other = 1 - rank.rank();
            let from_other = || Pattern {
                context: 7,
                source: Some(other),
                tag: None,
            };
            for _ in 0..rounds {
                if rank.rank() == 0 {
                    rank.recv(from_other(), WaitKind::Recv)?;
                    rank.post(other, 7, 0, Payload::empty())?;
                } else {
                    rank.post(other, 7, 0, Payload::empty())?;
                    rank.recv(from_other(), WaitKind::Recv)?;
                }
            }
            Ok(())
        })
        .unwrap();
        let blocked: Vec<u32> = calls.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        assert_eq!(blocked, vec![rounds, rounds, 0], "{rounds} rounds");
    }
}
