//! Checkpoints: one self-describing safetensors file per saved model.
//!
//! Tensors: the model's parameters and buffers under their state-dict names, and optimizer state
//! under `optimizer.<name>`, all f32. The `__metadata__` strings:
//! - `format`: [`CHECKPOINT_FORMAT`];
//! - `graph`: the [`Graph`] as JSON;
//! - `meta`: free-form JSON (epoch, metrics, configuration);
//! - `params`, `buffers`, `optimizer`: JSON lists of the parameter names in store order, the
//!   non-trainable ones among them, and the optimizer tensor names in order (safetensors itself
//!   sorts tensors by name, which would lose both orders and the trainable flags);
//! - `crc32`: CRC-32 of the tensor bytes followed by the metadata strings above, so that a damaged
//!   file is an error rather than a silently different model.

use crate::{IoError, Result};
use mase_ir::{Graph, ParamStore, Tensor};
use safetensors::tensor::{Dtype, SafeTensors, View};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The `format` string of checkpoints this version writes and reads.
pub const CHECKPOINT_FORMAT: &str = "mase-rs-checkpoint/1";
const OPT_PREFIX: &str = "optimizer.";
/// Metadata keys covered by the checksum, in the order they are fed to it.
const HASHED_KEYS: [&str; 6] = ["format", "graph", "meta", "params", "buffers", "optimizer"];

/// A saved model: graph, parameters (with their trainable flags), optimizer state and metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    pub graph: Graph,
    pub params: ParamStore,
    /// Optimizer state as flat vectors (`exp_avg.seq_blocks.2.weight`, ...), in the optimizer's order.
    pub optimizer_tensors: Vec<(String, Vec<f32>)>,
    pub meta: serde_json::Value,
}

/// One f32 tensor as safetensors sees it.
struct F32View<'a> {
    shape: Vec<usize>,
    data: &'a [f32],
}

impl View for F32View<'_> {
    fn dtype(&self) -> Dtype {
        Dtype::F32
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Owned(self.data.iter().flat_map(|v| v.to_le_bytes()).collect())
    }
    fn data_len(&self) -> usize {
        self.data.len() * 4
    }
}

fn ck_err(path: &Path, reason: impl Into<String>) -> IoError {
    IoError::Checkpoint { path: path.to_path_buf(), reason: reason.into() }
}

/// A checkpoint error whose cause (safetensors', serde's, the IR's) stays the source.
fn ck_cause(path: &Path, what: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static) -> IoError {
    IoError::CheckpointPart { path: path.to_path_buf(), what: what.into(), source: Box::new(source) }
}

fn checksum(data: &[u8], meta: &HashMap<String, String>) -> String {
    let mut h = crc32fast::Hasher::new();
    h.update(data);
    for k in HASHED_KEYS {
        // Length prefixes keep ("ab", "c") and ("a", "bc") apart.
        let v = meta.get(k).map(String::as_str).unwrap_or("");
        h.update(&(v.len() as u64).to_le_bytes());
        h.update(v.as_bytes());
    }
    format!("{:08x}", h.finalize())
}

