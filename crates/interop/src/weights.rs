//! Weights from other tools: `torch.save` state dicts, Lightning checkpoints, `.npz` and
//! `.safetensors` files, read into one [`StateDict`] and mapped onto a graph's parameters by name.

use crate::dtype::DType;
use crate::state_dict::{StateDict, Weight};
use crate::{InteropError, Result};
use mase_ir::{Graph, NodeKind, ParamStore, Tensor};
use std::path::Path;

/// The container formats [`read_weights`] recognises by content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFormat {
    /// A `torch.save` zip file or a Lightning checkpoint.
    Torch,
    Npz,
    Safetensors,
}

/// Tells a weight file's format from its first bytes (and, for zip files, its entries).
pub fn sniff(bytes: &[u8]) -> Option<WeightFormat> {
    if crate::zip::is_zip(bytes) {
        let zip = crate::zip::ZipArchive::new(bytes).ok()?;
        return Some(if crate::torch::is_torch_zip(&zip) { WeightFormat::Torch } else { WeightFormat::Npz });
    }
    // A safetensors file starts with the little-endian length of its JSON header, then `{`.
    let header = bytes.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    if header.is_some_and(|n| n > 0 && n < bytes.len() as u64) && bytes.get(8) == Some(&b'{') {
        return Some(WeightFormat::Safetensors);
    }
    // A bare pickle (the legacy torch.save format) starts with the PROTO opcode.
    (bytes.first() == Some(&0x80)).then_some(WeightFormat::Torch)
}

/// Reads the tensors of a weight file of any supported format.
pub fn read_weight_bytes(bytes: &[u8]) -> Result<StateDict> {
    match sniff(bytes) {
        Some(WeightFormat::Torch) => Ok(crate::torch::read_torch(bytes)?.state_dict),
        Some(WeightFormat::Npz) => crate::npy::read_npz(bytes),
        Some(WeightFormat::Safetensors) => read_safetensors(bytes),
        None => Err(InteropError::Mapping {
            reason: "not a weight file: expected a PyTorch/Lightning checkpoint, an .npz or a .safetensors file".into(),
        }),
    }
}

/// Reads the tensors of a weight file; errors name the file.
pub fn read_weights(path: &Path) -> Result<StateDict> {
    let bytes = std::fs::read(path).map_err(|e| InteropError::io(path, "read", e))?;
    read_weight_bytes(&bytes).map_err(|e| e.in_file(path))
}

/// Reads a `.safetensors` file.
pub fn read_safetensors(bytes: &[u8]) -> Result<StateDict> {
    use safetensors::Dtype as S;
    let st =
        safetensors::SafeTensors::deserialize(bytes).map_err(|e| InteropError::SafetensorsFormat { tensor: String::new(), source: e })?;
    let mut names: Vec<(usize, String)> = Vec::new();
    for (name, view) in st.tensors() {
        names.push((view.data().as_ptr() as usize, name));
    }
    // File order is the order of the data offsets.
    names.sort();
    let mut out = Vec::with_capacity(names.len());
    for (_, name) in names {
        let view = st.tensor(&name).map_err(|e| InteropError::SafetensorsFormat { tensor: name.clone(), source: e })?;
        let dtype = match view.dtype() {
            S::F16 => DType::F16,
            S::BF16 => DType::BF16,
            S::F32 => DType::F32,
            S::F64 => DType::F64,
            S::I8 => DType::I8,
            S::I16 => DType::I16,
            S::I32 => DType::I32,
            S::I64 => DType::I64,
            S::U8 => DType::U8,
            S::BOOL => DType::Bool,
            other => return Err(InteropError::Safetensors { reason: format!("`{name}` has unsupported dtype {other:?}") }),
        };
        let shape = view.shape().to_vec();
        // The safetensors crate checks each tensor's byte range against its shape; checked here
        // again so that a tensor never has fewer values than its shape says.
        let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if count.and_then(|c| c.checked_mul(dtype.size())) != Some(view.data().len()) {
            return Err(InteropError::Safetensors {
                reason: format!("`{name}`: {} bytes do not hold shape {shape:?} of {other:?}", view.data().len(), other = view.dtype()),
            });
        }
        let count = count.unwrap_or(0);
        let data = crate::dtype::decode(view.data(), dtype, count, false);
        out.push((name, Weight { dtype, tensor: Tensor { shape, data } }));
    }
    Ok(out)
}

