//! The integer executor: inference in integer arithmetic, the way hardware computes a quantized
//! network, for graphs whose quantized nodes use `integer` (fixed-point) formats.
//!
//! A node runs in integer arithmetic when it is a quantized `linear`, `conv1d`, `conv2d`, `relu`,
//! `add`, `sub`, `mul`, `matmul` or batch norm (below) whose data inputs, weight and bias (where it has them) all have
//! `integer` formats; a `linear` whose input or weight is bipolar (`BipolarQuant` with one
//! power-of-two scale, Brevitas' 1-bit layers) runs so too, its bipolar operands as the codes
//! `±1` (the sign of the value, `+1` at 0), so that a bipolar-by-bipolar layer computes
//! `2 popcount(xnor(w, x)) - K` as the hardware does. Then:
//!
//! - inputs become codes `clamp(round(x * 2^f), lo, hi)` in the narrowest of `i8`/`i16`/`i32`
//!   that holds the format; an input produced by an integer node is rescaled from that node's
//!   integer result by a shift (round half to even) instead of from its float value;
//! - weights and biases become codes the same way;
//! - products are summed in an `i32` accumulator when the largest possible sum fits, else `i64`;
//!   the result has `f_x + f_w` fraction bits, and the bias is added at that scale (or the sum is
//!   shifted up to the bias's scale when the bias has more fraction bits);
//! - a `data_out` integer format rescales the accumulator by a shift with round half to even
//!   and clamps it; without one the accumulator is the node's result.
//!
//! A quantized batch norm runs so too when it is in the affine form `fold_batch_norm` leaves
//! (running mean 0, running variance 1, `eps` 0): one product per element by its channel's
//! weight, plus its bias, as a linear layer with one input per output. An unquantized `relu`,
//! max pool or `dropout` whose input is an integer result runs on its codes and keeps its
//! fraction bits; so do the unquantized ops that only move, select or bound values (`getitem`,
//! `transpose`, `permute`, `expand`, `repeat`, `cat`, `stack`, `amax`, adaptive max pools,
//! `relu6`, and `clamp`/`pad` whose bounds or fill are whole codes) when their inputs are
//! integer results (`movement.rs`).
//!
//! Every other node (a batch norm with running statistics, average pools, nodes with other
//! formats, other unquantized nodes) runs in float on the dequantized values, with its fake
//! quantization, exactly as in [`Executor::forward`] in evaluation mode.
//!
//! Why it lives in the runtime: it needs the plan (buffers, the float kernels for the nodes in
//! between, the quantized weight copies) and is one more way to run a plan. The number formats
//! themselves (`Fixed`, codes) come from `mase-quant`.
//!
//! Agreement with the fake-quant float path: a float kernel computes the same sum of products
//! of dyadic values, and `f32` adds them exactly as long as every partial sum, in units of the
//! result's last fraction bit, stays below 2^24. Where that holds for every node (`acc_bits <=
//! 24` in the report), the two paths give the same bits; elsewhere the float path has rounded and
//! the integer result is the exact one.

mod bipolar;
pub use bipolar::{bipolar_code, bipolar_fixed};
mod codes;
pub use codes::shift_right_rne;
mod movement;
mod ops;

use crate::executor::{Executor, Mode};
use crate::kernels::conv::ConvGeom;
use crate::kernels::pool::{max_pool_codes, PoolGeom};
use crate::kernels::{Fwd, NodeKernel};
use crate::plan::Plan;
use crate::slots::ParamSlot;
use crate::{ExecOptions, Result, RuntimeError};
use codes::{bits_used, requant, Codes};
use mase_ir::{Graph, Node, NormSpec, Op, ParamStore, QuantFormat};
use mase_quant::Fixed;

