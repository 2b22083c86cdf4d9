//! Verilog of a design: one module per layer and a top module chaining them with valid/ready
//! handshakes. Every signal is a two's-complement value as wide as its range needs
//! ([`Range::width`]); constants are written at a width that holds them, and each assignment
//! keeps the low bits, which hold the exact value because the ranges bound it.

use crate::design::{signed_bits, Design, Layer, Range, Step};
use std::fmt::Write;

/// The name of the top module.
pub const TOP: &str = "mase_top";

/// The Verilog module name of a layer.
pub fn layer_module(layer: &Layer) -> String {
    format!("mase_{}", layer.node)
}

/// A signed literal of width `w` (at least one bit wider than the value needs).
pub(crate) fn lit(v: i64, w: u32) -> String {
    let w = w.max(signed_bits(v as i128, v as i128) + 1);
    if v < 0 {
        format!("(-{w}'sd{})", v.unsigned_abs())
    } else {
        format!("{w}'sd{v}")
    }
}

/// Declares `dst` as the result of `step` on `src` (range `from`, element `k` of its stream);
/// returns the result's range.
fn step_wires(out: &mut String, src: &str, from: Range, step: &Step, k: usize, dst: &str) -> Range {
    let to = step.range(from);
    let (w, ow) = (from.width(), to.width());
    if to.lo == to.hi {
        let _ = writeln!(out, "  wire signed [{}:0] {dst} = {};", ow - 1, lit(to.lo, ow));
        return to;
    }
    match step {
        Step::Relu => {
            if from.lo >= 0 {
                let _ = writeln!(out, "  wire signed [{}:0] {dst} = {src};", ow - 1);
            } else {
                let _ = writeln!(out, "  wire signed [{}:0] {dst} = {src}[{}] ? {ow}'sd0 : {src};", ow - 1, w - 1);
            }
        }
        Step::Affine { mul, add, .. } => {
            // This element's channel; the sum's low `ow` bits are exact (the range bounds it).
            let c = k % mul.len().max(1);
            let (m, a) = (mul.get(c).copied().unwrap_or(0), add.get(c).copied().unwrap_or(0));
            let cw = signed_bits(m as i128, m as i128).max(signed_bits(a as i128, a as i128)).max(w).max(ow) + 1;
            let _ = writeln!(out, "  wire signed [{}:0] {dst} = {src} * {} + {};", ow - 1, lit(m, cw), lit(a, cw));
        }
        Step::Threshold { at, descending } => {
            // A comparator: the bit 1 from the channel's threshold up (or down to it).
            let c = k % at.len().max(1);
            let (t, down) = (at.get(c).copied().unwrap_or(0), descending.get(c).copied().unwrap_or(false));
            let cw = signed_bits(t as i128, t as i128).max(w) + 1;
            let cmp = if down { "<=" } else { ">=" };
            let _ = writeln!(out, "  wire signed [{}:0] {dst} = ({src} {cmp} {}) ? {ow}'sd1 : {ow}'sd0;", ow - 1, lit(t, cw));
        }
        Step::Requant { .. } => {
            let s = requant_shift(step, from);
            if s > 0 {
                let round = part_wires(out, src, from, from, step, k, Part::Round, &format!("{dst}_rd"));
                let carry = part_wires(out, &format!("{dst}_rd"), round, from, step, k, Part::Carry, &format!("{dst}_c"));
                part_wires(out, &format!("{dst}_c"), carry, from, step, k, Part::Clamp, dst);
            } else {
                part_wires(out, src, from, from, step, k, Part::Clamp, dst);
            }
        }
    }
    to
}

/// The bits a rescale step drops from codes of `from` (negative: bits it appends).
pub(crate) fn requant_shift(step: &Step, from: Range) -> i32 {
    match step {
        Step::Requant { frac_width, .. } => from.frac - frac_width,
        Step::Relu | Step::Affine { .. } | Step::Threshold { .. } => 0,
    }
}

