//! Quantized values of a whole tensor, through `mase_quant` (the one implementation of every
//! format's arithmetic).

use mase_ir::{QuantFormat, Rng, Tensor};
use mase_quant::QuantError;

/// `t` quantized with `fmt`, or the reason it cannot be.
pub(crate) fn quantize_tensor(t: &Tensor, fmt: &QuantFormat) -> Result<Tensor, QuantError> {
    let mut out = vec![0.0; t.data.len()];
    // Only stochastic binary draws random numbers, and QONNX has no stochastic format.
    mase_quant::quantize(fmt, &t.data, &t.shape, &mut out, &mut Rng::new(0))?;
    Ok(Tensor { shape: t.shape.clone(), data: out })
}