/// How one node ran.
#[derive(Clone, Debug, PartialEq)]
pub struct IntegerNode {
    pub node: String,
    /// MASE's op name (`linear`, `batch_norm1d`, ...).
    pub op: String,
    /// `None` when the node ran in integer arithmetic; otherwise why it ran in float.
    pub float_reason: Option<String>,
    /// Integer type of each input's codes (integer nodes only).
    pub input_types: Vec<&'static str>,
    /// `i32` or `i64` (integer nodes only).
    pub accumulator: Option<&'static str>,
    /// Bits of the largest accumulator magnitude this batch reached (integer nodes only). Up to
    /// 24 the float path computes the same sums exactly.
    pub acc_bits: u32,
    /// Fraction bits of the node's integer result.
    pub out_frac: Option<i32>,
}

impl IntegerNode {
    /// Whether the node ran in integer arithmetic.
    pub fn is_integer(&self) -> bool {
        self.float_reason.is_none()
    }
}

/// Which nodes ran in integer arithmetic, in graph order (nodes without a kernel, such as
/// `flatten` and `output`, are left out).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IntegerReport {
    pub nodes: Vec<IntegerNode>,
}

impl IntegerReport {
    /// Names of the nodes that ran in integer arithmetic.
    pub fn integer_nodes(&self) -> Vec<&str> {
        self.nodes.iter().filter(|n| n.is_integer()).map(|n| n.node.as_str()).collect()
    }

    /// The largest accumulator width any integer node reached.
    pub fn max_acc_bits(&self) -> u32 {
        self.nodes.iter().map(|n| n.acc_bits).max().unwrap_or(0)
    }
}

/// The result of [`run_integer`].
#[derive(Clone, Debug, PartialEq)]
pub struct IntegerRun {
    pub output: Vec<f32>,
    pub shape: Vec<usize>,
    pub report: IntegerReport,
}

/// Runs `graph` on the batch `x` (shape `shape`) with integer arithmetic wherever the
/// quantization allows, in evaluation mode; see the module documentation.
pub fn run_integer(graph: &Graph, params: &ParamStore, x: &[f32], shape: &[usize]) -> Result<IntegerRun> {
    let mut exec = Executor::new(graph, params, ExecOptions { threads: 1, seed: 0 })?;
    let (output, report) = exec.forward_integer(x, shape)?;
    let output = output.to_vec();
    let shape = exec.output_shape(shape.first().copied().unwrap_or(0))?;
    Ok(IntegerRun { output, shape, report })
}

/// The integer formats of a node that can run in integer arithmetic.
struct IntSpec {
    ins: Vec<Fixed>,
    weight: Option<(usize, Fixed)>,
    bias: Option<(usize, Fixed)>,
    out: Option<Fixed>,
    /// Which operands of a linear layer are bipolar (`BipolarQuant`): their codes are `±1`, the
    /// sign of the value, held in `ins[0]` and `weight` as 2-bit formats.
    bipolar: Bipolar,
}

/// The bipolar operands of a node (see [`bipolar`]).
#[derive(Clone, Copy, Debug, Default)]
struct Bipolar {
    input: bool,
    weight: bool,
}

fn fixed(f: Option<&QuantFormat>) -> Option<Fixed> {
    f.and_then(Fixed::of)
}