/// A part of a step that a pipeline for a fast clock registers apart from the others
/// ([`crate::pipeline`]): a rescale that drops bits is a rounding decision, the carry that
/// adds it and the clamp; an affine is its product and its sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The whole step.
    Whole,
    /// `2 q + up`: the code shifted right (`q`, rounded down) beside the bit that rounds it
    /// half to even (`up`), from the dropped bits alone (no comparator).
    Round,
    /// `q + up` from `2 q + up`: the rounded code before clamping.
    Carry,
    /// The rounded (or left-shifted) code clamped to the format's range.
    Clamp,
    /// An affine's product `m_c v`.
    Mul,
    /// An affine's sum `m_c v + a_c` from the product.
    Add,
}

/// The range of `part` of `step`, whose input (before its first part) has range `from`.
pub(crate) fn part_range(step: &Step, from: Range, part: Part) -> Range {
    match (step, part) {
        (Step::Requant { frac_width, .. }, Part::Round) => {
            let s = requant_shift(step, from).clamp(0, 62) as u32;
            Range { lo: 2 * (from.lo >> s), hi: 2 * (from.hi >> s) + 1, frac: *frac_width }
        }
        (Step::Requant { frac_width, .. }, Part::Carry) => {
            let s = requant_shift(step, from);
            Range { lo: crate::design::shift_rne(from.lo, s), hi: crate::design::shift_rne(from.hi, s), frac: *frac_width }
        }
        (Step::Affine { mul, frac, .. }, Part::Mul) => {
            let zeros = vec![0; mul.len()];
            let (lo, hi) = crate::design::affine_bounds(mul, &zeros, from);
            Range {
                lo: lo.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
                hi: hi.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
                frac: *frac,
            }
        }
        _ => step.range(from),
    }
}

/// Declares `dst` as `part` of `step` (element `k` of its stream) on `src`, of range `cur`;
/// `from` is the range at the step's input. Returns the range of `dst`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn part_wires(out: &mut String, src: &str, cur: Range, from: Range, step: &Step, k: usize, part: Part, dst: &str) -> Range {
    let to = part_range(step, from, part);
    let (w, ow) = (cur.width(), to.width());
    if to.lo == to.hi {
        let _ = writeln!(out, "  wire signed [{}:0] {dst} = {};", ow - 1, lit(to.lo, ow));
        return to;
    }
    match (step, part) {
        (Step::Requant { .. }, Part::Round) => {
            // Sign-extended so that the shift keeps at least one bit; `up` is the dropped bits
            // above half, or exactly half with `q` odd.
            let s = requant_shift(step, from) as u32;
            let we = w.max(s + 1);
            let _ = writeln!(out, "  wire signed [{}:0] {dst}_e = {src};", we - 1);
            let below = if s >= 2 { format!("(|{dst}_e[{}:0]) || ", s - 2) } else { String::new() };
            let _ = writeln!(out, "  wire {dst}_up = {dst}_e[{}] && ({below}{dst}_e[{s}]);", s - 1);
            let _ = writeln!(out, "  wire signed [{}:0] {dst} = $signed({{{dst}_e[{}:{s}], {dst}_up}});", ow - 1, we - 1);
        }
        (Step::Requant { .. }, Part::Carry) => {
            let _ = writeln!(out, "  wire signed [{}:0] {dst} = ({src} >>> 1) + $signed({{1'b0, {src}[0]}});", ow - 1);
        }
        (Step::Requant { width, frac_width, signed }, Part::Clamp) => {
            let f = mase_quant::Fixed { width: *width, frac_width: *frac_width, signed: *signed };
            let s = requant_shift(step, from);
            // `t`: the code at the target's scale before clamping, `tw` its width.
            let tw = if s < 0 {
                let k = -s;
                let _ = writeln!(out, "  wire signed [{}:0] {dst}_t = $signed({{{src}, {k}'b0}});", w + k as u32 - 1);
                w + k as u32
            } else {
                let _ = writeln!(out, "  wire signed [{}:0] {dst}_t = {src};", w - 1);
                w
            };
            // The unclamped range decides which bounds can be passed.
            let unclamped = |v: i64| crate::design::shift_rne(v, s);
            let (ulo, uhi) = (unclamped(from.lo), unclamped(from.hi));
            let cw = tw.max(ow).max(signed_bits(f.lo() as i128, f.hi() as i128)) + 1;
            let mut e = format!("{dst}_t");
            if ulo < f.lo() {
                e = format!("({dst}_t < {lo}) ? {lo} : {e}", lo = lit(f.lo(), cw));
            }
            if uhi > f.hi() {
                e = format!("({dst}_t > {hi}) ? {hi} : {e}", hi = lit(f.hi(), cw));
            }
            let _ = writeln!(out, "  wire signed [{}:0] {dst} = {e};", ow - 1);
        }
        (Step::Affine { mul, add, .. }, Part::Mul | Part::Add) => {
            let c = k % mul.len().max(1);
            let (m, a) = (mul.get(c).copied().unwrap_or(0), add.get(c).copied().unwrap_or(0));
            let cw = signed_bits(m as i128, m as i128).max(signed_bits(a as i128, a as i128)).max(w).max(ow) + 1;
            if part == Part::Mul {
                let _ = writeln!(out, "  wire signed [{}:0] {dst} = {src} * {};", ow - 1, lit(m, cw));
            } else {
                let _ = writeln!(out, "  wire signed [{}:0] {dst} = {src} + {};", ow - 1, lit(a, cw));
            }
        }
        // A part that the step does not have is the whole step.
        (Step::Relu | Step::Threshold { .. }, _)
        | (Step::Requant { .. }, Part::Mul | Part::Add | Part::Whole)
        | (Step::Affine { .. }, _) => {
            return step_wires(out, src, cur, step, k, dst);
        }
    }
    to
}

