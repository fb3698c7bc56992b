//! K-means on generated blobs with 5 ranks on 2 virtual nodes; checks that every centroid lies
//! near a true blob centre. `cargo run --release --example kmeans`.

use spillway::algorithms::cluster::kmeans::{kmeans, Init, KMeansOptions};
use spillway::algorithms::cluster::points::{load_points, PointSource};
use spillway::algorithms::generate::BlobsSpec;
use spillway::algorithms::AlgoError;
use spillway::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spec = BlobsSpec::parse("blobs:20000:3:4:5")?;
    let options = KMeansOptions {
        k: 4,
        max_iterations: 100,
        init: Init::Random(3),
    };
    let out = run(&Config::new(5).nodes(2), |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let points = load_points(&world, &PointSource::Blobs(spec))?;
        let r = kmeans(&world, &points, &options, &mut |_| {})?;
        Ok((r.centroids, r.iterations, r.converged))
    })?;
    let (centroids, iterations, converged) = &out[0];
    let centres = spec.centres();
    let mut worst: f64 = 0.0;
    for c in centroids.chunks(3) {
        let nearest = centres
            .chunks(3)
            .map(|t| {
                t.iter()
                    .zip(c)
                    .map(|(a, b)| (a - b).powi(2))
                    .sum::<f64>()
                    .sqrt()
            })
            .fold(f64::INFINITY, f64::min);
        worst = worst.max(nearest);
    }
    println!("kmeans: converged={converged} after {iterations} iterations; worst centroid is {worst:.3} from a blob centre");
    assert!(*converged);
    Ok(())
}