/// The node's integer formats, or why it runs in float.
fn int_spec(node: &Node, slots: &[usize], params: &[ParamSlot], in_shapes: &[&[usize]]) -> std::result::Result<IntSpec, String> {
    let Some(q) = node.quant.as_ref().filter(|q| q.is_active()) else { return Err("not quantized".into()) };
    if !matches!(
        node.op,
        Op::Linear { .. }
            | Op::Conv1d(_)
            | Op::Conv2d(_)
            | Op::Relu
            | Op::Add
            | Op::Sub
            | Op::Mul
            | Op::MatMul
            | Op::BatchNorm1d(_)
            | Op::BatchNorm2d(_)
    ) {
        return Err(format!("{} has no integer kernel", node.op.mase_op()));
    }
    if let Op::BatchNorm1d(n) | Op::BatchNorm2d(n) = &node.op {
        affine_form(node, n, slots, params)?;
    }
    if let (Op::MatMul, [a, b]) = (&node.op, in_shapes) {
        // Vector operands are the rows and columns `matmul_shapes` makes of them.
        let promoted = mase_ir::matmul_shapes(a, b)?;
        let (pa, pb) = (&promoted.a, &promoted.b);
        if pa.len() != pb.len() || pa[..pa.len() - 2] != pb[..pb.len() - 2] {
            return Err(format!("matmul of shapes {a:?} and {b:?} broadcasts, which only the float kernel does"));
        }
    }
    let params = node.params();
    let slot_of = |name: &str| params.iter().position(|(_, s)| s.name == name).map(|p| slots[p]);
    let (w_slot, b_slot) = (slot_of("weight"), slot_of("bias"));
    let mut ins = Vec::new();
    let mut bipolar = Bipolar::default();
    for k in 0..node.inputs.len() {
        let f = match q.data_in.get(k) {
            Some(Some(f)) => Some(f),
            _ if k == 1 && w_slot.is_none() => q.weight.as_ref(),
            _ => None,
        };
        // A linear layer's input and weight may also be bipolar with a power-of-two scale.
        let linear = matches!(node.op, Op::Linear { .. }) && k == 0;
        match (fixed(f), bipolar::bipolar_fixed(f).filter(|_| linear)) {
            (Some(fx), _) => ins.push(fx),
            (None, Some(fx)) => {
                bipolar.input = true;
                ins.push(fx);
            }
            (None, None) => return Err(format!("data_in_{k} is not an integer format (or a bipolar one with a power-of-two scale)")),
        }
    }
    let weight = match w_slot {
        Some(s) => {
            let wf = q.weight.as_ref();
            let bip = bipolar::bipolar_fixed(wf).filter(|_| matches!(node.op, Op::Linear { .. }));
            bipolar.weight = bip.is_some();
            Some((s, fixed(wf).or(bip).ok_or("the weight is not an integer format")?))
        }
        None => None,
    };
    let bias = match b_slot {
        Some(s) => Some((s, fixed(q.bias.as_ref()).ok_or("the bias is not an integer format")?)),
        None => None,
    };
    let out = match &q.data_out {
        None => None,
        Some(f) => Some(Fixed::of(f).ok_or("data_out is not an integer format")?),
    };
    let spec = IntSpec { ins, weight, bias, out, bipolar };
    let log2 = worst_magnitude(&node.op, &spec, in_shapes).log2();
    if log2 >= 63.0 {
        return Err(format!("its sums could reach 2^{log2:.1}, beyond 64-bit integers (narrower formats or closer scales run in integer)"));
    }
    Ok(spec)
}

/// Checks that a batch norm is in the affine form `fold_batch_norm` leaves (running mean 0,
/// running variance 1, `eps` 0, a weight and a bias), where evaluation computes `weight x + bias`.
fn affine_form(node: &Node, n: &NormSpec, slots: &[usize], params: &[ParamSlot]) -> std::result::Result<(), String> {
    let value = |name: &str| node.params().iter().position(|(_, s)| s.name == name).map(|p| &params[slots[p]].data);
    let all = |name: &str, v: f32| value(name).is_some_and(|d| d.iter().all(|&x| x == v));
    if !n.affine || n.eps != 0.0 || !all("running_mean", 0.0) || !all("running_var", 1.0) {
        return Err("a batch norm with running statistics has no integer kernel (fold_batch_norm makes it an integer affine)".into());
    }
    Ok(())
}

