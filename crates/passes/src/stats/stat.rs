//! The statistics of MASE's profiler (`stat.py`, doc/mase-semantics.md#statistics), with exact formulas
//! and every `dims` mode working for every statistic.
//!
//! `dims` says over what a statistic is taken. A *sample* is one update: a whole weight tensor,
//! or one input of a batch with a leading dimension of 1 (`[1, C, ...]`).
//! - `"all"`: one value per tensor, over every element of every sample;
//! - `"none"` (MASE's `None`): one value per element position, over the samples;
//! - a list of dimensions: those are reduced (with the samples), the others kept — `[0]` on an
//!   activation `[1, C]` gives one value per channel, `[1]` on a weight `[O, I]` one per output
//!   (and, on its bias `[O]`, which has no dimension 1, one per element).
//!
//! Departures from MASE, each a fix:
//! - `variance_online` with `"all"` adds the batch's sum of squared deviations (Chan et al.); MASE
//!   adds the *unbiased* batch variance times the batch size, which overstates the variance;
//! - `range_n_sigma` works in `var_mode = "online"` (MASE raises) and per channel (MASE: scalars);
//! - list `dims` work for `variance_precise` and `range_min_max` (MASE raises);
//! - `count < 2` gives `"NA"` for every value of a statistic that needs two values.
//!
//! As in MASE, `variance_online` reports the population variance (divided by n) and
//! `variance_precise` the unbiased one (n - 1, `torch.var`); quantiles interpolate linearly
//! between order statistics (`torch.quantile`). Accumulation is in f64.

use serde_json::{json, Map, Value};

/// The statistic names, in the order the documentation lists them.
pub const STAT_NAMES: [&str; 7] =
    ["record", "variance_online", "variance_precise", "range_n_sigma", "range_min_max", "range_quantile", "abs_mean"];

/// Which elements a statistic groups together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dims {
    All,
    Elementwise,
    /// Dimensions to reduce (negative counts from the end); the rest are kept.
    Reduce(Vec<i64>),
}

impl Dims {
    fn parse(v: Option<&Value>) -> Result<Dims, String> {
        match v {
            None => Ok(Dims::All),
            Some(Value::Null) => Ok(Dims::Elementwise),
            Some(Value::String(s)) => match s.as_str() {
                "all" => Ok(Dims::All),
                "none" | "None" | "NA" | "elementwise" => Ok(Dims::Elementwise),
                other => Err(format!("`dims = \"{other}\"`: expected \"all\", \"none\" or a list of dimensions")),
            },
            Some(Value::Array(a)) => a
                .iter()
                .map(|d| d.as_i64().ok_or_else(|| format!("`dims` entry {d} is not an integer")))
                .collect::<Result<Vec<_>, _>>()
                .map(Dims::Reduce),
            Some(other) => Err(format!("`dims = {other}`: expected \"all\", \"none\" or a list of dimensions")),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Record,
    VarianceOnline,
    VariancePrecise,
    RangeNSigma,
    RangeMinMax,
    RangeQuantile,
    AbsMean,
}

/// How a statistic maps a sample's elements to output positions.
#[derive(Clone, Debug, PartialEq)]
struct Layout {
    sample_shape: Vec<usize>,
    kept_shape: Vec<usize>,
    /// Output position of each element of a sample.
    pos: Vec<usize>,
    positions: usize,
}

impl Layout {
    fn new(shape: &[usize], dims: &Dims) -> Result<Layout, String> {
        let numel: usize = shape.iter().product();
        match dims {
            Dims::All => Ok(Layout { sample_shape: shape.to_vec(), kept_shape: vec![], pos: vec![0; numel], positions: 1 }),
            Dims::Elementwise => {
                Ok(Layout { sample_shape: shape.to_vec(), kept_shape: shape.to_vec(), pos: (0..numel).collect(), positions: numel })
            }
            Dims::Reduce(ds) => {
                let rank = shape.len() as i64;
                let mut reduce = vec![false; shape.len()];
                for &d in ds {
                    // A dimension the tensor does not have reduces nothing: `dims = [1]` is
                    // per row of a weight and per element of its bias.
                    if d >= rank {
                        continue;
                    }
                    let r = if d < 0 { d + rank } else { d };
                    if r < 0 {
                        return Err(format!("`dims` entry {d} is out of range for a sample of shape {shape:?}"));
                    }
                    reduce[r as usize] = true;
                }
                let kept: Vec<usize> = (0..shape.len()).filter(|&i| !reduce[i]).collect();
                let kept_shape: Vec<usize> = kept.iter().map(|&i| shape[i]).collect();
                let positions: usize = kept_shape.iter().product();
                let mut pos = vec![0; numel];
                let mut idx = vec![0usize; shape.len()];
                for p in pos.iter_mut() {
                    *p = kept.iter().fold(0, |acc, &i| acc * shape[i] + idx[i]);
                    for d in (0..shape.len()).rev() {
                        idx[d] += 1;
                        if idx[d] < shape[d] {
                            break;
                        }
                        idx[d] = 0;
                    }
                }
                Ok(Layout { sample_shape: shape.to_vec(), kept_shape, pos, positions })
            }
        }
    }
}

/// Running count, mean and sum of squared deviations of one position.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Moments {
    n: f64,
    mean: f64,
    m2: f64,
}

impl Moments {
    /// Chan et al.'s combination of two groups.
    fn merge(&mut self, b: Moments) {
        if b.n == 0.0 {
            return;
        }
        let n = self.n + b.n;
        let delta = b.mean - self.mean;
        self.mean += delta * b.n / n;
        self.m2 += b.m2 + delta * delta * self.n * b.n / n;
        self.n = n;
    }
}

/// One statistic being collected.
#[derive(Clone, Debug, PartialEq)]
pub struct Stat {
    name: String,
    kind: Kind,
    dims: Dims,
    abs: bool,
    quantile: f64,
    num_sigma: f64,
    precise: bool,
    add_new_dim: bool,
    layout: Option<Layout>,
    samples: usize,
    moments: Vec<Moments>,
    values: Vec<Vec<f64>>,
    min: Vec<f64>,
    max: Vec<f64>,
    record: Vec<f32>,
}

fn boolean(m: &Map<String, Value>, k: &str, default: bool) -> Result<bool, String> {
    match m.get(k) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::Number(n)) if n.as_i64() == Some(0) || n.as_i64() == Some(1) => Ok(n.as_i64() == Some(1)),
        Some(v) => Err(format!("`{k} = {v}`: expected true or false")),
    }
}

