//! ONNX and QONNX models into the graph IR.
//!
//! The importer walks the ONNX nodes in order and keeps, for every ONNX value, what it is
//! ([`value::Val`]): a tensor the graph computes, a constant, a quantized constant or a shape.
//! Constants and shape arithmetic are folded at import time (so the `Shape, Gather, Unsqueeze,
//! Concat, Reshape` flatten of PyTorch exports becomes one reshape); layers become IR modules whose
//! parameters keep their state-dict names where the file has them (`seq_blocks.2.weight`); QONNX
//! quantizers become number formats on the nodes that consume their values.
//!
//! The first dimension of the graph input is the batch and is left open, also when the file fixes
//! it (`[1, 16]`, `[789444, 16]`); a shape constant equal to that fixed size in the batch position
//! of a `Reshape` is read as the batch.

mod gelu;
mod lower;
mod ops;
mod util;
pub use ops::supported_onnx_ops;
mod value;

pub(crate) mod fold;

use crate::onnx::proto::{GraphProto, ModelProto, NodeProto};
use crate::onnx::tensor::{from_proto, Const};
use crate::{InteropError, Result, UnsupportedOp};
use mase_ir::{Graph, NodeId, NodeKind, NodeQuant, Op, ParamStore, QuantFormat, TensorMeta, ValueInfo};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use value::{Computed, Dim, Val};

/// What happens to quantizers on weights.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WeightQuant {
    /// Keep the file's float weights and put the quantizer on the node as its weight (or bias)
    /// format, as the file has it: the runtime quantizes them, and fine-tuning updates the
    /// float values (quantization-aware training).
    #[default]
    Keep,
    /// Store the quantized weights as the parameters and keep the format on the node as well.
    Fold,
}

/// Settings of [`import_model`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportOptions {
    pub weight_quant: WeightQuant,
}

/// An imported model.
#[derive(Clone, Debug)]
pub struct Imported {
    pub graph: Graph,
    pub params: ParamStore,
    /// Shape of one input sample (the first input's shape without the batch dimension).
    pub sample_shape: Vec<usize>,
    /// Shape of one output sample (the first output's).
    pub output_shape: Vec<usize>,
    /// Shape of one sample of every graph input, in order.
    pub sample_shapes: Vec<Vec<usize>>,
    /// Shape of one sample of every graph output, in order.
    pub output_shapes: Vec<Vec<usize>>,
    /// The standard ONNX opset the file imports.
    pub opset: i64,
    /// Things the importer changed or assumed, one sentence each (a fixed batch made dynamic).
    pub notes: Vec<String>,
}

/// The two batch sizes every node's shape is inferred for: a dimension that follows them is the
/// batch, one that does not change is fixed.
pub(crate) const PROBES: [usize; 2] = [2, 3];

/// Reads an ONNX or QONNX model file.
pub fn import_file(path: &Path, opts: &ImportOptions) -> Result<Imported> {
    let bytes = std::fs::read(path).map_err(|e| InteropError::io(path, "read", e))?;
    import_bytes(&bytes, opts).map_err(|e| e.in_file(path))
}

/// Imports a model from the bytes of a `.onnx` file.
pub fn import_bytes(bytes: &[u8], opts: &ImportOptions) -> Result<Imported> {
    import_model(&crate::onnx::decode_model(bytes)?, opts)
}

/// Imports a decoded model.
pub fn import_model(model: &ModelProto, opts: &ImportOptions) -> Result<Imported> {
    let graph = model.graph.as_ref().ok_or_else(|| InteropError::Graph { reason: "the model has no graph".into() })?;
    let opset = standard_opset(model)?;
    let gelus = gelu::find(graph);
    check_supported(graph, model, opset, &gelus)?;
    check_single_writers(graph)?;
    let mut im = Importer::new(opset, opts.clone());
    im.run(graph, &gelus)
}

fn standard_opset(model: &ModelProto) -> Result<i64> {
    let v = model.opset_import.iter().find(|o| o.domain.is_empty() || o.domain == "ai.onnx").map(|o| o.version);
    match v {
        // A model that imports no standard opset can only use custom-domain operators (QONNX
        // quantizers); no standard operator's version matters, so the newest rules apply.
        None => Ok(21),
        Some(v) if (6..=21).contains(&v) => Ok(v),
        Some(v) => Err(InteropError::UnsupportedOpset { domain: "ai.onnx".into(), version: v }),
    }
}

