//! One measurement and its JSON line, with the keys of `shared/reference/torch_bench.py`.

use serde_json::{json, Value};

/// The medians of one case.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub model: String,
    pub batch: usize,
    pub threads: usize,
    /// The convolution algorithm of the executor.
    pub conv: mase_runtime::ConvAlgo,
    /// Whether the executor fused epilogues.
    pub fusion: mase_runtime::Fusion,
    /// Trainable scalars of the model.
    pub params: usize,
    /// Median time of one training step (forward, cross-entropy, backward, Adam), microseconds.
    pub train_step_us: f64,
    /// Median time of one eval-mode forward pass over a batch, microseconds.
    pub eval_batch_us: f64,
    /// Loss of the last timed step, a sanity check that the steps did real work.
    pub last_loss: f32,
}

impl Measurement {
    /// Training throughput: samples in a batch over the median step time.
    pub fn train_samples_per_s(&self) -> f64 {
        per_second(self.batch, self.train_step_us)
    }

    /// Evaluation throughput: samples in a batch over the median eval time.
    pub fn eval_samples_per_s(&self) -> f64 {
        per_second(self.batch, self.eval_batch_us)
    }

    /// The JSON object printed by `--json` (`framework` is `mase-rs`).
    pub fn to_json(&self) -> Value {
        json!({
            "framework": "mase-rs",
            "model": self.model,
            "batch": self.batch,
            "threads": self.threads,
            "conv": format!("{:?}", self.conv).to_lowercase(),
            "fusion": format!("{:?}", self.fusion).to_lowercase(),
            "params": self.params,
            "train_step_us": self.train_step_us,
            "eval_batch_us": self.eval_batch_us,
            "train_samples_per_s": self.train_samples_per_s(),
            "eval_samples_per_s": self.eval_samples_per_s(),
            "final_loss": self.last_loss,
        })
    }

    /// One aligned line for a terminal.
    pub fn to_line(&self) -> String {
        format!(
            "{:<16} batch {:>4}  threads {}  train {:>10.1} us/step {:>12.0} samples/s   eval {:>10.1} us/batch {:>12.0} samples/s",
            self.model,
            self.batch,
            self.threads,
            self.train_step_us,
            self.train_samples_per_s(),
            self.eval_batch_us,
            self.eval_samples_per_s()
        )
    }
}

fn per_second(batch: usize, us: f64) -> f64 {
    if us > 0.0 {
        batch as f64 / us * 1e6
    } else {
        f64::INFINITY
    }
}

/// Median of the samples (the mean of the two middle ones for an even count; NaN when empty).
/// NaNs sort last, so a stray NaN cannot move the median of otherwise finite timings much.
pub fn median(samples: &[f64]) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_cases() {
        // One line per case: samples, expected median.
        let cases: [(&[f64], f64); 4] =
            [(&[3.0], 3.0), (&[5.0, 1.0, 3.0], 3.0), (&[4.0, 1.0, 3.0, 2.0], 2.5), (&[1.0, 9.0, 2.0, 8.0, 100.0], 8.0)];
        for (s, m) in cases {
            assert_eq!(median(s), m, "{s:?}");
        }
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn json_line_has_the_reference_keys_and_rates() {
        let m = Measurement {
            model: "jsc-toy".into(),
            batch: 256,
            threads: 2,
            conv: mase_runtime::ConvAlgo::Exact,
            fusion: mase_runtime::Fusion::Off,
            params: 327,
            train_step_us: 128.0,
            eval_batch_us: 16.0,
            last_loss: 1.5,
        };
        let j = m.to_json();
        for key in ["train_step_us", "eval_batch_us", "train_samples_per_s", "eval_samples_per_s", "model", "batch", "threads"] {
            assert!(j.get(key).is_some(), "missing {key}");
        }
        assert_eq!(j["train_samples_per_s"].as_f64(), Some(2_000_000.0));
        assert_eq!(j["eval_samples_per_s"].as_f64(), Some(16_000_000.0));
        assert_eq!(j["framework"], "mase-rs");
        assert_eq!(j["conv"], "exact");
        assert_eq!(j["fusion"], "off");
        assert!(serde_json::to_string(&j).expect("serialisable").starts_with("{\"framework\":\"mase-rs\",\"model\":\"jsc-toy\""));
    }
}
