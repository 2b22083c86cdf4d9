//! What a data set tells a model about its input and output.

use crate::{Result, ZooError};

/// What the data set tells a model: per-sample input shape (without the batch dimension) and the
/// number of classes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelContext {
    /// Shape of one sample without the batch dimension: `[16]` for jsc, `[1, 28, 28]` for MNIST.
    pub sample_shape: Vec<usize>,
    /// Number of classes the model must score.
    pub num_classes: usize,
}

/// The batch size used when a builder runs shape inference. It is 2 rather than 1 so that a
/// layer mixing up the batch dimension with a feature dimension of size 1 is caught.
pub(crate) const PROBE_BATCH: usize = 2;

impl ModelContext {
    /// A context for samples of `sample_shape` and `num_classes` classes.
    pub fn new(sample_shape: impl Into<Vec<usize>>, num_classes: usize) -> ModelContext {
        ModelContext { sample_shape: sample_shape.into(), num_classes }
    }

    /// The input shape of one batch: `[batch, ...sample_shape]`.
    pub fn batch_shape(&self, batch: usize) -> Vec<usize> {
        let mut s = Vec::with_capacity(self.sample_shape.len() + 1);
        s.push(batch);
        s.extend(&self.sample_shape);
        s
    }

    /// Number of scalars in one sample (`prod(sample_shape)`).
    pub fn sample_numel(&self) -> usize {
        self.sample_shape.iter().product()
    }

    pub(crate) fn error(&self, model: &str, reason: impl Into<String>) -> ZooError {
        ZooError::Context {
            model: model.to_string(),
            sample_shape: self.sample_shape.clone(),
            num_classes: self.num_classes,
            reason: reason.into(),
        }
    }

    /// Checks what every model needs: at least one class and a non-empty sample.
    pub(crate) fn check_basic(&self, model: &str) -> Result<()> {
        if self.num_classes == 0 {
            return Err(self.error(model, "the data set has no classes"));
        }
        if self.sample_shape.is_empty() || self.sample_numel() == 0 {
            return Err(self.error(model, "samples must have at least one dimension and no zero-sized dimension"));
        }
        Ok(())
    }

    /// The feature count of a tabular model, which needs 1-D samples `[features]`.
    pub(crate) fn features_1d(&self, model: &str) -> Result<usize> {
        self.check_basic(model)?;
        match self.sample_shape.as_slice() {
            [f] => Ok(*f),
            _ => Err(self.error(model, "this model needs 1-D samples [features] (a tabular data set such as jsc)")),
        }
    }

    /// Channels, height and width of an image model, which needs samples `[C, H, W]` with
    /// `H, W >= min_side`.
    pub(crate) fn image_chw(&self, model: &str, min_side: usize) -> Result<(usize, usize, usize)> {
        self.check_basic(model)?;
        match self.sample_shape.as_slice() {
            [c, h, w] if *h >= min_side && *w >= min_side => Ok((*c, *h, *w)),
            [_, _, _] => Err(self.error(model, format!("images must be at least {min_side}x{min_side}"))),
            _ => Err(self.error(model, "this model needs image samples [channels, height, width]")),
        }
    }
}
