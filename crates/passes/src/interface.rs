//! `save_node_meta_param` / `load_node_meta_param` (doc/mase-semantics.md#metadata-files): every node's
//! metadata as a TOML file `{node_name: {common, software, hardware}}`, with `None` written as
//! `"NA"` and read back as `None`, as MASE does. Unlike MASE, saving leaves the live metadata as
//! it is (MASE converts it in place), and loading a file that names a node the graph lacks is an
//! error naming it. A value that really was the string `"NA"` (a statistic over too few samples)
//! comes back as `None`, as in MASE.

use crate::report::write_file;
use crate::{PassContext, PassError, PassReport, Result};
use mase_ir::{CommonMeta, Graph};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::path::PathBuf;

/// The file name MASE uses.
pub const NODE_META_FILE: &str = "node_meta_param.toml";

/// Arguments of `save_node_meta_param`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SaveMetaArgs {
    /// The file to write (default: `<out_dir>/node_meta_param.toml`).
    pub save_path: Option<PathBuf>,
}

/// Arguments of `load_node_meta_param`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadMetaArgs {
    /// The file to read (default: `<out_dir>/node_meta_param.toml`).
    pub load_path: Option<PathBuf>,
}

fn to_toml(v: &Value) -> toml::Value {
    match v {
        Value::Null => toml::Value::String("NA".into()),
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(a) => toml::Value::Array(a.iter().map(to_toml).collect()),
        Value::Object(m) => toml::Value::Table(m.iter().map(|(k, x)| (k.clone(), to_toml(x))).collect()),
    }
}

/// A TOML value as JSON, each string through `string`: a metadata file reads `"NA"` as `None`
/// ([`na_as_null`]), pass arguments keep their strings. A datetime becomes its text, a non-finite
/// float `null`.
pub fn toml_to_json(v: &toml::Value, string: &dyn Fn(&str) -> Value) -> Value {
    match v {
        toml::Value::String(s) => string(s),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f).map(Value::Number).unwrap_or(Value::Null),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(|x| toml_to_json(x, string)).collect()),
        toml::Value::Table(t) => Value::Object(t.iter().map(|(k, x)| (k.clone(), toml_to_json(x, string))).collect()),
    }
}

/// MASE's reading of a metadata file's strings: `"NA"` is `None`.
pub fn na_as_null(s: &str) -> Value {
    if s == "NA" {
        Value::Null
    } else {
        Value::String(s.to_string())
    }
}

/// The metadata of every node as TOML text.
pub fn node_meta_toml(graph: &Graph) -> Result<String> {
    let mut m = Map::new();
    for n in graph.nodes() {
        let common = serde_json::to_value(&n.meta.common).map_err(|e| PassError::ArgsCause {
            pass: "save_node_meta_param".into(),
            what: String::new(),
            source: Box::new(e),
        })?;
        m.insert(n.name.clone(), json!({"common": common, "software": n.meta.software, "hardware": n.meta.hardware}));
    }
    toml::to_string(&to_toml(&Value::Object(m))).map_err(|e| PassError::ArgsCause {
        pass: "save_node_meta_param".into(),
        what: "cannot write TOML".into(),
        source: Box::new(e),
    })
}

fn default_path(ctx: &PassContext, pass: &str, explicit: &Option<PathBuf>) -> Result<PathBuf> {
    explicit
        .clone()
        .or_else(|| ctx.out_dir.as_ref().map(|d| d.join(NODE_META_FILE)))
        .ok_or_else(|| PassError::args(pass, "no path given and no output folder"))
}

/// The save pass.
pub fn save_node_meta_param(graph: &mut Graph, ctx: &mut PassContext, args: &SaveMetaArgs) -> Result<PassReport> {
    const PASS: &str = "save_node_meta_param";
    let path = default_path(ctx, PASS, &args.save_path)?;
    let text = node_meta_toml(graph)?;
    write_file(&path, &text)?;
    let mut r = PassReport::new(PASS, json!({"path": path, "nodes": graph.len()}));
    r.files = vec![path];
    Ok(r)
}

/// The load pass: replaces the metadata of every node the file names.
pub fn load_node_meta_param(graph: &mut Graph, ctx: &mut PassContext, args: &LoadMetaArgs) -> Result<PassReport> {
    const PASS: &str = "load_node_meta_param";
    let path = default_path(ctx, PASS, &args.load_path)?;
    let text = std::fs::read_to_string(&path).map_err(|e| PassError::file(&path, "cannot read", e))?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| PassError::file(&path, "", e))?;
    let mut loaded = 0;
    for (name, v) in &table {
        let id = graph.find(name).ok_or_else(|| PassError::UnknownNode { pass: PASS.into(), node: name.clone() })?;
        let v = toml_to_json(v, &na_as_null);
        let bad = |what: &str, e: serde_json::Error| PassError::file(&path, &format!("node `{name}`: bad {what}"), e);
        let common: CommonMeta =
            serde_json::from_value(v.get("common").cloned().unwrap_or(json!({"args": {}, "results": {}}))).map_err(|e| bad("common", e))?;
        let part = |k: &str| -> Result<Map<String, Value>> {
            match v.get(k) {
                None => Ok(Map::new()),
                Some(Value::Object(m)) => Ok(m.clone()),
                Some(other) => {
                    Err(PassError::File { path: path.clone(), reason: format!("node `{name}`: bad {k}: expected a table, got {other}") })
                }
            }
        };
        let (software, hardware) = (part("software")?, part("hardware")?);
        let meta = &mut graph.node_mut(id).meta;
        meta.common = common;
        meta.software = software;
        meta.hardware = hardware;
        loaded += 1;
    }
    Ok(PassReport::new(PASS, json!({"path": path, "nodes": loaded})))
}
