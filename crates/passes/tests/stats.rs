//! Every statistic of the profiler against hand computations, per tensor, per channel and
//! elementwise (doc/mase-semantics.md#statistics).

use mase_passes::stats::stat::Stat;
use serde_json::{json, Value};

/// Compares JSON trees, numbers to 1e-9 relative.
fn approx(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            (a - b).abs() <= 1e-9 * b.abs().max(1.0)
        }
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| approx(x, y)),
        (Value::Object(a), Value::Object(b)) => a.len() == b.len() && b.iter().all(|(k, y)| a.get(k).is_some_and(|x| approx(x, y))),
        (a, b) => a == b,
    }
}

/// The weight `[[1, -2, 3], [4, 5, -6]]` as one sample.
const W: [f32; 6] = [1.0, -2.0, 3.0, 4.0, 5.0, -6.0];

/// Samples given to a statistic: shape and values of each.
type Samples<'a> = &'a [(&'a [usize], &'a [f32])];

fn run(name: &str, kwargs: Value, samples: Samples<'_>) -> Value {
    let mut s = Stat::new(name, &kwargs).unwrap_or_else(|e| panic!("{name}: {e}"));
    for (shape, x) in samples {
        s.update(shape, x).unwrap();
    }
    s.compute()
}

#[test]
fn statistics_match_hand_computation() {
    let w: Samples<'_> = &[(&[2, 3], &W)];
    // Two activation samples [1, 3]: a = [1, 2, 3], b = [3, 2, -1].
    let acts: Samples<'_> = &[(&[1, 3], &[1.0, 2.0, 3.0]), (&[1, 3], &[3.0, 2.0, -1.0])];
    // Sums over W: sum 5, sum of squares 91, sum of |x| 21; mean 5/6.
    let mean = 5.0 / 6.0;
    let ss = 91.0 - 6.0 * mean * mean;
    let var_unb: f64 = ss / 5.0;
    let sigma = var_unb.sqrt();
    let cases: Vec<(&str, Value, Samples<'_>, Value)> = vec![
        // Per tensor.
        ("variance_online", json!({"dims": "all"}), w, json!({"mean": mean, "variance": ss / 6.0, "count": 6})),
        ("variance_precise", json!({"dims": "all", "device": "cpu"}), w, json!({"mean": mean, "variance": var_unb, "count": 6})),
        ("range_min_max", json!({"dims": "all"}), w, json!({"min": -6.0, "max": 5.0, "range": 11.0, "count": 6})),
        ("range_min_max", json!({"dims": "all", "abs": true}), w, json!({"min": 1.0, "max": 6.0, "range": 5.0, "count": 6})),
        ("abs_mean", json!({}), w, json!({"abs_mean": 3.5, "count": 6})),
        // Sorted -6, -2, 1, 3, 4, 5: q = 0.75 sits at 3.75 (3 + 0.75), q = 0.25 at 1.25 (-2 + 0.25 * 3).
        ("range_quantile", json!({"dims": "all", "quantile": 0.75}), w, json!({"min": -1.25, "max": 3.75, "range": 5.0, "count": 6})),
        (
            "range_n_sigma",
            json!({"var_mode": "precise", "num_sigma": 2}),
            w,
            json!({"min": mean - 2.0 * sigma, "max": mean + 2.0 * sigma, "range": 4.0 * sigma, "count": 6}),
        ),
        // MASE crashes in online mode; here it uses the population variance.
        (
            "range_n_sigma",
            json!({"var_mode": "online", "num_sigma": 1}),
            w,
            json!({"min": mean - (ss / 6.0).sqrt(), "max": mean + (ss / 6.0).sqrt(), "range": 2.0 * (ss / 6.0).sqrt(), "count": 6}),
        ),
        // Per output channel of W (reduce dim 1): rows [1, -2, 3] and [4, 5, -6].
        ("variance_online", json!({"dims": [1]}), w, json!({"mean": [2.0 / 3.0, 1.0], "variance": [38.0 / 9.0, 74.0 / 3.0], "count": 3})),
        ("variance_precise", json!({"dims": [-1]}), w, json!({"mean": [2.0 / 3.0, 1.0], "variance": [19.0 / 3.0, 37.0], "count": 3})),
        ("range_min_max", json!({"dims": [1]}), w, json!({"min": [-2.0, -6.0], "max": [3.0, 5.0], "range": [5.0, 11.0], "count": 3})),
        ("abs_mean", json!({"dims": [1]}), w, json!({"abs_mean": [2.0, 5.0], "count": 3})),
        // Rows sorted: [-2, 1, 3] and [-6, 4, 5]; q = 0.5 is the middle value.
        (
            "range_quantile",
            json!({"dims": [1], "quantile": 0.5}),
            w,
            json!({"min": [1.0, 4.0], "max": [1.0, 4.0], "range": [0.0, 0.0], "count": 3}),
        ),
        // Per input column (reduce dim 0): [1, 4], [-2, 5], [3, -6].
        (
            "range_min_max",
            json!({"dims": [0]}),
            w,
            json!({"min": [1.0, -2.0, -6.0], "max": [4.0, 5.0, 3.0], "range": [3.0, 7.0, 9.0], "count": 2}),
        ),
        // Per tensor over two samples: values 1, 2, 3, 3, 2, -1 (sum 10, squares 28).
        (
            "variance_online",
            json!({"dims": "all"}),
            acts,
            json!({"mean": 10.0 / 6.0, "variance": 28.0 / 6.0 - (10.0f64 / 6.0).powi(2), "count": 6}),
        ),
        ("variance_precise", json!({"dims": "all"}), acts, json!({"mean": 10.0 / 6.0, "variance": (28.0 - 100.0 / 6.0) / 5.0, "count": 6})),
        // Per channel of activations (reduce the leading 1 with the samples): channels [1, 3], [2, 2], [3, -1].
        ("variance_online", json!({"dims": [0]}), acts, json!({"mean": [2.0, 2.0, 1.0], "variance": [1.0, 0.0, 4.0], "count": 2})),
        ("variance_precise", json!({"dims": [0]}), acts, json!({"mean": [2.0, 2.0, 1.0], "variance": [2.0, 0.0, 8.0], "count": 2})),
        ("abs_mean", json!({"dims": [0]}), acts, json!({"abs_mean": [2.0, 2.0, 2.0], "count": 2})),
        (
            "range_quantile",
            json!({"dims": [0], "quantile": 1.0}),
            acts,
            json!({"min": [1.0, 2.0, -1.0], "max": [3.0, 2.0, 3.0], "range": [2.0, 0.0, 4.0], "count": 2}),
        ),
        // Elementwise (MASE's dims = None): one value per position of [1, 3].
        ("variance_online", json!({"dims": "none"}), acts, json!({"mean": [[2.0, 2.0, 1.0]], "variance": [[1.0, 0.0, 4.0]], "count": 2})),
        (
            "range_min_max",
            json!({"dims": "none"}),
            acts,
            json!({"min": [[1.0, 2.0, -1.0]], "max": [[3.0, 2.0, 3.0]], "range": [[2.0, 0.0, 4.0]], "count": 2}),
        ),
        (
            "range_n_sigma",
            json!({"dims": [0], "var_mode": "precise", "num_sigma": 1}),
            acts,
            json!({"min": [2.0 - 2f64.sqrt(), 2.0, 1.0 - 8f64.sqrt()], "max": [2.0 + 2f64.sqrt(), 2.0, 1.0 + 8f64.sqrt()], "range": [2.0 * 2f64.sqrt(), 0.0, 2.0 * 8f64.sqrt()], "count": 2}),
        ),
        // Too few values: "NA" (MASE's rule), with real min and max for range_min_max.
        ("variance_online", json!({"dims": "none"}), &acts[..1], json!({"mean": "NA", "variance": "NA"})),
        ("abs_mean", json!({"dims": "none"}), &acts[..1], json!({"abs_mean": "NA"})),
        (
            "range_min_max",
            json!({"dims": "none"}),
            &acts[..1],
            json!({"min": [[1.0, 2.0, 3.0]], "max": [[1.0, 2.0, 3.0]], "range": "NA", "count": 1}),
        ),
        // record keeps the samples.
        (
            "record",
            json!({"add_new_dim_before_concat": true}),
            acts,
            json!({"data": [[[1.0, 2.0, 3.0]], [[3.0, 2.0, -1.0]]], "count": 2, "size_in_bytes": 24}),
        ),
        ("record", json!({}), acts, json!({"data": [[1.0, 2.0, 3.0], [3.0, 2.0, -1.0]], "count": 2, "size_in_bytes": 24})),
    ];
    for (name, kwargs, samples, want) in cases {
        let got = run(name, kwargs.clone(), samples);
        assert!(approx(&got, &want), "{name} {kwargs}: got {got}, want {want}");
    }
}

#[test]
fn bad_statistics_are_named() {
    let cases = [
        ("variance", json!({}), "unknown statistic `variance`"),
        ("range_quantile", json!({"quantile": 1.5}), "must lie in [0, 1]"),
        ("range_min_max", json!({"dimz": "all"}), "no option `dimz`"),
        ("range_n_sigma", json!({"var_mode": "exact"}), "var_mode"),
        ("abs_mean", json!({"dims": "some"}), "dims"),
    ];
    for (name, kwargs, want) in cases {
        let e = Stat::new(name, &kwargs).unwrap_err();
        assert!(e.contains(want), "{name}: {e}");
    }
    let mut s = Stat::new("variance_online", &json!({"dims": [-3]})).unwrap();
    assert!(s.update(&[2, 3], &W).unwrap_err().contains("out of range"));
    let mut s = Stat::new("variance_online", &json!({})).unwrap();
    s.update(&[2, 3], &W).unwrap();
    assert!(s.update(&[3, 2], &W).unwrap_err().contains("differs"));
}
