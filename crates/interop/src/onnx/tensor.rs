//! `TensorProto` <-> constants. The importer keeps integer tensors (shapes, axes, indices) as i64
//! and every other numeric type as f32, which is all the supported operators need.

use super::proto::{tensor_proto::DataType, TensorProto};
use crate::dtype::{decode, DType};
use crate::{InteropError, Result};
use mase_ir::Tensor;

/// The values of a constant.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Data {
    F(Vec<f32>),
    I(Vec<i64>),
}

/// A tensor known when the model is imported: an initializer, a `Constant`, or a folded result.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Const {
    pub shape: Vec<usize>,
    pub data: Data,
    /// The initializer it came from, for naming parameters after it.
    pub origin: Option<String>,
}

impl Const {
    pub fn float(shape: Vec<usize>, v: Vec<f32>) -> Const {
        Const { shape, data: Data::F(v), origin: None }
    }

    pub fn ints(shape: Vec<usize>, v: Vec<i64>) -> Const {
        Const { shape, data: Data::I(v), origin: None }
    }

    pub fn is_float(&self) -> bool {
        matches!(self.data, Data::F(_))
    }

    pub fn numel(&self) -> usize {
        match &self.data {
            Data::F(v) => v.len(),
            Data::I(v) => v.len(),
        }
    }

    /// The values as f32.
    pub fn f32s(&self) -> Vec<f32> {
        match &self.data {
            Data::F(v) => v.clone(),
            Data::I(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }

    /// The values as i64 (floats are truncated, as ONNX `Cast` does).
    pub fn i64s(&self) -> Vec<i64> {
        match &self.data {
            Data::F(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I(v) => v.clone(),
        }
    }

    /// The f32 tensor of the IR.
    pub fn tensor(&self) -> Tensor {
        Tensor { shape: self.shape.clone(), data: self.f32s() }
    }

    /// The single value of a one-element constant.
    pub fn scalar_f32(&self) -> Option<f32> {
        (self.numel() == 1).then(|| self.f32s()[0])
    }
}

/// Whether the product of the non-zero dimensions fits in `usize`. Every constant keeps to this,
/// so that strides and element counts, taken in any order, never overflow: a shape such as
/// `[0, 2^40, 2^40]` has no elements, but its strides would.
pub(crate) fn dims_fit(shape: &[usize]) -> bool {
    shape.iter().filter(|&&d| d != 0).try_fold(1usize, |a, &d| a.checked_mul(d)).is_some()
}

fn terr(name: &str, reason: impl Into<String>) -> InteropError {
    InteropError::Tensor { name: name.to_string(), reason: reason.into() }
}

/// Reads a `TensorProto` (inline data only).
pub(crate) fn from_proto(t: &TensorProto) -> Result<Const> {
    let name = if t.name.is_empty() { "<unnamed>" } else { t.name.as_str() };
    if t.data_location == 1 {
        return Err(terr(name, "its data is stored in an external file, which is not supported; save the model with the data embedded"));
    }
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        shape.push(usize::try_from(d).map_err(|_| terr(name, format!("negative dimension {d}")))?);
    }
    if !dims_fit(&shape) {
        return Err(terr(name, format!("dimensions {shape:?} overflow")));
    }
    let count = shape.iter().product::<usize>();
    let raw = &t.raw_data;
    let from_raw = |dt: DType| -> Result<Vec<f32>> {
        let need = count.checked_mul(dt.size()).ok_or_else(|| terr(name, "dimensions overflow"))?;
        if raw.len() != need {
            return Err(terr(name, format!("raw data has {} bytes, shape {shape:?} needs {need}", raw.len())));
        }
        Ok(decode(raw, dt, count, false))
    };
    let check = |len: usize| -> Result<()> {
        if len != count {
            return Err(terr(name, format!("holds {len} values, shape {shape:?} needs {count}")));
        }
        Ok(())
    };
    let dt = DataType::try_from(t.data_type).map_err(|_| terr(name, format!("unknown data type {}", t.data_type)))?;
    let data = match dt {
        DataType::Float => {
            if raw.is_empty() && count > 0 {
                check(t.float_data.len())?;
                Data::F(t.float_data.clone())
            } else {
                Data::F(from_raw(DType::F32)?)
            }
        }
        DataType::Double => {
            if raw.is_empty() && count > 0 {
                check(t.double_data.len())?;
                Data::F(t.double_data.iter().map(|&x| x as f32).collect())
            } else {
                Data::F(from_raw(DType::F64)?)
            }
        }
        DataType::Float16 | DataType::Bfloat16 => {
            let dty = if dt == DataType::Float16 { DType::F16 } else { DType::BF16 };
            if raw.is_empty() && count > 0 {
                check(t.int32_data.len())?;
                let bytes: Vec<u8> = t.int32_data.iter().flat_map(|&v| (v as u16).to_le_bytes()).collect();
                Data::F(decode(&bytes, dty, count, false))
            } else {
                Data::F(from_raw(dty)?)
            }
        }
        DataType::Int64 => {
            if raw.is_empty() && count > 0 {
                check(t.int64_data.len())?;
                Data::I(t.int64_data.clone())
            } else {
                let need = count.checked_mul(8).ok_or_else(|| terr(name, "dimensions overflow"))?;
                if raw.len() != need {
                    return Err(terr(name, format!("raw data has {} bytes, shape {shape:?} needs {need}", raw.len())));
                }
                Data::I(raw.chunks_exact(8).map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])).collect())
            }
        }
        DataType::Int32 | DataType::Int16 | DataType::Int8 | DataType::Uint8 | DataType::Uint16 | DataType::Bool => {
            if raw.is_empty() && count > 0 {
                check(t.int32_data.len())?;
                Data::I(t.int32_data.iter().map(|&v| v as i64).collect())
            } else {
                let dty = match dt {
                    DataType::Int32 => DType::I32,
                    DataType::Int16 => DType::I16,
                    DataType::Int8 => DType::I8,
                    DataType::Bool => DType::Bool,
                    DataType::Uint16 => return Err(terr(name, "raw uint16 data is not supported")),
                    _ => DType::U8,
                };
                Data::I(from_raw(dty)?.into_iter().map(|v| v as i64).collect())
            }
        }
        other => return Err(terr(name, format!("data type {other:?} is not supported"))),
    };
    Ok(Const { shape, data, origin: (!t.name.is_empty()).then(|| t.name.clone()) })
}

/// A float `TensorProto` with raw little-endian data.
pub(crate) fn f32_proto(name: &str, t: &Tensor) -> TensorProto {
    TensorProto {
        name: name.to_string(),
        dims: t.shape.iter().map(|&d| d as i64).collect(),
        data_type: DataType::Float as i32,
        raw_data: t.data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// An int64 `TensorProto`.
pub(crate) fn i64_proto(name: &str, shape: &[usize], v: &[i64]) -> TensorProto {
    TensorProto {
        name: name.to_string(),
        dims: shape.iter().map(|&d| d as i64).collect(),
        data_type: DataType::Int64 as i32,
        raw_data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ..Default::default()
    }
}