/// The largest magnitude the node's integer result can reach, from its formats and shapes: the
/// products summed by linear, conv and matmul (with the bias shifted to the accumulator's scale),
/// or both operands of add/sub aligned to the finer scale. Computed in `f64`, which is exact for
/// powers of two and rounds monotonically, so a bound of `2^63` or more is never missed.
fn worst_magnitude(op: &Op, spec: &IntSpec, in_shapes: &[&[usize]]) -> f64 {
    let code = |f: Fixed| max_code(f) as f64;
    let scale = |bits: i32| 2f64.powi(bits);
    let fx: Vec<i32> = spec.ins.iter().map(|f| f.frac_width).collect();
    match op {
        Op::Linear { .. } | Op::Conv1d(_) | Op::Conv2d(_) | Op::BatchNorm1d(_) | Op::BatchNorm2d(_) => {
            let terms = match op {
                Op::Linear { in_features, .. } => *in_features as f64,
                Op::BatchNorm1d(_) | Op::BatchNorm2d(_) => 1.0,
                Op::Conv1d(c) | Op::Conv2d(c) => (c.in_channels / c.groups.max(1) * c.kernel.iter().product::<usize>()) as f64,
                _ => 0.0,
            };
            let Some((_, fw)) = spec.weight else { return 0.0 };
            let sums = terms * code(spec.ins[0]) * code(fw);
            match spec.bias {
                Some((_, fb)) => {
                    let frac = fx[0] + fw.frac_width;
                    let target = frac.max(fb.frac_width);
                    sums * scale(target - frac) + code(fb) * scale(target - fb.frac_width)
                }
                None => sums,
            }
        }
        Op::Add | Op::Sub => {
            let frac = fx[0].max(fx[1]);
            code(spec.ins[0]) * scale(frac - fx[0]) + code(spec.ins[1]) * scale(frac - fx[1])
        }
        Op::Mul => code(spec.ins[0]) * code(spec.ins[1]),
        Op::MatMul => {
            let k = in_shapes.first().and_then(|s| s.last()).copied().unwrap_or(0) as f64;
            k * code(spec.ins[0]) * code(spec.ins[1])
        }
        _ => spec.ins.iter().map(|&f| code(f)).fold(0.0, f64::max),
    }
}

/// An integer result: codes (or accumulator values) and their fraction bits.
struct IntVal {
    v: Vec<i64>,
    frac: i32,
}

/// The largest code magnitude of a format.
fn max_code(f: Fixed) -> i64 {
    f.lo().abs().max(f.hi())
}

impl Executor {
    /// Forward in evaluation mode with integer arithmetic wherever the quantization allows (see
    /// [`crate::integer`]); returns the output and which nodes ran in integer arithmetic.
    pub fn forward_integer(&mut self, x: &[f32], x_shape: &[usize]) -> Result<(&[f32], IntegerReport)> {
        let p = self.prepare(x_shape, x.len(), Mode::Eval, "integer execution")?;
        let report = self.run_integer_plan(p, x)?;
        Ok((&self.plans[p].vals[self.topo.storage[self.topo.output]], report))
    }

