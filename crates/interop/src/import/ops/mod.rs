//! The ONNX operators the importer lowers, one file per family (as tract's `onnx/src/ops/`): each
//! family lists its operators in an `OPS` table of `(op_type, lowering)` entries. The supported-
//! operator check before import and the dispatch during import both read these tables, so a new
//! operator is one function in its family's file and one line in that file's table.

use super::value::Val;
use super::Importer;
use crate::onnx::proto::NodeProto;
use crate::Result;

mod indexing;
mod logic;
mod math;
mod nn;
mod quant;
mod shape;

/// Lowers one ONNX node of a given operator type.
pub(crate) type Lower = fn(&mut Importer, &NodeProto) -> Result<Val>;

/// Every family's table.
const FAMILIES: [&[(&str, Lower)]; 5] = [math::OPS, nn::OPS, shape::OPS, indexing::OPS, logic::OPS];

/// The lowering of a standard ONNX operator, if the importer has one.
pub(crate) fn lowering(op_type: &str) -> Option<Lower> {
    FAMILIES.iter().flat_map(|f| f.iter()).find(|(name, _)| *name == op_type).map(|(_, lower)| *lower)
}

/// Every standard ONNX operator the importer lowers, in table order (QONNX's quantizers come on
/// top, recognised by their domain).
pub fn supported_onnx_ops() -> impl Iterator<Item = &'static str> {
    FAMILIES.into_iter().flat_map(|f| f.iter()).map(|(name, _)| *name)
}
