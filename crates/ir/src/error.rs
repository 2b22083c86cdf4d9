use thiserror::Error;

/// Errors of the IR crate. Each variant names the node, parameter or shape at fault.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum IrError {
    #[error("node `{node}` ({op}): input shapes {shapes:?} do not fit: {reason}")]
    ShapeMismatch { node: String, op: String, shapes: Vec<Vec<usize>>, reason: String },
    #[error("node `{node}` ({op}) expects {expected} input(s), got {got}")]
    Arity { node: String, op: String, expected: String, got: usize },
    #[error("node `{node}`: input `{input}` is not defined before it")]
    UseBeforeDef { node: String, input: String },
    #[error("duplicate node name `{0}`")]
    DuplicateName(String),
    #[error("graph has no output node")]
    NoOutput,
    #[error("graph has {0} output nodes; a graph has one, which returns every output")]
    ManyOutputs(usize),
    #[error("no node named `{0}`")]
    UnknownNode(String),
    #[error("parameter `{name}`: {reason}")]
    Param { name: String, reason: String },
    #[error("tensor of shape {shape:?} needs {expected} values, got {got}")]
    TensorSize { shape: Vec<usize>, expected: usize, got: usize },
    #[error("node `{node}`: {reason}")]
    Invalid { node: String, reason: String },
}

pub type Result<T, E = IrError> = std::result::Result<T, E>;
