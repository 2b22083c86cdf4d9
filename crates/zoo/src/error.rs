//! The error type of the zoo crate.

use mase_ir::IrError;
use std::path::PathBuf;
use thiserror::Error;

/// Errors of building a named model or reading a model file. Each variant names the model, file,
/// layer or key at fault, so the CLI can print it as one line.
#[derive(Debug, Error)]
pub enum ZooError {
    /// The name is not one of [`crate::model_names`].
    #[error("unknown model `{name}`; known models: {known}")]
    UnknownModel { name: String, known: String },

    /// The data set does not fit the model (wrong sample rank, too small an image, no classes).
    #[error("model `{model}` cannot be built for samples of shape {sample_shape:?} with {num_classes} classes: {reason}")]
    Context { model: String, sample_shape: Vec<usize>, num_classes: usize, reason: String },

    /// The IR rejected the built graph; for a named model this is a bug, for a model file it is a
    /// shape the layers do not agree on.
    #[error("model `{model}`: {source}")]
    Graph { model: String, source: IrError },

    /// A model file could not be read.
    #[error("cannot read model file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },

    /// A model file is not valid TOML or its top level does not follow the schema (unknown key,
    /// missing `layers`, a layer that is not a table). The message carries TOML's line and column.
    #[error("{origin}: {message}")]
    Syntax { origin: String, message: String },

    /// One layer of a model file is wrong. `index` counts `[[layers]]` entries from 0, like
    /// `seq_blocks.<i>`; `key` is the offending key (`inputs` for shape mismatches).
    #[error("{origin}: layer {index} ({}), key `{key}`: {reason}", layer_label(.op, .name))]
    Layer { origin: String, index: usize, op: String, name: Option<String>, key: String, reason: String },

    /// A problem of the file as a whole that no single layer owns (no layers, a bad `output`).
    #[error("{origin}: key `{key}`: {reason}")]
    File { origin: String, key: String, reason: String },
}

/// `op \`linear\`, name \`fc1\`` for error messages.
fn layer_label(op: &str, name: &Option<String>) -> String {
    match name {
        Some(n) => format!("op `{op}`, name `{n}`"),
        None => format!("op `{op}`"),
    }
}

/// Result type of the zoo crate.
pub type Result<T, E = ZooError> = std::result::Result<T, E>;
