//! One node's quantization config (doc/mase-semantics.md#quantize-config) turned into an
//! [`mase_ir::NodeQuant`].
//!
//! A config names a format (`name = "integer"`) and gives, per entry group (`data_in`, `weight`,
//! `bias`, `data_out`), the format's fields as `<group>_<field>` keys. Which groups an op reads:
//!
//! | op | required | optional |
//! |---|---|---|
//! | add, sub, mul, relu | data_in | |
//! | matmul, bmm, einsum | data_in (left operand), weight (right operand) | |
//! | scaled_dot_product_attention | data_in (query, key and value; a mask stays float) | |
//! | embedding | weight (the table: the module's own, or a function call's input 1) | |
//! | linear, conv1d, conv2d | data_in, weight | bias, data_out |
//!
//! Rules, with MASE's where they work and fixes where it fails:
//! - a key that is no `<group>_<field>` of the format (a typo, `weight_widht`) is an error naming
//!   it (MASE drops it); groups the op does not read are ignored, so one `default` serves all ops;
//! - a missing field of a group the op reads is an error naming the key;
//! - `"NA"` for a `frac_width` means `width // 2`, for an `exponent_bias` the format's default
//!   bias, and for ternary's `mean`/`median`/`max` "take it from the profiled statistics";
//! - a linear or conv layer with a bias but no `bias_*` keys keeps a float bias (MASE raises);
//! - `bypass = true` keeps the node in float and records the config;
//! - `relu` quantizes its input as unsigned integers (MASE's `ReLUInteger`);
//! - `binary` and `ternary` on linear and conv quantize the weight only (MASE's `LinearBinary`,
//!   `Conv2dBinaryScaling` and `*Ternary` pass the input and bias through);
//! - `mxint` and `mxfp` (the OCP microscaling formats) take MASE's keys: `width` (the element
//!   bits) or `exponent_width` and `frac_width`, and `block_size` (32 when absent); `block_dim`
//!   (the block axis, -1, the last, when absent) is the argument MASE's quantizers take and its
//!   modules fix (-1 for inputs, 1 for linear weights, 0 for biases);
//! - `data_in_skip_first_dim` is honoured for block formats (MASE drops the key);
//!   `binary_training` is accepted and has no effect (it matters to binary_residual only).

use crate::metadata::precision::EdgeFormat;
use mase_ir::{Node, NodeQuant, Op, QuantFormat};
use serde_json::{Map, Value};

/// Ops the quantize pass rewrites (MASE's `QUANTIZEABLE_OP`).
pub const QUANTIZABLE_OPS: [&str; 9] = ["add", "bmm", "conv1d", "conv2d", "matmul", "mul", "linear", "relu", "sub"];

/// Ops that `quantize` changes only where a key names them (by type or by name), never through
/// `default` or a `regex_name` pattern: batch norms, which MASE does not quantize, get formats for the integer affine
/// `fold_batch_norm` leaves (doc/hardware.md, section Batch norms); the activations and reductions
/// MASE's list lacks get a `data_in` format (their input quantized, the op run in float); einsum
/// takes matmul's groups, attention a `data_in` format for its query, key and value, and an
/// embedding a `weight` format for its table.
pub const QUANTIZABLE_BY_KEY: [&str; 13] = [
    "batch_norm1d",
    "batch_norm2d",
    "silu",
    "hardswish",
    "hardsigmoid",
    "softplus",
    "mish",
    "mean",
    "sum",
    "amax",
    "einsum",
    "scaled_dot_product_attention",
    "embedding",
];

/// The format names a config may give, with the fields of each group.
pub const FORMATS: &[(&str, &[&str])] = &[
    ("integer", &["width", "frac_width"]),
    ("fixed", &["width", "frac_width"]),
    ("minifloat_ieee", &["width", "exponent_width", "exponent_bias"]),
    ("minifloat_denorm", &["width", "exponent_width", "exponent_bias"]),
    ("log", &["width", "exponent_bias"]),
    ("block_fp", &["width", "exponent_width", "exponent_bias", "block_size"]),
    ("block_minifloat", &["width", "exponent_width", "exponent_bias_width", "block_size"]),
    ("block_log", &["width", "exponent_bias_width", "block_size"]),
    ("binary", &["width", "stochastic", "bipolar"]),
    ("ternary", &["width", "scaling_factor", "mean", "median", "max"]),
    ("mxint", &["width", "block_size", "block_dim"]),
    ("mxfp", &["exponent_width", "frac_width", "block_size", "block_dim"]),
];

/// MASE formats mase-rs does not implement.
const UNSUPPORTED: [&str; 3] = ["binary_residual", "lutnet", "logicnets"];

const GROUPS: [&str; 4] = ["data_in", "weight", "bias", "data_out"];

