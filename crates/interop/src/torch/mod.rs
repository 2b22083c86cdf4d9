//! PyTorch `torch.save` files (the zip format of PyTorch 1.6 and later) and PyTorch Lightning
//! checkpoints, read without executing any of their pickled code.
//!
//! A file is a zip archive `<name>/data.pkl`, `<name>/data/<key>` (one raw storage per key),
//! `<name>/byteorder`. The pickle describes each tensor as a call
//! `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)` whose storage is a
//! persistent id `('storage', torch.FloatStorage, key, location, numel)`; [`read_torch`] rebuilds
//! those tensors (any strides and offsets) and finds the state dict: the root dict itself, or its
//! `state_dict` entry (Lightning), or the `_parameters`/`_buffers` of a pickled module tree.

pub mod pickle;

use crate::dtype::{decode, DType};
use crate::state_dict::{StateDict, Weight};
use crate::zip::ZipArchive;
use crate::{InteropError, Result};
use mase_ir::Tensor;
use pickle::{Object, Pickle, Value};
use serde_json::{json, Map};
use std::collections::HashMap;

/// What a PyTorch file holds.
#[derive(Clone, Debug, PartialEq)]
pub struct TorchFile {
    /// The tensors of the state dict, under their keys as saved (`model.seq_blocks.0.weight`).
    pub state_dict: StateDict,
    /// `lightning` for a Lightning checkpoint, `state_dict` for a saved dict of tensors,
    /// `module` for a pickled `nn.Module`.
    pub kind: &'static str,
    /// Plain scalar entries of the root dict (`epoch`, `global_step`, `pytorch-lightning_version`).
    pub meta: serde_json::Value,
}

fn err(reason: impl Into<String>) -> InteropError {
    InteropError::Torch { reason: reason.into() }
}

/// Nesting deeper than this in a pickled module tree (or of parameters around a tensor) is treated
/// as hostile.
const MAX_DEPTH: usize = 64;

/// The most values a tensor may have beyond the elements of its storage (through strides of 0).
const MAX_EXPANDED: usize = 1 << 24;

fn storage_dtype(class: &str) -> Option<DType> {
    Some(match class.rsplit('.').next()? {
        "FloatStorage" => DType::F32,
        "DoubleStorage" => DType::F64,
        "HalfStorage" => DType::F16,
        "BFloat16Storage" => DType::BF16,
        "LongStorage" => DType::I64,
        "IntStorage" => DType::I32,
        "ShortStorage" => DType::I16,
        "CharStorage" => DType::I8,
        "ByteStorage" => DType::U8,
        "BoolStorage" => DType::Bool,
        _ => return None,
    })
}

struct Ctx<'p, 'z> {
    p: &'p Pickle,
    zip: &'z ZipArchive<'z>,
    prefix: String,
    big_endian: bool,
    /// Raw storages already read, by key.
    storages: HashMap<String, Vec<u8>>,
}

impl Ctx<'_, '_> {
    fn int(&self, v: &Value, what: &str) -> Result<i64> {
        match v {
            Value::Int(i) => Ok(*i),
            Value::Bool(b) => Ok(*b as i64),
            _ => Err(err(format!("tensor {what} is not an integer"))),
        }
    }

    fn ints(&self, v: &Value, what: &str) -> Result<Vec<usize>> {
        let items = self.p.seq(v).ok_or_else(|| err(format!("tensor {what} is not a tuple")))?;
        items.iter().map(|x| usize::try_from(self.int(x, what)?).map_err(|_| err(format!("tensor {what} has a negative entry")))).collect()
    }