/// Declares `dst` as `src` (element `k` of its stream) after every step of `steps`; returns the
/// final wire and range.
pub(crate) fn steps_wires(out: &mut String, src: &str, from: Range, steps: &[Step], k: usize, prefix: &str) -> (String, Range) {
    let (mut cur, mut r) = (src.to_string(), from);
    for (i, s) in steps.iter().enumerate() {
        let dst = format!("{prefix}_s{i}");
        r = step_wires(out, &cur, r, s, k, &dst);
        cur = dst;
    }
    (cur, r)
}

/// The module of one fully unrolled layer: the products of a sample summed in one cycle, the
/// result held in an output register with valid/ready (a one-entry pipeline stage).
/// Output `j`'s accumulator wire `{acc}_{j} = {sum}` and its post-processing steps; returns
/// the name of the last step's wire.
fn output_wires(o: &mut String, layer: &Layer, acc: &str, j: usize, sum: &str) -> String {
    let _ = writeln!(o, "  wire signed [{}:0] {acc}_{j} = {sum};", layer.acc.width() - 1);
    steps_wires(o, &format!("{acc}_{j}"), layer.acc, &layer.post, j, &format!("y_{j}")).0
}

/// The outputs' low `ow` bits, last output first, as the parts of a Verilog concatenation.
fn packed_outputs(ys: &[String], ow: u32) -> Vec<String> {
    ys.iter().rev().map(|y| format!("{y}[{}:0]", ow - 1)).collect()
}