/// Keys besides `name`, `bypass` and `<group>_<field>` that MASE configs carry.
const EXTRA_KEYS: [&str; 2] = ["data_in_skip_first_dim", "binary_training"];

/// Required and optional groups of an op.
pub fn op_groups(op: &str) -> Option<(&'static [&'static str], &'static [&'static str])> {
    Some(match op {
        "add" | "sub" | "mul" | "relu" => (&["data_in"], &[]),
        "silu" | "hardswish" | "hardsigmoid" | "softplus" | "mish" | "mean" | "sum" | "amax" => (&["data_in"], &[]),
        "matmul" | "bmm" | "einsum" => (&["data_in", "weight"], &[]),
        "scaled_dot_product_attention" => (&["data_in"], &[]),
        "embedding" => (&["weight"], &[]),
        "linear" | "conv1d" | "conv2d" => (&["data_in", "weight"], &["bias", "data_out"]),
        // Without weight or bias groups, `quantize` derives them from the values (see
        // `derive_batch_norm_formats`).
        "batch_norm1d" | "batch_norm2d" => (&["data_in"], &["weight", "bias", "data_out"]),
        _ => return None,
    })
}

/// Statistics a ternary group may fall back to, read from `software.args.<entry>.stat`.
pub type StatLookup<'a> = &'a dyn Fn(&str, &str) -> Option<f64>;

/// The result of reading a config for a node: nothing to do (`name = "NA"`), or the node's quantization.
pub fn node_quant(node: &Node, mase_op: &str, cfg: &Map<String, Value>, stats: StatLookup<'_>) -> Result<Option<NodeQuant>, String> {
    let name = match cfg.get("name") {
        None => return Err("missing key `name` (the format, or \"NA\" to leave the node in float)".into()),
        Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) if s == "NA" || s == "None" => return Ok(None),
        Some(Value::String(s)) => s.clone(),
        Some(v) => return Err(format!("`name = {v}`: expected a format name")),
    };
    if UNSUPPORTED.contains(&name.as_str()) {
        return Err(format!("format `{name}` is not supported by mase-rs (known: {})", format_names()));
    }
    let fields = FORMATS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .ok_or_else(|| format!("unknown format `{name}` (known: {})", format_names()))?;
    let bypass = match cfg.get("bypass") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(format!("`bypass = {v}`: expected true or false")),
    };
    for k in cfg.keys() {
        if k == "name" || k == "bypass" || EXTRA_KEYS.contains(&k.as_str()) {
            continue;
        }
        let known = GROUPS.iter().any(|g| k.strip_prefix(g).and_then(|r| r.strip_prefix('_')).is_some_and(|f| fields.contains(&f)));
        if !known {
            let expect: Vec<String> = fields.iter().map(|f| format!("<group>_{f}")).collect();
            return Err(format!(
                "unknown key `{k}` for format `{name}` (keys: name, bypass, {}; groups: data_in, weight, bias, data_out)",
                expect.join(", ")
            ));
        }
    }
    if bypass {
        return Ok(Some(NodeQuant { bypass: true, config: Value::Object(cfg.clone()), ..NodeQuant::default() }));
    }
    let (required, optional) =
        op_groups(mase_op).ok_or_else(|| format!("op `{mase_op}` cannot be quantized (quantizable: {})", QUANTIZABLE_OPS.join(", ")))?;
    let present = |g: &str| cfg.keys().any(|k| k.starts_with(&format!("{g}_")) && k != "data_in_skip_first_dim");
    let has_bias = node.op.param_specs().iter().any(|s| s.name == "bias");
    let conv = matches!(node.op, Op::Conv1d(_) | Op::Conv2d(_));
    let skip_in = match cfg.get("data_in_skip_first_dim") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(format!("`data_in_skip_first_dim = {v}`: expected true or false")),
    };
    let mut formats: Vec<(&str, QuantFormat)> = Vec::new();
    for g in required.iter().chain(optional.iter().filter(|g| present(g))) {
        if *g == "bias" && !has_bias {
            continue;
        }
        let (signed, skip) = match *g {
            "data_in" => (mase_op != "relu", skip_in),
            "weight" => (true, conv),
            _ => (true, false),
        };
        let entry = match *g {
            "data_in" => "data_in_0",
            "weight" if matches!(mase_op, "matmul" | "bmm" | "einsum") => "data_in_1",
            other => other,
        };
        formats.push((g, group_format(&name, g, cfg, signed, skip, &|stat: &str| stats(entry, stat))?));
    }
    let get = |g: &str| formats.iter().find(|(n, _)| *n == g).map(|(_, f)| f.clone());
    let weight_only = matches!(name.as_str(), "binary" | "ternary") && matches!(mase_op, "linear" | "conv1d" | "conv2d");
    let data_in = get("data_in");
    let mut q = NodeQuant { config: Value::Object(cfg.clone()), ..NodeQuant::default() };
    match mase_op {
        "add" | "sub" | "mul" => q.data_in = vec![data_in.clone(), data_in],
        "relu" => q.data_in = vec![data_in],
        "matmul" | "bmm" | "einsum" => q.data_in = vec![data_in, get("weight")],
        "scaled_dot_product_attention" => q.data_in = vec![data_in.clone(), data_in.clone(), data_in],
        // A function call reads its table as input 1.
        "embedding" if matches!(node.op, Op::Embedding { functional: true, .. }) => q.data_in = vec![None, get("weight")],
        "embedding" => q.weight = get("weight"),
        _ => {
            q.data_in = vec![if weight_only { None } else { data_in }];
            q.weight = get("weight");
            q.bias = if weight_only { None } else { get("bias") };
            q.data_out = get("data_out");
        }
    }
    Ok(Some(q))
}