/// Every value is defined once: by an initializer, a graph input or one node's output. A second
/// definition (two nodes writing one output name) is refused, as onnxruntime refuses it; the
/// import would otherwise keep whichever came last.
fn check_single_writers(graph: &GraphProto) -> Result<()> {
    let mut defined: HashMap<&str, String> = HashMap::new();
    for t in &graph.initializer {
        defined.insert(t.name.as_str(), "an initializer".into());
    }
    for i in &graph.input {
        defined.entry(i.name.as_str()).or_insert_with(|| "a graph input".into());
    }
    for n in &graph.node {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            let this = format!("node `{}` ({})", n.name, n.op_type);
            if let Some(first) = defined.insert(o.as_str(), this) {
                return Err(util::err(n, format!("writes output `{o}`, which {first} already defines; each value needs one writer")));
            }
        }
    }
    Ok(())
}

/// All unsupported operators of the graph, in one error.
fn check_supported(graph: &GraphProto, model: &ModelProto, opset: i64, gelus: &gelu::ErfGelus) -> Result<()> {
    let mut bad: Vec<UnsupportedOp> = Vec::new();
    // The inner nodes of an exact GELU (its `Erf`) are imported with the chain's last `Mul`.
    for n in graph.node.iter().enumerate().filter(|(k, _)| !gelus.inner.contains(k)).map(|(_, n)| n) {
        let standard = n.domain.is_empty() || n.domain == "ai.onnx";
        let ok = (standard && ops::lowering(&n.op_type).is_some()) || crate::qonnx::is_quant_op(n);
        if !ok {
            let version = if standard { opset } else { model.opset_import.iter().find(|o| o.domain == n.domain).map_or(1, |o| o.version) };
            let op = UnsupportedOp {
                op_type: n.op_type.clone(),
                domain: if standard { String::new() } else { n.domain.clone() },
                opset: version,
            };
            if !bad.contains(&op) {
                bad.push(op);
            }
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(InteropError::UnsupportedOps { ops: bad })
    }
}

/// The import state.
pub(crate) struct Importer {
    pub g: Graph,
    pub params: ParamStore,
    pub vals: HashMap<String, Val>,
    /// Values that exist in the file but cannot be used (a second output of a node), with why.
    pub unavailable: HashMap<String, String>,
    /// Shape information of every IR node for the two probe batch sizes.
    pub probes: Vec<[ValueInfo; 2]>,
    /// Module and constant targets in use.
    pub targets: HashSet<String>,
    /// `get_attr` nodes already made for constants, by the initializer they came from.
    pub const_nodes: HashMap<String, NodeId>,
    /// How many ONNX nodes read each value (graph outputs count as readers).
    pub uses: HashMap<String, usize>,
    /// How many ONNX nodes read each value, a node reading it twice counting once.
    pub readers: HashMap<String, usize>,
    /// How many times each value is read as the indices (input 1) of a `Gather`.
    pub index_uses: HashMap<String, usize>,
    /// IR nodes that are bias-less linear layers made from a `MatMul`, which a following `Add`
    /// of a constant may complete.
    pub fusable: HashSet<NodeId>,
    pub opset: i64,
    /// The batch size the file fixes for its input, if it fixes one.
    pub hard_batch: Option<usize>,
    pub opts: ImportOptions,
    pub notes: Vec<String>,
    /// Values whose batch dimension a `Transpose` without `perm` moved away from axis 0, with
    /// the axis it went to and the Transpose's name, to explain the error of a node reading one.
    pub batch_moved: HashMap<String, (usize, String)>,
    /// How many nodes of each operator computed constants or shapes, folded at import time.
    pub folded: BTreeMap<String, usize>,
}

impl Importer {
    fn new(opset: i64, opts: ImportOptions) -> Importer {
        Importer {
            g: Graph::new(),
            params: ParamStore::new(),
            vals: HashMap::new(),
            unavailable: HashMap::new(),
            probes: Vec::new(),
            targets: HashSet::new(),
            const_nodes: HashMap::new(),
            uses: HashMap::new(),
            readers: HashMap::new(),
            index_uses: HashMap::new(),
            fusable: HashSet::new(),
            opset,
            hard_batch: None,
            opts,
            notes: Vec::new(),
            batch_moved: HashMap::new(),
            folded: BTreeMap::new(),
        }
    }

    fn run(&mut self, graph: &GraphProto, gelus: &gelu::ErfGelus) -> Result<Imported> {
        for t in &graph.initializer {
            let c = from_proto(t)?;
            self.vals.insert(t.name.clone(), Val::Const(c));
        }
        for n in &graph.node {
            for i in n.input.iter().filter(|i| !i.is_empty()) {
                *self.uses.entry(i.clone()).or_default() += 1;
            }
            for i in n.input.iter().filter(|i| !i.is_empty()).collect::<HashSet<_>>() {
                *self.readers.entry(i.clone()).or_default() += 1;
            }
            if let ("Gather", Some(i)) = (n.op_type.as_str(), n.input.get(1)) {
                *self.index_uses.entry(i.clone()).or_default() += 1;
            }
        }
        for o in &graph.output {
            *self.uses.entry(o.name.clone()).or_default() += 1;
        }
        let inputs: Vec<_> = graph.input.iter().filter(|i| !self.vals.contains_key(&i.name)).collect();
        if inputs.is_empty() {
            return Err(InteropError::Graph { reason: "the graph has no input that is not an initializer".into() });
        }
        // One placeholder per graph input, in the file's order.
        let sample_shapes = inputs.iter().map(|i| self.add_input(i)).collect::<Result<Vec<_>>>()?;
        for (k, n) in graph.node.iter().enumerate() {
            if gelus.inner.contains(&k) {
                continue;
            }
            match gelus.last.get(&k) {
                Some(x) => self.erf_gelu(n, x)?,
                None => self.node(n)?,
            }
        }
        if graph.output.is_empty() {
            return Err(InteropError::Graph { reason: "the graph has no output".into() });
        }
        let mut outs = Vec::with_capacity(graph.output.len());
        for out in &graph.output {
            let d = match self.value(&out.name)? {
                Val::Computed(d) => d,
                other => {
                    return Err(InteropError::Graph { reason: format!("output `{}` is {}, not a computed tensor", out.name, other.kind()) })
                }
            };
            if let Some(q) = d.quant.clone() {
                self.attach_output_quant(d.id, q, &out.name)?;
            }
            outs.push(d.id);
        }
        self.g.outputs(&outs);
        let p = self.probes[outs[0].0].clone();
        self.probes.push(p);
        mase_ir::validate(&self.g, Some(&self.params))?;
        if !self.folded.is_empty() {
            let total: usize = self.folded.values().sum();
            let ops: Vec<String> = self.folded.iter().map(|(op, k)| format!("{op} {k}")).collect();
            self.notes.push(format!("{total} nodes computing constants or shapes were folded at import time ({})", ops.join(", ")));
        }
        let sample_of = |c: Computed| c.shape.iter().skip(1).map(|d| if let Dim::Fixed(v) = d { *v as usize } else { 0 }).collect();
        let output_shapes: Vec<Vec<usize>> = outs.iter().map(|&o| self.dyn_of(o).map(sample_of)).collect::<Result<_>>()?;
        Ok(Imported {
            graph: std::mem::take(&mut self.g),
            params: std::mem::take(&mut self.params),
            sample_shape: sample_shapes[0].clone(),
            output_shape: output_shapes[0].clone(),
            sample_shapes,
            output_shapes,
            opset: self.opset,
            notes: std::mem::take(&mut self.notes),
        })
    }

    /// The placeholder for a graph input; returns the per-sample shape.
    fn add_input(&mut self, input: &crate::onnx::proto::ValueInfoProto) -> Result<Vec<usize>> {
        use crate::onnx::proto::{tensor_shape_proto::dimension::Value as DV, type_proto::Value as TV};
        let bad = |reason: String| InteropError::Graph { reason: format!("input `{}`: {reason}", input.name) };
        let tt = match input.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(TV::TensorType(t)) => t,
            _ => return Err(bad("it is not a tensor".into())),
        };
        if tt.elem_type != 1 {
            return Err(bad(format!("element type {} is not float32", tt.elem_type)));
        }
        let dims = tt.shape.as_ref().map(|s| s.dim.clone()).ok_or_else(|| bad("its shape is unknown".into()))?;
        if dims.is_empty() {
            return Err(bad("it has rank 0; the first dimension must be the batch".into()));
        }
        match &dims[0].value {
            Some(DV::DimValue(v)) if *v > 0 => {
                self.hard_batch = Some(*v as usize);
                self.notes.push(format!("input `{}` fixes the batch size to {v}; the imported model takes any batch size", input.name));
            }
            _ => {}
        }
        let mut sample = Vec::new();
        for (i, d) in dims.iter().enumerate().skip(1) {
            match &d.value {
                Some(DV::DimValue(v)) if *v > 0 => sample.push(*v as usize),
                Some(DV::DimParam(p)) => return Err(bad(format!("dimension {i} is symbolic (`{p}`); only the batch dimension may be")))?,
                _ => return Err(bad(format!("dimension {i} is unknown"))),
            }
        }
        if sample.iter().try_fold(1usize, |p, &d| p.checked_mul(d)).is_none_or(|n| n > 1 << 31) {
            return Err(bad(format!("its sample shape {sample:?} is too large")));
        }
        let id = self.g.placeholder(&input.name);
        let mut first = vec![1];
        first.extend(&sample);
        // MASE records the input shape in the placeholder's metadata; the executor reads it too.
        self.g.node_mut(id).meta.common.results.insert("data_out_0".into(), mase_ir::ArgMeta::Tensor(TensorMeta::float32(first)));
        let probe = |b: usize| {
            let mut s = vec![b];
            s.extend(&sample);
            ValueInfo::Tensor(s)
        };
        self.probes.push([probe(PROBES[0]), probe(PROBES[1])]);
        let shape = std::iter::once(Dim::Batch).chain(sample.iter().map(|&v| Dim::Fixed(v as i64))).collect();
        self.vals.insert(input.name.clone(), Val::Computed(Computed { id, shape, quant: None }));
        Ok(sample)
    }

    /// The value called `name`.
    pub fn value(&self, name: &str) -> Result<Val> {
        if let Some(v) = self.vals.get(name) {
            return Ok(v.clone());
        }
        if let Some(why) = self.unavailable.get(name) {
            return Err(InteropError::Graph { reason: format!("value `{name}` is used but {why}") });
        }
        Err(InteropError::Graph {
            reason: format!(
                "value `{name}` is used before it is defined (the graph is not topologically sorted or refers to a missing tensor)"
            ),
        })
    }

    /// The shape of an IR node's value, from its probes.
    pub fn dyn_of(&self, id: NodeId) -> Result<Computed> {
        let [a, b] = &self.probes[id.0];
        let (a, b) = (a.shape(), b.shape());
        let mut shape = Vec::with_capacity(a.len());
        for (&x, &y) in a.iter().zip(b) {
            shape.push(if x == y {
                Dim::Fixed(x as i64)
            } else if x == PROBES[0] && y == PROBES[1] {
                Dim::Batch
            } else {
                let n = &self.g.node(id).name;
                return Err(InteropError::node(
                    n,
                    self.g.node(id).op.mase_op(),
                    "a dimension mixes the batch with other dimensions, so the batch size cannot be left open",
                ));
            });
        }
        Ok(Computed { id, shape, quant: None })
    }

    /// Adds an IR node and infers its shapes. `data_in` are the formats of its inputs (quantized
    /// values it reads). The arguments are the fields of the node itself, hence their number.
    #[allow(clippy::too_many_arguments)]
    pub fn emit(
        &mut self,
        onnx: &NodeProto,
        name: &str,
        kind: NodeKind,
        target: &str,
        op: Op,
        inputs: &[NodeId],
        data_in: Vec<Option<QuantFormat>>,
    ) -> Result<NodeId> {
        let mut infos: [ValueInfo; 2] = [ValueInfo::Int(0), ValueInfo::Int(0)];
        for (k, info) in infos.iter_mut().enumerate() {
            let ins: Vec<ValueInfo> = inputs.iter().map(|i| self.probes[i.0][k].clone()).collect();
            *info = op.infer(name, &ins).map_err(|source| InteropError::NodeShape {
                node: onnx.name.clone(),
                op: onnx.op_type.clone(),
                source: Box::new(source),
                note: String::new(),
            })?;
        }
        let id = match kind {
            NodeKind::CallModule => self.g.call_module(target, op, inputs),
            _ => self.g.add_node(name, kind, target, op, inputs),
        };
        if data_in.iter().any(Option::is_some) {
            self.g.node_mut(id).quant = Some(NodeQuant { data_in, ..Default::default() });
        }
        self.probes.push(infos);
        Ok(id)
    }

    /// Puts a pending quantizer of the graph output onto the node that computes it.
    fn attach_output_quant(&mut self, id: NodeId, q: QuantFormat, value: &str) -> Result<()> {
        let n = self.g.node_mut(id);
        if matches!(n.op, Op::Input | Op::Constant) {
            return Err(InteropError::Graph {
                reason: format!("output `{value}` is a quantized graph input; there is no node to carry the quantizer"),
            });
        }
        let nq = n.quant.get_or_insert_with(NodeQuant::default);
        if nq.data_out.is_some() {
            return Err(InteropError::Graph { reason: format!("output `{value}` is quantized twice") });
        }
        nq.data_out = Some(q);
        Ok(())
    }

    /// A `get_attr` node reading constant `c`, which ONNX node `n` uses as an operand.
    ///
    /// An initializer under a state-dict name (`gain`, `blocks.0.scale`) is a parameter the
    /// model uses directly in `forward` (`x * self.gain`): as in torch.fx, a `get_attr` of a
    /// trainable parameter, which fine-tuning updates. ONNX does not tell parameters from
    /// buffers, so the import says so in its notes; batch-norm statistics (`running_mean`) are
    /// buffers by name. Other constants (folded values, `Constant` nodes, exporter-named ones
    /// such as `onnx::Mul_12`) are stored not trainable.
    pub fn const_node(&mut self, n: &NodeProto, c: &Const) -> NodeId {
        let param = c.origin.as_deref().filter(|o| c.is_float() && is_state_dict_name(o) && !is_buffer_name(o)).map(str::to_string);
        let want = match (&param, &c.origin) {
            (Some(o), _) => self.attr_name(n, o),
            (None, Some(o)) => o.clone(),
            (None, None) => format!("{}_const", base_name(n)),
        };
        if c.origin.is_some() {
            if let Some(&id) = self.const_nodes.get(&want) {
                if self.params.get(&self.g.node(id).target).is_some_and(|t| t.shape == c.shape && t.data == c.f32s()) {
                    return id;
                }
            }
        }
        let target = self.unique_target(&want);
        self.params.insert(target.clone(), c.tensor(), param.is_some());
        let id = self.g.get_attr(&target);
        self.probes.push([ValueInfo::Tensor(c.shape.clone()), ValueInfo::Tensor(c.shape.clone())]);
        if let Some(o) = &param {
            self.notes.push(format!(
                "initializer `{o}` read by `{}` ({}) is imported as trainable parameter `{target}` of a get_attr node \
                 (ONNX does not say whether it was a parameter or a buffer)",
                n.name, n.op_type
            ));
        }
        if c.origin.is_some() {
            self.const_nodes.insert(want, id);
        }
        id
    }

    /// The name of a parameter read directly by node `n`: the initializer's own name, except
    /// when the exporter shared one initializer between modules (it deduplicates equal values)
    /// and it names another module than the reader's; then the reader's scope and the
    /// initializer's last word (`seq_blocks.0.weight` read in `/head/Mul` -> `head.weight`).
    fn attr_name(&self, n: &NodeProto, origin: &str) -> String {
        let shared = self.readers.get(origin).copied().unwrap_or(0) > 1;
        let word = origin.rsplit('.').next().unwrap_or(origin);
        match scope_path(n) {
            Some(s) if shared && !origin.starts_with(&format!("{s}.")) => format!("{s}.{word}"),
            None if shared && origin.contains('.') => word.to_string(),
            _ => origin.to_string(),
        }
    }

    /// The target of a layer made from node `n` whose weights come from initializers
    /// `origins`: the node's PyTorch scope path, else the module path the initializers' names
    /// imply when no other node reads them, else the node's name. The exporter shares one
    /// initializer between layers whose values are equal (freshly initialised batch norms), so
    /// a shared initializer's name says nothing about the layer reading it.
    pub fn module_target(&mut self, n: &NodeProto, origins: &[Option<&str>]) -> String {
        let own: Vec<Option<&str>> = origins.iter().map(|o| o.filter(|name| self.readers.get(*name).copied().unwrap_or(0) <= 1)).collect();
        let want = scope_path(n).or_else(|| param_prefix(&own)).unwrap_or_else(|| base_name(n));
        self.unique_target(&want)
    }

    /// A module or constant path not used yet, made from `want` (`seq_blocks.2`): neither a
    /// target nor a stored tensor, nor the module of a stored layer parameter.
    pub fn unique_target(&mut self, want: &str) -> String {
        let mut base: String = want.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '.' { c } else { '_' }).collect();
        base = base.trim_matches('.').replace("..", ".");
        if base.is_empty() {
            base = "node".into();
        }
        let taken = |im: &Importer, t: &str| {
            im.targets.contains(t) || im.params.contains(t) || LAYER_PARAMS.iter().any(|p| im.params.contains(&format!("{t}.{p}")))
        };
        let mut t = base.clone();
        let mut k = 1;
        while taken(&*self, &t) {
            t = format!("{base}_{k}");
            k += 1;
        }
        self.targets.insert(t.clone());
        t
    }
}

