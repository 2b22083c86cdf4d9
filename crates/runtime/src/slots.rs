//! The executor's copy of the parameter store: flat buffers for values and gradients, indexed by
//! position so that kernels reach them without name lookups.

use mase_ir::{ParamStore, Tensor};

/// One parameter or buffer, in state-dict order.
#[derive(Clone, Debug)]
pub(crate) struct ParamSlot {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
    /// Gradient buffer; empty for buffers (running statistics) and frozen constants.
    pub grad: Vec<f32>,
    pub trainable: bool,
    /// Whether some node writes a gradient for this parameter. PyTorch leaves `.grad` at `None`
    /// for a parameter the loss does not reach, and its optimizers then skip it; ours do the same.
    pub reached: bool,
}

/// Copies a store into slots, keeping its order.
pub(crate) fn slots_from_store(store: &ParamStore) -> Vec<ParamSlot> {
    store
        .iter()
        .map(|(name, e)| ParamSlot {
            name: name.to_string(),
            shape: e.tensor.shape.clone(),
            data: e.tensor.data.clone(),
            grad: if e.trainable { vec![0.0; e.tensor.data.len()] } else { Vec::new() },
            trainable: e.trainable,
            reached: false,
        })
        .collect()
}

/// Builds a store from slots, in slot order.
pub(crate) fn store_from_slots(slots: &[ParamSlot]) -> ParamStore {
    let mut store = ParamStore::new();
    for s in slots {
        store.insert(s.name.clone(), Tensor { shape: s.shape.clone(), data: s.data.clone() }, s.trainable);
    }
    store
}
