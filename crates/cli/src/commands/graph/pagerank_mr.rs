//! `run pagerank --engine mapreduce`: PageRank as iterative MapReduce (adjacency lists
//! travel with their vertex), with fault tolerance and checkpoints.

use std::time::Instant;

use spillway::algorithms::graph::pagerank_mr::{load_edge_dataset, pagerank_mapreduce};
use spillway::{Collectives, Comm};

use super::pagerank::{PageRank, PageRankFacts};
use crate::commands::checkpoint::{checkpoint_facts, restore};
use crate::commands::ft::unless_lost;
use crate::driver::{Failure, Job, OpReport, RankOut, Timing};

/// Runs the MapReduce engine.
pub(crate) fn run(args: &PageRank, job: &Job<'_>) -> Result<Option<PageRankFacts>, Failure> {
    let source = args.source(job);
    let options = args.options();
    let memory = args.mr_memory.and_then(|m| m.to_usize());
    let ft = args.ft.settings();
    let fingerprint = args.fingerprint(job, Some("mapreduce"));
    let facts = job.spmd(options.iterations, "pagerank", |rank, _| {
        let world = Comm::world(rank);
        let mut ck = args.checkpoint.checkpointer(&fingerprint);
        let t0 = Instant::now();
        let (edges, n) = load_edge_dataset(&world, &source)?;
        let m = edges.count(&world)?;
        world.barrier()?;
        restore(&world, ck.as_mut())?;
        let load = t0.elapsed();
        let t1 = Instant::now();
        let Some(result) = unless_lost(pagerank_mapreduce(
            &world,
            edges,
            n,
            &options,
            memory,
            ft.clone(),
            &mut |_| {},
            ck.as_mut(),
        ))?
        else {
            return Ok(None);
        };
        let comm = &result.comm;
        let compute = t1.elapsed();
        let checkpoint = checkpoint_facts(comm, ck.as_ref())?;
        // The ranks in vertex order, written by the first rank.
        let all = result.ranks.gather(comm, 0)?;
        let rank_sum = all.as_ref().map_or(0.0, |a| a.iter().map(|(_, r)| r).sum());
        if let Some(path) = &args.out {
            let mut all = all.unwrap_or_default();
            all.sort_unstable_by_key(|&(v, _)| v);
            job.write_ordered(comm, path, |w| {
                for (v, r) in &all {
                    writeln!(w, "{v} {r}")?;
                }
                Ok(())
            })?;
        }
        let performed = result.iteration_times.len() as f64;
        Ok(Some(RankOut {
            facts: PageRankFacts {
                engine: "mapreduce",
                vertices: n,
                edges: m,
                max_edges_per_rank: None,
                iteration_bytes: None,
                final_l1_change: result.delta,
                spill_io_per_iteration_bytes: None,
                rank_sum,
                edges_per_second: m as f64 * performed / compute.as_secs_f64().max(1e-12),
                checkpoint,
            },
            timing: Timing {
                iterations: result.iterations,
                iteration_times: result.iteration_times,
                load,
                compute,
                operations: result.stats.iter().map(OpReport::from).collect(),
                fault_tolerance: result.ft,
                ..Timing::default()
            },
            lead: comm.rank() == 0,
        }))
    })?;
    if facts.is_some() {
        args.ft.warn_unreached(job.operations(), job.nodes(), true);
    }
    Ok(facts)
}