/// The parameter names layers store under their target.
const LAYER_PARAMS: [&str; 4] = ["weight", "bias", "running_mean", "running_var"];

/// PyTorch's scope path of a node (`/seq_blocks/seq_blocks.2/Gemm` -> `seq_blocks.2`,
/// `/layer1/layer1.0/conv1/Conv` -> `layer1.0.conv1`): the module that ran the operator, as
/// torch.onnx's exporter records it in the node name. `None` for names without a scope.
pub(crate) fn scope_path(n: &NodeProto) -> Option<String> {
    let rest = n.name.strip_prefix('/')?;
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    if segs.len() < 2 {
        return None;
    }
    let scopes = &segs[..segs.len() - 1];
    let mut path = scopes[scopes.len() - 1].to_string();
    for s in scopes[..scopes.len() - 1].iter().rev() {
        if path.starts_with(&format!("{s}.")) {
            break;
        }
        path = format!("{s}.{path}");
    }
    Some(path)
}

/// The name a node keeps: its PyTorch scope path ([`scope_path`]), else the ONNX node name,
/// else its operator type in lower case.
pub(crate) fn base_name(n: &NodeProto) -> String {
    if let Some(path) = scope_path(n) {
        return path;
    }
    if n.name.is_empty() {
        n.op_type.to_ascii_lowercase()
    } else {
        n.name.clone()
    }
}