    fn run_integer_plan(&mut self, p: usize, x: &[f32]) -> Result<IntegerReport> {
        // Hardware has no code for NaN or infinity: refuse the batch at the door rather than
        // clamp an infinity to the format's largest code.
        if let Some((index, &value)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            let input = &self.graph.node(mase_ir::NodeId(self.topo.input)).name;
            return Err(RuntimeError::NonFiniteCode { node: input.clone(), operand: "the graph input".into(), index, value });
        }
        let Plan { vals, kerns, trained, ins, quant, shapes, fused, .. } = &mut self.plans[p];
        *fused = false;
        vals[self.topo.storage[self.topo.input]].copy_from_slice(x);
        let mut ints: Vec<Option<IntVal>> = (0..vals.len()).map(|_| None).collect();
        let mut report = IntegerReport::default();
        for (i, kern) in kerns.iter_mut().enumerate() {
            if matches!(kern, NodeKernel::Nop) {
                continue;
            }
            let node = self.graph.node(mase_ir::NodeId(i));
            let mut entry = IntegerNode {
                node: node.name.clone(),
                op: node.op.mase_op().into(),
                float_reason: None,
                input_types: Vec::new(),
                accumulator: None,
                acc_bits: 0,
                out_frac: None,
            };
            let in_shapes: Vec<&[usize]> = node.inputs.iter().map(|u| shapes[u.0].as_slice()).collect();
            if let Some(r) = passthrough(node, &self.topo.ins[i], &in_shapes, &shapes[i], &ints, &mut vals[i]) {
                entry.acc_bits = bits_used(&r.v);
                entry.out_frac = Some(r.frac);
                ints[i] = Some(r);
                report.nodes.push(entry);
                continue;
            }
            // An unquantized op that only moves, selects or bounds integer results keeps codes.
            let moved = if node.quant.as_ref().is_some_and(|q| q.is_active()) {
                None
            } else {
                let tensor_ins: Option<Vec<&IntVal>> = node
                    .inputs
                    .iter()
                    .zip(&self.topo.ins[i])
                    .filter(|(u, _)| self.topo.is_tensor[u.0])
                    .map(|(_, &s)| ints[s].as_ref())
                    .collect();
                tensor_ins.and_then(|xs| {
                    let fracs: Vec<i32> = xs.iter().map(|x| x.frac).collect();
                    let bits: Vec<u32> = xs.iter().map(|x| bits_used(&x.v)).collect();
                    movement::code_frac(&node.op, &fracs, &bits)
                })
            };
            match int_spec(node, &self.topo.slots[i], &self.params, &in_shapes) {
                Ok(spec) => {
                    let mut y = std::mem::take(&mut vals[i]);
                    let r =
                        integer_node(node, &spec, &self.topo.ins[i], &in_shapes, &shapes[i], vals, &ints, &self.params, &mut entry, &mut y);
                    vals[i] = y;
                    ints[i] = Some(r?);
                }
                Err(reason) => {
                    // The float path of `Executor::forward`, fake quantization included.
                    entry.float_reason = Some(reason);
                    quant[i].inputs(vals, &mut self.quant.rng);
                    self.quant.swap_in(i, &mut self.params);
                    let mut y = std::mem::take(&mut vals[i]);
                    let mut cx = Fwd {
                        vals,
                        ins: &ins[i],
                        params: &mut self.params,
                        train: false,
                        pool: self.pool.as_deref(),
                        rng: &mut self.rng,
                        epilogue: None,
                        params_generation: None,
                    };
                    kern.forward(&mut cx, &mut y);
                    self.quant.swap_out(i, &mut self.params);
                    quant[i].output(vals, &mut y, &mut self.quant.rng);
                    if let Some(frac) = moved {
                        let r = IntVal { v: movement::codes_of(&y, frac), frac };
                        entry.float_reason = None;
                        entry.acc_bits = bits_used(&r.v);
                        entry.out_frac = Some(frac);
                        ints[i] = Some(r);
                    }
                    vals[i] = y;
                    if let Some(bad) = kern.take_bad_id() {
                        self.current = None;
                        return Err(crate::executor::bad_id_error(&self.graph, i, bad));
                    }
                }
            }
            report.nodes.push(entry);
        }
        *trained = false;
        self.current = Some(p);
        Ok(report)
    }
}

/// Codes of data input `k`: rescaled from the producer's integer result when it has one, else
/// quantized from its float value.
/// A bipolar input's codes are the signs of the values (of the producer's codes, when it has
/// them).
fn input_codes(node: &Node, k: usize, f: Fixed, bip: bool, src: usize, vals: &[Vec<f32>], ints: &[Option<IntVal>]) -> Result<Vec<i64>> {
    match (&ints[src], bip) {
        (Some(iv), false) => Ok(iv.v.iter().map(|&c| requant(c, iv.frac, f)).collect()),
        (Some(iv), true) => Ok(iv.v.iter().map(|&c| if c >= 0 { 1 } else { -1 }).collect()),
        (None, false) => finite_codes(node, f, &vals[src], || format!("data input {k}")),
        (None, true) => bipolar_codes(node, &vals[src], || format!("data input {k}")),
    }
}

/// Bipolar codes of finite values; the first NaN or infinity is an error naming `operand`, as
/// for fixed-point codes (hardware has no code for them).
fn bipolar_codes(node: &Node, data: &[f32], operand: impl Fn() -> String) -> Result<Vec<i64>> {
    data.iter()
        .enumerate()
        .map(|(index, &v)| {
            v.is_finite().then(|| bipolar::bipolar_code(v)).ok_or_else(|| RuntimeError::NonFiniteCode {
                node: node.name.clone(),
                operand: operand(),
                index,
                value: v,
            })
        })
        .collect()
}