/// How a state dict was matched to a graph.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MapReport {
    /// The prefix stripped from every key (`model.` for MASE's Lightning checkpoints).
    pub prefix: String,
    /// Keys of the file that the graph does not use (`num_batches_tracked`, optimizer state).
    pub unused: Vec<String>,
}

/// The tensors a graph needs, by state-dict name, with whether each is trainable: module
/// parameters and buffers (`param_specs`) and `get_attr` constants.
fn graph_tensors(graph: &Graph) -> Vec<(String, Option<Vec<usize>>, bool)> {
    let mut v: Vec<(String, Option<Vec<usize>>, bool)> =
        graph.param_specs().into_iter().map(|(n, s)| (n, Some(s.shape), s.trainable)).collect();
    for n in graph.nodes().iter().filter(|n| n.kind == NodeKind::GetAttr) {
        if !v.iter().any(|(name, _, _)| *name == n.target) {
            v.push((n.target.clone(), None, false));
        }
    }
    v
}

/// Maps a state dict onto a graph's parameters by name. Keys may carry one common prefix
/// (`model.` in MASE's Lightning checkpoints, `module.` from DataParallel); it is found by
/// matching. Every tensor the graph needs must be present with its shape; keys the graph does not
/// use are listed in the report.
pub fn map_onto_graph(graph: &Graph, sd: &StateDict) -> Result<(ParamStore, MapReport)> {
    let needed = graph_tensors(graph);
    let Some((first, _, _)) = needed.first() else {
        return Ok((ParamStore::new(), MapReport { prefix: String::new(), unused: sd.iter().map(|(k, _)| k.clone()).collect() }));
    };
    // Candidate prefixes: those under which the first needed name exists; keep the one that
    // matches the most names.
    let mut candidates: Vec<String> = sd.iter().filter_map(|(k, _)| k.strip_suffix(first.as_str()).map(str::to_string)).collect();
    candidates.push(String::new());
    let score = |p: &str| {
        needed
            .iter()
            .filter(|(n, _, _)| sd.iter().any(|(k, _)| k.len() == p.len() + n.len() && k.starts_with(p) && k.ends_with(n.as_str())))
            .count()
    };
    let prefix = candidates.into_iter().max_by_key(|p| (score(p), std::cmp::Reverse(p.len()))).unwrap_or_default();
    let mut store = ParamStore::new();
    let mut missing = Vec::new();
    let mut used = vec![false; sd.len()];
    for (name, shape, trainable) in &needed {
        let key = format!("{prefix}{name}");
        match sd.iter().position(|(k, _)| *k == key) {
            None => missing.push(key),
            Some(i) => {
                let t = &sd[i].1.tensor;
                if let Some(shape) = shape {
                    if t.shape != *shape {
                        return Err(InteropError::Mapping {
                            reason: format!("tensor `{key}` has shape {:?}, the model needs {shape:?}", t.shape),
                        });
                    }
                }
                used[i] = true;
                store.insert(name.clone(), t.clone(), *trainable);
            }
        }
    }
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(8).map(String::as_str).collect();
        let more = if missing.len() > 8 { format!(" and {} more", missing.len() - 8) } else { String::new() };
        let have: Vec<&str> = sd.iter().take(6).map(|(k, _)| k.as_str()).collect();
        return Err(InteropError::Mapping {
            reason: format!(
                "missing {}{more} (the file has {}{})",
                shown.join(", "),
                have.join(", "),
                if sd.len() > 6 { ", ..." } else { "" }
            ),
        });
    }
    let unused = sd.iter().zip(&used).filter(|(_, u)| !**u).map(|((k, _), _)| k.clone()).collect();
    Ok((store, MapReport { prefix, unused }))
}
