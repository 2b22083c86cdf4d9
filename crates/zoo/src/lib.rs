//! The model zoo of mase-rs: MASE's named models (jsc-tiny ... vgg7), a BERT-style encoder
//! (bert-tiny) and user model files.
//!
//! Builders return a [`mase_ir::Graph`] without parameters; the runtime initialises them from
//! each node's `Op::param_specs`. Node names, module paths and parameter names are those torch.fx
//! and PyTorch give the same model (`seq_blocks_2`, `seq_blocks.2.weight`), so MASE configs that
//! select nodes by name and checkpoints keyed by state-dict names work unchanged. Widths that
//! depend on the data come from a [`ModelContext`]; a data set that does not fit a model is an
//! error, not a panic.

// Errors carry the file, layer, key and reason by value so that callers can match on them; they
// are built once per failed run, so their size does not matter.
#![allow(clippy::result_large_err)]

mod context;
mod error;
mod file;
mod jsc;
mod layers;
mod mobilenet;
mod registry;
mod resnet;
mod text;
mod toy;
mod vision;
mod vit;

pub use context::ModelContext;
pub use error::{Result, ZooError};
pub use file::{load_model_file, model_file_ops, parse_model_file};
pub use registry::{build_model, model_info, model_names, trainable_params, ModelInfo};
