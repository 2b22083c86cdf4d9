//! The graph IR of mase-rs.
//!
//! A [`Graph`] is a list of [`Node`]s in topological (execution) order, as in torch.fx. Each node has
//! an fx [`NodeKind`] (placeholder, call_module, ...), a `target`, the [`NodeId`]s of its inputs, an
//! [`Op`] that says what it computes, and MASE's per-node metadata ([`NodeMeta`]). Parameters and
//! buffers live beside the graph in a [`ParamStore`] keyed by PyTorch state-dict names
//! (`seq_blocks.2.weight`), so checkpoints and configs written for MASE map one to one.

mod attention;
mod error;
mod family;
mod graph;
mod index;
mod meta;
mod naming;
mod op;
mod params;
mod printer;
mod quant;
mod rng;
mod shape;
mod tensor;
mod validate;

pub use attention::{size_of, AttnMask, Contraction};
pub use error::{IrError, Result};
pub use family::OpFamily;
pub use graph::{Graph, GraphParam, Node, NodeId, NodeKind};
pub use index::{expand_shape, items_at, repeat_shape, resolve_index, IndexItem, Indexed, ReadDim, SizeOp};
pub use meta::{ArgMeta, CommonMeta, GraphMeta, NodeMeta, TensorMeta};
pub use naming::{snake_case, Namer};
pub use op::{ConvSpec, DepthMode, DimArg, Init, NormSpec, Op, ParamSpec, PoolSpec, ReduceSpec};
pub use params::{ParamEntry, ParamStore};
pub use quant::{NodeQuant, QuantFormat, RoundingMode};
pub use rng::Rng;
pub use shape::{broadcast_shapes, checked_numel, matmul_shapes, MatMulShapes, ValueInfo, MAX_ELEMENTS};
pub use tensor::Tensor;
pub use validate::validate;