fn unrolled_layer(layer: &Layer) -> String {
    let mut o = String::new();
    let (iw, ow) = (layer.input.width(), layer.output().width());
    let (n_in, n_out) = (layer.in_features, layer.out_features);
    let _ = writeln!(o, "// Layer `{}`: {n_in} -> {n_out}, fully unrolled (one sample per cycle).", layer.node);
    let _ = writeln!(o, "module {} (", layer_module(layer));
    let _ = writeln!(o, "  input clk, input rst,");
    let _ = writeln!(o, "  input in_valid, output in_ready, input [{}:0] in_data,", n_in * iw as usize - 1);
    let _ = writeln!(o, "  output reg out_valid, input out_ready, output reg [{}:0] out_data", n_out * ow as usize - 1);
    let _ = writeln!(o, ");");
    let xr = layer.product_input();
    let mut xs = Vec::new();
    for k in 0..n_in {
        let _ = writeln!(o, "  wire signed [{}:0] in_{k} = in_data[{}:{}];", iw - 1, (k + 1) * iw as usize - 1, k * iw as usize);
        let (x, _) = steps_wires(&mut o, &format!("in_{k}"), layer.input, &layer.pre, k, &format!("x_{k}"));
        xs.push(x);
    }
    let aw = layer.acc.width();
    let cw =
        layer.weight.iter().chain(&layer.bias).map(|&v| signed_bits(v as i128, v as i128)).max().unwrap_or(1).max(aw).max(xr.width()) + 1;
    let mut ys = Vec::new();
    let popcount = layer.is_popcount();
    for j in 0..n_out {
        // A popcount starts from 0: its bias is in the XNORs.
        let mut e = lit(if popcount { 0 } else { layer.bias[j] }, cw);
        for (k, x) in xs.iter().enumerate() {
            let wv = layer.weight[j * n_in + k];
            if popcount {
                // XNOR with the weight's bit (1 for +1), summed: a popcount.
                let _ = write!(e, " + $signed({{1'b0, {x}[0] ~^ 1'b{}}})", u8::from(wv > 0));
            } else if wv != 0 {
                let _ = write!(e, " + {x} * {}", lit(wv, cw));
            }
        }
        ys.push(output_wires(&mut o, layer, "acc", j, &e));
    }
    let packed = packed_outputs(&ys, ow);
    let _ = writeln!(o, "  assign in_ready = !out_valid || out_ready;");
    let _ = writeln!(o, "  always @(posedge clk) begin");
    let _ = writeln!(o, "    if (rst) out_valid <= 1'b0;");
    let _ = writeln!(o, "    else if (in_ready) begin");
    let _ = writeln!(o, "      out_valid <= in_valid;");
    let _ = writeln!(o, "      if (in_valid) out_data <= {{{}}};", packed.join(", "));
    let _ = writeln!(o, "    end");
    let _ = writeln!(o, "  end");
    let _ = writeln!(o, "endmodule");
    o
}

