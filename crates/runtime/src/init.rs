//! PyTorch's default initialisation of module parameters.

use mase_ir::{Graph, Init, ParamSpec, ParamStore, Rng, Tensor};

/// A fresh parameter store for `graph`: every module tensor from [`mase_ir::Op::param_specs`],
/// drawn from `rng` in state-dict order, so the same seed gives the same model.
/// `Uniform { fan_in }` draws from `U(-1/sqrt(fan_in), 1/sqrt(fan_in))` (PyTorch's
/// `kaiming_uniform_(a=sqrt(5))` for weights and its bias rule, which agree); `Ones`/`Zeros`
/// fill; `Normal` draws N(0, 1) (`nn.Embedding`), `Gaussian` N(0, std^2) and `Xavier` PyTorch's
/// `xavier_uniform_`; `Arange` counts along the last dimension (a position-id buffer). The
/// tensors the graph owns itself ([`mase_ir::Graph::parameter`], read by `get_attr` nodes) are
/// drawn too, in node order; constants an importer brought are not created here.
pub fn init_params(graph: &Graph, rng: &mut Rng) -> ParamStore {
    let mut store = ParamStore::new();
    for (name, spec) in graph.param_specs() {
        // A module called twice has its tensors listed twice; it owns them once.
        if store.contains(&name) {
            continue;
        }
        let tensor = init_tensor(&spec, rng);
        store.insert(name, tensor, spec.trainable);
    }
    store
}

/// One tensor drawn by the rule of its spec, as [`init_params`] draws it (the same values for
/// the same generator state). Transforms that replace a layer (a widened `Linear`) use it to
/// initialise the new tensors as PyTorch would initialise the new module.
pub fn init_tensor(spec: &ParamSpec, rng: &mut Rng) -> Tensor {
    let n = spec.shape.iter().product::<usize>();
    let data = match spec.init {
        Init::Uniform { fan_in } => {
            let bound = if fan_in == 0 { 0.0 } else { 1.0 / (fan_in as f32).sqrt() };
            (0..n).map(|_| rng.uniform_range(-bound, bound)).collect()
        }
        Init::Gaussian { std } => (0..n).map(|_| rng.normal() as f32 * std).collect(),
        Init::Xavier { fan_in, fan_out } => {
            let bound = if fan_in + fan_out == 0 { 0.0 } else { (6.0 / (fan_in + fan_out) as f32).sqrt() };
            (0..n).map(|_| rng.uniform_range(-bound, bound)).collect()
        }
        Init::Ones => vec![1.0; n],
        Init::Zeros => vec![0.0; n],
        Init::Normal { zero_row } => {
            let mut v: Vec<f32> = (0..n).map(|_| rng.normal() as f32).collect();
            // A matrix's row `zero_row` (an embedding's padding row) is zero, as PyTorch sets it.
            if let (Some(r), Some(&cols)) = (zero_row, spec.shape.last()) {
                v.iter_mut().skip(r * cols).take(cols).for_each(|x| *x = 0.0);
            }
            v
        }
        Init::Arange => {
            let cols = spec.shape.last().copied().unwrap_or(1).max(1);
            (0..n).map(|i| (i % cols) as f32).collect()
        }
    };
    Tensor { shape: spec.shape.clone(), data }
}
