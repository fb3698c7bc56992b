//! A ring, a reduction and a deadlock-free exchange on 6 ranks over 2 virtual nodes.
//! Checks its own answer: `cargo run --example hello`.

use spillway::prelude::*;

fn main() -> Result<(), JobError> {
    let config = Config::new(6).nodes(2).running(1);
    let out = run(&config, |rank| {
        let world = Comm::world(rank);
        let (me, p) = (world.rank(), world.size());
        world.send((me + 1) % p, 0, &[me as u64])?;
        let (left, _) = world.recv::<u64>((me + p - 1) % p, 0)?;
        let total = world.allreduce(&left, Sum)?[0];
        let node = Comm::node(rank);
        let on_node = node.allreduce(&[1u32], Sum)?[0];
        Ok::<_, Error>((total, on_node))
    })?;
    let expect = (0..6).sum::<u64>();
    assert!(out.iter().all(|&(t, n)| t == expect && n == 3), "{out:?}");
    println!("hello: 6 ranks agree on sum {expect}; 3 ranks per node");
    Ok(())
}