/// Codes of finite values; the first NaN or infinity is an error naming `operand`.
fn finite_codes(node: &Node, f: Fixed, data: &[f32], operand: impl Fn() -> String) -> Result<Vec<i64>> {
    data.iter()
        .enumerate()
        .map(|(index, &v)| {
            f.code(v).filter(|_| v.is_finite()).ok_or_else(|| RuntimeError::NonFiniteCode {
                node: node.name.clone(),
                operand: operand(),
                index,
                value: v,
            })
        })
        .collect()
}

/// Codes of a parameter.
fn param_codes(node: &Node, f: Fixed, slot: &ParamSlot) -> Result<Vec<i64>> {
    finite_codes(node, f, &slot.data, || format!("parameter `{}`", slot.name))
}

/// Runs one node in integer arithmetic: writes its dequantized result to `y` and returns the
/// integer result.
#[allow(clippy::too_many_arguments)]
fn integer_node(
    node: &Node,
    spec: &IntSpec,
    srcs: &[usize],
    in_shapes: &[&[usize]],
    out_shape: &[usize],
    vals: &[Vec<f32>],
    ints: &[Option<IntVal>],
    params: &[crate::slots::ParamSlot],
    entry: &mut IntegerNode,
    y: &mut [f32],
) -> Result<IntVal> {
    let xs: Vec<Vec<i64>> = spec
        .ins
        .iter()
        .zip(srcs)
        .enumerate()
        .map(|(k, (&f, &s))| input_codes(node, k, f, k == 0 && spec.bipolar.input, s, vals, ints))
        .collect::<Result<_>>()?;
    let fx: Vec<i32> = spec.ins.iter().map(|f| f.frac_width).collect();
    let mut acc = vec![0i64; y.len()];
    let mut frac;
    match &node.op {
        Op::Linear { .. } | Op::Conv1d(_) | Op::Conv2d(_) | Op::BatchNorm1d(_) | Op::BatchNorm2d(_) => {
            let (w_slot, fw) = spec.weight.ok_or_else(|| RuntimeError::Integer { node: node.name.clone(), reason: "no weight".into() })?;
            let w = if spec.bipolar.weight {
                bipolar_codes(node, &params[w_slot].data, || format!("parameter `{}`", params[w_slot].name))?
            } else {
                param_codes(node, fw, &params[w_slot])?
            };
            let fin = spec.ins[0];
            let xc = Codes::pack(&xs[0], fin.lo(), fin.hi());
            let wc = Codes::pack(&w, fw.lo(), fw.hi());
            entry.input_types = vec![xc.type_name(), wc.type_name()];
            let terms = match &node.op {
                Op::Linear { in_features, .. } => *in_features,
                Op::Conv1d(c) | Op::Conv2d(c) => c.in_channels / c.groups.max(1) * c.kernel.iter().product::<usize>(),
                Op::BatchNorm1d(_) | Op::BatchNorm2d(_) => 1,
                _ => unreachable!("matched above"),
            };
            // The largest sum the products can reach decides the accumulator.
            let bound = (terms as i128) * (max_code(fin) as i128) * (max_code(fw) as i128);
            let wide = bound > i32::MAX as i128;
            entry.accumulator = Some(if wide { "i64" } else { "i32" });
            match &node.op {
                Op::Linear { in_features, out_features, .. } => ops::linear(&xc, &wc, *in_features, *out_features, wide, &mut acc),
                Op::Conv1d(c) | Op::Conv2d(c) => ops::conv(&xc, &wc, &ConvGeom::new(c, in_shapes[0], out_shape), wide, &mut acc),
                // A batch norm in affine form: one product per element, by its channel's weight.
                Op::BatchNorm1d(_) | Op::BatchNorm2d(_) => ops::channel_scale(&xs[0], &w, out_shape, &mut acc),
                _ => unreachable!("matched above"),
            }
            frac = fx[0] + fw.frac_width;
            if let Some((b_slot, fb)) = spec.bias {
                let b = param_codes(node, fb, &params[b_slot])?;
                // Bias at the accumulator's scale: shift whichever has fewer fraction bits up.
                let target = frac.max(fb.frac_width);
                let (up_acc, up_b) = ((target - frac) as u32, (target - fb.frac_width) as u32);
                let channels = b.len().max(1);
                let inner = match &node.op {
                    Op::Linear { .. } => 1,
                    _ => out_shape[2..].iter().product(),
                };
                for (j, a) in acc.iter_mut().enumerate() {
                    *a = (*a << up_acc) + (b[(j / inner) % channels] << up_b);
                }
                frac = target;
            }
        }
        Op::Relu => {
            acc.iter_mut().zip(&xs[0]).for_each(|(a, &c)| *a = c.max(0));
            frac = fx[0];
        }
        Op::Add | Op::Sub => {
            // Align both operands to the finer scale, then add exactly.
            frac = fx[0].max(fx[1]);
            let a: Vec<i64> = xs[0].iter().map(|&c| c << (frac - fx[0])).collect();
            let b: Vec<i64> = xs[1].iter().map(|&c| c << (frac - fx[1])).collect();
            let sub = matches!(node.op, Op::Sub);
            ops::broadcast(&a, in_shapes[0], &b, in_shapes[1], out_shape, &mut acc, |p, q| if sub { p - q } else { p + q });
        }
        Op::Mul => {
            frac = fx[0] + fx[1];
            ops::broadcast(&xs[0], in_shapes[0], &xs[1], in_shapes[1], out_shape, &mut acc, |p, q| p * q);
        }
        Op::MatMul => {
            // int_spec admitted equal batch dimensions only (of the promoted shapes).
            let p = mase_ir::matmul_shapes(in_shapes[0], in_shapes[1]).expect("int_spec checked the operands");
            let r = p.product.len();
            let (m, k, n) = (p.product[r - 2], p.a[r - 1], p.product[r - 1]);
            ops::matmul(&xs[0], &xs[1], p.product[..r - 2].iter().product(), m, k, n, &mut acc);
            frac = fx[0] + fx[1];
            entry.accumulator = Some("i64");
        }
        _ => unreachable!("int_spec admits only the ops above"),
    }
    entry.acc_bits = bits_used(&acc);
    let result = match spec.out {
        Some(fo) => IntVal { v: acc.iter().map(|&a| requant(a, frac, fo)).collect(), frac: fo.frac_width },
        None => IntVal { v: acc, frac },
    };
    entry.out_frac = Some(result.frac);
    write_values(&result, y);
    Ok(result)
}

