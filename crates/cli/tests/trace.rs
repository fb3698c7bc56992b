//! `--trace FILE`: the file follows the Chrome trace event format (JSON object form) and tells
//! a consistent story: every rank has a named track, a rank's running and blocked intervals
//! never overlap, and an out-of-core run shows loads and unloads with their bytes.

use std::collections::{BTreeMap, BTreeSet};

mod common;
use common::Cmd;

fn traced(args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    Cmd::spillway()
        .args(args)
        .arg("--trace")
        .arg(&path)
        .arg("--spill-dir")
        .arg(dir.path())
        .ok();
    let text = std::fs::read_to_string(&path).expect("the trace file is written");
    serde_json::from_str(&text).expect("the trace is JSON")
}

/// A complete event: name, category, start and duration in microseconds, args.
type Interval = (String, String, f64, f64, serde_json::Value);

/// Checks the trace event format and returns the complete events per (pid, tid).
fn check_format(trace: &serde_json::Value) -> BTreeMap<(u64, u64), Vec<Interval>> {
    let events = trace["traceEvents"]
        .as_array()
        .expect("an object with a traceEvents array");
    let mut named = BTreeSet::new();
    let mut tracks: BTreeMap<(u64, u64), Vec<Interval>> = BTreeMap::new();
    for e in events {
        let name = e["name"].as_str().expect("every event has a name");
        let ph = e["ph"].as_str().expect("every event has a phase");
        let pid = e["pid"].as_u64().expect("integer pid");
        let tid = e["tid"].as_u64().expect("integer tid");
        match ph {
            "M" => {
                assert!(
                    ["process_name", "thread_name", "thread_sort_index"].contains(&name),
                    "metadata event {name}"
                );
                assert!(e["args"].is_object(), "metadata has args: {e}");
                if name == "thread_name" {
                    assert!(e["args"]["name"].is_string());
                    named.insert((pid, tid));
                }
            }
            "X" => {
                let ts = e["ts"].as_f64().expect("ts is a number (microseconds)");
                let dur = e["dur"].as_f64().expect("dur is a number");
                assert!(ts >= 0.0 && dur >= 0.0, "{e}");
                let cat = e["cat"].as_str().expect("category").to_owned();
                tracks.entry((pid, tid)).or_default().push((
                    name.to_owned(),
                    cat,
                    ts,
                    dur,
                    e["args"].clone(),
                ));
            }
            other => panic!("unexpected phase {other}"),
        }
    }
    for track in tracks.keys() {
        assert!(named.contains(track), "track {track:?} has no thread_name");
    }
    tracks
}

#[test]
fn out_of_core_pagerank_trace() {
    let ranks = 8u64;
    let trace = traced(&[
        "run",
        "pagerank",
        "--generate",
        "rmat:14:8",
        "--ranks",
        "8",
        "--nodes",
        "2",
        "--mem-budget",
        "8M",
        "--running",
        "2",
        "--iterations",
        "3",
        "--tolerance",
        "0",
    ]);
    let tracks = check_format(&trace);
    let mut loads = 0;
    let mut unloads = 0;
    for rank in 0..ranks {
        let node = rank / 4;
        let events = tracks
            .get(&(node, rank))
            .unwrap_or_else(|| panic!("no events for rank {rank} on node {node}"));
        // Scheduling intervals of one rank follow each other without overlap.
        let mut sched: Vec<_> = events
            .iter()
            .filter(|e| e.1 == "sched" || e.1 == "blocked")
            .collect();
        assert!(
            sched.iter().any(|e| e.0 == "running"),
            "rank {rank} never ran"
        );
        assert!(
            sched.iter().any(|e| e.1 == "blocked"),
            "rank {rank} never blocked"
        );
        sched.sort_by(|a, b| a.2.total_cmp(&b.2));
        for w in sched.windows(2) {
            assert!(
                w[0].2 + w[0].3 <= w[1].2 + 1e-3,
                "rank {rank}: {:?} overlaps {:?}",
                w[0],
                w[1]
            );
        }
        for e in events.iter().filter(|e| e.1 == "memory") {
            let bytes = e.4["bytes"].as_u64().expect("memory events carry bytes");
            match e.0.as_str() {
                "load" => {
                    assert!(bytes > 0);
                    loads += 1;
                }
                "unload" => unloads += 1,
                other => panic!("memory event {other}"),
            }
        }
    }
    assert!(loads > 0 && unloads > 0, "{loads} loads, {unloads} unloads");
}

#[test]
fn in_memory_trace_has_no_memory_events() {
    let trace = traced(&[
        "run",
        "kmeans",
        "--generate",
        "blobs:2000:4:3",
        "--k",
        "3",
        "--ranks",
        "3",
    ]);
    let tracks = check_format(&trace);
    assert_eq!(tracks.len(), 3, "one track per rank: {:?}", tracks.keys());
    assert!(tracks.values().flatten().all(|e| e.1 != "memory"));
}
