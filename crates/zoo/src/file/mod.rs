//! User model files: a TOML list of layers that becomes a graph (format in `doc/model-files.md`).
//!
//! Layers run in file order. Each layer reads the previous layer's value unless it names its
//! `inputs`; module layers are called `seq_blocks.<i>` (i = the layer's index in the file) or by
//! their `name`, so node names follow torch.fx as in the named models. In-features and channels
//! come from shape inference on a probe batch as the layers are read, so each mismatch is
//! reported at the layer that causes it.

mod keys;
mod ops;

use crate::context::PROBE_BATCH;
use crate::layers::check_graph;
use crate::{ModelContext, Result, ZooError};
use keys::{Keys, LayerAt};
use mase_ir::{Graph, NodeId, Op, ValueInfo};
use ops::{layer_entry, layer_op, op_names, why_not_in_model_files, Call};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// The top level of a model file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    /// Model name used in messages; the file's path when absent.
    name: Option<String>,
    /// Free text for the reader of the file; accepted so that files can document themselves.
    #[allow(dead_code)]
    description: Option<String>,
    /// Label of the layer whose value the model returns; the last layer when absent.
    output: Option<String>,
    layers: Vec<toml::Table>,
}

/// The op names a model file may use.
pub fn model_file_ops() -> Vec<&'static str> {
    op_names()
}

/// The label the graph input goes by in `inputs` lists.
const INPUT_LABEL: &str = "x";

/// Reads and builds a model file (see [`parse_model_file`]).
pub fn load_model_file(path: &Path, ctx: &ModelContext) -> Result<Graph> {
    let text = std::fs::read_to_string(path).map_err(|source| ZooError::Read { path: path.to_path_buf(), source })?;
    parse_model_file(&text, &path.display().to_string(), ctx)
}

/// Builds the graph that a model file's text describes, for a data set's context. `origin` (a
/// path or any label) starts every error message.
pub fn parse_model_file(text: &str, origin: &str, ctx: &ModelContext) -> Result<Graph> {
    let file: ModelFile = toml::from_str(text).map_err(|e| syntax_error(text, origin, &e))?;
    let model = file.name.clone().unwrap_or_else(|| origin.to_string());
    ctx.check_basic(&model)?;
    if file.layers.is_empty() {
        return Err(ZooError::File {
            origin: origin.into(),
            key: "layers".into(),
            reason: "a model needs at least one [[layers]] entry".into(),
        });
    }
    let mut b = Builder::new(origin, ctx);
    for (index, table) in file.layers.iter().enumerate() {
        b.layer(index, table)?;
    }
    let out = match &file.output {
        Some(label) => *b.labels.get(label).ok_or_else(|| ZooError::File {
            origin: origin.into(),
            key: "output".into(),
            reason: format!("`{label}` is not the name of a layer"),
        })?,
        None => b.values.len() - 1,
    };
    b.check_all_used(out, &file.layers)?;
    let mut g = b.graph;
    g.output(b.values[out].node);
    check_graph(&model, &g, ctx)?;
    Ok(g)
}

/// A value a layer produced: its node and its shape for the probe batch.
struct Value {
    node: NodeId,
    shape: Vec<usize>,
}

/// The graph being assembled. Value 0 is the graph input; value `i + 1` is layer `i`'s.
struct Builder<'a> {
    origin: &'a str,
    ctx: &'a ModelContext,
    graph: Graph,
    values: Vec<Value>,
    /// Layer names (and `x`) to value indices.
    labels: HashMap<String, usize>,
    /// Whether a later layer reads value `i`.
    used: Vec<bool>,
}

