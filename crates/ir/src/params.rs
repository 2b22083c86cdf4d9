//! Parameters and buffers, keyed by PyTorch state-dict names.

use crate::{IrError, Result, Tensor};
use indexmap::IndexMap;

/// One named tensor of a model: a trainable parameter or a buffer (BatchNorm running statistics).
#[derive(Clone, Debug, PartialEq)]
pub struct ParamEntry {
    pub tensor: Tensor,
    pub trainable: bool,
}

/// The model's tensors in `state_dict` order (`seq_blocks.0.weight`, `seq_blocks.0.running_mean`, ...).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParamStore {
    entries: IndexMap<String, ParamEntry>,
}

impl ParamStore {
    pub fn new() -> ParamStore {
        ParamStore::default()
    }

    pub fn insert(&mut self, name: impl Into<String>, tensor: Tensor, trainable: bool) {
        self.entries.insert(name.into(), ParamEntry { tensor, trainable });
    }

    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.entries.get(name).map(|e| &e.tensor)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut Tensor> {
        self.entries.get_mut(name).map(|e| &mut e.tensor)
    }

    pub fn entry(&self, name: &str) -> Option<&ParamEntry> {
        self.entries.get(name)
    }

    /// The tensor called `name`, or an error naming it.
    pub fn require(&self, name: &str) -> Result<&Tensor> {
        self.get(name).ok_or_else(|| IrError::Param { name: name.into(), reason: "missing from the parameter store".into() })
    }

    /// Removes a tensor, keeping the order of the others; returns it if it was there.
    pub fn remove(&mut self, name: &str) -> Option<ParamEntry> {
        self.entries.shift_remove(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &ParamEntry)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&str, &mut ParamEntry)> {
        self.entries.iter_mut().map(|(k, v)| (k.as_str(), v))
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(|k| k.as_str())
    }

    /// Number of trainable scalars (what PyTorch reports as "Trainable params").
    pub fn trainable_count(&self) -> usize {
        self.entries.values().filter(|e| e.trainable).map(|e| e.tensor.numel()).sum()
    }

    /// Replaces the value of an existing tensor, checking that the shape is unchanged.
    pub fn set(&mut self, name: &str, tensor: Tensor) -> Result<()> {
        let e = self.entries.get_mut(name).ok_or_else(|| IrError::Param { name: name.into(), reason: "no such parameter".into() })?;
        if e.tensor.shape != tensor.shape {
            return Err(IrError::Param {
                name: name.into(),
                reason: format!("shape {:?} expected, got {:?}", e.tensor.shape, tensor.shape),
            });
        }
        e.tensor = tensor;
        Ok(())
    }
}
