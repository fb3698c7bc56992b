//! Property tests of the whole command line: any argument vector parses or is refused with a
//! clap error (never a panic), and what parses holds values in their documented ranges.

use clap::Parser;
use proptest::prelude::*;

use crate::{Algorithm, Cli, Command};

/// Options of `run pagerank` (and of every job) with values of every kind, good and bad.
fn option() -> impl Strategy<Value = Vec<String>> {
    let names = prop::sample::select(vec![
        "--iterations",
        "--damping",
        "--tolerance",
        "--ranks",
        "--nodes",
        "--mem-budget",
        "--stack-size",
        "--running",
        "--policy",
        "--generate",
        "--input-limit",
        "--engine",
        "--mr-memory",
    ]);
    let values = prop::sample::select(vec![
        "0",
        "1",
        "-1",
        "0.85",
        "1.0",
        "1e309",
        "NaN",
        "inf",
        "4K",
        "0K",
        "2G",
        "5T",
        "16E",
        "99999999999999999999",
        "dynamic",
        "araw",
        "rmat:4:4",
        "rmat:0:4",
        "rmat:40:1",
        "blobs:1:1:1",
        "direct",
        "mapreduce",
        "",
        "x",
        "1.5M",
        "-4K",
    ]);
    (names, values).prop_map(|(n, v)| vec![n.to_string(), v.to_string()])
}

proptest! {
    #[test]
    fn any_pagerank_command_line_parses_in_range_or_is_refused(
        opts in prop::collection::vec(option(), 0..6)
    ) {
        let mut args = vec!["spillway".to_string(), "run".into(), "pagerank".into()];
        args.extend(opts.into_iter().flatten());
        if let Ok(cli) = Cli::try_parse_from(&args) {
            let Command::Run { algorithm: Algorithm::Pagerank(p) } = cli.command else {
                panic!("parsed as another command: {args:?}");
            };
            prop_assert!(p.iterations >= 1);
            prop_assert!((0.0..1.0).contains(&p.damping));
            prop_assert!(p.tolerance.is_finite() && p.tolerance >= 0.0);
            prop_assert!(p.runtime.ranks >= 1 && p.runtime.nodes >= 1);
            prop_assert!(p.runtime.mem_budget.is_none_or(|b| b.bytes() > 0));
            if let Some(spec) = p.generate {
                prop_assert!((1..32).contains(&spec.scale));
            }
        }
    }

    #[test]
    fn any_compress_command_line_parses_in_range_or_is_refused(
        eps in prop::sample::select(vec!["1e-3", "0", "-1", "NaN", "inf", "1e-320", "x"]),
        level in prop::sample::select(vec!["1", "22", "0", "23", "-3"]),
        radius in prop::sample::select(vec!["1", "0.5", "0", "1.01", "NaN"]),
        method in prop::sample::select(vec!["predict", "sbd1", "rbd3", "sbd9", ""]),
        grid in prop::sample::select(vec!["4", "2x2", "0", "4x0", "1x1x1x1", "x"]),
    ) {
        let args = [
            "spillway", "compress", "--epsilon", eps, "--level", level, "--set-radius", radius,
            "--method", method, "--grid", grid, "in.f64", "out.spz",
        ];
        if let Ok(cli) = Cli::try_parse_from(args) {
            prop_assert!(matches!(cli.command, Command::Compress(_)));
            let e: f64 = eps.parse().unwrap();
            prop_assert!(e.is_finite() && e > 0.0);
            let l: i32 = level.parse().unwrap();
            prop_assert!((1..=22).contains(&l));
            let r: f64 = radius.parse().unwrap();
            prop_assert!(r > 0.0 && r <= 1.0);
        }
    }
}
