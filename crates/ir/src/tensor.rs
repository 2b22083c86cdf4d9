use crate::{IrError, Result};
use serde::{Deserialize, Serialize};

/// A dense, row-major f32 tensor with a run-time shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl Tensor {
    /// Builds a tensor, checking that `data` has exactly as many values as `shape` describes.
    pub fn new(shape: Vec<usize>, data: Vec<f32>) -> Result<Tensor> {
        let expected = shape.iter().product::<usize>();
        if expected != data.len() {
            return Err(IrError::TensorSize { shape, expected, got: data.len() });
        }
        Ok(Tensor { shape, data })
    }

    pub fn zeros(shape: Vec<usize>) -> Tensor {
        Tensor::full(shape, 0.0)
    }

    pub fn full(shape: Vec<usize>, value: f32) -> Tensor {
        let n = shape.iter().product();
        Tensor { shape, data: vec![value; n] }
    }

    pub fn scalar(value: f32) -> Tensor {
        Tensor { shape: vec![], data: vec![value] }
    }

    pub fn numel(&self) -> usize {
        self.data.len()
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Same data under a new shape with the same number of elements.
    pub fn reshape(mut self, shape: Vec<usize>) -> Result<Tensor> {
        let expected = shape.iter().product::<usize>();
        if expected != self.data.len() {
            return Err(IrError::TensorSize { shape, expected, got: self.data.len() });
        }
        self.shape = shape;
        Ok(self)
    }

    /// Largest absolute difference to `other`, or infinity when the shapes differ.
    pub fn max_abs_diff(&self, other: &Tensor) -> f32 {
        if self.shape != other.shape {
            return f32::INFINITY;
        }
        self.data.iter().zip(&other.data).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max)
    }
}