    /// Rebuilds the tensor described by a `_rebuild_tensor_v2` call, or `None` if `v` is not one.
    fn tensor(&mut self, v: &Value) -> Result<Option<Weight>> {
        let (p, mut v) = (self.p, v);
        // A parameter wraps a tensor; a hostile pickle can make it wrap itself (a list holding the
        // call that takes the list as its arguments), so the unwrapping is bounded.
        let mut wraps = 0;
        let (name, args) = loop {
            let Some(Object::Call { func, args, .. }) = p.obj(v) else { return Ok(None) };
            let name = p.global_name(func).unwrap_or_default();
            let args = p.seq(args).unwrap_or(&[]);
            match name.as_str() {
                "torch._utils._rebuild_tensor_v2" | "torch._utils._rebuild_tensor" => break (name, args),
                "torch._utils._rebuild_parameter" | "torch._utils._rebuild_parameter_with_state" => {
                    wraps += 1;
                    if wraps > MAX_DEPTH {
                        return Err(err("_rebuild_parameter calls are nested too deeply (they refer to themselves)"));
                    }
                    v = args.first().ok_or_else(|| err("_rebuild_parameter without a tensor"))?;
                }
                _ => return Ok(None),
            }
        };
        if args.len() < 4 {
            return Err(err(format!("{name} with {} arguments", args.len())));
        }
        let Some(Object::PersId(pid)) = self.p.obj(&args[0]) else { return Err(err("tensor storage is not a persistent id")) };
        let pid = self.p.seq(pid).ok_or_else(|| err("storage id is not a tuple"))?;
        let (class, key) = match pid {
            [Value::Str(tag), class, Value::Str(key), _location, ..] if tag == "storage" => (class, key.clone()),
            _ => return Err(err("storage id is not ('storage', type, key, location, numel)")),
        };
        let class_name = self.p.global_name(class).unwrap_or_default();
        let dtype = storage_dtype(&class_name).ok_or_else(|| err(format!("storage type `{class_name}` is not supported")))?;
        let offset = usize::try_from(self.int(&args[1], "offset")?).map_err(|_| err("negative storage offset"))?;
        let size = self.ints(&args[2], "size")?;
        let stride = self.ints(&args[3], "stride")?;
        if size.len() != stride.len() {
            return Err(err(format!("tensor size {size:?} and stride {stride:?} differ in rank")));
        }
        if !self.storages.contains_key(&key) {
            let path = format!("{}/data/{key}", self.prefix);
            let raw = self.zip.read_named(&path).map_err(|e| InteropError::TorchStorage { path: path.clone(), source: Box::new(e) })?;
            self.storages.insert(key.clone(), raw);
        }
        let raw = &self.storages[&key];
        let numel_storage = raw.len() / dtype.size();
        let count = size.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| err("tensor size overflows"))?;
        // Strides of 0 repeat storage elements (an expanded tensor), so the size alone does not
        // bound the values to make; a hostile file must not make the reader allocate without bound.
        if count > numel_storage.max(MAX_EXPANDED) {
            return Err(err(format!(
                "tensor of size {size:?} repeats the {numel_storage} elements of storage `{key}` into {count} values; \
                 more than {MAX_EXPANDED} are refused"
            )));
        }
        if count > 0 {
            // The furthest element read must lie inside the storage.
            let last = size
                .iter()
                .zip(&stride)
                .try_fold(offset, |a, (&d, &s)| (d - 1).checked_mul(s).and_then(|x| a.checked_add(x)))
                .ok_or_else(|| err("tensor strides overflow"))?;
            if last >= numel_storage {
                return Err(err(format!("storage `{key}` has {numel_storage} elements, the tensor reads element {last}: truncated")));
            }
        }
        let all = decode(raw, dtype, numel_storage, self.big_endian);
        let mut data = Vec::with_capacity(count);
        let mut idx = vec![0usize; size.len()];
        for _ in 0..count {
            data.push(all[offset + idx.iter().zip(&stride).map(|(i, s)| i * s).sum::<usize>()]);
            for d in (0..size.len()).rev() {
                idx[d] += 1;
                if idx[d] < size[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        Ok(Some(Weight { dtype, tensor: Tensor { shape: size, data } }))
    }

    /// The tensors of a dict whose values are tensors (other values are skipped).
    fn tensor_dict(&mut self, v: &Value, prefix: &str, out: &mut StateDict) -> Result<usize> {
        let Some(items) = self.p.dict_items(v) else { return Ok(0) };
        let mut n = 0;
        for (k, val) in items {
            let Value::Str(k) = k else { continue };
            if let Some(t) = self.tensor(val)? {
                out.push((format!("{prefix}{k}"), t));
                n += 1;
            }
        }
        Ok(n)
    }

    /// Parameters and buffers of a pickled `nn.Module` tree, named as `state_dict()` names them.
    fn module(&mut self, v: &Value, prefix: &str, depth: usize, out: &mut StateDict) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(err("module tree is nested too deeply"));
        }
        let Some(Object::Call { state: Some(state), .. }) = self.p.obj(v) else { return Ok(()) };
        let state = state.clone();
        for key in ["_parameters", "_buffers"] {
            if let Some(d) = self.p.get(&state, key) {
                self.tensor_dict(&d.clone(), prefix, out)?;
            }
        }
        if let Some(children) = self.p.get(&state, "_modules") {
            let items: Vec<(Value, Value)> = self.p.dict_items(children).map(|s| s.to_vec()).unwrap_or_default();
            for (k, child) in items {
                if let Value::Str(k) = k {
                    self.module(&child, &format!("{prefix}{k}."), depth + 1, out)?;
                }
            }
        }
        Ok(())
    }
}

