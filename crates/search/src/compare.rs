//! Samplers compared over several seeds (`ch search --compare-samplers tpe,random --seeds 1,2,3`):
//! each sampler's best-so-far curves, one per seed, become their mean with a min–max band, so a
//! sample-efficiency comparison is not one lucky run. The numbers behind the plot are written as
//! CSV and JSON.

use serde_json::{json, Value};

/// The study of one sampler and one seed: its best-so-far curve `(trial number, value)`.
#[derive(Clone, Debug, PartialEq)]
pub struct SeedRun {
    pub seed: u64,
    pub study: String,
    pub curve: Vec<(f64, f64)>,
}

/// The runs of one sampler, one per seed (the same seeds, in the same order, for every sampler).
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerRuns {
    pub sampler: String,
    pub runs: Vec<SeedRun>,
}

/// The curves of several seeds at one trial number.
#[derive(Clone, Debug, PartialEq)]
pub struct BandPoint {
    pub x: f64,
    /// Each seed's best so far, in the order of the runs.
    pub per_seed: Vec<f64>,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

/// The band of step curves: at every trial number where a curve has a point, the value each
/// curve holds there (its last point at or before it). A trial number is left out while some
/// curve has no value yet (no feasible trial), and the band stops at the last trial number every
/// curve reaches, so every row averages all seeds.
pub fn band(curves: &[&[(f64, f64)]]) -> Vec<BandPoint> {
    let Some(end) = curves.iter().map(|c| c.last().map(|p| p.0)).collect::<Option<Vec<f64>>>() else { return Vec::new() };
    let end = end.into_iter().fold(f64::INFINITY, f64::min);
    let mut xs: Vec<f64> = curves.iter().flat_map(|c| c.iter().map(|p| p.0)).filter(|&x| x <= end).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let mut out = Vec::with_capacity(xs.len());
    for x in xs {
        let held: Option<Vec<f64>> = curves.iter().map(|c| c.iter().take_while(|p| p.0 <= x).last().map(|p| p.1)).collect();
        let Some(per_seed) = held else { continue };
        let mean = per_seed.iter().sum::<f64>() / per_seed.len() as f64;
        let min = per_seed.iter().copied().fold(f64::INFINITY, f64::min);
        let max = per_seed.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        out.push(BandPoint { x, per_seed, mean, min, max });
    }
    out
}

/// The band of each sampler's runs.
pub fn bands(samplers: &[SamplerRuns]) -> Vec<(String, Vec<BandPoint>)> {
    samplers.iter().map(|s| (s.sampler.clone(), band(&s.runs.iter().map(|r| r.curve.as_slice()).collect::<Vec<_>>()))).collect()
}

/// `compare_samplers.csv`: one row per sampler and trial number, with each seed's best so far,
/// their mean, min and max (`sampler,trial,seed_1,seed_2,mean,min,max`).
pub fn compare_csv(samplers: &[SamplerRuns]) -> String {
    let seeds: Vec<u64> = samplers.first().map(|s| s.runs.iter().map(|r| r.seed).collect()).unwrap_or_default();
    let mut header = vec!["sampler".to_string(), "trial".into()];
    header.extend(seeds.iter().map(|s| format!("seed_{s}")));
    header.extend(["mean", "min", "max"].map(String::from));
    let mut out = header.join(",") + "\n";
    for (sampler, points) in bands(samplers) {
        for p in points {
            let mut row = vec![sampler.clone(), p.x.to_string()];
            row.extend(p.per_seed.iter().map(|v| v.to_string()));
            row.extend([p.mean, p.min, p.max].map(|v| v.to_string()));
            out += &(row.join(",") + "\n");
        }
    }
    out
}

/// `compare_samplers.json`: what the curves are, the seeds, and per sampler its studies, the
/// band rows and the final best so far (mean, min, max over seeds).
pub fn compare_json(samplers: &[SamplerRuns], value: &str) -> Value {
    let seeds: Vec<u64> = samplers.first().map(|s| s.runs.iter().map(|r| r.seed).collect()).unwrap_or_default();
    let per_sampler: Vec<Value> = samplers
        .iter()
        .zip(bands(samplers))
        .map(|(s, (_, points))| {
            let last = points.last();
            json!({
                "sampler": s.sampler,
                "studies": s.runs.iter().map(|r| json!({"seed": r.seed, "study": r.study})).collect::<Vec<_>>(),
                "final": last.map(|p| json!({"trial": p.x, "mean": p.mean, "min": p.min, "max": p.max})),
                "rows": points.iter().map(|p| json!({"trial": p.x, "per_seed": p.per_seed, "mean": p.mean, "min": p.min, "max": p.max})).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({"value": value, "seeds": seeds, "samplers": per_sampler})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_band_holds_each_curve_and_averages_every_seed() {
        let a = [(0.0, 5.0), (1.0, 3.0), (3.0, 3.0)];
        let b = [(0.0, 4.0), (2.0, 1.0), (3.0, 1.0), (4.0, 0.0)];
        let got: Vec<(f64, Vec<f64>, f64, f64, f64)> =
            band(&[&a[..], &b[..]]).into_iter().map(|p| (p.x, p.per_seed, p.mean, p.min, p.max)).collect();
        assert_eq!(
            got,
            [
                (0.0, vec![5.0, 4.0], 4.5, 4.0, 5.0),
                (1.0, vec![3.0, 4.0], 3.5, 3.0, 4.0),
                (2.0, vec![3.0, 1.0], 2.0, 1.0, 3.0),
                (3.0, vec![3.0, 1.0], 2.0, 1.0, 3.0),
            ],
            "trial 4 is past the end of the first curve"
        );
        // A curve whose first feasible trial comes later: rows start where every seed has one.
        let late = [(2.0, 7.0)];
        assert_eq!(band(&[&a[..], &late[..]]).iter().map(|p| (p.x, p.mean)).collect::<Vec<_>>(), [(2.0, 5.0)]);
        assert!(band(&[&a[..], &[]]).is_empty());
    }

    #[test]
    fn csv_rows_per_sampler_and_trial() {
        let run = |seed, curve: &[(f64, f64)]| SeedRun { seed, study: format!("s{seed}"), curve: curve.to_vec() };
        let runs = [
            SamplerRuns { sampler: "tpe".into(), runs: vec![run(1, &[(0.0, 2.0), (1.0, 1.0)]), run(2, &[(0.0, 4.0), (1.0, 4.0)])] },
            SamplerRuns { sampler: "random".into(), runs: vec![run(1, &[(0.0, 3.0)]), run(2, &[(0.0, 1.0)])] },
        ];
        assert_eq!(
            compare_csv(&runs),
            "sampler,trial,seed_1,seed_2,mean,min,max\ntpe,0,2,4,3,2,4\ntpe,1,1,4,2.5,1,4\nrandom,0,3,1,2,1,3\n"
        );
        let j = compare_json(&runs, "best value so far");
        assert_eq!(j["seeds"], json!([1, 2]));
        assert_eq!(j["samplers"][0]["final"], json!({"trial": 1.0, "mean": 2.5, "min": 1.0, "max": 4.0}));
        assert_eq!(j["samplers"][1]["studies"][1], json!({"seed": 2, "study": "s2"}));
    }
}