fn number(m: &Map<String, Value>, k: &str, default: f64) -> Result<f64, String> {
    match m.get(k) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v.as_f64().ok_or_else(|| format!("`{k} = {v}`: expected a number")),
    }
}

impl Stat {
    /// A statistic from its name and MASE keyword arguments (`dims`, `abs`, `quantile`,
    /// `num_sigma`, `var_mode`, `add_new_dim_before_concat`; `device` is accepted and ignored).
    pub fn new(name: &str, kwargs: &Value) -> Result<Stat, String> {
        let kind = match name {
            "record" => Kind::Record,
            "variance_online" => Kind::VarianceOnline,
            "variance_precise" => Kind::VariancePrecise,
            "range_n_sigma" => Kind::RangeNSigma,
            "range_min_max" => Kind::RangeMinMax,
            "range_quantile" => Kind::RangeQuantile,
            "abs_mean" => Kind::AbsMean,
            other => return Err(format!("unknown statistic `{other}`; known: {}", STAT_NAMES.join(", "))),
        };
        let empty = Map::new();
        let m = match kwargs {
            Value::Object(m) => m,
            Value::Null => &empty,
            other => return Err(format!("statistic `{name}`: expected a table of options, got {other}")),
        };
        let allowed: &[&str] = match kind {
            Kind::Record => &["device", "add_new_dim_before_concat"],
            Kind::VarianceOnline | Kind::VariancePrecise | Kind::AbsMean => &["device", "dims"],
            Kind::RangeNSigma => &["device", "dims", "abs", "var_mode", "num_sigma"],
            Kind::RangeMinMax => &["device", "dims", "abs"],
            Kind::RangeQuantile => &["device", "dims", "abs", "quantile"],
        };
        if let Some(k) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(format!("statistic `{name}` has no option `{k}` (options: {})", allowed.join(", ")));
        }
        let precise = match m.get("var_mode").and_then(Value::as_str).unwrap_or("online") {
            "online" => false,
            "precise" => true,
            other => return Err(format!("`var_mode = \"{other}\"`: expected \"online\" or \"precise\"")),
        };
        let quantile = number(m, "quantile", 0.975)?;
        if !(0.0..=1.0).contains(&quantile) {
            return Err(format!("`quantile = {quantile}`: must lie in [0, 1]"));
        }
        Ok(Stat {
            name: name.to_string(),
            kind,
            dims: Dims::parse(m.get("dims"))?,
            abs: boolean(m, "abs", false)?,
            quantile,
            num_sigma: number(m, "num_sigma", 3.0)?,
            precise,
            add_new_dim: boolean(m, "add_new_dim_before_concat", false)?,
            layout: None,
            samples: 0,
            moments: Vec::new(),
            values: Vec::new(),
            min: Vec::new(),
            max: Vec::new(),
            record: Vec::new(),
        })
    }

    /// The statistic's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Adds one sample of `shape`. Every sample must have the shape of the first.
    pub fn update(&mut self, shape: &[usize], x: &[f32]) -> Result<(), String> {
        if shape.iter().product::<usize>() != x.len() {
            return Err(format!("sample of shape {shape:?} has {} values", x.len()));
        }
        let layout = match &self.layout {
            Some(l) if l.sample_shape != shape => {
                return Err(format!("sample shape {shape:?} differs from the first sample's {:?}", l.sample_shape))
            }
            Some(l) => l.clone(),
            None => {
                let dims = if self.kind == Kind::Record { Dims::All } else { self.dims.clone() };
                let l = Layout::new(shape, &dims)?;
                let k = l.positions;
                self.moments = vec![Moments::default(); k];
                self.values = vec![Vec::new(); k];
                self.min = vec![f64::INFINITY; k];
                self.max = vec![f64::NEG_INFINITY; k];
                self.layout = Some(l.clone());
                l
            }
        };
        self.samples += 1;
        let val = |v: f32| {
            let v = v as f64;
            if self.abs || self.kind == Kind::AbsMean {
                v.abs()
            } else {
                v
            }
        };
        match self.kind {
            Kind::Record => self.record.extend_from_slice(x),
            Kind::RangeMinMax => {
                for (&p, &v) in layout.pos.iter().zip(x) {
                    let v = val(v);
                    self.min[p] = self.min[p].min(v);
                    self.max[p] = self.max[p].max(v);
                }
                // The count is kept in `moments[..].n` so every statistic counts the same way.
                for (&p, _) in layout.pos.iter().zip(x) {
                    self.moments[p].n += 1.0;
                }
            }
            Kind::VariancePrecise | Kind::RangeQuantile => {
                for (&p, &v) in layout.pos.iter().zip(x) {
                    self.values[p].push(val(v));
                }
            }
            Kind::RangeNSigma if self.precise => {
                for (&p, &v) in layout.pos.iter().zip(x) {
                    self.values[p].push(val(v));
                }
            }
            Kind::VarianceOnline | Kind::RangeNSigma | Kind::AbsMean => {
                // Two passes over the sample give its exact moments, which are then merged.
                let k = layout.positions;
                let mut sum = vec![0.0f64; k];
                let mut n = vec![0.0f64; k];
                for (&p, &v) in layout.pos.iter().zip(x) {
                    sum[p] += val(v);
                    n[p] += 1.0;
                }
                let mean: Vec<f64> = sum.iter().zip(&n).map(|(s, n)| if *n > 0.0 { s / n } else { 0.0 }).collect();
                let mut m2 = vec![0.0f64; k];
                for (&p, &v) in layout.pos.iter().zip(x) {
                    let d = val(v) - mean[p];
                    m2[p] += d * d;
                }
                for p in 0..k {
                    self.moments[p].merge(Moments { n: n[p], mean: mean[p], m2: m2[p] });
                }
            }
        }
        Ok(())
    }

    /// The statistic's values (MASE's `export()`): scalars for `"all"`, nested lists in the kept
    /// shape otherwise; `"NA"` where fewer than two values were seen.
    pub fn compute(&self) -> Value {
        let Some(layout) = &self.layout else {
            return match self.kind {
                Kind::AbsMean => json!({"abs_mean": "NA"}),
                Kind::VarianceOnline => json!({"mean": "NA", "variance": "NA"}),
                _ => json!({"count": 0}),
            };
        };
        let shape = &layout.kept_shape;
        let out = |v: &[f64]| nest(v, shape);
        let counts: Vec<f64> = match self.kind {
            Kind::VariancePrecise | Kind::RangeQuantile => self.values.iter().map(|v| v.len() as f64).collect(),
            Kind::RangeNSigma if self.precise => self.values.iter().map(|v| v.len() as f64).collect(),
            _ => self.moments.iter().map(|m| m.n).collect(),
        };
        let count = counts.first().copied().unwrap_or(0.0);
        let count_json = Value::from(count as u64);
        match self.kind {
            Kind::Record => {
                let mut data_shape = if self.add_new_dim { vec![self.samples] } else { vec![] };
                match (self.add_new_dim, layout.sample_shape.split_first()) {
                    (true, _) => data_shape.extend(&layout.sample_shape),
                    (false, Some((first, rest))) => {
                        data_shape.push(first * self.samples);
                        data_shape.extend(rest);
                    }
                    (false, None) => data_shape.push(self.samples),
                }
                let data: Vec<f64> = self.record.iter().map(|&v| v as f64).collect();
                json!({"data": nest(&data, &data_shape), "count": self.samples, "size_in_bytes": self.record.len() * 4})
            }
            Kind::VarianceOnline => {
                if count < 2.0 {
                    return json!({"mean": "NA", "variance": "NA"});
                }
                let mean: Vec<f64> = self.moments.iter().map(|m| m.mean).collect();
                let var: Vec<f64> = self.moments.iter().map(|m| m.m2 / m.n).collect();
                json!({"mean": out(&mean), "variance": out(&var), "count": count_json})
            }
            Kind::VariancePrecise => {
                if count < 2.0 {
                    return json!({"mean": "NA", "variance": "NA", "count": count_json});
                }
                let (mean, var): (Vec<f64>, Vec<f64>) = self.values.iter().map(|v| mean_var_unbiased(v)).unzip();
                json!({"mean": out(&mean), "variance": out(&var), "count": count_json})
            }
            Kind::RangeNSigma => {
                if count < 2.0 {
                    return json!({"min": "NA", "max": "NA", "range": "NA", "count": count_json});
                }
                let (mean, var): (Vec<f64>, Vec<f64>) = if self.precise {
                    self.values.iter().map(|v| mean_var_unbiased(v)).unzip()
                } else {
                    self.moments.iter().map(|m| (m.mean, m.m2 / m.n)).unzip()
                };
                let n = self.num_sigma;
                let lo: Vec<f64> = mean.iter().zip(&var).map(|(m, v)| m - n * v.sqrt()).collect();
                let hi: Vec<f64> = mean.iter().zip(&var).map(|(m, v)| m + n * v.sqrt()).collect();
                let range: Vec<f64> = lo.iter().zip(&hi).map(|(a, b)| b - a).collect();
                json!({"min": out(&lo), "max": out(&hi), "range": out(&range), "count": count_json})
            }
            Kind::RangeMinMax => {
                let range: Vec<f64> = self.min.iter().zip(&self.max).map(|(a, b)| b - a).collect();
                let range = if count < 2.0 { Value::from("NA") } else { out(&range) };
                json!({"min": out(&self.min), "max": out(&self.max), "range": range, "count": count_json})
            }
            Kind::RangeQuantile => {
                if count < 2.0 {
                    return json!({"min": "NA", "max": "NA", "range": "NA", "count": count_json});
                }
                let q = self.quantile;
                let (lo, hi): (Vec<f64>, Vec<f64>) = self.values.iter().map(|v| quantiles(v, 1.0 - q, q)).unzip();
                let range: Vec<f64> = lo.iter().zip(&hi).map(|(a, b)| b - a).collect();
                json!({"min": out(&lo), "max": out(&hi), "range": out(&range), "count": count_json})
            }
            Kind::AbsMean => {
                if count < 2.0 {
                    return json!({"abs_mean": "NA"});
                }
                let m: Vec<f64> = self.moments.iter().map(|m| m.mean).collect();
                json!({"abs_mean": out(&m), "count": count_json})
            }
        }
    }
}