/// The module of a layer folded by its reuse factor `R`: each output has `K / R` multipliers,
/// which take `K / R` inputs per cycle from a shift register of the sample, with the weights of
/// that cycle chosen by a counter. A sample is accepted in the cycle the previous one finishes,
/// so a new sample enters every `R` cycles and its result is registered `R + 1` cycles after its
/// input handshake.
fn folded_layer(layer: &Layer) -> String {
    let mut o = String::new();
    let (iw, ow) = (layer.input.width(), layer.output().width());
    let (n_in, n_out, r) = (layer.in_features, layer.out_features, layer.reuse);
    let p = n_in / r;
    let xr = layer.product_input();
    let xw = xr.width() as usize;
    let aw = layer.acc.width();
    let cb = signed_bits(0, r as i128);
    let _ = writeln!(o, "// Layer `{}`: {n_in} -> {n_out}, reuse factor {r} ({p} inputs per output per cycle).", layer.node);
    let _ = writeln!(o, "module {} (", layer_module(layer));
    let _ = writeln!(o, "  input clk, input rst,");
    let _ = writeln!(o, "  input in_valid, output in_ready, input [{}:0] in_data,", n_in * iw as usize - 1);
    let _ = writeln!(o, "  output reg out_valid, input out_ready, output reg [{}:0] out_data", n_out * ow as usize - 1);
    let _ = writeln!(o, ");");
    let mut xs = Vec::new();
    for k in 0..n_in {
        let _ = writeln!(o, "  wire signed [{}:0] in_{k} = in_data[{}:{}];", iw - 1, (k + 1) * iw as usize - 1, k * iw as usize);
        let (x, _) = steps_wires(&mut o, &format!("in_{k}"), layer.input, &layer.pre, k, &format!("x_{k}"));
        xs.push(format!("{x}[{}:0]", xw - 1));
    }
    let _ = writeln!(o, "  wire [{}:0] x_all = {{{}}};", n_in * xw - 1, xs.iter().rev().cloned().collect::<Vec<_>>().join(", "));
    let _ = writeln!(o, "  reg [{}:0] xs;", n_in * xw - 1);
    let _ = writeln!(o, "  reg busy;");
    let _ = writeln!(o, "  reg [{}:0] cnt;", cb - 1);
    let _ = writeln!(o, "  wire last = busy && (cnt == {cb}'d{});", r - 1);
    let _ = writeln!(o, "  wire fin = last && (!out_valid || out_ready);");
    let _ = writeln!(o, "  assign in_ready = !busy || fin;");
    for q in 0..p {
        let _ = writeln!(o, "  wire signed [{}:0] c_{q} = xs[{}:{}];", xw - 1, (q + 1) * xw - 1, q * xw);
    }
    let cw =
        layer.weight.iter().chain(&layer.bias).map(|&v| signed_bits(v as i128, v as i128)).max().unwrap_or(1).max(aw).max(xr.width()) + 1;
    let mut ys = Vec::new();
    let popcount = layer.is_popcount();
    for j in 0..n_out {
        let _ = writeln!(o, "  reg signed [{}:0] acc_{j};", aw - 1);
        let mut e = format!("acc_{j}");
        for q in 0..p {
            if popcount {
                // This cycle's weight bit (1 for +1); the XNOR with the input bit is counted.
                let _ = writeln!(o, "  reg wb_{j}_{q};");
                let _ = writeln!(o, "  always @* case (cnt)");
                for t in 0..r {
                    let _ = writeln!(o, "    {cb}'d{t}: wb_{j}_{q} = 1'b{};", u8::from(layer.weight[j * n_in + t * p + q] > 0));
                }
                let _ = writeln!(o, "    default: wb_{j}_{q} = 1'b0;");
                let _ = writeln!(o, "  endcase");
                let _ = write!(e, " + $signed({{1'b0, c_{q}[0] ~^ wb_{j}_{q}}})");
                continue;
            }
            let _ = writeln!(o, "  reg signed [{}:0] w_{j}_{q};", cw - 1);
            let _ = writeln!(o, "  always @* case (cnt)");
            for t in 0..r {
                let _ = writeln!(o, "    {cb}'d{t}: w_{j}_{q} = {};", lit(layer.weight[j * n_in + t * p + q], cw));
            }
            let _ = writeln!(o, "    default: w_{j}_{q} = {cw}'sd0;");
            let _ = writeln!(o, "  endcase");
            let _ = write!(e, " + c_{q} * w_{j}_{q}");
        }
        ys.push(output_wires(&mut o, layer, "sum", j, &e));
    }
    let packed = packed_outputs(&ys, ow);
    let _ = writeln!(o, "  always @(posedge clk) begin");
    let _ = writeln!(o, "    if (rst) begin");
    let _ = writeln!(o, "      busy <= 1'b0;");
    let _ = writeln!(o, "      out_valid <= 1'b0;");
    let _ = writeln!(o, "    end else begin");
    let _ = writeln!(o, "      if (out_valid && out_ready) out_valid <= 1'b0;");
    let _ = writeln!(o, "      if (busy && !(last && !fin)) begin");
    let _ = writeln!(o, "        xs <= xs >> {};", p * xw);
    let _ = writeln!(o, "        cnt <= cnt + {cb}'d1;");
    for j in 0..n_out {
        let _ = writeln!(o, "        acc_{j} <= sum_{j};");
    }
    let _ = writeln!(o, "      end");
    let _ = writeln!(o, "      if (fin) begin");
    let _ = writeln!(o, "        busy <= 1'b0;");
    let _ = writeln!(o, "        out_valid <= 1'b1;");
    let _ = writeln!(o, "        out_data <= {{{}}};", packed.join(", "));
    let _ = writeln!(o, "      end");
    let _ = writeln!(o, "      if (in_valid && in_ready) begin");
    let _ = writeln!(o, "        busy <= 1'b1;");
    let _ = writeln!(o, "        cnt <= {cb}'d0;");
    let _ = writeln!(o, "        xs <= x_all;");
    for j in 0..n_out {
        // A popcount starts from 0: its bias is in the XNORs.
        let start = if popcount { 0 } else { layer.bias[j] };
        let _ = writeln!(o, "        acc_{j} <= {};", lit(start, cw));
    }
    let _ = writeln!(o, "      end");
    let _ = writeln!(o, "    end");
    let _ = writeln!(o, "  end");
    let _ = writeln!(o, "endmodule");
    o
}