/// Serialises a checkpoint into the bytes of a safetensors file.
fn encode(path: &Path, ck: &Checkpoint) -> Result<Vec<u8>> {
    let mut views: Vec<(String, F32View)> = Vec::with_capacity(ck.params.len() + ck.optimizer_tensors.len());
    let mut names = HashSet::new();
    for (name, e) in ck.params.iter() {
        names.insert(name.to_string());
        views.push((name.to_string(), F32View { shape: e.tensor.shape.clone(), data: &e.tensor.data }));
    }
    for (name, v) in &ck.optimizer_tensors {
        let full = format!("{OPT_PREFIX}{name}");
        if !names.insert(full.clone()) {
            return Err(ck_err(
                path,
                format!("tensor name `{full}` is used twice (a parameter and optimizer state, or repeated optimizer state)"),
            ));
        }
        views.push((full, F32View { shape: vec![v.len()], data: v }));
    }
    let mut meta: HashMap<String, String> = HashMap::new();
    meta.insert("format".into(), CHECKPOINT_FORMAT.into());
    meta.insert("graph".into(), to_json(path, &ck.graph)?);
    meta.insert("meta".into(), to_json(path, &ck.meta)?);
    meta.insert("params".into(), to_json(path, &ck.params.names().collect::<Vec<_>>())?);
    meta.insert("buffers".into(), to_json(path, &ck.params.iter().filter(|(_, e)| !e.trainable).map(|(n, _)| n).collect::<Vec<_>>())?);
    meta.insert("optimizer".into(), to_json(path, &ck.optimizer_tensors.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>())?);
    // The checksum covers the data region, which safetensors lays out after the header; serialise
    // once without it to learn the region, then again with it (the region does not move).
    let probe = safetensors::tensor::serialize(views.iter().map(|(n, v)| (n.as_str(), v.clone_view())), &Some(meta.clone()))
        .map_err(|e| ck_cause(path, "cannot encode", e))?;
    let data_start = header_end(&probe).ok_or_else(|| ck_err(path, "internal: encoded header is malformed"))?;
    meta.insert("crc32".into(), checksum(&probe[data_start..], &meta));
    safetensors::tensor::serialize(views.iter().map(|(n, v)| (n.as_str(), v.clone_view())), &Some(meta))
        .map_err(|e| ck_cause(path, "cannot encode", e))
}

impl F32View<'_> {
    fn clone_view(&self) -> F32View<'_> {
        F32View { shape: self.shape.clone(), data: self.data }
    }
}

/// One metadata value as JSON text.
fn to_json<T: serde::Serialize + ?Sized>(path: &Path, v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| ck_cause(path, "cannot encode metadata", e))
}

/// Offset of the first data byte: 8 bytes of header length, then the header.
fn header_end(bytes: &[u8]) -> Option<usize> {
    let n = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    usize::try_from(n).ok()?.checked_add(8).filter(|&e| e <= bytes.len())
}