impl<'a> Builder<'a> {
    fn new(origin: &'a str, ctx: &'a ModelContext) -> Builder<'a> {
        let mut graph = Graph::new();
        let node = graph.placeholder(INPUT_LABEL);
        let labels = HashMap::from([(INPUT_LABEL.to_string(), 0)]);
        Builder { origin, ctx, graph, values: vec![Value { node, shape: ctx.batch_shape(PROBE_BATCH) }], labels, used: vec![false] }
    }

    fn layer(&mut self, index: usize, table: &toml::Table) -> Result<()> {
        let mut at = LayerAt { origin: self.origin, index, op: "?".into(), name: None };
        at.op = match table.get("op") {
            Some(toml::Value::String(s)) => s.clone(),
            Some(v) => return Err(at.err("op", format!("expected an op name (a string), got {v}"))),
            None => return Err(at.err("op", format!("missing; every layer needs one of: {}", op_names().join(", ")))),
        };
        at.name = self.layer_name(&at, table)?;
        let Some(entry) = layer_entry(&at.op) else {
            let known = op_names().join(", ");
            return Err(at.err(
                "op",
                match why_not_in_model_files(&at.op) {
                    Some(why) => format!("op `{}` is not for model files: {why}; known ops: {known}", at.op),
                    None => format!("unknown op `{}`; known ops: {known}", at.op),
                },
            ));
        };
        let keys = Keys::new(table, &at, entry.keys)?;
        let inputs = self.layer_inputs(&at, table)?;
        let shapes: Vec<Vec<usize>> = inputs.iter().map(|&i| self.values[i].shape.clone()).collect();
        let (op, call) = layer_op(&at.op, &keys, &shapes, self.ctx)?;

        let ins: Vec<NodeId> = inputs.iter().map(|&i| self.values[i].node).collect();
        let mut infos: Vec<ValueInfo> = shapes.into_iter().map(ValueInfo::Tensor).collect();
        let node = match call {
            Call::Module => {
                let target = at.name.clone().unwrap_or_else(|| format!("seq_blocks.{index}"));
                self.graph.call_module(&target, op.clone(), &ins)
            }
            Call::Function(target) => self.graph.call_function(target, op.clone(), &ins),
            Call::Method(method) => self.graph.call_method(method, op.clone(), &ins),
            Call::View => {
                // `x.view(x.size(0), *shape)`: the size node is the view's second input.
                let size = self.graph.call_method("size", Op::Size { dim: 0 }, &ins);
                infos.push(ValueInfo::Int(infos[0].shape().first().map_or(0, |&b| b as i64)));
                self.graph.call_method("view", op.clone(), &[ins[0], size])
            }
        };
        // Shapes in the message are those of the probe batch; say so, since the file never names it.
        let info = op
            .infer(&self.graph.node(node).name, &infos)
            .map_err(|e| at.err("inputs", format!("{e} (shapes for a probe batch of {PROBE_BATCH})")))?;
        // Widths are unbounded integers in the file; a weight too large to exist is refused here
        // rather than when the parameters are allocated.
        if let Some(p) = op.param_specs().iter().find(|p| mase_ir::checked_numel(&p.shape).is_none()) {
            let key = match op {
                Op::Linear { .. } => "out_features",
                Op::Conv1d(_) | Op::Conv2d(_) => "out_channels",
                _ => "inputs",
            };
            let reason = format!("parameter `{}` of shape {:?} has more than {} elements", p.name, p.shape, mase_ir::MAX_ELEMENTS);
            return Err(at.err(key, reason));
        }
        for &i in &inputs {
            self.used[i] = true;
        }
        if let Some(n) = &at.name {
            self.labels.insert(n.clone(), self.values.len());
        }
        self.values.push(Value { node, shape: info.shape().to_vec() });
        self.used.push(false);
        Ok(())
    }

    /// The layer's `name`: a Python identifier, unique, and not a label the format reserves.
    fn layer_name(&self, at: &LayerAt, table: &toml::Table) -> Result<Option<String>> {
        let name = match table.get("name") {
            None => return Ok(None),
            Some(toml::Value::String(s)) => s.clone(),
            Some(v) => return Err(at.err("name", format!("expected a string, got {v}"))),
        };
        let identifier =
            name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !identifier {
            return Err(at.err("name", format!("`{name}` is not a valid name (letters, digits and _, not starting with a digit)")));
        }
        if name == INPUT_LABEL || name == "seq_blocks" {
            return Err(at.err("name", format!("`{name}` is reserved (`x` is the graph input, `seq_blocks` holds unnamed layers)")));
        }
        if self.labels.contains_key(&name) {
            return Err(at.err("name", format!("`{name}` is already the name of an earlier layer")));
        }
        Ok(Some(name))
    }

    /// The value indices the layer reads: its `inputs` labels, or the previous layer's value.
    fn layer_inputs(&self, at: &LayerAt, table: &toml::Table) -> Result<Vec<usize>> {
        let inputs = match table.get("inputs") {
            None => vec![self.values.len() - 1],
            Some(toml::Value::Array(list)) => {
                let mut out = Vec::with_capacity(list.len());
                for v in list {
                    let label = v.as_str().ok_or_else(|| at.err("inputs", format!("expected a list of layer names, got {v}")))?;
                    let i = self.labels.get(label).ok_or_else(|| {
                        at.err("inputs", format!("`{label}` is neither `x` (the model input) nor the name of an earlier layer"))
                    })?;
                    out.push(*i);
                }
                out
            }
            Some(v) => return Err(at.err("inputs", format!("expected a list of layer names, got {v}"))),
        };
        let want = layer_entry(&at.op).map_or(1, |e| e.arity);
        if inputs.len() != want {
            let default = if table.contains_key("inputs") { "" } else { " (without `inputs` a layer reads only the previous layer)" };
            return Err(at.err("inputs", format!("op `{}` takes {want} input(s), got {}{default}", at.op, inputs.len())));
        }
        Ok(inputs)
    }

    /// Rejects a layer whose value nothing reads and that is not the output: it is almost always a
    /// forgotten `inputs` entry, and fx would drop it anyway.
    fn check_all_used(&self, out: usize, layers: &[toml::Table]) -> Result<()> {
        for (v, used) in self.used.iter().enumerate().skip(1) {
            if !used && v != out {
                let index = v - 1;
                let op = layers[index].get("op").and_then(|o| o.as_str()).unwrap_or("?").to_string();
                let name = layers[index].get("name").and_then(|o| o.as_str()).map(str::to_string);
                let at = LayerAt { origin: self.origin, index, op, name };
                return Err(
                    at.err("output", "the value of this layer is never used: no later layer reads it and it is not the model output")
                );
            }
        }
        Ok(())
    }
}

/// A TOML or schema error as one line with its position.
fn syntax_error(text: &str, origin: &str, e: &toml::de::Error) -> ZooError {
    let at = match e.span() {
        Some(span) => {
            // Spans fall on character boundaries; `get` keeps a bad span from panicking all the same.
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {col}: ")
        }
        None => String::new(),
    };
    ZooError::Syntax { origin: origin.to_string(), message: format!("{at}{}", e.message().trim()) }
}