/// The Verilog of one layer's module: fully unrolled, or folded by its reuse factor; pipelined
/// for a clock when `pipe` is given ([`crate::pipeline`]).
pub fn layer_verilog(layer: &Layer, pipe: Option<crate::pipeline::Pipelining>) -> String {
    let mut o = String::from("/* verilator lint_off WIDTH */\n");
    if let Some(p) = pipe {
        o.push_str(&crate::pipeline::pipelined_layer(layer, &p).text);
    } else if layer.reuse <= 1 {
        o.push_str(&unrolled_layer(layer));
    } else {
        o.push_str(&folded_layer(layer));
    }
    o
}

/// A valid/ready stream into a module of a top: its wires and the width of its data.
pub(crate) struct Stream {
    pub valid: String,
    pub ready: String,
    pub data: String,
    pub bits: usize,
}

impl Stream {
    /// The top module's input, `bits` wide, whose ready is the wire `ready`
    /// ([`crate::reset::input_ready`]).
    pub(crate) fn input(bits: usize, ready: String) -> Stream {
        Stream { valid: "in_valid".into(), ready, data: "in_data".into(), bits }
    }

    /// The output of module `u{i}` of a top (`v{i}`, `r{i}`, `d{i}`), `bits` wide.
    pub(crate) fn unit(i: usize, bits: usize) -> Stream {
        Stream { valid: format!("v{i}"), ready: format!("r{i}"), data: format!("d{i}"), bits }
    }

    /// The input ports of a module it feeds directly; a pipelined layer's readies ahead
    /// (`pipelined_layer`) are left open.
    pub(crate) fn ports(&self, pipelined_layer: bool) -> String {
        let ahead = if pipelined_layer { ", .in_ready_ahead_idle(), .in_ready_ahead_valid()" } else { "" };
        format!(".in_valid({}), .in_ready({}), .in_data({}){ahead}", self.valid, self.ready, self.data)
    }
}

/// The reset module `u{i}` of a top reads ([`crate::reset::write_reset`]) and the stream that
/// feeds it: the top's input (`input_bits` wide, its ready gated by that reset) for the first
/// module, else the output of `u{i-1}`, `prev_bits` wide.
pub(crate) fn unit_feed(o: &mut String, d: &Design, i: usize, input_bits: usize, prev_bits: usize) -> (String, Stream) {
    let rst = crate::reset::write_reset(o, d, i);
    let feed = if i == 0 { Stream::input(input_bits, crate::reset::input_ready(o, d, &rst)) } else { Stream::unit(i - 1, prev_bits) };
    (rst, feed)
}

