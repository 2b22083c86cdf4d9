//! Fake quantization in the executor (quantization is data on the nodes: doc/ir.md#quantization-on-nodes).
//!
//! For a node whose [`mase_ir::NodeQuant`] is active, the executor
//!
//! - quantizes each quantized data input into a copy owned by the plan, and the kernel reads the
//!   copy (the plan remaps the node's input storage to it);
//! - quantizes the weight and bias into buffers owned by the executor, once per change of the
//!   parameters (every optimizer step in training; in evaluation the copy is kept until
//!   `load_params`), and swaps them into the parameter slots around the node's kernels;
//! - quantizes the output in place after the kernel, keeping the unquantized output in a plan
//!   buffer for backward kernels that read their own output.
//!
//! Backward is the straight-through estimator: kernels see the quantized operands (so the weight
//! gradient is `dY^T * quantize(X)`, as PyTorch computes it through a fake-quant op), and the
//! gradient of each quantized operand is written unchanged to its float original. Nothing is
//! allocated per step.
//!
//! Where a format applies: `data_in[k]` to data input `k`; `weight` and `bias` to the node's
//! parameters of those names; `weight` on an op without a weight parameter (`matmul`) to its
//! second data input, as MASE's quantized `matmul`/`bmm` do; a `bias` format on a node without a
//! bias is ignored (MASE requires the keys even then).

use crate::slots::ParamSlot;
use crate::topo::{is_alias, Topo};
use crate::{Result, RuntimeError};
use mase_ir::{Graph, Node, Op, QuantFormat, Rng};

/// Label of the random stream of stochastic quantizers, forked from the executor's seed so that
/// dropout masks do not move when a model is quantized.
const QUANT_STREAM: u64 = 0x0051_5541_4e54;

/// A quantized weight or bias.
pub(crate) struct ParamQuant {
    pub slot: usize,
    pub fmt: QuantFormat,
    /// The quantized copy; while a node's kernels run it holds the float values instead (swapped).
    pub q: Vec<f32>,
    /// The parameter version `q` was computed from.
    pub version: u64,
}

/// The executor's share of quantization: the weight and bias copies by node.
pub(crate) struct ExecQuant {
    pub params: Vec<Vec<ParamQuant>>,
    /// Bumped whenever the parameters change (optimizer step, load).
    pub version: u64,
    pub rng: Rng,
}

/// The formats of a node, if its quantization is active.
fn active(node: &Node) -> Option<&mase_ir::NodeQuant> {
    node.quant.as_ref().filter(|q| q.is_active())
}

fn quant_err(node: &Node, operand: String, source: mase_quant::QuantError) -> RuntimeError {
    RuntimeError::Quant { node: node.name.clone(), operand, source: Box::new(source) }
}

impl ExecQuant {
    /// Validates every format of the graph and allocates the weight and bias copies.
    pub fn new(graph: &Graph, topo: &Topo, slots: &[ParamSlot], seed: u64) -> Result<ExecQuant> {
        let mut params = Vec::with_capacity(graph.len());
        for (i, node) in graph.nodes().iter().enumerate() {
            let mut list = Vec::new();
            if let Some(q) = active(node) {
                if is_alias(&node.op) || node.op.gives_int() || matches!(node.op, Op::Input | Op::Constant) {
                    return Err(RuntimeError::QuantUnsupported {
                        node: node.name.clone(),
                        op: node.op.mase_op().into(),
                        reason: "it has no computation of its own to quantize".into(),
                    });
                }
                for (k, f) in q.data_in.iter().enumerate() {
                    if let Some(f) = f {
                        mase_quant::validate_format(f).map_err(|e| quant_err(node, format!("data_in_{k}"), e))?;
                    }
                }
                if let Some(f) = &q.data_out {
                    mase_quant::validate_format(f).map_err(|e| quant_err(node, "data_out_0".into(), e))?;
                }
                for (fmt, name) in [(&q.weight, "weight"), (&q.bias, "bias")] {
                    let Some(fmt) = fmt else { continue };
                    mase_quant::validate_format(fmt).map_err(|e| quant_err(node, name.into(), e))?;
                    let pos = node.params().iter().position(|(_, s)| s.name == name);
                    let Some(slot) = pos.map(|p| topo.slots[i][p]) else { continue };
                    let s = &slots[slot];
                    mase_quant::validate_for_shape(fmt, &s.shape).map_err(|e| quant_err(node, name.into(), e))?;
                    list.push(ParamQuant { slot, fmt: fmt.clone(), q: vec![0.0; s.data.len()], version: 0 });
                }
            }
            params.push(list);
        }
        Ok(ExecQuant { params, version: 1, rng: Rng::new(seed).fork(QUANT_STREAM) })
    }

    /// Marks the parameters as changed, so the next use quantizes them again.
    pub fn params_changed(&mut self) {
        self.version += 1;
    }