fn format_names() -> String {
    FORMATS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

fn is_na(v: &Value) -> bool {
    v.is_null() || v.as_str().is_some_and(|s| s == "NA" || s == "None" || s == "none")
}

/// The value of `<group>_<field>`, which must be present.
fn field<'a>(cfg: &'a Map<String, Value>, g: &str, f: &str) -> Result<&'a Value, String> {
    cfg.get(&format!("{g}_{f}")).ok_or_else(|| format!("missing key `{g}_{f}`"))
}

fn int(cfg: &Map<String, Value>, g: &str, f: &str) -> Result<i64, String> {
    let v = field(cfg, g, f)?;
    v.as_i64()
        .or_else(|| v.as_f64().filter(|x| x.fract() == 0.0).map(|x| x as i64))
        .ok_or_else(|| format!("`{g}_{f} = {v}`: expected an integer"))
}

fn width(cfg: &Map<String, Value>, g: &str) -> Result<u32, String> {
    let w = int(cfg, g, "width")?;
    u32::try_from(w).map_err(|_| format!("`{g}_width = {w}`: must be a positive integer"))
}

fn uint(cfg: &Map<String, Value>, g: &str, f: &str) -> Result<u32, String> {
    let v = int(cfg, g, f)?;
    u32::try_from(v).map_err(|_| format!("`{g}_{f} = {v}`: must not be negative"))
}

fn opt_int(cfg: &Map<String, Value>, g: &str, f: &str) -> Result<Option<i32>, String> {
    let v = field(cfg, g, f)?;
    if is_na(v) {
        return Ok(None);
    }
    let i = int(cfg, g, f)?;
    i32::try_from(i).map(Some).map_err(|_| format!("`{g}_{f} = {i}` is out of range"))
}

fn flag(cfg: &Map<String, Value>, g: &str, f: &str) -> Result<bool, String> {
    match field(cfg, g, f)? {
        Value::Bool(b) => Ok(*b),
        Value::Number(n) if n.as_i64() == Some(0) || n.as_i64() == Some(1) => Ok(n.as_i64() == Some(1)),
        v => Err(format!("`{g}_{f} = {v}`: expected true or false (or 0 / 1)")),
    }
}

/// A block size: an integer or a list of them, each positive or MASE's `-1` for the whole
/// dimension (stored as 0, see `mase_quant::Blocking`).
fn block_size(cfg: &Map<String, Value>, g: &str) -> Result<Vec<usize>, String> {
    let v = field(cfg, g, "block_size")?;
    let bad = || format!("`{g}_block_size = {v}`: expected a positive integer, -1 (the whole dimension) or a list of them");
    let entry = |x: &Value| match x.as_i64() {
        Some(-1) => Ok(0),
        Some(b) if b > 0 => Ok(b as usize),
        _ => Err(bad()),
    };
    match v {
        Value::Array(a) if !a.is_empty() => a.iter().map(entry).collect(),
        Value::Array(_) => Err(bad()),
        x => entry(x).map(|b| vec![b]),
    }
}

/// The OCP microscaling block: `<group>_block_size` (one positive integer, 32 when absent) and
/// `<group>_block_dim` (the block axis, negative from the end, -1 when absent).
fn mx_block(cfg: &Map<String, Value>, g: &str) -> Result<(usize, i64), String> {
    let size = match cfg.get(&format!("{g}_block_size")) {
        None => 32,
        Some(_) => {
            let b = int(cfg, g, "block_size")?;
            usize::try_from(b).ok().filter(|&b| b > 0).ok_or_else(|| format!("`{g}_block_size = {b}`: expected a positive integer"))?
        }
    };
    let dim = match cfg.get(&format!("{g}_block_dim")) {
        None => -1,
        Some(_) => int(cfg, g, "block_dim")?,
    };
    Ok((size, dim))
}