/// Writes the values of an integer result (`v 2^-frac`) to a float buffer.
fn write_values(r: &IntVal, y: &mut [f32]) {
    let scale = 2f64.powi(-r.frac);
    for (o, &v) in y.iter_mut().zip(&r.v) {
        *o = (v as f64 * scale) as f32;
    }
}

/// An unquantized node that only compares or moves values (`relu`, max pools, `dropout`, which
/// is the identity in evaluation) whose input is the integer result of another node runs on
/// that result's codes and keeps its fraction bits: the float kernel computes the same values,
/// and the hardware the same codes. `None` for any other node, which runs as before.
fn passthrough(
    node: &Node,
    srcs: &[usize],
    in_shapes: &[&[usize]],
    out_shape: &[usize],
    ints: &[Option<IntVal>],
    y: &mut [f32],
) -> Option<IntVal> {
    if node.quant.as_ref().is_some_and(|q| q.is_active()) {
        return None;
    }
    let x = ints[*srcs.first()?].as_ref()?;
    let v = match &node.op {
        Op::Relu => x.v.iter().map(|&c| c.max(0)).collect(),
        Op::Dropout { .. } | Op::StochasticDepth { .. } => x.v.clone(),
        Op::MaxPool1d(p) | Op::MaxPool2d(p) => {
            let mut out = vec![0; y.len()];
            max_pool_codes(&PoolGeom::new(p, in_shapes[0], out_shape), &x.v, &mut out);
            out
        }
        // Every other op computes new values: it has an integer kernel of its own or runs in
        // float.
        _ => return None,
    };
    let r = IntVal { v, frac: x.frac };
    write_values(&r, y);
    Some(r)
}
