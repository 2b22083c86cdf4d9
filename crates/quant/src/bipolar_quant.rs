//! QONNX `BipolarQuant`: `out = (x >= 0 ? 1 : -1) * scale`, `scale` per tensor or per channel.
//! NaN gives `-scale`.

use crate::bcast::{check, map_runs, value_at};
use crate::int_quant::validate_param;
use crate::registry::{Reach, Scope};
use crate::Result;
use mase_ir::{QuantFormat, Rng, Tensor};

/// The format's entry in `registry::FORMATS`: its name, its one-line doc, and the functions
/// below (shared ones imported under the names the registry reads).
pub(crate) const NAME: &str = "bipolar_quant";
pub(crate) const DOC: &str = "scale: (x >= 0 ? 1 : -1) * scale (QONNX BipolarQuant)";

fn spec(fmt: &QuantFormat) -> &Tensor {
    match fmt {
        QuantFormat::BipolarQuant { scale } => scale,
        _ => unreachable!("bipolar_quant called with {}", fmt.type_name()),
    }
}

/// Per value with a per-tensor scale; a per-channel one ties values to positions.
pub(crate) fn scope(fmt: &QuantFormat) -> Scope {
    let reach = if spec(fmt).numel() == 1 { Reach::Value } else { Reach::Tensor };
    Scope { reach, random: false }
}

pub(crate) fn validate(fmt: &QuantFormat) -> Result<()> {
    validate_param("bipolar_quant", "scale", spec(fmt), true)
}

pub(crate) fn validate_shape(fmt: &QuantFormat, shape: &[usize]) -> Result<()> {
    check("bipolar_quant", "scale", spec(fmt), shape)
}

pub(crate) fn kernel(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let s = spec(fmt);
    map_runs(&s.shape, shape, x, out, |v, k| {
        let y = if v >= 0.0 { 1.0 } else { -1.0 };
        y * s.data[k]
    });
}

pub(crate) fn reference(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let s = spec(fmt);
    for (i, &v) in x.iter().enumerate() {
        let y_int = if v >= 0.0 { 1.0 } else { -1.0 };
        out[i] = y_int * value_at(s, shape, i);
    }
}

/// `±scale` for some channel's scale.
pub(crate) fn representable(fmt: &QuantFormat, v: f32) -> bool {
    spec(fmt).data.iter().any(|&s| v == s || v == -s)
}

pub(crate) fn on_grid(fmt: &QuantFormat, x: &[f32], shape: &[usize]) -> Vec<usize> {
    let s = spec(fmt);
    (0..x.len())
        .filter(|&i| {
            let c = value_at(s, shape, i);
            !(x[i] == c || x[i] == -c)
        })
        .collect()
}