/// Writes `ck` to `path` atomically: the bytes go to a temporary file in the same folder, which is
/// flushed to disk and then renamed over `path`, so a crash never leaves a half-written checkpoint.
pub fn save_checkpoint(path: &Path, ck: &Checkpoint) -> Result<()> {
    let bytes = encode(path, ck)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let file_name = path.file_name().ok_or_else(|| ck_err(path, "the path names no file"))?;
    let tmp = dir.join(format!(".{}.tmp-{}", file_name.to_string_lossy(), std::process::id()));
    let werr = |p: &Path| {
        let p = p.to_path_buf();
        move |source| IoError::Write { path: p, source }
    };
    let write = || -> Result<()> {
        let mut f = std::fs::File::create(&tmp).map_err(werr(&tmp))?;
        f.write_all(&bytes).map_err(werr(&tmp))?;
        f.sync_all().map_err(werr(&tmp))?;
        std::fs::rename(&tmp, path).map_err(werr(path))
    };
    if let Err(e) = write() {
        // Best effort: do not leave the temporary file behind; the write error is what matters.
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    // Persist the rename itself. Opening a folder for syncing is not possible on every platform,
    // so failure here is ignored: the data are already on disk.
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Reads and checks a checkpoint: format string, checksum, every listed tensor present as f32,
/// no unlisted tensors, and the graph valid with its parameters (names and shapes).
pub fn load_checkpoint(path: &Path) -> Result<Checkpoint> {
    let bytes = std::fs::read(path).map_err(|source| IoError::Read { path: path.to_path_buf(), source })?;
    decode(path, &bytes)
}

/// What a file given as a checkpoint holds, told from its first bytes (16 are enough).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Empty,
    /// A safetensors file, as mase-rs checkpoints are: 8 bytes of header length, then `{`. The
    /// length itself may be damaged.
    Safetensors,
    /// A zip archive: a PyTorch `torch.save` file, a Lightning checkpoint or an `.npz`.
    Zip,
    /// A bare pickle: PyTorch's legacy `torch.save` format.
    Pickle,
    /// An ONNX model (a protobuf `ModelProto`).
    Onnx,
    Unknown,
}

/// Tells what a file is from its first bytes.
pub fn sniff_file(head: &[u8]) -> FileKind {
    // ONNX writers emit `ModelProto` fields in number order: `ir_version` (field 1, a small
    // varint), then producer name/version, domain, model version, doc string, graph, opsets or
    // metadata (fields 2 to 8 and 14).
    const ONNX_SECOND_FIELD: [u8; 8] = [0x12, 0x1a, 0x22, 0x28, 0x32, 0x3a, 0x42, 0x72];
    match head {
        [] => FileKind::Empty,
        [b'P', b'K', 3 | 5, 4 | 6, ..] => FileKind::Zip,
        [0x80, 2..=5, ..] => FileKind::Pickle,
        [_, _, _, _, _, _, _, _, b'{', ..] => FileKind::Safetensors,
        [0x08, 1..=0x7f, f, ..] if ONNX_SECOND_FIELD.contains(f) => FileKind::Onnx,
        _ => FileKind::Unknown,
    }
}

/// What the file is, as error messages say it.
pub fn describe_file(head: &[u8]) -> String {
    match sniff_file(head) {
        FileKind::Empty => "the file is empty (0 bytes)".into(),
        FileKind::Safetensors => "a safetensors file".into(),
        FileKind::Zip => "a zip archive (a PyTorch or Lightning checkpoint, or an .npz)".into(),
        FileKind::Pickle => "a pickle (PyTorch's legacy torch.save format)".into(),
        FileKind::Onnx => "an ONNX model".into(),
        FileKind::Unknown => {
            let hex: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
            format!("of an unknown format (first bytes {})", hex.join(" "))
        }
    }
}

pub(crate) fn decode(path: &Path, bytes: &[u8]) -> Result<Checkpoint> {
    match sniff_file(bytes) {
        FileKind::Safetensors => {}
        FileKind::Unknown | FileKind::Empty => {
            return Err(ck_err(path, format!("not a mase-rs checkpoint (a safetensors file): {}", describe_file(bytes))))
        }
        _ => return Err(ck_err(path, format!("{}, not a mase-rs checkpoint (a safetensors file)", describe_file(bytes)))),
    }
    let announced = u64::from_le_bytes(bytes[..8].try_into().unwrap_or_default());
    if announced > (bytes.len() - 8) as u64 {
        return Err(ck_err(
            path,
            format!(
                "a safetensors file whose header length (its first 8 bytes) is damaged: it says {announced} bytes, the file has {}",
                bytes.len()
            ),
        ));
    }
    let (_, header) =
        SafeTensors::read_metadata(bytes).map_err(|e| ck_cause(path, "not a readable safetensors file (truncated or damaged?)", e))?;
    let st = SafeTensors::deserialize(bytes).map_err(|e| ck_cause(path, "not a readable safetensors file", e))?;
    let meta = header.metadata().clone().unwrap_or_default();
    let get = |k: &str| meta.get(k).ok_or_else(|| ck_err(path, format!("metadata key `{k}` is missing; not a mase-rs checkpoint?")));
    let format = get("format")?;
    if format != CHECKPOINT_FORMAT {
        return Err(ck_err(path, format!("format `{format}`, expected `{CHECKPOINT_FORMAT}`")));
    }
    let data_start = header_end(bytes).ok_or_else(|| ck_err(path, "header length is out of range"))?;
    // Fuzzing builds (cargo-fuzz sets `cfg(fuzzing)`) skip the checksum, so that mutated files
    // reach the parsing behind it.
    if !cfg!(fuzzing) {
        let want = checksum(&bytes[data_start..], &meta);
        if get("crc32")? != &want {
            return Err(ck_err(path, format!("checksum mismatch (stored {}, computed {want}): the file is damaged", get("crc32")?)));
        }
    }
    let parse = |k: &str| -> Result<serde_json::Value> {
        serde_json::from_str(get(k)?).map_err(|e| ck_cause(path, format!("metadata `{k}` is not valid JSON"), e))
    };
    let list = |k: &str| -> Result<Vec<String>> {
        serde_json::from_value(parse(k)?).map_err(|e| ck_cause(path, format!("metadata `{k}` is not a list of names"), e))
    };
    let graph: Graph = serde_json::from_value(parse("graph")?).map_err(|e| ck_cause(path, "metadata `graph` is not a graph", e))?;
    let buffers: HashSet<String> = list("buffers")?.into_iter().collect();

    let mut used = HashSet::new();
    let mut tensor = |name: &str| -> Result<(Vec<usize>, Vec<f32>)> {
        let v = st.tensor(name).map_err(|_| ck_err(path, format!("tensor `{name}` is listed but missing")))?;
        if v.dtype() != Dtype::F32 {
            return Err(ck_err(path, format!("tensor `{name}` has dtype {:?}, expected F32", v.dtype())));
        }
        used.insert(name.to_string());
        Ok((v.shape().to_vec(), f32s(v.data())))
    };
    let mut params = ParamStore::new();
    for name in list("params")? {
        let (shape, data) = tensor(&name)?;
        let t = Tensor::new(shape, data).map_err(|e| ck_cause(path, format!("tensor `{name}`"), e))?;
        let trainable = !buffers.contains(&name);
        params.insert(name, t, trainable);
    }
    let mut optimizer_tensors = Vec::new();
    for name in list("optimizer")? {
        let (_, data) = tensor(&format!("{OPT_PREFIX}{name}"))?;
        optimizer_tensors.push((name, data));
    }
    if let Some(extra) = st.names().into_iter().find(|n| !used.contains(n.as_str())) {
        return Err(ck_err(path, format!("tensor `{extra}` is not listed in the metadata")));
    }
    mase_ir::validate(&graph, Some(&params)).map_err(|source| IoError::CheckpointGraph { path: path.to_path_buf(), source })?;
    Ok(Checkpoint { graph, params, optimizer_tensors, meta: parse("meta")? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mase_ir::{NormSpec, Op};
    use serde_json::json;

    /// jsc-tiny: BatchNorm1d(16), ReLU, Linear(16, 5), ReLU, with recognisable parameter values.
    pub(crate) fn jsc_tiny() -> Checkpoint {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let bn = g.call_module("seq_blocks.0", Op::BatchNorm1d(NormSpec::new(16)), &[x]);
        let r = g.call_module("seq_blocks.1", Op::Relu, &[bn]);
        let l = g.call_module("seq_blocks.2", Op::Linear { in_features: 16, out_features: 5, bias: true }, &[r]);
        let r2 = g.call_module("seq_blocks.3", Op::Relu, &[l]);
        g.output(r2);
        let mut params = ParamStore::new();
        for (name, spec) in g.param_specs() {
            let n: usize = spec.shape.iter().product();
            let data = (0..n).map(|i| i as f32 * 0.25 - 1.0 + name.len() as f32).collect();
            params.insert(name, Tensor { shape: spec.shape.clone(), data }, spec.trainable);
        }
        Checkpoint {
            graph: g,
            params,
            optimizer_tensors: vec![
                ("exp_avg.seq_blocks.2.weight".into(), vec![0.5; 80]),
                ("step".into(), vec![3.0]),
                ("empty".into(), vec![]),
            ],
            meta: json!({"epoch": 4, "val_loss": 0.84, "dataset": "jsc"}),
        }
    }

    #[test]
    fn round_trip_keeps_everything() {
        let ck = jsc_tiny();
        let bytes = encode(Path::new("x.ckpt"), &ck).map_err(|e| e.to_string());
        let back = match bytes.and_then(|b| decode(Path::new("x.ckpt"), &b).map_err(|e| e.to_string())) {
            Ok(b) => b,
            Err(e) => panic!("round trip failed: {e}"),
        };
        assert_eq!(back, ck);
        let order: Vec<&str> = back.params.names().collect();
        assert_eq!(order[..3], ["seq_blocks.0.weight", "seq_blocks.0.bias", "seq_blocks.0.running_mean"]);
        assert_eq!(back.params.entry("seq_blocks.0.running_var").map(|e| e.trainable), Some(false));
        assert_eq!(back.params.entry("seq_blocks.2.weight").map(|e| e.trainable), Some(true));
    }

    #[test]
    fn parameterless_model_round_trips() {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let r = g.call_function("torch.nn.functional.relu", Op::Relu, &[x]);
        g.output(r);
        let ck = Checkpoint { graph: g, params: ParamStore::new(), optimizer_tensors: vec![], meta: json!(null) };
        let back = encode(Path::new("e.ckpt"), &ck).and_then(|b| decode(Path::new("e.ckpt"), &b)).map_err(|e| e.to_string());
        assert_eq!(back, Ok(ck));
    }

    #[test]
    fn damaged_bytes_are_errors() {
        let path = Path::new("d.ckpt");
        let Ok(good) = encode(path, &jsc_tiny()) else { panic!("encode") };
        let data_start = header_end(&good).unwrap_or(0);
        // Truncations and single flipped bytes at the start, inside the header, and in the data.
        let mut damaged: Vec<(String, Vec<u8>)> = Vec::new();
        for cut in [0, 5, 8, data_start / 2, data_start, good.len() - 1] {
            damaged.push((format!("cut at {cut}"), good[..cut].to_vec()));
        }
        for pos in [0, 3, 9, data_start / 3, data_start / 2, data_start - 2, data_start, data_start + 4, good.len() - 1] {
            let mut b = good.clone();
            b[pos] ^= 0x20;
            damaged.push((format!("flip at {pos}"), b));
        }
        for (what, b) in damaged {
            match decode(path, &b) {
                Ok(_) => panic!("{what}: damaged checkpoint was accepted"),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(msg.starts_with("checkpoint d.ckpt") && !msg.contains('\n'), "{what}: {msg}");
                }
            }
        }
    }

    #[test]
    fn files_that_are_no_checkpoint_say_what_they_are() {
        let path = Path::new("w.ckpt");
        let Ok(good) = encode(path, &jsc_tiny()) else { panic!("encode") };
        // The header length's third byte damaged: it announces 2 MiB more than the file has.
        let mut long = good.clone();
        long[2] ^= 0x20;
        let announced = u64::from_le_bytes(long[..8].try_into().unwrap_or_default());
        // An ONNX `ModelProto` starts with `ir_version` (field 1) and `producer_name` (field 2).
        let onnx = b"\x08\x07\x12\x07pytorch".to_vec();
        let cases: [(&str, Vec<u8>, FileKind, String); 6] = [
            ("empty", vec![], FileKind::Empty, "the file is empty (0 bytes)".into()),
            ("onnx", onnx, FileKind::Onnx, "an ONNX model, not a mase-rs checkpoint".into()),
            ("zip", b"PK\x03\x04rest".to_vec(), FileKind::Zip, "a zip archive (a PyTorch or Lightning checkpoint, or an .npz)".into()),
            ("pickle", vec![0x80, 2, b'}', b'.'], FileKind::Pickle, "a pickle (PyTorch's legacy torch.save format)".into()),
            ("text", b"hello".to_vec(), FileKind::Unknown, "of an unknown format (first bytes 68 65 6c 6c 6f)".into()),
            (
                "damaged length",
                long,
                FileKind::Safetensors,
                format!("header length (its first 8 bytes) is damaged: it says {announced} bytes, the file has {}", good.len()),
            ),
        ];
        for (what, bytes, kind, want) in cases {
            assert_eq!(sniff_file(&bytes[..bytes.len().min(16)]), kind, "{what}");
            let e = decode(path, &bytes).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.starts_with("checkpoint w.ckpt: ") && e.contains(&want), "{what}: {e}");
        }
        assert_eq!(sniff_file(&good[..16]), FileKind::Safetensors);
    }

    #[test]
    fn foreign_and_inconsistent_files_are_errors() {
        let path = Path::new("f.ckpt");
        let views = [("w".to_string(), F32View { shape: vec![2], data: &[1.0, 2.0] })];
        let plain = |meta: Option<HashMap<String, String>>| {
            safetensors::tensor::serialize(views.iter().map(|(n, v)| (n.as_str(), v.clone_view())), &meta).unwrap_or_default()
        };
        let e = decode(path, &plain(None)).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("metadata key `format` is missing"), "{e}");
        let other = HashMap::from([("format".to_string(), "pt".to_string())]);
        let e = decode(path, &plain(Some(other))).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("format `pt`, expected `mase-rs-checkpoint/1`"), "{e}");

        // A parameter the graph needs is absent: the graph check names it.
        let mut ck = jsc_tiny();
        let mut params = ParamStore::new();
        for (n, e) in ck.params.iter().filter(|(n, _)| *n != "seq_blocks.2.bias") {
            params.insert(n, e.tensor.clone(), e.trainable);
        }
        ck.params = params;
        let e = encode(path, &ck).and_then(|b| decode(path, &b)).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("seq_blocks.2.bias"), "{e}");

        // Graphs whose numbers no builder would write (a hand-edited or hostile file): the graph
        // check names the node instead of a later shape computation indexing past a list or
        // allocating without bound. (op, whether to store its parameters, error fragment)
        let huge = 1usize << 40;
        let mut conv = mase_ir::ConvSpec::new(2, 1, 2, 3, 1, 0);
        conv.kernel = vec![3];
        let mut pool = mase_ir::PoolSpec::new(2, 2);
        pool.stride = vec![0, 0];
        let cases = [
            (Op::Conv2d(conv), true, "node `c`: kernel [3] needs 2 entries"),
            (Op::MaxPool2d(pool), true, "node `c`: stride [0, 0] has an entry of 0"),
            (Op::Linear { in_features: huge, out_features: huge, bias: false }, false, "more than 2147483648 elements"),
        ];
        for (op, store, want) in cases {
            let mut g = Graph::new();
            let x = g.placeholder("x");
            let c = g.call_module("c", op, &[x]);
            g.output(c);
            let mut params = ParamStore::new();
            for (name, spec) in g.param_specs().into_iter().filter(|_| store) {
                params.insert(name, Tensor::zeros(spec.shape.clone()), spec.trainable);
            }
            let ck = Checkpoint { graph: g, params, optimizer_tensors: vec![], meta: json!(null) };
            let e = encode(path, &ck).and_then(|b| decode(path, &b)).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.starts_with("checkpoint f.ckpt") && e.contains(want) && !e.contains('\n'), "{want}: {e}");
        }

        // Optimizer state may not shadow a parameter.
        let mut ck = jsc_tiny();
        ck.params.insert("optimizer.step", Tensor::scalar(1.0), false);
        let e = encode(path, &ck).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("used twice"), "{e}");
    }

    #[test]
    fn save_is_atomic_and_loadable() {
        let dir = std::env::temp_dir().join(format!("mase-io-ck-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("best.ckpt");
        let ck = jsc_tiny();
        assert!(save_checkpoint(&path, &ck).is_ok());
        // Saving again replaces the file; no temporary file is left behind.
        assert!(save_checkpoint(&path, &ck).is_ok());
        let names: Vec<String> = std::fs::read_dir(&dir)
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        assert_eq!(names, ["best.ckpt"]);
        assert_eq!(load_checkpoint(&path).ok(), Some(ck));
        let e = load_checkpoint(&dir.join("none.ckpt")).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("none.ckpt: cannot read"), "{e}");
        let e = save_checkpoint(&dir.join("no/such/dir/x.ckpt"), &jsc_tiny()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("cannot write"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