/// The format of one group.
fn group_format(
    name: &str,
    g: &str,
    cfg: &Map<String, Value>,
    signed: bool,
    skip_first_dim: bool,
    stats: &dyn Fn(&str) -> Option<f64>,
) -> Result<QuantFormat, String> {
    Ok(match name {
        "integer" | "fixed" => {
            let width = width(cfg, g)?;
            let frac_width = if is_na(field(cfg, g, "frac_width")?) {
                (width / 2) as i32
            } else {
                let f = int(cfg, g, "frac_width")?;
                i32::try_from(f).map_err(|_| format!("`{g}_frac_width = {f}` is out of range"))?
            };
            QuantFormat::Integer { width, frac_width, signed }
        }
        "minifloat_ieee" | "minifloat_denorm" => {
            let (width, exponent_width, exponent_bias) =
                (width(cfg, g)?, uint(cfg, g, "exponent_width")?, opt_int(cfg, g, "exponent_bias")?);
            if name == "minifloat_ieee" {
                QuantFormat::MinifloatIeee { width, exponent_width, exponent_bias }
            } else {
                QuantFormat::MinifloatDenorm { width, exponent_width, exponent_bias }
            }
        }
        "log" => QuantFormat::Log { width: width(cfg, g)?, exponent_bias: opt_int(cfg, g, "exponent_bias")? },
        "block_fp" => QuantFormat::BlockFp {
            width: width(cfg, g)?,
            exponent_width: uint(cfg, g, "exponent_width")?,
            exponent_bias: opt_int(cfg, g, "exponent_bias")?,
            block_size: block_size(cfg, g)?,
            skip_first_dim,
        },
        "block_minifloat" => QuantFormat::BlockMinifloat {
            width: width(cfg, g)?,
            exponent_width: uint(cfg, g, "exponent_width")?,
            exponent_bias_width: uint(cfg, g, "exponent_bias_width")?,
            block_size: block_size(cfg, g)?,
            skip_first_dim,
        },
        "block_log" => QuantFormat::BlockLog {
            width: width(cfg, g)?,
            exponent_bias_width: uint(cfg, g, "exponent_bias_width")?,
            block_size: block_size(cfg, g)?,
            skip_first_dim,
        },
        "binary" => {
            let w = width(cfg, g)?;
            if w != 1 {
                return Err(format!("`{g}_width = {w}`: binary values have width 1"));
            }
            QuantFormat::Binary { stochastic: flag(cfg, g, "stochastic")?, bipolar: flag(cfg, g, "bipolar")? }
        }
        "ternary" => {
            let w = width(cfg, g)?;
            if w != 2 {
                return Err(format!("`{g}_width = {w}`: ternary values have width 2"));
            }
            // MASE's threshold: the first available of 0.75 * mean, 0.05 * max, 0.75 * median,
            // each from the config or else from the profiled statistics of the tensor.
            let stat = |f: &str, from: &str| -> Result<Option<f64>, String> {
                let v = field(cfg, g, f)?;
                if is_na(v) {
                    return Ok(stats(from));
                }
                v.as_f64().map(Some).ok_or_else(|| format!("`{g}_{f} = {v}`: expected a number or \"NA\""))
            };
            let (mean, max, median) = (stat("mean", "abs_mean")?, stat("max", "max")?, stat("median", "median")?);
            let threshold = mean.map(|m| 0.75 * m).or(max.map(|m| 0.05 * m)).or(median.map(|m| 0.75 * m)).map(|t| t as f32);
            QuantFormat::Ternary { scaling_factor: flag(cfg, g, "scaling_factor")?, threshold }
        }
        "mxint" => {
            let (block_size, block_dim) = mx_block(cfg, g)?;
            QuantFormat::Mxint { width: width(cfg, g)?, block_size, block_dim }
        }
        "mxfp" => {
            let (block_size, block_dim) = mx_block(cfg, g)?;
            QuantFormat::Mxfp {
                exponent_width: uint(cfg, g, "exponent_width")?,
                frac_width: uint(cfg, g, "frac_width")?,
                block_size,
                block_dim,
            }
        }
        other => return Err(format!("unknown format `{other}`")),
    })
}

/// A short description of a format: `integer [8, 4]`, `integer [8, 4] unsigned`.
pub fn describe(f: &QuantFormat) -> String {
    let e = EdgeFormat::from_quant(f);
    let p: Vec<String> = e.precision.iter().map(|v| v.to_string()).collect();
    let unsigned = matches!(f, QuantFormat::Integer { signed: false, .. });
    format!("{} [{}]{}", e.kind, p.join(", "), if unsigned { " unsigned" } else { "" })
}
