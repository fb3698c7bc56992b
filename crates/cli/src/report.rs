//! The final report of a run: human-readable or one JSON object.

use serde::Serialize;
use spillway::Config;

/// What a run reports.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub(crate) algorithm: String,
    pub(crate) input: String,
    pub(crate) backend: String,
    pub(crate) ranks: u32,
    pub(crate) nodes: u32,
    pub(crate) running: u32,
    pub(crate) iterations: usize,
    pub(crate) load_seconds: f64,
    pub(crate) compute_seconds: f64,
    pub(crate) total_seconds: f64,
    pub(crate) iteration_seconds: Vec<f64>,
    pub(crate) messages_sent: u64,
    pub(crate) bytes_sent: u64,
    pub(crate) output: Option<String>,
    #[serde(skip)]
    pub(crate) facts: Vec<(String, f64)>,
}

impl Report {
    pub(crate) fn new(algorithm: &str, input: &str, config: &Config, backend: &str) -> Report {
        Report {
            algorithm: algorithm.into(),
            input: input.into(),
            backend: backend.into(),
            ranks: config.ranks_total(),
            nodes: config.nodes_total(),
            running: config.running_per_node(),
            iterations: 0,
            load_seconds: 0.0,
            compute_seconds: 0.0,
            total_seconds: 0.0,
            iteration_seconds: Vec::new(),
            messages_sent: 0,
            bytes_sent: 0,
            output: None,
            facts: Vec::new(),
        }
    }

    pub(crate) fn print(&self, json: bool) {
        if json {
            let mut value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
            if let serde_json::Value::Object(map) = &mut value {
                for (k, v) in &self.facts {
                    let num = serde_json::Number::from_f64(*v)
                        .map(serde_json::Value::Number)
                        .unwrap_or(serde_json::Value::Null);
                    map.insert(k.clone(), num);
                }
            }
            println!("{value}");
            return;
        }
        println!("spillway {}: {}", self.algorithm, self.input);
        println!(
            "  layout      {} ranks on {} node(s), {} running per node, {} backend",
            self.ranks, self.nodes, self.running, self.backend
        );
        for (k, v) in &self.facts {
            if v.fract() == 0.0 && v.abs() < 1e15 {
                println!("  {k:<19} {}", *v as i64);
            } else {
                println!("  {k:<19} {v:.6e}");
            }
        }
        let n = self.iteration_seconds.len().max(1) as f64;
        let mean = self.iteration_seconds.iter().sum::<f64>() / n;
        let max = self.iteration_seconds.iter().cloned().fold(0.0, f64::max);
        println!("  iterations  {}", self.iterations);
        println!(
            "  time        load {:.3} s, compute {:.3} s, total {:.3} s",
            self.load_seconds, self.compute_seconds, self.total_seconds
        );
        println!("  per iter    mean {:.4} s, max {:.4} s", mean, max);
        for (i, t) in self.iteration_seconds.iter().enumerate() {
            println!("    iteration {:>3}  {:.4} s", i + 1, t);
        }
        println!(
            "  messages    {} sent, {} bytes",
            self.messages_sent, self.bytes_sent
        );
        if let Some(o) = &self.output {
            println!("  output      {o}");
        }
    }
}