/// Whether a zip archive is a `torch.save` file (it has a `*/data.pkl`).
pub fn is_torch_zip(zip: &ZipArchive) -> bool {
    zip.entries().iter().any(|e| e.name.ends_with("data.pkl") && e.name.matches('/').count() == 1)
}

/// Reads a `torch.save` zip file or a Lightning checkpoint from its bytes.
pub fn read_torch(bytes: &[u8]) -> Result<TorchFile> {
    if !crate::zip::is_zip(bytes) {
        if bytes.first() == Some(&0x80) {
            return Err(err("this is the legacy (PyTorch < 1.6) torch.save format, which is not supported; re-save it with a recent PyTorch or export the state dict to .npz or .safetensors"));
        }
        return Err(err("not a PyTorch file (neither a zip archive nor a pickle)"));
    }
    let zip = ZipArchive::new(bytes)?;
    let pkl = zip.entries().iter().find(|e| e.name.ends_with("/data.pkl") && e.name.matches('/').count() == 1).ok_or_else(|| {
        if zip.entries().iter().any(|e| e.name.ends_with("constants.pkl")) {
            err("this is a TorchScript archive (torch.jit.save); save the state dict with torch.save instead")
        } else {
            err("zip archive has no `<name>/data.pkl`: not a torch.save file")
        }
    })?;
    let prefix = pkl.name.trim_end_matches("/data.pkl").to_string();
    let big_endian = match zip.find(&format!("{prefix}/byteorder")) {
        Some(e) => zip.read(e)?.trim_ascii() == b"big",
        None => false,
    };
    let p = pickle::unpickle(&zip.read(pkl)?)?;
    let root = p.root.clone().ok_or_else(|| err("data.pkl holds no object"))?;
    let mut cx = Ctx { p: &p, zip: &zip, prefix, big_endian, storages: HashMap::new() };
    let mut state_dict = Vec::new();
    let mut meta = Map::new();
    let kind;
    if let Some(sd) = p.get(&root, "state_dict") {
        cx.tensor_dict(&sd.clone(), "", &mut state_dict)?;
        kind = "lightning";
        for (k, v) in p.dict_items(&root).unwrap_or(&[]) {
            let (Value::Str(k), Some(v)) = (k, scalar_json(v)) else { continue };
            meta.insert(k.clone(), v);
        }
    } else if cx.tensor_dict(&root, "", &mut state_dict)? > 0 {
        kind = "state_dict";
    } else if matches!(p.obj(&root), Some(Object::Call { state: Some(_), .. })) {
        cx.module(&root, "", 0, &mut state_dict)?;
        kind = "module";
    } else {
        return Err(err("found no tensors: the file holds neither a state dict, a Lightning checkpoint nor a module"));
    }
    if state_dict.is_empty() {
        return Err(err("the state dict holds no tensors"));
    }
    Ok(TorchFile { state_dict, kind, meta: json!(meta) })
}

fn scalar_json(v: &Value) -> Option<serde_json::Value> {
    Some(match v {
        Value::Bool(b) => json!(b),
        Value::Int(i) => json!(i),
        Value::Float(f) if f.is_finite() => json!(f),
        Value::Str(s) => json!(s),
        _ => return None,
    })
}