/// Whether an initializer name reads as a PyTorch state-dict path (`gain`, `blocks.0.scale`,
/// `Parameter193`): dot-separated words of letters, digits and underscores, the first not
/// starting with a digit. Exporters name folded constants otherwise (`onnx::Mul_12`, `38`,
/// `sequential/dense/BiasAdd/ReadVariableOp:0`).
pub(crate) fn is_state_dict_name(name: &str) -> bool {
    let word = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    name.split('.').all(word) && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
}

/// Whether a state-dict name is one of PyTorch's buffers by convention (batch-norm statistics),
/// which are not trained.
pub(crate) fn is_buffer_name(name: &str) -> bool {
    ["running_mean", "running_var", "num_batches_tracked"].contains(&name.rsplit('.').next().unwrap_or(name))
}

/// The module path that parameter names imply (`seq_blocks.0.running_mean` -> `seq_blocks.0`).
pub(crate) fn param_prefix(origins: &[Option<&str>]) -> Option<String> {
    origins
        .iter()
        .flatten()
        .find_map(|o| LAYER_PARAMS.iter().find_map(|s| o.strip_suffix(s)?.strip_suffix('.')).filter(|p| !p.is_empty()).map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_pytorch_scopes() {
        let n = |name: &str, op: &str| NodeProto { name: name.into(), op_type: op.into(), ..Default::default() };
        assert_eq!(base_name(&n("/seq_blocks.2/Gemm", "Gemm")), "seq_blocks.2");
        assert_eq!(base_name(&n("/layer1/layer1.0/conv1/Conv", "Conv")), "layer1.0.conv1");
        assert_eq!(base_name(&n("MatMul_16", "MatMul")), "MatMul_16");
        assert_eq!(base_name(&n("", "Gemm")), "gemm");
        assert_eq!(param_prefix(&[Some("38"), Some("features.3.running_mean")]).as_deref(), Some("features.3"));
        assert_eq!(param_prefix(&[Some("W"), None]), None);
    }
}
