//! What a pass sees besides the graph: the parameters, where input samples come from, where
//! reports go, and the graph as it was before the first quantization (for the summary).

use crate::{PassError, Result};
use mase_io::{Dataset, Splits};
use mase_ir::{ArgMeta, Graph, Op, ParamStore, Rng};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where passes that run the model (statistics, latency, verification) take their inputs.
#[derive(Clone, Debug, Default)]
pub enum InputSource {
    /// The splits of a loaded data set.
    Data(Box<Splits>),
    /// Seeded standard-normal samples of this per-sample shape (MASE's dummy input when there
    /// is no data set at hand).
    Random { sample_shape: Vec<usize> },
    /// No samples: passes that need them fail with [`PassError::NoData`].
    #[default]
    None,
}

/// A data split, with MASE's data-loader names accepted as aliases.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    #[default]
    #[serde(alias = "train_dataloader")]
    Train,
    #[serde(alias = "validation", alias = "val_dataloader")]
    Val,
    #[serde(alias = "test_dataloader")]
    Test,
}

impl Split {
    /// The split's name as written in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Val => "val",
            Split::Test => "test",
        }
    }
}

/// One batch of inputs: values in row-major order of `shape` (`[N, ...sample]`) and labels
/// (empty for random inputs).
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    pub x: Vec<f32>,
    pub shape: Vec<usize>,
    pub labels: Vec<u32>,
}

/// The state passes share while a pipeline runs.
#[derive(Clone, Debug)]
pub struct PassContext {
    /// Parameters and buffers of the model, by state-dict name.
    pub params: ParamStore,
    pub inputs: InputSource,
    /// Folder for the files reports write (`<project>/software/transform`); `None` writes nothing
    /// unless a pass is given an explicit path.
    pub out_dir: Option<PathBuf>,
    /// Batch size of the dummy input of `add_common_metadata` and of the batches passes run.
    pub batch_size: usize,
    /// Seed of random inputs and of anything else a pass draws.
    pub seed: u64,
    /// Kernel threads of the executors passes build (0 = all cores).
    pub threads: usize,
    /// The graph before the first `quantize` pass of the pipeline, kept for
    /// `summarize_quantization`.
    pub original: Option<Graph>,
}

impl PassContext {
    /// A context with these parameters, no inputs, no output folder, batch size 8 and seed 0.
    pub fn new(params: ParamStore) -> PassContext {
        PassContext { params, inputs: InputSource::None, out_dir: None, batch_size: 8, seed: 0, threads: 1, original: None }
    }

    /// The shape of one input sample: the data set's, the random source's, the input node's
    /// metadata, or what the first layer reading the input implies.
    pub fn sample_shape(&self, graph: &Graph) -> Option<Vec<usize>> {
        match &self.inputs {
            InputSource::Data(s) => return Some(s.info.sample_shape.clone()),
            InputSource::Random { sample_shape } => return Some(sample_shape.clone()),
            InputSource::None => {}
        }
        let input = *graph.inputs().first()?;
        if let Some(ArgMeta::Tensor(t)) = graph.node(input).meta.common.results.get("data_out_0") {
            if t.shape.len() > 1 {
                return Some(t.shape[1..].to_vec());
            }
        }
        graph.users(input).into_iter().find_map(|u| match &graph.node(u).op {
            Op::Linear { in_features, .. } => Some(vec![*in_features]),
            Op::BatchNorm1d(s) => Some(vec![s.num_features]),
            _ => None,
        })
    }

    /// The shape of one sample of every graph input, in order: [`PassContext::sample_shape`]
    /// for a graph with one input; for several, each placeholder's metadata (`data_out_0`,
    /// recorded by the tracer, the ONNX importer or `add_common_metadata`).
    pub fn sample_shapes(&self, graph: &Graph) -> Option<Vec<Vec<usize>>> {
        let inputs = graph.inputs();
        if inputs.len() == 1 {
            return self.sample_shape(graph).map(|s| vec![s]);
        }
        inputs
            .iter()
            .map(|&i| match graph.node(i).meta.common.results.get("data_out_0") {
                Some(ArgMeta::Tensor(t)) if !t.shape.is_empty() => Some(t.shape[1..].to_vec()),
                _ => None,
            })
            .collect()
    }

    /// Refuses, for pass `pass`, a graph with several inputs (passes that run the model on the
    /// data set's batches, or rebuild it for one input shape).
    pub fn require_one_input(pass: &str, graph: &Graph) -> Result<()> {
        match graph.inputs().len() {
            1 => Ok(()),
            inputs => Err(PassError::SeveralInputs { pass: pass.into(), inputs }),
        }
    }

    /// The first `num_samples` samples of `split` (or seeded random samples), cut into batches
    /// of `batch_size`. Taking the first samples in order, rather than a shuffled draw as
    /// MASE's data loader does, makes statistics reproducible run to run.
    pub fn batches(&self, pass: &str, graph: &Graph, split: Split, num_samples: usize, batch_size: usize) -> Result<Vec<Batch>> {
        PassContext::require_one_input(pass, graph)?;
        let bs = batch_size.max(1);
        match &self.inputs {
            InputSource::Data(s) => {
                let data: &Dataset = match split {
                    Split::Train => &s.train,
                    Split::Val => &s.val,
                    Split::Test => &s.test,
                };
                if data.is_empty() {
                    return Err(PassError::NoData {
                        pass: pass.into(),
                        reason: format!("the {} split of `{}` is empty", split.as_str(), s.info.name),
                    });
                }
                let n = num_samples.min(data.len());
                let idx: Vec<usize> = (0..n).collect();
                Ok(idx
                    .chunks(bs)
                    .map(|c| {
                        let (mut x, mut y) = (Vec::new(), Vec::new());
                        data.gather(c, &mut x, &mut y);
                        let mut shape = vec![c.len()];
                        shape.extend(&data.sample_shape);
                        Batch { x, shape, labels: y }
                    })
                    .collect())
            }
            InputSource::Random { .. } | InputSource::None => {
                let sample =
                    self.sample_shape(graph).filter(|_| !matches!(self.inputs, InputSource::None)).ok_or_else(|| PassError::NoData {
                        pass: pass.into(),
                        reason: "no data set was given (pass a DATASET, or a checkpoint that names one)".into(),
                    })?;
                let mut rng = Rng::new(self.seed).fork(0x5eed);
                let per: usize = sample.iter().product();
                let mut out = Vec::new();
                let mut left = num_samples;
                while left > 0 {
                    let b = left.min(bs);
                    let x = (0..b * per).map(|_| rng.normal() as f32).collect();
                    let mut shape = vec![b];
                    shape.extend(&sample);
                    out.push(Batch { x, shape, labels: Vec::new() });
                    left -= b;
                }
                Ok(out)
            }
        }
    }
}
