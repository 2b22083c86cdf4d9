//! The error type of the runtime. Every variant names the input, node, parameter or label at fault.

use mase_ir::IrError;
use thiserror::Error;

/// Errors of the executor, the optimizers and the parameter loaders. (The thread pool's error
/// is not `Clone`, so it is shared through an `Arc`.)
#[derive(Debug, Error, Clone)]
pub enum RuntimeError {
    /// A graph-level problem found by the IR (bad shape, missing parameter, invalid node).
    #[error(transparent)]
    Ir(#[from] IrError),
    #[error("graph has {count} inputs; the executor runs graphs with at least one input")]
    InputCount { count: usize },
    /// A call that takes one input batch and gives one output (training, evaluation, the
    /// single-tensor forward) on a graph with several.
    #[error(
        "graph has {inputs} input(s) and {outputs} output(s); {call} takes a graph with exactly one of each (several go through `forward_many` / `backward_many`, which training and evaluation do not use)"
    )]
    NotSingle { call: &'static str, inputs: usize, outputs: usize },
    #[error("{got} input batches given; the graph has {expected} inputs")]
    InputBatches { expected: usize, got: usize },
    #[error("{got} output gradients given; the graph has {expected} outputs")]
    OutputGrads { expected: usize, got: usize },
    #[error("output {index} (`{node}`) is an integer (a size); graph outputs must be tensors")]
    IntegerOutput { index: usize, node: String },
    #[error("input data has {got} values, but shape {shape:?} needs {expected}")]
    InputLength { shape: Vec<usize>, expected: usize, got: usize },
    #[error("input has {got} {what} per sample, graph `{input}` expects {expected}")]
    InputFeatures { input: String, what: &'static str, got: usize, expected: usize },
    #[error("input shape {shape:?} has no samples: the first dimension is the batch and must be at least 1")]
    EmptyBatch { shape: Vec<usize> },
    #[error("the per-sample shape of graph input `{input}` is unknown: run a batch through the executor first")]
    UnknownInputShape { input: String },
    #[error("{got} labels given for a batch of {batch} samples")]
    LabelCount { got: usize, batch: usize },
    #[error("label {label} of sample {index} is out of range: the model has {classes} classes")]
    LabelOutOfRange { index: usize, label: u32, classes: usize },
    #[error("the loss needs an output of shape [N, classes]; output `{node}` has shape {shape:?}")]
    LossShape { node: String, shape: Vec<usize> },
    #[error("output gradient has {got} values, the output has {expected}")]
    OutputGradLength { expected: usize, got: usize },
    #[error("gradient of output {index} has {got} values, the output has {expected}")]
    OutputGradLengthOf { index: usize, expected: usize, got: usize },
    #[error("input {index} (`{input}`): data has {got} values, but shape {shape:?} needs {expected}")]
    InputLengthOf { index: usize, input: String, shape: Vec<usize>, expected: usize, got: usize },
    #[error("node `{node}` ({op}) needs more than one value per channel in training, got input shape {shape:?}")]
    BatchNormSingleValue { node: String, op: String, shape: Vec<usize> },
    #[error(
        "node `{node}` is a PyTorch module mase-rs cannot run ({class}): run the model through `mg.model` in Python, which hands it to PyTorch"
    )]
    Opaque { node: String, class: String },
    /// `--accelerator` names a device this process cannot run on (no PyTorch, no such device, a
    /// `ch` without Python), or the device engine failed.
    #[error("accelerator `{accelerator}`: {reason}")]
    Accelerator { accelerator: String, reason: String },
    #[error("backward needs a forward pass in training mode on the same batch shape first")]
    NoTrainingForward,
    #[error("parameter `{name}`: {reason}")]
    Param { name: String, reason: String },
    #[error("optimizer state entry `{name}`: {reason}")]
    OptimizerState { name: String, reason: String },
    #[error("could not start a pool of {threads} threads: {source}")]
    ThreadPool {
        threads: usize,
        #[source]
        source: std::sync::Arc<rayon::ThreadPoolBuildError>,
    },
    /// A number format on a node is invalid, or does not fit the operand's shape. (The source
    /// is boxed to keep this enum small.)
    #[error("node `{node}`, {operand}: {source}")]
    Quant { node: String, operand: String, source: Box<mase_quant::QuantError> },
    /// Quantization was asked for on a node that cannot carry it.
    #[error("node `{node}` ({op}) cannot be quantized: {reason}")]
    QuantUnsupported { node: String, op: String, reason: String },
    /// The integer executor met a value it cannot turn into an integer code.
    #[error("integer execution of node `{node}`: {reason}")]
    Integer { node: String, reason: String },
    /// A NaN or infinite value reached the integer executor, where it has no integer code.
    #[error("integer execution of node `{node}`: {operand} holds {value} at index {index}; a NaN or infinite value has no integer code")]
    NonFiniteCode { node: String, operand: String, index: usize, value: f32 },
    /// An embedding id that is not a row of the table: the run stops rather than give a wrong answer.
    #[error("node `{node}` (embedding): id {value} at index {index} of its input is not a whole number in 0..{num_embeddings}")]
    EmbeddingId { node: String, index: usize, value: f32, num_embeddings: usize },
}

/// `Result` with [`RuntimeError`].
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
