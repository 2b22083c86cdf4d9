//! From metrics to objective values (doc/mase-semantics.md#search-objectives): each configured metric is
//! multiplied by its `scale` (whatever its direction, as MASE does), metrics are taken in
//! alphabetical order, and either summed into one objective (`sum_scaled_metrics = true`, with
//! `setup.direction`) or kept as one objective each with its own direction. Constraints bound raw
//! metric values; a trial that violates one is infeasible and never "best".

use crate::trial::Metrics;
use crate::{Direction, Result, SearchError};

/// A metric of `[search.strategy.metrics]`.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricSpec {
    pub name: String,
    pub scale: f64,
    /// The metric's own direction (used when objectives are not summed).
    pub direction: Direction,
}

/// A bound on a raw metric value (`[search.strategy.constraints] accuracy = { min = 0.9 }`).
#[derive(Clone, Debug, PartialEq)]
pub struct Constraint {
    pub metric: String,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// The objectives of a study.
#[derive(Clone, Debug, PartialEq)]
pub struct Objective {
    /// Sorted by name.
    pub metrics: Vec<MetricSpec>,
    /// `Some(direction)`: one objective, the sum of the scaled metrics.
    pub sum_scaled: Option<Direction>,
    pub constraints: Vec<Constraint>,
}

/// Values and bookkeeping of one evaluated trial.
#[derive(Clone, Debug, PartialEq)]
pub struct Scored {
    pub values: Vec<f64>,
    pub scaled: Metrics,
    pub violation: f64,
}

impl Objective {
    /// Builds an objective, sorting metrics by name as MASE does.
    pub fn new(mut metrics: Vec<MetricSpec>, sum_scaled: Option<Direction>, constraints: Vec<Constraint>) -> Objective {
        metrics.sort_by(|a, b| a.name.cmp(&b.name));
        Objective { metrics, sum_scaled, constraints }
    }

    /// One direction per objective value.
    pub fn directions(&self) -> Vec<Direction> {
        match self.sum_scaled {
            Some(d) => vec![d],
            None => self.metrics.iter().map(|m| m.direction).collect(),
        }
    }

    /// Names of the objective values: `value` for a sum, else the metric names.
    pub fn value_names(&self) -> Vec<String> {
        match self.sum_scaled {
            Some(_) => vec!["value".into()],
            None => self.metrics.iter().map(|m| m.name.clone()).collect(),
        }
    }

    /// Whether there is more than one objective.
    pub fn is_multi(&self) -> bool {
        self.directions().len() > 1
    }

    /// Every metric name the objective and the constraints read.
    pub fn required_metrics(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.metrics.iter().map(|m| m.name.as_str()).collect();
        for c in &self.constraints {
            if !v.contains(&c.metric.as_str()) {
                v.push(&c.metric);
            }
        }
        v
    }

    /// Scores the metrics a trial's runners reported.
    pub fn score(&self, metrics: &Metrics) -> Result<Scored> {
        let get = |name: &str| {
            metrics.get(name).copied().ok_or_else(|| SearchError::MetricWithoutRunner {
                metric: name.to_string(),
                available: metrics.keys().cloned().collect::<Vec<_>>().join(", "),
            })
        };
        let mut scaled = Metrics::new();
        for m in &self.metrics {
            scaled.insert(m.name.clone(), m.scale * get(&m.name)?);
        }
        let values = match self.sum_scaled {
            Some(_) => vec![scaled.values().sum()],
            None => scaled.values().copied().collect(),
        };
        let mut violation = 0.0;
        for c in &self.constraints {
            let v = get(&c.metric)?;
            violation += c.min.map_or(0.0, |lo| (lo - v).max(0.0)) + c.max.map_or(0.0, |hi| (v - hi).max(0.0));
        }
        Ok(Scored { values, scaled, violation })
    }

    /// The values as losses (smaller is better), for samplers and Pareto fronts.
    pub fn losses(&self, values: &[f64]) -> Vec<f64> {
        self.directions().iter().zip(values).map(|(d, &v)| d.loss(v)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_order_sum_and_constraints() {
        let m = |name: &str, scale, direction| MetricSpec { name: name.into(), scale, direction };
        let metrics: Metrics =
            [("loss".to_string(), 1.5), ("average_bitwidth".to_string(), 4.0), ("accuracy".to_string(), 0.8)].into_iter().collect();
        let multi =
            Objective::new(vec![m("average_bitwidth", 0.2, Direction::Minimize), m("accuracy", 1.0, Direction::Maximize)], None, vec![]);
        let s = multi.score(&metrics).unwrap();
        assert_eq!(s.values.len(), 2);
        assert!((s.values[0] - 0.8).abs() < 1e-12 && (s.values[1] - 0.8).abs() < 1e-12, "alphabetical: accuracy, then 0.2 * 4");
        assert_eq!(multi.directions(), [Direction::Maximize, Direction::Minimize]);
        assert_eq!(multi.losses(&s.values), [-0.8, 0.8]);
        let sum = Objective::new(
            vec![m("accuracy", 1.0, Direction::Maximize), m("average_bitwidth", -0.1, Direction::Minimize)],
            Some(Direction::Maximize),
            vec![Constraint { metric: "accuracy".into(), min: Some(0.9), max: None }],
        );
        let s = sum.score(&metrics).unwrap();
        assert!((s.values[0] - 0.4).abs() < 1e-12 && (s.violation - 0.1).abs() < 1e-12, "{s:?}");
        let missing = Objective::new(vec![m("bitops", 1.0, Direction::Minimize)], None, vec![]);
        assert!(missing.score(&metrics).unwrap_err().to_string().contains("bitops"));
    }
}