    /// Puts the quantized weight and bias of `node` into the parameter slots (quantizing them
    /// first if the parameters changed since), keeping the float values aside.
    pub fn swap_in(&mut self, node: usize, params: &mut [ParamSlot]) {
        let Some(list) = self.params.get_mut(node) else { return };
        for p in list {
            if p.version != self.version {
                let s = &params[p.slot];
                // Formats and shapes were validated when the executor was built.
                if let Err(e) = mase_quant::quantize(&p.fmt, &s.data, &s.shape, &mut p.q, &mut self.rng) {
                    unreachable!("parameter `{}` was validated for its format: {e}", s.name);
                }
                p.version = self.version;
            }
            std::mem::swap(&mut params[p.slot].data, &mut p.q);
        }
    }

    /// Puts the float weight and bias of `node` back.
    pub fn swap_out(&mut self, node: usize, params: &mut [ParamSlot]) {
        let Some(list) = self.params.get_mut(node) else { return };
        for p in list {
            std::mem::swap(&mut params[p.slot].data, &mut p.q);
        }
    }
}

/// A quantized data input of one node in one plan.
pub(crate) struct QuantIn {
    /// Storage of the float value and of its quantized copy.
    pub src: usize,
    pub dst: usize,
    pub fmt: QuantFormat,
    pub shape: Vec<usize>,
}

/// A quantized output: the kernel's float result is kept in `raw` for backward.
pub(crate) struct QuantOut {
    pub raw: usize,
    pub fmt: QuantFormat,
    pub shape: Vec<usize>,
}

/// What a plan quantizes at one node.
#[derive(Default)]
pub(crate) struct PlanQuant {
    pub inputs: Vec<QuantIn>,
    pub output: Option<QuantOut>,
}

impl PlanQuant {
    /// Quantizes the node's data inputs into their copies.
    pub fn inputs(&self, vals: &mut [Vec<f32>], rng: &mut Rng) {
        for q in &self.inputs {
            let mut dst = std::mem::take(&mut vals[q.dst]);
            quantize_checked(&q.fmt, &vals[q.src], &q.shape, &mut dst, rng);
            vals[q.dst] = dst;
        }
    }

    /// Quantizes the node's output `y` in place, keeping the float result in its raw buffer.
    pub fn output(&self, vals: &mut [Vec<f32>], y: &mut Vec<f32>, rng: &mut Rng) {
        if let Some(q) = &self.output {
            let mut raw = std::mem::take(&mut vals[q.raw]);
            quantize_checked(&q.fmt, y, &q.shape, &mut raw, rng);
            std::mem::swap(y, &mut raw);
            vals[q.raw] = raw;
        }
    }
}

/// Quantizes with a format and shape the plan has validated.
fn quantize_checked(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], rng: &mut Rng) {
    if let Err(e) = mase_quant::quantize(fmt, x, shape, out, rng) {
        unreachable!("the plan validated this format for shape {shape:?}: {e}");
    }
}

/// The data-input and output quantization of a plan: the storage each kernel reads its inputs
/// from, and per node what to quantize. New buffers (quantized input copies, raw outputs) are
/// appended to `vals`.
pub(crate) fn plan_quant(
    graph: &Graph,
    topo: &Topo,
    shapes: &[Vec<usize>],
    vals: &mut Vec<Vec<f32>>,
) -> Result<(Vec<Vec<usize>>, Vec<PlanQuant>)> {
    let mut ins = topo.ins.clone();
    let mut plans: Vec<PlanQuant> = Vec::with_capacity(graph.len());
    for (i, node) in graph.nodes().iter().enumerate() {
        let mut pq = PlanQuant::default();
        if let Some(q) = active(node) {
            let has_weight = node.params().iter().any(|(_, s)| s.name == "weight");
            for (k, u) in node.inputs.iter().enumerate() {
                let fmt = match q.data_in.get(k) {
                    Some(Some(f)) => Some(f),
                    _ if k == 1 && !has_weight => q.weight.as_ref(),
                    _ => None,
                };
                let Some(fmt) = fmt else { continue };
                if !topo.is_tensor[u.0] {
                    continue;
                }
                let shape = shapes[u.0].clone();
                mase_quant::validate_for_shape(fmt, &shape).map_err(|e| quant_err(node, format!("data_in_{k}"), e))?;
                let dst = vals.len();
                vals.push(vec![0.0; shape.iter().product()]);
                pq.inputs.push(QuantIn { src: topo.ins[i][k], dst, fmt: fmt.clone(), shape });
                ins[i][k] = dst;
            }
            if let Some(fmt) = &q.data_out {
                let shape = shapes[i].clone();
                mase_quant::validate_for_shape(fmt, &shape).map_err(|e| quant_err(node, "data_out_0".into(), e))?;
                let raw = vals.len();
                vals.push(vec![0.0; shape.iter().product()]);
                pq.output = Some(QuantOut { raw, fmt: fmt.clone(), shape });
            }
        }
        plans.push(pq);
    }
    Ok((ins, plans))
}