/// Mean and unbiased variance (two passes).
fn mean_var_unbiased(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let ss: f64 = v.iter().map(|x| (x - mean) * (x - mean)).sum();
    (mean, ss / (n - 1.0))
}

/// The `a` and `b` quantiles with linear interpolation (`torch.quantile`'s default).
fn quantiles(v: &[f64], a: f64, b: f64) -> (f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(|x, y| x.total_cmp(y));
    let q = |p: f64| {
        let pos = p * (s.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
    };
    (q(a), q(b))
}

/// Values as a scalar (empty shape) or nested lists of `shape`.
fn nest(v: &[f64], shape: &[usize]) -> Value {
    let num = |x: f64| serde_json::Number::from_f64(x).map(Value::Number).unwrap_or(Value::Null);
    match shape.split_first() {
        None => v.first().map_or(Value::Null, |&x| num(x)),
        Some((&n, rest)) => {
            let step: usize = rest.iter().product();
            Value::Array((0..n).map(|i| nest(&v[i * step..(i + 1) * step], rest)).collect())
        }
    }
}

/// A set of statistics collected on one tensor (MASE's Weight/ActStatCollection).
#[derive(Clone, Debug, PartialEq)]
pub struct StatCollection {
    pub stats: Vec<Stat>,
}

impl StatCollection {
    /// One fresh statistic per entry of `spec` (`{name: {kwargs}}`).
    pub fn new(spec: &Map<String, Value>) -> Result<StatCollection, String> {
        Ok(StatCollection { stats: spec.iter().map(|(k, v)| Stat::new(k, v)).collect::<Result<_, _>>()? })
    }

    /// Adds one sample to every statistic.
    pub fn update(&mut self, shape: &[usize], x: &[f32]) -> Result<(), String> {
        self.stats.iter_mut().try_for_each(|s| s.update(shape, x))
    }

    /// `{stat_name: {...}}`.
    pub fn compute(&self) -> Value {
        Value::Object(self.stats.iter().map(|s| (s.name.clone(), s.compute())).collect())
    }
}