/// The input ports of layer `index` of `d.layers` in a top module, fed by `feed`: through a
/// register slice ([`crate::slice`]) where the layer has one, whose producer's readies are
/// then the layer's readies ahead and whose reset is the layer's, `rst`.
pub(crate) fn layer_ports(o: &mut String, d: &Design, index: usize, feed: &Stream, rst: &str) -> String {
    if !crate::slice::has_slice(d, index) {
        return feed.ports(d.clock_mhz.is_some());
    }
    let ahead = (format!("a{index}_idle"), format!("a{index}_valid"));
    let _ = writeln!(o, "  wire {}, {};", ahead.0, ahead.1);
    let _ = writeln!(o, "  assign {} = {};", feed.ready, ahead.0);
    let _ = writeln!(o, "  assign {} = {};", popped_ready(&feed.ready), ahead.1);
    let (sv, sd) = crate::slice::write_slice(o, index, (&feed.valid, &feed.data, feed.bits), (&ahead.0, &ahead.1), rst);
    format!(".in_valid({sv}), .in_ready(), .in_data({sd}), .in_ready_ahead_idle({}), .in_ready_ahead_valid({})", ahead.0, ahead.1)
}

/// The wire of a producer's `out_ready_popped` beside its `out_ready` wire `ready`.
fn popped_ready(ready: &str) -> String {
    format!("{ready}_popped")
}

/// Declares the output stream of module `u{i}` of a top (`v{i}`, `r{i}`, `d{i}`, `bits` wide,
/// and `r{i}_popped` when it `feeds_slice`) and returns the module's output ports.
pub(crate) fn unit_output(o: &mut String, i: usize, bits: usize, feeds_slice: bool) -> String {
    let s = Stream::unit(i, bits);
    let popped = popped_ready(&s.ready);
    if feeds_slice {
        let _ = writeln!(o, "  wire {}, {}, {popped};", s.valid, s.ready);
    } else {
        let _ = writeln!(o, "  wire {}, {};", s.valid, s.ready);
    }
    let _ = writeln!(o, "  wire [{}:0] {};", bits - 1, s.data);
    let popped_port = if feeds_slice { format!(", .out_ready_popped({popped})") } else { String::new() };
    format!(".out_valid({}), .out_ready({}){popped_port}, .out_data({})", s.valid, s.ready, s.data)
}

/// The top module: the layers in a chain, the handshake of each feeding the next.
pub fn top_verilog(d: &Design) -> String {
    let mut o = String::new();
    let (iw, ow) = (d.input_range().width() as usize, d.output_range().width() as usize);
    let _ = writeln!(
        o,
        "// Model `{}`: {} layers, latency {} cycles, initiation interval {}.",
        d.model,
        d.layers.len(),
        d.latency(),
        d.initiation_interval()
    );
    let _ = writeln!(o, "module {TOP} (");
    let _ = writeln!(o, "  input clk, input rst,");
    let _ = writeln!(o, "  input in_valid, output in_ready, input [{}:0] in_data,", d.input_len() * iw - 1);
    let _ = writeln!(o, "  output out_valid, input out_ready, output [{}:0] out_data", d.output_len() * ow - 1);
    let _ = writeln!(o, ");");
    let n = d.layers.len();
    let mut widths = Vec::new();
    let mut outputs = Vec::new();
    for (i, l) in d.layers.iter().enumerate() {
        let w = l.output().width() as usize * l.out_features;
        outputs.push(unit_output(&mut o, i, w, crate::slice::feeds_slice(d, i)));
        widths.push(w);
    }
    for (i, l) in d.layers.iter().enumerate() {
        let (rst, feed) = unit_feed(&mut o, d, i, d.input_len() * iw, if i > 0 { widths[i - 1] } else { 0 });
        let ports = layer_ports(&mut o, d, i, &feed, &rst);
        let _ = writeln!(o, "  {} u{i} (.clk(clk), .rst({rst}), {ports}, {});", layer_module(l), outputs[i]);
    }
    let _ = writeln!(o, "  assign out_valid = v{};", n - 1);
    let _ = writeln!(o, "  assign r{} = out_ready;", n - 1);
    let _ = writeln!(o, "  assign out_data = d{};", n - 1);
    let _ = writeln!(o, "endmodule");
    o
}
