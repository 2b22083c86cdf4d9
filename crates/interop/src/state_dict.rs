//! The weights read from a file: named tensors with the element type each had there. The
//! readers of every format ([`crate::npy`], [`crate::torch`], safetensors in [`crate::weights`])
//! produce a [`StateDict`], and [`crate::weights`] maps it onto a graph.

use crate::dtype::DType;
use mase_ir::Tensor;

/// One stored tensor with the element type it had in the file (the values are converted to f32).
#[derive(Clone, Debug, PartialEq)]
pub struct Weight {
    pub dtype: DType,
    pub tensor: Tensor,
}

/// Named tensors in file order.
pub type StateDict = Vec<(String, Weight)>;
