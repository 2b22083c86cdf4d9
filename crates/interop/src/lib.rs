//! Interoperability of mase-rs with the files other tools write.
//!
//! - **ONNX and QONNX import** ([`import_file`]): an ONNX model becomes a [`mase_ir::Graph`] and
//!   its [`mase_ir::ParamStore`], with node and parameter names kept, constants and shape
//!   arithmetic folded, and QONNX quantizers (`Quant`/`IntQuant`, `BipolarQuant`, `FloatQuant`,
//!   `Trunc` in the domains `qonnx.custom_op.general`, `finn.custom_op.general`, `onnx.brevitas`)
//!   turned into number formats on the nodes that use their values.
//! - **ONNX and QONNX export** ([`export_model`]): a float graph as standard ONNX, a quantized
//!   one with `IntQuant`/`BipolarQuant`/`FloatQuant` nodes carrying its formats.
//! - **Weights** ([`read_weights`], [`map_onto_graph`]): `torch.save` state dicts and Lightning
//!   checkpoints through a safe unpickler that executes nothing, `.npz` and `.safetensors` files,
//!   mapped onto a model by state-dict name (with MASE's `model.` prefix handled).
//!
//! Every reader checks what it reads: a truncated or hostile file gives an [`InteropError`] that
//! names the file and the place, never a panic.

mod dtype;
mod error;
mod export;
mod import;
pub mod npy;
pub mod onnx;
pub mod qonnx;
mod quantize;
mod state_dict;
pub mod torch;
mod weights;
pub mod zip;

pub use dtype::DType;
pub use error::{InteropError, Result, UnsupportedOp};
pub use export::{export_bytes, export_file, export_model, ExportFormat, ExportOptions};
pub use import::{import_bytes, import_file, import_model, supported_onnx_ops, ImportOptions, Imported, WeightQuant};
pub use state_dict::{StateDict, Weight};
pub use weights::{map_onto_graph, read_safetensors, read_weight_bytes, read_weights, sniff, MapReport, WeightFormat};
