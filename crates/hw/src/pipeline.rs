//! Pipelining to a clock: the schedule and the Verilog of a layer registered so that no stage
//! holds more logic than one clock period allows (doc/hardware.md, "Pipelining to a clock").
//!
//! A pipelined layer is a chain of register stages that all advance together on one enable,
//! `en`, followed by a small output FIFO ([`output_entries`]). `en` is a register decided
//! from the FIFO's count one or more cycles ahead, never from the consumer's `out_ready`, so the
//! enable, and the `in_ready` the layer gives the layer before it, depend on this layer's own
//! registers only: no combinational path crosses a layer, and the consumer's ready reaches only
//! the FIFO's count and read pointer. The stages:
//!
//! 1. **pre**: the steps before the product, in the stages of [`step_plan`];
//! 2. folded layers only: a **feeder** (the sample's shift register and the cycle counter) and a
//!    **select** stage registering the `K / R` inputs and the weights of the cycle;
//! 3. **multiply**: every product into its own register (with `--multipliers inferred`, a DSP's
//!    input registers are the registers of the stage before, its output register this one);
//!    with `--multipliers ecp5-dsp`, four stages: a fabric register, the input and output
//!    registers of a `MULT18X18D`, and a fabric register again ([`crate::dsp`]);
//! 4. **adder tree**: `2^L` terms summed per stage, `L` = [`adder_levels`] of the clock;
//! 5. folded layers only: the **accumulator**, adding one partial sum per cycle;
//! 6. **post**: the steps after the sums, in the stages of [`step_plan`], the last one being the output
//!    buffer's register.

use crate::design::{signed_bits, Layer, Range, Step};
use crate::dsp::{ecp5_product, Multipliers};
use crate::shift_add::{digits, Digit, Products};
use crate::verilog::{layer_module, lit, part_range, part_wires, requant_shift, Part};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// Nanoseconds of one adder level on the ECP5 fabric, routing included (a carry chain of the
/// widths these designs use plus the route to the next level).
pub const ADDER_LEVEL_NS: f64 = 2.5;
/// Nanoseconds of every stage besides its logic: clock to output, setup, clock skew and the
/// route into the stage.
pub const STAGE_OVERHEAD_NS: f64 = 2.0;

/// The clocks a design can be pipelined for, in MHz.
pub const CLOCK_RANGE_MHZ: std::ops::RangeInclusive<f64> = 1.0..=1000.0;

/// Why `clock_mhz` is no clock to pipeline for, or `Ok`.
pub fn check_clock(clock_mhz: f64) -> Result<(), String> {
    if CLOCK_RANGE_MHZ.contains(&clock_mhz) {
        Ok(())
    } else {
        Err(format!("clock_mhz {clock_mhz}: expected a frequency from {} to {} MHz", CLOCK_RANGE_MHZ.start(), CLOCK_RANGE_MHZ.end()))
    }
}

/// Adder levels one stage holds at `clock_mhz`: as many as fit in the period after the stage's
/// overhead, at least one (1 at 200 MHz, 3 at 100 MHz, 7 at 50 MHz).
pub fn adder_levels(clock_mhz: f64) -> usize {
    let period = 1000.0 / clock_mhz;
    (((period - STAGE_OVERHEAD_NS) / ADDER_LEVEL_NS).floor().max(1.0)) as usize
}

/// Adder levels of a whole rescale (its rounding decision, the carry adding it and the clamp)
/// in the delay model: below this many levels per stage, a rescale and an affine are split
/// into parts, each registered on its own ([`Part`]).
pub const RESCALE_LEVELS: usize = 3;

/// Whether steps are split into their parts at `clock_mhz` (above about 105 MHz).
pub fn splits_steps(clock_mhz: f64) -> bool {
    adder_levels(clock_mhz) < RESCALE_LEVELS
}

/// What a layer is pipelined for: the clock, how its products are built, and what reads its
/// output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pipelining {
    pub clock_mhz: f64,
    pub multipliers: Multipliers,
    /// Whether the layer's output FIFO feeds a register slice ([`crate::slice`]): then the
    /// FIFO decides its reads from the consumer's two registered readies ([`output_fifo`]).
    pub feeds_slice: bool,
}

impl Pipelining {
    /// Pipelining for `clock_mhz` with products in Verilog `*`, the output read directly.
    pub fn clock(clock_mhz: f64) -> Pipelining {
        Pipelining { clock_mhz, multipliers: Multipliers::Inferred, feeds_slice: false }
    }
}

/// A piece of logic a stage holds: part `part` of step `step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub step: usize,
    pub part: Part,
}

/// The register stages of `steps` on a stream of range `from`, each a list of pieces in order.
///
/// Unsplit (a slow clock), each stage is a group: an affine alone (it is a product),
/// consecutive rescales and relus together. Split (a fast clock), a rescale that drops bits is
/// three stages (the rounding decision, the carry, the clamp when a bound can be passed), one
/// that does not is one; an affine is two (the product, the sum); a relu, one LUT level, joins
/// the stage of the piece after it, or, last, the one before. With instantiated multipliers an
/// affine is its product and its sum at any clock.
pub fn step_plan(steps: &[Step], from: Range, p: &Pipelining) -> Vec<Vec<Piece>> {
    let whole = |step| Piece { step, part: Part::Whole };
    let mut stages: Vec<Vec<Piece>> = Vec::new();
    if !splits_steps(p.clock_mhz) {
        let mut open: Vec<Piece> = Vec::new();
        for (i, s) in steps.iter().enumerate() {
            match s {
                Step::Affine { .. } => {
                    if !open.is_empty() {
                        stages.push(std::mem::take(&mut open));
                    }
                    if p.multipliers.instantiated() {
                        stages.push(vec![Piece { step: i, part: Part::Mul }]);
                        stages.push(vec![Piece { step: i, part: Part::Add }]);
                    } else {
                        stages.push(vec![whole(i)]);
                    }
                }
                Step::Requant { .. } | Step::Relu | Step::Threshold { .. } => open.push(whole(i)),
            }
        }
        if !open.is_empty() {
            stages.push(open);
        }
        return stages;
    }
    let mut relus: Vec<Piece> = Vec::new();
    let mut r = from;
    for (i, s) in steps.iter().enumerate() {
        let parts: Vec<Part> = match s {
            Step::Relu => {
                relus.push(whole(i));
                r = s.range(r);
                continue;
            }
            Step::Affine { .. } => vec![Part::Mul, Part::Add],
            // One comparator, a carry chain as long as the popcount's width.
            Step::Threshold { .. } => vec![Part::Whole],
            Step::Requant { width, frac_width, signed } => {
                if requant_shift(s, r) > 0 {
                    let f = mase_quant::Fixed { width: *width, frac_width: *frac_width, signed: *signed };
                    let carry = part_range(s, r, Part::Carry);
                    let clamps = carry.lo < f.lo() || carry.hi > f.hi();
                    if clamps {
                        vec![Part::Round, Part::Carry, Part::Clamp]
                    } else {
                        vec![Part::Round, Part::Carry]
                    }
                } else {
                    vec![Part::Whole]
                }
            }
        };
        for (n, part) in parts.into_iter().enumerate() {
            let mut stage = if n == 0 { std::mem::take(&mut relus) } else { Vec::new() };
            stage.push(Piece { step: i, part });
            stages.push(stage);
        }
        r = s.range(r);
    }
    match stages.last_mut() {
        Some(last) => last.extend(relus),
        None if !relus.is_empty() => stages.push(relus),
        None => {}
    }
    stages
}

/// Whether a stage of [`step_plan`] ends in a product that goes to an instantiated multiplier
/// (an affine's `Mul` part is always the last piece of its stage).
fn stage_is_product(stage: &[Piece], p: &Pipelining) -> bool {
    p.multipliers.instantiated() && stage.last().is_some_and(|piece| piece.part == Part::Mul)
}

/// Register stages of a plan: one per stage, [`Multipliers::product_cycles`] for a stage
/// ending in an instantiated product.
fn plan_cycles(plan: &[Vec<Piece>], p: &Pipelining) -> usize {
    plan.iter().map(|s| if stage_is_product(s, p) { p.multipliers.product_cycles() } else { 1 }).sum()
}

/// The register stages of a pipelined layer and what they cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Schedule {
    /// Adder levels per stage of the tree.
    pub adder_levels: usize,
    /// Stages of the steps before the product.
    pub pre_stages: usize,
    /// Stages of every product (two in a `MULT18X18D` with its input and output registers).
    pub product_stages: usize,
    /// Stages of the adder tree.
    pub tree_stages: usize,
    /// Stages of the steps after the sums, the output FIFO's entry included.
    pub post_stages: usize,
    /// Cycles from the input handshake of a sample to the output handshake of its result, with
    /// a consumer that is always ready.
    pub latency: usize,
    /// Cycles between two samples the layer accepts.
    pub initiation_interval: usize,
}

/// Terms summed per output: the nonzero products and the bias when not zero (unrolled), the
/// multipliers with a nonzero weight in some cycle (folded; the bias enters the accumulator),
/// the weights' signed digits and the bias (shift-add products).
/// `popcount` says whether the layer is binarized ([`Layer::is_popcount`]), its bias in its XNORs.
pub(crate) fn terms(layer: &Layer, j: usize, popcount: bool) -> usize {
    let (k, r) = (layer.in_features, layer.reuse.max(1));
    let w = &layer.weight[j * k..][..k];
    if layer.products == Products::ShiftAdd && r <= 1 {
        // Every signed digit of every weight is a term.
        w.iter().map(|&v| digits(v).len()).sum::<usize>() + usize::from(layer.bias[j] != 0)
    } else if layer.products == Products::ShiftAdd {
        // Every bit of the weights a lane selects is a term.
        let p = k / r;
        (0..p).map(|q| lane_bits(&(0..r).map(|t| w[t * p + q]).collect::<Vec<_>>()).len()).sum()
    } else if r <= 1 {
        layer.lanes_in_use(j) + usize::from(layer.bias[j] != 0 && !popcount)
    } else {
        layer.lanes_in_use(j)
    }
}

/// Stages a tree of `n` terms needs at `2^levels` terms per stage.
fn tree_stages(mut n: usize, levels: usize) -> usize {
    let fan = 1usize << levels.min(16);
    let mut stages = 0;
    while n > 1 {
        n = n.div_ceil(fan);
        stages += 1;
    }
    stages
}

/// Bits of the signed register that holds every weight of a folded layer's lane `ws` (0 for a
/// lane whose weights are all zero, which has no multiplier).
pub(crate) fn lane_weight_bits(ws: &[i64]) -> u32 {
    if ws.iter().all(|&w| w == 0) {
        return 0;
    }
    let (lo, hi) = (ws.iter().copied().min().unwrap_or(0), ws.iter().copied().max().unwrap_or(0));
    signed_bits(lo.min(0) as i128, hi.max(0) as i128)
}

/// The bits of a folded shift-add lane's weight register ([`lane_weight_bits`] wide) that some
/// weight of the lane sets, lowest first: each is a term of the array multiplier; the others
/// (a weight's trailing zeros at the accumulator's scale, the sign bit of a lane without
/// negative weights) are always zero and have none.
pub(crate) fn lane_bits(ws: &[i64]) -> Vec<u32> {
    let bits = lane_weight_bits(ws);
    (0..bits).filter(|&i| ws.iter().any(|&w| (w >> i) & 1 == 1)).collect()
}

/// Bits of a folded lane's weight ROM: the signed width of its weights and zero.
fn rom_width(ws: &[i64]) -> u32 {
    let (lo, hi) = ws.iter().fold((0i64, 0i64), |(l, h), &w| (l.min(w), h.max(w)));
    signed_bits(lo as i128, hi as i128)
}

/// The cycle counts a folded layer's weight ROMs read, `rom_bits` ROM bits in all: about
/// `sqrt(rom_bits)` copies of the count `cnt`, each a counter of its own (`keep`) reaching about
/// as many ROM bits as there are copies, so that no count net reaches every ROM of the layer
/// (on jsc-three-layer folded, `cnt` reached thousands of LUTs and its own increment was the
/// critical path, 10 ns of routing). A copy is cleared when a sample is taken (`en && xv`) and
/// counts on the enabled cycles of a busy layer, as `cnt` does; below 64 ROM bits, `cnt` itself.
/// Each copy has a busy flag of its own (`busy_k{g}`, set on the sample and cleared after the
/// copy's own last beat of `r`), which holds `busy`'s value in every cycle: one `busy` reaching
/// every copy across the layer was the next critical path (9.57 ns of routing at 96.8 MHz).
fn count_copies(m: &mut Module, cb: u32, r: usize, xv: &str, rom_bits: usize) -> Vec<String> {
    if rom_bits < 64 {
        return vec!["cnt".into()];
    }
    let copies = (rom_bits as f64).sqrt().ceil() as usize;
    (0..copies)
        .map(|g| {
            let (name, busy) = (format!("cnt_k{g}"), format!("busy_k{g}"));
            m.line(format!("  reg [{}:0] {name};", cb - 1));
            m.line(format!("  reg {busy};"));
            m.register_bits += cb as usize + 1;
            let e = m.enable();
            m.line(format!(
                "  (* keep *) always @(posedge clk) if ({e} && {xv}) {name} <= {cb}'d0; else if ({e} && {busy}) {name} <= {name} + {cb}'d1;"
            ));
            m.line(format!(
                "  (* keep *) always @(posedge clk) if (rst) {busy} <= 1'b0; else if ({e} && {xv}) {busy} <= 1'b1; else if ({e} && {busy}) {busy} <= ({name} != {cb}'d{});",
                r - 1
            ));
            name
        })
        .collect()
}

/// Register stages of a layer's products: the multipliers' ([`Multipliers::product_cycles`]),
/// or one for shift-add products (the shifted and negated terms) and for a binarized layer's
/// XNOR bits (`popcount`, [`Layer::is_popcount`]), which never need a multiplier.
fn product_cycles(layer: &Layer, p: &Pipelining, popcount: bool) -> usize {
    if popcount {
        return 1;
    }
    match layer.products {
        Products::Multipliers => p.multipliers.product_cycles(),
        Products::ShiftAdd => 1,
    }
}

/// The schedule of `layer` pipelined as `p` says.
pub fn schedule(layer: &Layer, p: &Pipelining) -> Schedule {
    let levels = adder_levels(p.clock_mhz);
    let popcount = layer.is_popcount();
    let n = (0..layer.out_features).map(|j| terms(layer, j, popcount)).max().unwrap_or(0);
    let (pre, tree) = (plan_cycles(&step_plan(&layer.pre, layer.input, p), p), tree_stages(n, levels));
    let post = plan_cycles(&step_plan(&layer.post, layer.acc, p), p).max(1);
    let (r, mul) = (layer.reuse.max(1), product_cycles(layer, p, popcount));
    // Unrolled: pre, multiply, tree, post. Folded: pre, the feeder taking the sample, R beats
    // through select, multiply, tree and the accumulator, then post.
    let latency = if r <= 1 { pre + mul + tree + post } else { pre + 1 + r + 1 + mul + tree + post };
    Schedule {
        adder_levels: levels,
        pre_stages: pre,
        product_stages: mul,
        tree_stages: tree,
        post_stages: post,
        latency,
        initiation_interval: r,
    }
}

/// The range of every partial sum of output `j`'s terms, with or without the bias: each term
/// (a product, or an unrolled shift-add product's digit) ranges over `[min(0, lo), max(0, hi)]`
/// since any subset may be summed. A folded shift-add layer's bit terms may pass this range on
/// the way (a weight's sign bit against its other bits); the sums are exact modulo `2^width`
/// and every product and accumulated sum is within it, so the result is exact.
pub(crate) fn running_range(layer: &Layer) -> (i128, i128) {
    let x = layer.product_input();
    let (k, mut lo, mut hi) = (layer.in_features, 0i128, 0i128);
    for j in 0..layer.out_features {
        let b = layer.bias[j] as i128;
        let (mut l, mut h) = (b.min(0), b.max(0));
        for &w in &layer.weight[j * k..][..k] {
            // Shift-add products sum their digits' terms, each of its own range.
            let factors = match layer.products {
                Products::ShiftAdd if layer.reuse <= 1 => digits(w).iter().map(|d| d.value()).collect(),
                Products::Multipliers | Products::ShiftAdd => vec![w as i128],
            };
            for f in factors {
                let (p, q) = (f * x.lo as i128, f * x.hi as i128);
                l += p.min(q).min(0);
                h += p.max(q).max(0);
            }
        }
        lo = lo.min(l);
        hi = hi.max(h);
    }
    (lo.min(layer.acc.lo as i128), hi.max(layer.acc.hi as i128))
}

/// The Verilog being written and the register bits declared so far.
struct Module {
    text: String,
    register_bits: usize,
    /// The copies of the stage enable made so far, when the enable is replicated
    /// ([`Module::enable`]); `None`: every register uses `en`.
    copies: Option<Vec<String>>,
    /// Instantiated multipliers so far.
    dsps: usize,
}

/// Where the declarations of the enable's copies go in the module's text.
const COPIES_MARK: &str = "  // (copies of the stage enable)\n";

impl Module {
    /// An instantiated product ([`ecp5_product`]), counted with its fabric registers (the
    /// operands' and the product's; the DSP's own registers are not flip-flops).
    fn product(&mut self, inst: &str, ce: &str, a: (&str, u32), b: (&str, u32), p: (&str, u32)) {
        ecp5_product(&mut self.text, inst, ce, a, b, p);
        self.dsps += 1;
        self.register_bits += (a.1 + b.1 + p.1) as usize;
    }

    /// The stage enable for one group of registers: `en` itself, or (replicated) a new copy of
    /// it, a register of its own computing the same value, which the placer can put near the
    /// group.
    fn enable(&mut self) -> String {
        match &mut self.copies {
            Some(c) => {
                let name = format!("en_c{}", c.len());
                c.push(name.clone());
                name
            }
            None => "en".to_string(),
        }
    }

    fn line(&mut self, s: impl AsRef<str>) {
        self.text.push_str(s.as_ref());
        self.text.push('\n');
    }

    /// Declares a register of `width` bits (signed when `signed`).
    fn reg(&mut self, name: &str, width: u32, signed: bool) {
        self.register_bits += width as usize;
        let s = if signed { "signed " } else { "" };
        if width == 1 && !signed {
            self.line(format!("  reg {name};"));
        } else {
            self.line(format!("  reg {s}[{}:0] {name};", width - 1));
        }
    }
}

/// A term of an output's adder tree: a register, wire or literal, and the range of its value.
#[derive(Clone, Debug)]
struct Term {
    name: String,
    lo: i128,
    hi: i128,
}

impl Term {
    /// The literal `v`, written `width` bits wide.
    fn constant(v: i64, width: u32) -> Term {
        Term { name: lit(v, width), lo: v as i128, hi: v as i128 }
    }
}

/// A binarized layer's product: the XNOR of an input bit with a weight bit (`1` for `+1`), in
/// a 2-bit register of its own, a term of value 0 or 1.
fn xnor_term(m: &mut Module, always: &mut Vec<String>, name: String, input_bit: &str, weight_bit: &str) -> Term {
    m.reg(&name, 2, true);
    let e = m.enable();
    always.push(format!("    if ({e}) {name} <= $signed({{1'b0, {input_bit} ~^ {weight_bit}}});"));
    Term { name, lo: 0, hi: 1 }
}

/// The names of `terms`.
fn names(terms: &[Term]) -> Vec<String> {
    terms.iter().map(|t| t.name.clone()).collect()
}

/// A balanced sum of `terms` (parenthesised so that the tree's depth is the log of its size).
fn balanced(terms: &[String]) -> String {
    match terms.len() {
        0 => "0".into(),
        1 => terms[0].clone(),
        n => format!("({} + {})", balanced(&terms[..n / 2]), balanced(&terms[n / 2..])),
    }
}

/// Register stages of steps `steps` on the elements `src` (ranges `from`), each stage of
/// [`step_plan`] advancing on `en`, with valid bits from `valid`; returns the registers, their
/// ranges and the last valid bit. The last stage is left unregistered when `register_last` is
/// false (it feeds the output FIFO): its wires are returned instead. A stage ending in an
/// instantiated product is that many stages ([`plan_cycles`]), its registers the primitive's.
#[allow(clippy::too_many_arguments)]
fn step_stages(
    m: &mut Module,
    always: &mut Vec<String>,
    prefix: &str,
    src: Vec<String>,
    from: Range,
    steps: &[Step],
    pipe: &Pipelining,
    valid: String,
    register_last: bool,
) -> (Vec<String>, Range, String) {
    let plan = step_plan(steps, from, pipe);
    // The range at the input of every step.
    let inputs: Vec<Range> = steps
        .iter()
        .scan(from, |r, s| {
            let here = *r;
            *r = s.range(here);
            Some(here)
        })
        .collect();
    let (mut cur, mut r, mut v) = (src, from, valid);
    for (g, stage) in plan.iter().enumerate() {
        if stage_is_product(stage, pipe) {
            (cur, r, v) = product_stage(m, always, &format!("{prefix}{g}"), &cur, r, stage, (steps, &inputs), pipe, v);
            continue;
        }
        let mut next = Vec::with_capacity(cur.len());
        let mut to = r;
        for (k, s) in cur.iter().enumerate() {
            let (mut w, mut rr) = (s.clone(), r);
            for (i, p) in stage.iter().enumerate() {
                let dst = format!("{prefix}{g}_w{k}_p{i}");
                rr = part_wires(&mut m.text, &w, rr, inputs[p.step], &steps[p.step], k, p.part, &dst);
                w = dst;
            }
            next.push(w);
            to = rr;
        }
        if g + 1 == plan.len() && !register_last {
            return (next, to, v);
        }
        let vreg = format!("{prefix}{g}_v");
        m.reg(&vreg, 1, false);
        always.push(format!("    if (rst) {vreg} <= 1'b0; else if (en) {vreg} <= {v};"));
        let mut regs = Vec::with_capacity(next.len());
        for (k, w) in next.iter().enumerate() {
            let name = format!("{prefix}{g}_{k}");
            m.reg(&name, to.width(), true);
            let e = m.enable();
            always.push(format!("    if ({e}) {name} <= {w};"));
            regs.push(name);
        }
        (cur, r, v) = (regs, to, vreg);
    }
    (cur, r, v)
}

/// A stage of [`step_plan`] that ends in an affine's product, on the elements `cur` (range `r`):
/// the pieces before the product as wires, then the product of every element in an instantiated
/// multiplier whose registers advance on `en`, with a valid bit per register stage. `steps`
/// comes with the range at the input of every step. Returns the products, their range and the
/// last valid bit.
#[allow(clippy::too_many_arguments)]
fn product_stage(
    m: &mut Module,
    always: &mut Vec<String>,
    name: &str,
    cur: &[String],
    r: Range,
    stage: &[Piece],
    (steps, inputs): (&[Step], &[Range]),
    pipe: &Pipelining,
    valid: String,
) -> (Vec<String>, Range, String) {
    let (last, before) = match stage.split_last() {
        Some(x) => x,
        None => return (cur.to_vec(), r, valid),
    };
    let step = &steps[last.step];
    let to = part_range(step, inputs[last.step], Part::Mul);
    let mut out = Vec::with_capacity(cur.len());
    for (k, s) in cur.iter().enumerate() {
        let (mut w, mut rr) = (s.clone(), r);
        for (i, p) in before.iter().enumerate() {
            let dst = format!("{name}_w{k}_p{i}");
            rr = part_wires(&mut m.text, &w, rr, inputs[p.step], &steps[p.step], k, p.part, &dst);
            w = dst;
        }
        let dst = format!("{name}_{k}");
        let c = match step {
            Step::Affine { mul, .. } => mul.get(k % mul.len().max(1)).copied().unwrap_or(0),
            Step::Requant { .. } | Step::Relu | Step::Threshold { .. } => 0,
        };
        if to.lo == to.hi {
            // A constant product needs no multiplier.
            m.line(format!("  wire signed [{}:0] {dst} = {};", to.width() - 1, lit(to.lo, to.width())));
        } else {
            let cw = signed_bits(c as i128, c as i128) + 1;
            let e = m.enable();
            m.product(&format!("u_{dst}"), &e, (&w, rr.width()), (&lit(c, cw), cw), (&dst, to.width()));
        }
        out.push(dst);
    }
    let mut v = valid;
    for c in 0..pipe.multipliers.product_cycles() {
        let vreg = format!("{name}_v{c}");
        m.reg(&vreg, 1, false);
        always.push(format!("    if (rst) {vreg} <= 1'b0; else if (en) {vreg} <= {v};"));
        v = vreg;
    }
    (out, to, v)
}

/// The terms of every output of an unrolled layer with shift-add products: the bias (when not
/// zero) and, for every nonzero weight, its signed digits ([`digits`]) as registers of the
/// product stage holding `±(x << shift)` of the weight's input `x` (elements `xs`, range `xr`).
/// Equal terms (an input shifted by the same digit for two outputs) share a register. `tw` is
/// the width of the tree's sums.
fn shift_add_terms(m: &mut Module, always: &mut Vec<String>, layer: &Layer, (xs, xr): (&[String], Range), tw: u32) -> Vec<Vec<Term>> {
    let k = layer.in_features;
    let mut made: std::collections::BTreeMap<(usize, Digit), Term> = std::collections::BTreeMap::new();
    let mut nodes = Vec::with_capacity(layer.out_features);
    for j in 0..layer.out_features {
        let mut t = Vec::new();
        if layer.bias[j] != 0 {
            t.push(Term::constant(layer.bias[j], tw));
        }
        for (i, x) in xs.iter().enumerate() {
            for d in digits(layer.weight[j * k + i]) {
                let name = made.entry((i, d)).or_insert_with(|| {
                    let name = format!("sa_{i}_{}{}", if d.negative { "n" } else { "p" }, d.shift);
                    let (p, q) = (d.value() * xr.lo as i128, d.value() * xr.hi as i128);
                    let width = signed_bits(p.min(q), p.max(q));
                    m.reg(&name, width, true);
                    // The input sign-extends to the register's width before the shift.
                    let shifted = if d.shift == 0 { x.clone() } else { format!("({x} <<< {})", d.shift) };
                    let value = if d.negative { format!("-{shifted}") } else { shifted };
                    let e = m.enable();
                    always.push(format!("    if ({e}) {name} <= {value};"));
                    Term { name, lo: p.min(q), hi: p.max(q) }
                });
                t.push(name.clone());
            }
        }
        nodes.push(t);
    }
    nodes
}

/// `n` valid bits in a chain from `from`, named `{prefix}{c}_v` (the last one `{prefix}_v`),
/// advancing on `en`; returns the last one's name.
fn valid_chain(m: &mut Module, always: &mut Vec<String>, prefix: &str, n: usize, from: String) -> String {
    let mut v = from;
    for c in 0..n {
        let name = if c + 1 == n { format!("{prefix}_v") } else { format!("{prefix}{c}_v") };
        m.reg(&name, 1, false);
        always.push(format!("    if (rst) {name} <= 1'b0; else if (en) {name} <= {v};"));
        v = name;
    }
    v
}

/// The Verilog of a pipelined layer and what it declares.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerRtl {
    pub text: String,
    /// Bits of its flip-flop registers (an instantiated multiplier's own registers are the
    /// primitive's, not counted; the fabric registers around it are).
    pub register_bits: usize,
    /// Instantiated multipliers (DSP blocks).
    pub dsps: usize,
    /// Bits of the adder tree's adders: for every register of the tree, its width times the
    /// terms it adds less one.
    pub tree_adder_bits: usize,
    /// Bits of the output FIFO's entries (its read multiplexer selects among them).
    pub fifo_bits: usize,
    /// Folded only: bits of the weight registers that the cycle counter loads from a case
    /// statement (a ROM of `R` entries each).
    pub rom_bits: usize,
}

/// The Verilog of `layer` pipelined as `pipe` says.
pub fn pipelined_layer(layer: &Layer, pipe: &Pipelining) -> LayerRtl {
    let clock_mhz = pipe.clock_mhz;
    let sched = schedule(layer, pipe);
    // On an ECP5 with instantiated multipliers, the enable is replicated: one copy per
    // multiplier and per register of the other stages, so that no single net reaches every
    // DSP and flip-flop of the layer in one clock.
    let copies = if pipe.multipliers.instantiated() { Some(Vec::new()) } else { None };
    let mut m = Module { text: String::new(), register_bits: 0, copies, dsps: 0 };
    let mut always: Vec<String> = Vec::new();
    let (iw, ow) = (layer.input.width(), layer.output().width());
    let (n_in, n_out, r) = (layer.in_features, layer.out_features, layer.reuse.max(1));
    // A binarized layer ([`Layer::is_popcount`]) sums XNOR bits from 0: its bias, the count of
    // its `-1` weights, is in the XNORs.
    let popcount = layer.is_popcount();
    let bias = |j: usize| if popcount { 0 } else { layer.bias[j] };
    m.line(format!(
        "// Layer `{}`: {n_in} -> {n_out}, reuse factor {r}, pipelined for {clock_mhz} MHz ({} adder levels per stage): latency {} cycles, initiation interval {r}.",
        layer.node, sched.adder_levels, sched.latency
    ));
    m.line(format!("module {} (", layer_module(layer)));
    m.line("  input clk, input rst,");
    m.line(format!("  input in_valid, output in_ready, input [{}:0] in_data,", n_in * iw as usize - 1));
    m.line(format!("  output out_valid, input out_ready, output [{}:0] out_data,", n_out * ow as usize - 1));
    if pipe.feeds_slice {
        m.line("  input out_ready_popped,");
    }
    m.line("  output in_ready_ahead_idle, output in_ready_ahead_valid");
    m.line(");");
    // The stage enable, a register decided from the FIFO's count ahead of the cycle it holds,
    // `en_next`, what it holds in the next cycle, and (decided two cycles ahead) `en_d`, what
    // it holds in the cycle after ([`output_fifo`]).
    m.line("  reg en;");
    m.line("  wire en_next;");
    let lead = enable_lead(pipe);
    if lead == 2 {
        m.line("  wire en_d;");
    }
    m.register_bits += 1;
    if m.copies.is_some() {
        m.text.push_str(COPIES_MARK);
    }
    let ins: Vec<String> = (0..n_in)
        .map(|k| {
            m.line(format!("  wire signed [{}:0] in_{k} = in_data[{}:{}];", iw - 1, (k + 1) * iw as usize - 1, k * iw as usize));
            format!("in_{k}")
        })
        .collect();
    let (rlo, rhi) = running_range(layer);
    let tw = signed_bits(rlo, rhi);
    let aw = layer.acc.width();
    let fan = 1usize << sched.adder_levels.min(16);
    // The valid bit and the terms of every output entering the tree, and (folded) the first
    // and last beat flags.
    type Terms = (String, Vec<Vec<Term>>, Option<(String, String)>);
    // What each register of a folded layer's valid bit and first beat flag is loaded from, for
    // the accumulator's copies of them ([`beat_copies`]).
    let mut beat_inputs: BTreeMap<String, String> = BTreeMap::new();
    let mut rom_bits = 0;
    let (tree_valid, mut nodes, flags): Terms = if r <= 1 {
        m.line("  assign in_ready = en;");
        m.line("  assign in_ready_ahead_idle = en_next;");
        m.line("  assign in_ready_ahead_valid = en_next;");
        let (xs, xr, xv) = step_stages(&mut m, &mut always, "pre", ins, layer.input, &layer.pre, pipe, "in_valid".into(), true);
        let mul_v = valid_chain(&mut m, &mut always, "mul", product_cycles(layer, pipe, popcount), xv);
        if layer.products == Products::ShiftAdd {
            let nodes = shift_add_terms(&mut m, &mut always, layer, (&xs, xr), tw);
            (mul_v, nodes, None)
        } else {
            let mut nodes = Vec::new();
            for j in 0..n_out {
                let mut t = Vec::new();
                if bias(j) != 0 {
                    t.push(Term::constant(bias(j), tw));
                }
                for (k, x) in xs.iter().enumerate() {
                    let wv = layer.weight[j * n_in + k];
                    if wv == 0 {
                        continue;
                    }
                    if popcount {
                        let weight_bit = format!("1'b{}", u8::from(wv > 0));
                        t.push(xnor_term(&mut m, &mut always, format!("mul_{j}_{k}"), &format!("{x}[0]"), &weight_bit));
                        continue;
                    }
                    let (p, q) = (wv as i128 * xr.lo as i128, wv as i128 * xr.hi as i128);
                    let name = format!("mul_{j}_{k}");
                    let pw = signed_bits(p.min(q), p.max(q));
                    if pipe.multipliers.instantiated() {
                        let cw = signed_bits(wv as i128, wv as i128) + 1;
                        let e = m.enable();
                        m.product(&format!("u_{name}"), &e, (x, xr.width()), (&lit(wv, cw), cw), (&name, pw));
                    } else {
                        m.reg(&name, pw, true);
                        let cw = signed_bits(wv as i128, wv as i128).max(xr.width()) + 1;
                        always.push(format!("    if (en) {name} <= {x} * {};", lit(wv, cw)));
                    }
                    t.push(Term { name, lo: p.min(q), hi: p.max(q) });
                }
                nodes.push(t);
            }
            (mul_v, nodes, None)
        }
    } else {
        let p = n_in / r;
        let cb = signed_bits(0, r as i128);
        m.line("  reg busy;");
        m.line(format!("  reg [{}:0] cnt;", cb - 1));
        m.register_bits += 1 + cb as usize;
        m.line(format!("  wire last = busy && (cnt == {cb}'d{});", r - 1));
        // The layer takes a sample every `r` enabled cycles at most (`open`, after `gap` counts
        // down), so that a sample reaches the feeder when its last beat leaves or later: the
        // pre stages advance on the enable with every other stage, and the `in_ready` this
        // layer gives its producer is a gate on two registers.
        m.line("  reg open;");
        m.line(format!("  reg [{}:0] gap;", cb - 1));
        m.register_bits += 1 + cb as usize;
        m.line("  wire accept = in_valid && open;");
        m.line("  assign in_ready = en && open;");
        // What `open` and `gap` hold in the next cycle.
        m.line(format!("  wire open_next = rst || (en ? (!accept && (open || gap == {cb}'d1)) : open);"));
        m.line(format!(
            "  wire [{}:0] gap_next = rst ? {cb}'d0 : (en && accept) ? {cb}'d{} : (en && !open) ? gap - {cb}'d1 : gap;",
            cb - 1,
            r - 1
        ));
        always.push("    open <= open_next; gap <= gap_next;".to_string());
        ready_ahead(&mut m, lead, cb);
        let (xs, xr, xv) = step_stages(&mut m, &mut always, "pre", ins, layer.input, &layer.pre, pipe, "accept".into(), true);
        let xw = xr.width() as usize;
        m.line(format!("  wire take = en && {xv};"));
        m.line(format!(
            "  wire [{}:0] x_all = {{{}}};",
            n_in * xw - 1,
            xs.iter().rev().map(|x| format!("{x}[{}:0]", xw - 1)).collect::<Vec<_>>().join(", ")
        ));
        m.reg("xs", (n_in * xw) as u32, false);
        always.push(format!(
            "    if (rst) busy <= 1'b0;\n    else if (take) begin busy <= 1'b1; cnt <= {cb}'d0; end\n    else if (en && busy) begin busy <= !last; cnt <= cnt + {cb}'d1; end"
        ));
        // The sample's shift register, apart from the reset (which would gate its every bit),
        // in chunks of a copy of the enable each (replicated): its load and shift reach
        // hundreds of flip-flops.
        m.line(format!("  wire [{}:0] xs_next = xs >> {};", n_in * xw - 1, p * xw));
        for (c, lo) in (0..n_in * xw).step_by(XS_CHUNK_BITS).enumerate() {
            let hi = (lo + XS_CHUNK_BITS).min(n_in * xw) - 1;
            let e = m.enable();
            m.line(format!("  wire take_{c} = {e} && {xv};"));
            always.push(format!(
                "    if (take_{c}) xs[{hi}:{lo}] <= x_all[{hi}:{lo}]; else if ({e} && busy) xs[{hi}:{lo}] <= xs_next[{hi}:{lo}];"
            ));
        }
        // Select: the inputs and weights of this cycle, with the first and last beat marked.
        for name in ["sel_v", "sel_f", "sel_l"] {
            m.reg(name, 1, false);
        }
        always.push(format!("    if (rst) sel_v <= 1'b0; else if (en) begin sel_v <= busy; sel_f <= (cnt == {cb}'d0); sel_l <= last; end"));
        // Each input of the cycle in a register per group of outputs ([`SELECT_GROUP_OUTPUTS`]),
        // the copies kept apart (`keep`): one register would reach every output's products.
        for q in 0..p {
            for g in 0..n_out.div_ceil(SELECT_GROUP_OUTPUTS) {
                let name = select_name(q, g * SELECT_GROUP_OUTPUTS);
                m.reg(&name, xw as u32, true);
                let e = m.enable();
                let load = format!("if ({e}) {name} <= xs[{}:{}];", (q + 1) * xw - 1, q * xw);
                if g == 0 {
                    always.push(format!("    {load}"));
                } else {
                    m.line(format!("  (* keep *) always @(posedge clk) {load}"));
                }
            }
        }
        // The valid bit and the first and last beat flags through the product's stages.
        let mut prev = ("sel_v".to_string(), "sel_f".to_string(), "sel_l".to_string());
        for c in 0..product_cycles(layer, pipe, popcount) {
            let names = (format!("mul{c}_v"), format!("mul{c}_f"), format!("mul{c}_l"));
            for name in [&names.0, &names.1, &names.2] {
                m.reg(name, 1, false);
            }
            always.push(format!(
                "    if (rst) {} <= 1'b0; else if (en) begin {} <= {}; {} <= {}; {} <= {}; end",
                names.0, names.0, prev.0, names.1, prev.1, names.2, prev.2
            ));
            beat_inputs.insert(names.0.clone(), prev.0.clone());
            beat_inputs.insert(names.1.clone(), prev.1.clone());
            prev = names;
        }
        let (mul_v, mul_f, mul_l) = prev;
        // The weight ROMs of every lane, each a case on the cycle count.
        let roms: Vec<(usize, usize, Vec<i64>)> = (0..n_out)
            .flat_map(|j| (0..p).map(move |q| (j, q, (0..r).map(|c| layer.weight[j * n_in + c * p + q]).collect::<Vec<i64>>())))
            .filter(|(_, _, ws)| ws.iter().any(|&w| w != 0))
            .collect();
        // A binarized layer's ROMs hold the weights' bits (1 for +1).
        let width = |ws: &[i64]| if popcount { 1 } else { rom_width(ws) };
        rom_bits = roms.iter().map(|(_, _, ws)| width(ws) as usize).sum();
        let counts = count_copies(&mut m, cb, r, &xv, rom_bits);
        let per = roms.len().div_ceil(counts.len()).max(1);
        let mut nodes: Vec<Vec<Term>> = vec![Vec::new(); n_out];
        let mut negated = BTreeSet::new();
        for (i, (j, q, ws)) in roms.iter().enumerate() {
            let (j, q) = (*j, *q);
            let t = &mut nodes[j];
            let ww = width(ws);
            let sel = format!("sel_w{j}_{q}");
            m.reg(&sel, ww, !popcount);
            let mut case = format!("    if ({}) case ({})", m.enable(), counts[i / per]);
            for (c, &w) in ws.iter().enumerate() {
                let value = if popcount { format!("1'b{}", u8::from(w > 0)) } else { lit(w, ww) };
                let _ = write!(case, "\n      {cb}'d{c}: {sel} <= {value};");
            }
            let default = if popcount { "1'b0".to_string() } else { format!("{ww}'sd0") };
            let _ = write!(case, "\n      default: {sel} <= {default};\n    endcase");
            always.push(case);
            let name = format!("mul_{j}_{q}");
            if popcount {
                // This cycle's input bit with its weight's bit.
                t.push(xnor_term(&mut m, &mut always, name, &format!("{}[0]", select_name(q, j)), &sel));
                continue;
            }
            let prods = ws.iter().flat_map(|&w| [w as i128 * xr.lo as i128, w as i128 * xr.hi as i128]);
            let (plo, phi) = prods.fold((0i128, 0i128), |(l, h), v| (l.min(v), h.max(v)));
            let pw = signed_bits(plo, phi);
            if layer.products == Products::ShiftAdd {
                // An array multiplier: one term per bit of the weight, the input shifted by
                // the bit's place when the bit is set (the sign bit's term negated).
                for i in lane_bits(ws) {
                    let bit = format!("{name}_b{i}");
                    let place = if i + 1 == ww { -(1i128 << i) } else { 1i128 << i };
                    let (a, b) = (place * xr.lo as i128, place * xr.hi as i128);
                    let width = signed_bits(a.min(b).min(0), a.max(b).max(0));
                    m.reg(&bit, width, true);
                    let x = if place < 0 { negated_select(&mut m, &mut negated, (q, j), xw) } else { select_name(q, j) };
                    let value = if i == 0 { x } else { format!("({x} <<< {i})") };
                    let e = m.enable();
                    always.push(format!("    if ({e}) {bit} <= {sel}[{i}] ? {value} : {width}'sd0;"));
                    t.push(Term { name: bit, lo: a.min(b).min(0), hi: a.max(b).max(0) });
                }
                continue;
            }
            if pipe.multipliers.instantiated() {
                let e = m.enable();
                m.product(&format!("u_{name}"), &e, (&select_name(q, j), xw as u32), (&sel, ww), (&name, pw));
            } else {
                m.reg(&name, pw, true);
                always.push(format!("    if (en) {name} <= {} * {sel};", select_name(q, j)));
            }
            t.push(Term { name, lo: plo, hi: phi });
        }
        (mul_v, nodes, Some((mul_f, mul_l)))
    };
    // The adder tree: `fan` terms per register per stage, every output through the same stages.
    let (mut tv, mut flags) = (tree_valid, flags);
    let mut tree_adder_bits = 0;
    for s in 0..sched.tree_stages {
        let v = format!("tree{s}_v");
        m.reg(&v, 1, false);
        always.push(format!("    if (rst) {v} <= 1'b0; else if (en) {v} <= {tv};"));
        if let Some((f, l)) = &flags {
            let (nf, nl) = (format!("tree{s}_f"), format!("tree{s}_l"));
            m.reg(&nf, 1, false);
            m.reg(&nl, 1, false);
            always.push(format!("    if (en) begin {nf} <= {f}; {nl} <= {l}; end"));
            beat_inputs.insert(v.clone(), tv.clone());
            beat_inputs.insert(nf.clone(), f.clone());
            flags = Some((nf, nl));
        }
        tv = v;
        for (j, t) in nodes.iter_mut().enumerate() {
            let mut next = Vec::new();
            for (c, chunk) in t.chunks(fan).enumerate() {
                // Each sum as wide as its terms' ranges added: narrower than the tree's width
                // near the products.
                let name = format!("tree{s}_{j}_{c}");
                let (lo, hi) = chunk.iter().fold((0i128, 0i128), |(l, h), t| (l + t.lo, h + t.hi));
                m.reg(&name, signed_bits(lo, hi), true);
                tree_adder_bits += (chunk.len() - 1) * signed_bits(lo, hi) as usize;
                let e = m.enable();
                always.push(format!("    if ({e}) {name} <= {};", balanced(&names(chunk))));
                next.push(Term { name, lo, hi });
            }
            *t = next;
        }
    }
    // The sums: the tree's single term (unrolled), or the accumulator that adds one partial sum
    // per cycle, starting from the bias on the first beat (folded).
    let (sums, sum_valid): (Vec<String>, String) = match &flags {
        None => {
            let s = nodes
                .iter()
                .enumerate()
                .map(|(j, t)| {
                    m.line(format!("  wire signed [{}:0] acc_{j} = {};", aw - 1, balanced(&names(t))));
                    format!("acc_{j}")
                })
                .collect();
            (s, tv)
        }
        Some((f, l)) => {
            m.reg("acc_v", 1, false);
            always.push(format!("    if (rst) acc_v <= 1'b0; else if (en) acc_v <= {tv} && {l};"));
            let (vs, fs) = (beat_copies(&mut m, &beat_inputs, &tv, n_out), beat_copies(&mut m, &beat_inputs, f, n_out));
            let s = nodes
                .iter()
                .enumerate()
                .map(|(j, t)| {
                    let name = format!("acc_r{j}");
                    m.reg(&name, tw, true);
                    let e = m.enable();
                    let (v, f) = (&vs[j / SELECT_GROUP_OUTPUTS], &fs[j / SELECT_GROUP_OUTPUTS]);
                    always.push(format!("    if ({e} && {v}) {name} <= ({f} ? {} : {name}) + {};", lit(bias(j), tw), balanced(&names(t))));
                    m.line(format!("  wire signed [{}:0] acc_{j} = {name};", aw - 1));
                    format!("acc_{j}")
                })
                .collect();
            (s, "acc_v".into())
        }
    };
    // Post: the steps after the sums; the last group feeds the output FIFO.
    let (ys, _, yv) = step_stages(&mut m, &mut always, "post", sums, layer.acc, &layer.post, pipe, sum_valid, false);
    let packed: Vec<String> = ys.iter().rev().map(|y| format!("{y}[{}:0]", ow - 1)).collect();
    m.line(format!("  wire [{}:0] y = {{{}}};", n_out * ow as usize - 1, packed.join(", ")));
    for chunk in always.chunks(PROCESS_STATEMENTS) {
        m.line("  always @(posedge clk) begin");
        for a in chunk {
            m.line(a);
        }
        m.line("  end");
    }
    output_fifo(&mut m, &yv, n_out * ow as usize, lead, pipe.feeds_slice);
    m.line("endmodule");
    let fifo_bits = output_entries(lead) * n_out * ow as usize;
    LayerRtl { text: m.text, register_bits: m.register_bits, dsps: m.dsps, tree_adder_bits, fifo_bits, rom_bits }
}

/// A folded layer's `in_ready_ahead_idle` and `in_ready_ahead_valid`: the value its `in_ready`
/// (`en && open`) has in the next cycle if `in_valid` is then low, or high (the sample taken
/// when `open`), so that a producer that knows whether it offers a sample then
/// ([`output_fifo`]) knows the ready. Decided one cycle ahead (`lead` 1), they are gates on
/// this cycle's registers (`gap` `cb` bits wide). Decided two cycles ahead (`lead` 2), the
/// enable of the cycle after the next is known now (`en_d`), and so are `open` and `gap` of
/// the next (`open_next`, `gap_next`): the two readies are registers, and the route to the
/// producer starts at a flip-flop. They leave out the reset of the next cycle, in which the
/// producer and the slice between the two are reset and read neither.
fn ready_ahead(m: &mut Module, lead: usize, cb: u32) {
    let (idle, valid) = ("in_ready_ahead_idle", "in_ready_ahead_valid");
    if lead == 2 {
        m.line(format!("  reg {idle}_r, {valid}_r;"));
        m.line(format!("  assign {idle} = {idle}_r;"));
        m.line(format!("  assign {valid} = {valid}_r;"));
        m.line(format!(
            "  always @(posedge clk) begin\n    {idle}_r <= en_d && (en_next ? (open_next || gap_next == {cb}'d1) : open_next);\n    {valid}_r <= en_d && (en_next ? (!open_next && gap_next == {cb}'d1) : open_next);\n  end"
        ));
        m.register_bits += 2;
    } else {
        m.line(format!("  assign {idle} = en_next && (rst || (en ? (open || gap == {cb}'d1) : open));"));
        m.line(format!("  assign {valid} = en_next && (rst || (en ? (!open && gap == {cb}'d1) : open));"));
    }
}

/// Statements of a layer's registers per `always` block. Yosys's `proc` takes time
/// superlinear in the size of one process: TFC_1W1A's first layer folded by 16 and pipelined
/// (about 10,000 statements) took 198 s of `proc` as one block and 16 s in blocks of 1,000,
/// and the whole design, as one block per layer, had not left `proc` after 45 minutes of
/// `synth_ecp5`. One block per statement made Verilator's build of a layer 40 % slower; blocks
/// of 1,000 build as fast as one.
const PROCESS_STATEMENTS: usize = 1024;

/// Bits of a folded layer's sample shift register that one copy of the enable loads and
/// shifts.
const XS_CHUNK_BITS: usize = 64;

/// Outputs of a folded layer whose products read one copy of a select register (`sel_x{q}`,
/// the lane's input of the cycle). One register for all 64 outputs of jsc-three-layer's first
/// layer (shift-add products) put its route across the part and Yosys shared its negation
/// among the outputs' terms: 5.80 and 4.93 ns of routing on one path, 73.6 MHz.
pub(crate) const SELECT_GROUP_OUTPUTS: usize = 8;

/// The select register of lane `q` that output `j`'s products read: `sel_x{q}` for the first
/// group of outputs, a copy `sel_x{q}_g{g}` for group `g`.
fn select_name(q: usize, j: usize) -> String {
    match j / SELECT_GROUP_OUTPUTS {
        0 => format!("sel_x{q}"),
        g => format!("sel_x{q}_g{g}"),
    }
}

/// The register `flag` (a folded layer's valid bit or first beat flag as the accumulators read
/// it) and a copy of it per further group of [`SELECT_GROUP_OUTPUTS`] outputs (`{flag}_g{g}`,
/// kept apart), each loaded from what `inputs` says `flag` is: one register for the
/// accumulators of every output reaches each of their bits (the enable and the bias select).
fn beat_copies(m: &mut Module, inputs: &BTreeMap<String, String>, flag: &str, n_out: usize) -> Vec<String> {
    let groups = n_out.div_ceil(SELECT_GROUP_OUTPUTS).max(1);
    let Some(from) = inputs.get(flag) else {
        return vec![flag.to_string(); groups];
    };
    let mut names = vec![flag.to_string()];
    for g in 1..groups {
        let name = format!("{flag}_g{g}");
        m.reg(&name, 1, false);
        m.line(format!("  (* keep *) always @(posedge clk) if (rst) {name} <= 1'b0; else if (en) {name} <= {from};"));
        names.push(name);
    }
    names
}

/// The negated select register of lane `q` that output `j`'s sign-bit terms read (`sel_n{q}`,
/// a copy `sel_n{q}_g{g}` per group of outputs as [`select_name`]), declared and loaded with
/// the negated input of the cycle at its first use (`made`): the negation's carry chain then
/// runs from the sample register to one register per group, and the term is a select of it.
/// Negating the select register in the term instead put the chain, which Yosys shares among
/// the group's outputs, between two routes across the layer.
fn negated_select(m: &mut Module, made: &mut BTreeSet<String>, (q, j): (usize, usize), xw: usize) -> String {
    let name = select_name(q, j).replacen("sel_x", "sel_n", 1);
    if made.insert(name.clone()) {
        m.reg(&name, xw as u32 + 1, true);
        let e = m.enable();
        let load = format!("if ({e}) {name} <= -$signed(xs[{}:{}]);", (q + 1) * xw - 1, q * xw);
        m.line(format!("  (* keep *) always @(posedge clk) {load}"));
    }
    name
}

/// Bits of an output FIFO entry that one copy of the enable writes.
const FIFO_CHUNK_BITS: usize = 32;

/// Cycles ahead of the cycle it holds in which the stage enable is decided ([`output_fifo`]):
/// 1 with one register (inferred multipliers), 2 when replicated to every DSP and register
/// group through a level of registers before the copies. (A third cycle, two levels before
/// the copies, measured slower on jsc-tiny: 157.6 against 198.3 MHz, its FIFO of five entries
/// taking more logic.)
pub fn enable_lead(pipe: &Pipelining) -> usize {
    if pipe.multipliers.instantiated() {
        2
    } else {
        1
    }
}

/// The entry of the output FIFO at the read pointer `ptr`, bits `slice` of it: a tree of 2-to-1
/// multiplexers on the pointer's bits `bits - 1` down to 0, over the entries `base..` below
/// `entries`.
fn read_mux(ptr: &str, slice: &str, bits: usize, base: usize, entries: usize) -> String {
    if bits == 0 {
        return format!("ob_d{}{slice}", base.min(entries - 1));
    }
    let lo = read_mux(ptr, slice, bits - 1, base, entries);
    let upper = base + (1 << (bits - 1));
    if upper >= entries {
        return lo;
    }
    format!("({ptr}[{}] ? {} : {lo})", bits - 1, read_mux(ptr, slice, bits - 1, upper, entries))
}

/// Entries of a pipelined layer's output FIFO for an enable decided `lead` cycles ahead: the
/// writes of the `lead - 1` cycles whose enable is already decided, the one of this cycle, and
/// the entry the consumer is reading, so that a layer streams at interval 1 while its consumer
/// keeps up.
pub fn output_entries(lead: usize) -> usize {
    lead + 2
}

/// The output FIFO of a pipelined layer and the stage enable that keeps it from overflowing.
///
/// The layer writes its result `y` (`bits` wide, valid `yv`) into the FIFO in a cycle whose `en`
/// is high. `en` never reads `out_ready`: it is decided `lead` cycles ahead from the FIFO's
/// count `c` and this cycle's write `w`, assuming no read and a write in each of the `lead - 1`
/// cycles between: high when `c + w + lead - 1 < E`, `E` the [`output_entries`]. So the count is
/// below `E` in a cycle whose `en` is high, and a write always has an entry. Decided one cycle
/// ahead (one enable), the decision is `en` itself; two cycles ahead (replicated), it goes
/// through a level of about `sqrt(copies)` registers to the copies of the enable (`en` one of
/// them), so that no net reaches more than about `sqrt(copies)` registers and the placer can
/// put each register between its source and its loads. The
/// consumer's `out_ready` reaches only the count and the read pointer; the data leave through a
/// multiplexer on the read pointer. Only the control registers are reset: a data word counts
/// only through the count.
///
/// Feeding a register slice (`feeds_slice`), the FIFO gives up a word when it holds one and
/// the consumer will take it in the next cycle: the consumer's `in_ready_ahead_idle` or, in a
/// cycle after one in which the FIFO gave up a word (which is then in the slice, offered to
/// the consumer), its `in_ready_ahead_valid` (`out_ready`, `out_ready_popped`). Each chunk's
/// read pointer moves on a read decided next to it, from a register of its own that says
/// whether the FIFO gave up a word in the last cycle (`ob_pl`, `ob_pl_c{c}`, kept apart): one
/// read for all reached the pointer copies of every chunk across the layer (jsc-three-layer's
/// critical path at 87.7 MHz, 3.57 and 5.51 ns of routing through it).
fn output_fifo(m: &mut Module, yv: &str, bits: usize, lead: usize, feeds_slice: bool) {
    let e = output_entries(lead);
    let pw = signed_bits(0, e as i128 - 1) as usize;
    for k in 0..e {
        m.line(format!("  reg [{}:0] ob_d{k};", bits - 1));
    }
    // The count as a thermometer code: `ob_th[i]` is high when the FIFO holds more than `i`
    // results, so that `out_valid` is a register and each bit's next value one gate.
    m.line(format!("  reg [{}:0] ob_th;", e - 1));
    m.line(format!("  reg [{}:0] ob_wr, ob_rd;", pw - 1));
    m.register_bits += e * bits + e + 2 * pw;
    // The write (to the count and the write pointer), on a copy of the enable of its own, and
    // the same write on another copy for the decision below.
    let (ew, ed) = (m.enable(), m.enable());
    m.line(format!("  wire ob_w = {yv} && {ew};"));
    m.line(format!("  wire ob_wd = {yv} && {ed};"));
    m.line("  assign out_valid = ob_th[0];");
    // The entries' data in chunks, each written on a copy of the enable of its own (replicated)
    // and read through a multiplexer on a copy of the read pointer of its own, so that neither
    // a write-enable net nor a read pointer reaches every bit of an entry.
    let chunks: Vec<(usize, usize)> = (0..bits).step_by(FIFO_CHUNK_BITS).map(|lo| (lo, (lo + FIFO_CHUNK_BITS).min(bits) - 1)).collect();
    let copy = |base: &str, c: usize| if c == 0 { base.to_string() } else { format!("{base}_c{c}") };
    let pointers: Vec<String> = (0..chunks.len()).map(|c| copy("ob_rd", c)).collect();
    let writes: Vec<String> = (0..chunks.len()).map(|c| copy("ob_wr", c)).collect();
    // The read of each chunk: `ob_p` for the first (and the count), one of its own for each
    // other when the FIFO feeds a slice.
    let reads: Vec<String> = (0..chunks.len()).map(|c| if feeds_slice { copy("ob_p", c) } else { "ob_p".to_string() }).collect();
    if feeds_slice {
        for (c, read) in reads.iter().enumerate() {
            let popped = copy("ob_pl", c);
            m.line(format!("  reg {popped};"));
            m.line(format!("  wire {read} = ob_th[0] && ({popped} ? out_ready_popped : out_ready);"));
            m.line(format!("  (* keep *) always @(posedge clk) {popped} <= !rst && {read};"));
        }
        m.register_bits += chunks.len();
    } else {
        m.line("  wire ob_p = ob_th[0] && out_ready;");
    }
    // Each chunk's entries are written on a copy of the enable of its own (replicated), and
    // its write pointer moves on the write of that copy (`ob_w_c{c}`): one write for all
    // reached the write pointer copies of every chunk, and its gate, placed among them, sat
    // between two routes across the layer (the critical path at 96.3 MHz of jsc-three-layer,
    // 3.83 and 3.57 ns of routing from the last valid bit through it to the count).
    let chunk_enables: Vec<String> = chunks.iter().map(|_| m.enable()).collect();
    let chunk_writes: Vec<String> = (0..chunks.len()).map(|c| copy("ob_w", c)).collect();
    for (w, ec) in chunk_writes.iter().zip(&chunk_enables).skip(1) {
        m.line(format!("  wire {w} = {yv} && {ec};"));
    }
    // The copies of the pointers (the first chunk's are `ob_rd` and `ob_wr`, below).
    let step = |p: &str| format!("{p} <= {p} == {pw}'d{} ? {pw}'d0 : {p} + {pw}'d1;", e - 1);
    let copies = pointers[1..].iter().zip(&reads[1..]).chain(writes[1..].iter().zip(&chunk_writes[1..]));
    for (ptr, moves) in copies {
        m.line(format!("  reg [{}:0] {ptr};", pw - 1));
        m.line(format!("  (* keep *) always @(posedge clk) if (rst) {ptr} <= {pw}'d0; else if ({moves}) {}", step(ptr)));
    }
    m.register_bits += 2 * (chunks.len() - 1) * pw;
    for (&(lo, hi), ptr) in chunks.iter().zip(&pointers) {
        m.line(format!("  assign out_data[{hi}:{lo}] = {};", read_mux(ptr, &format!("[{hi}:{lo}]"), pw, 0, e)));
    }
    m.line("  always @(posedge clk) begin");
    m.line(format!("    if (rst) begin ob_th <= {e}'d0; ob_wr <= {pw}'d0; ob_rd <= {pw}'d0; end"));
    m.line("    else begin");
    m.line(format!("      if (ob_w && !ob_p) ob_th <= {{ob_th[{}:0], 1'b1}};", e - 2));
    m.line(format!("      else if (ob_p && !ob_w) ob_th <= {{1'b0, ob_th[{}:1]}};", e - 1));
    m.line(format!("      if (ob_w) {}", step("ob_wr")));
    m.line(format!("      if (ob_p) {}", step("ob_rd")));
    m.line("    end");
    m.line("  end");
    // A chunk is written in every enabled cycle, the layer's valid bit aside: where the
    // enable is high the entry at the write pointer is free (the count is below the entries),
    // so a cycle without a result writes an entry nothing reads, and no chunk's write waits
    // for the valid bit's net, which would reach every chunk (jsc-toy's critical path, 4.33 ns
    // of routing from the last valid bit to an entry).
    for ((&(lo, hi), wr), ec) in chunks.iter().zip(&writes).zip(&chunk_enables) {
        m.line(format!("  always @(posedge clk) if ({ec}) case ({wr})"));
        for k in 0..e {
            let label = if k + 1 == e { "default".to_string() } else { format!("{pw}'d{k}") };
            m.line(format!("    {label}: ob_d{k}[{hi}:{lo}] <= y[{hi}:{lo}];"));
        }
        m.line("  endcase");
    }
    // The count plus this cycle's write at most `t`: with a write, a count of at most `t - 1`.
    let t = e - lead;
    let decision = format!("rst || (ob_wd ? !ob_th[{}] : !ob_th[{t}])", t - 1);
    match m.copies.take() {
        None => {
            m.line(format!("  assign en_next = {decision};"));
            m.line("  always @(posedge clk) en <= en_next;");
        }
        Some(copies) => {
            // Decided two cycles ahead: one level of about `sqrt(copies)` registers between
            // the decision and the copies, each reaching about as many copies. `keep` stops
            // Yosys from merging the registers of a level back into one.
            debug_assert_eq!(lead, 2, "a replicated enable is decided two cycles ahead");
            let all: Vec<String> = std::iter::once("en".to_string()).chain(copies.iter().cloned()).collect();
            let branch = (all.len() as f64).sqrt().ceil() as usize;
            let level = all.len().div_ceil(branch.max(1));
            let firsts: Vec<String> = (0..level).map(|i| format!("en_t0_{i}")).collect();
            m.line(format!("  assign en_d = {decision};"));
            let mut decl = String::new();
            for r in &firsts {
                let _ = writeln!(decl, "  reg {r};");
                m.line(format!("  (* keep *) always @(posedge clk) {r} <= en_d;"));
            }
            for c in &copies {
                let _ = writeln!(decl, "  reg {c};");
            }
            let per = all.len().div_ceil(level);
            for (i, c) in all.iter().enumerate() {
                m.line(format!("  (* keep *) always @(posedge clk) {c} <= {};", firsts[i / per]));
            }
            // Every copy takes the value of a register of the level, all of them equal.
            m.line(format!("  assign en_next = {};", firsts[0]));
            m.register_bits += level + copies.len();
            m.text = m.text.replacen(COPIES_MARK, &decl, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adder_levels_fill_the_period_after_the_overhead() {
        // (clock, levels): (1000 / f - 2.0) / 2.5 rounded down, at least 1.
        for (f, want) in [(400.0, 1), (200.0, 1), (125.0, 2), (100.0, 3), (50.0, 7), (10.0, 39)] {
            assert_eq!(adder_levels(f), want, "{f} MHz");
        }
        assert_eq!(check_clock(0.0).unwrap_err(), "clock_mhz 0: expected a frequency from 1 to 1000 MHz");
        assert!(check_clock(f64::NAN).is_err() && check_clock(1000.0).is_ok());
    }

    #[test]
    fn the_output_fifo_has_room_for_every_result_its_enable_lets_through() {
        // (lead, entries, read multiplexer): the entries hold the writes already let through,
        // this cycle's and the one being read; the multiplexer selects on the pointer's bits.
        let cases = [
            (1, 3, "(ob_rd[1] ? ob_d2 : (ob_rd[0] ? ob_d1 : ob_d0))"),
            (2, 4, "(ob_rd[1] ? (ob_rd[0] ? ob_d3 : ob_d2) : (ob_rd[0] ? ob_d1 : ob_d0))"),
        ];
        assert_eq!(read_mux("ob_rd_c1", "[63:32]", 1, 0, 2), "(ob_rd_c1[0] ? ob_d1[63:32] : ob_d0[63:32])");
        for (lead, entries, mux) in cases {
            assert_eq!(output_entries(lead), entries, "lead {lead}");
            assert_eq!(read_mux("ob_rd", "", signed_bits(0, entries as i128 - 1) as usize, 0, entries), mux, "lead {lead}");
        }
        // The enable's lead: one register inferred, a tree of two replicated.
        assert_eq!(enable_lead(&Pipelining::clock(200.0)), 1);
        assert_eq!(enable_lead(&Pipelining { clock_mhz: 200.0, multipliers: Multipliers::Ecp5Dsp, feeds_slice: false }), 2);
    }

    #[test]
    fn a_large_layer_writes_its_registers_in_bounded_blocks_each_register_in_one() {
        // (inputs, outputs, reuse, blocks of the layer's statements): a folded layer has a ROM
        // statement per lane, 128 x 32 of them in the last case. Each block holds at most
        // `PROCESS_STATEMENTS` statements (one starts at four spaces of indent; `else`, `end`
        // and `endcase` continue one), and no register (with its bit range) is assigned in two
        // blocks, which would be two drivers.
        for (k, n, r, blocks) in [(16, 8, 4, 1), (512, 32, 4, 13)] {
            let text = pipelined_layer(&layer(k, n, r, vec![], vec![]), &Pipelining::clock(200.0)).text;
            let mut owner: BTreeMap<String, usize> = BTreeMap::new();
            let mut sizes = Vec::new();
            for (b, block) in text.split("  always @(posedge clk) begin\n").skip(1).enumerate() {
                let body = &block[..block.find("\n  end\n").expect("a block ends")];
                let statement =
                    |l: &&str| l.starts_with("    ") && !l.starts_with("     ") && !l.starts_with("    else") && !l.starts_with("    end");
                sizes.push(body.lines().filter(statement).count());
                for lhs in body.split(" <= ").map(|s| s.rsplit([' ', '(', ';']).next().unwrap_or("")).filter(|s| !s.is_empty()) {
                    let first = *owner.entry(lhs.to_string()).or_insert(b);
                    assert_eq!(first, b, "{k} -> {n}: `{lhs}` is assigned in blocks {first} and {b}");
                }
            }
            let large: Vec<usize> = sizes.iter().copied().filter(|&c| c > 8).collect();
            assert_eq!(large.len(), blocks, "{k} -> {n}: statements per block {sizes:?}");
            assert!(sizes.iter().all(|&c| c <= PROCESS_STATEMENTS), "{k} -> {n}: {sizes:?}");
        }
    }

    #[test]
    fn a_fifo_feeding_a_slice_reads_next_to_each_chunk_and_its_consumer_readies_are_registers() {
        // (multipliers, feeds slice, reads decided, readies ahead registered). 16 outputs of 10
        // bits are 160 bits, 5 chunks of the FIFO: feeding a slice, each chunk's read pointer
        // moves on a read of its own, from a register of its own; otherwise all on `ob_p`. The
        // readies ahead of a folded layer are registers when its enable is decided two cycles
        // ahead (`ecp5-dsp`), gates otherwise.
        let (i, e) = (Multipliers::Inferred, Multipliers::Ecp5Dsp);
        let cases = [(i, false, 1, false), (i, true, 5, false), (e, false, 1, true), (e, true, 5, true)];
        for (multipliers, feeds_slice, reads, registered) in cases {
            let pipe = Pipelining { clock_mhz: 200.0, multipliers, feeds_slice };
            let text = pipelined_layer(&layer(16, 16, 4, vec![], vec![]), &pipe).text;
            let case = format!("{multipliers:?}, feeds slice {feeds_slice}");
            assert_eq!(text.matches("  wire ob_p").count(), reads, "{case}");
            assert_eq!(text.matches("ob_pl_c").count(), 3 * (reads - 1), "{case}");
            assert_eq!(text.contains("input out_ready_popped"), feeds_slice, "{case}");
            let moves = if feeds_slice { "else if (ob_p_c4) ob_rd_c4 <=" } else { "else if (ob_p) ob_rd_c4 <=" };
            assert!(text.contains(moves), "{case}");
            assert_eq!(text.contains("reg in_ready_ahead_idle_r, in_ready_ahead_valid_r;"), registered, "{case}");
        }
    }

    /// A plan in short: the pieces of a stage as step index and part (`w` whole, `r` round,
    /// `c` carry, `k` clamp, `m` product, `a` sum), stages separated by `|`.
    fn short(plan: &[Vec<Piece>]) -> String {
        let piece = |p: &Piece| {
            let part = match p.part {
                Part::Whole => 'w',
                Part::Round => 'r',
                Part::Carry => 'c',
                Part::Clamp => 'k',
                Part::Mul => 'm',
                Part::Add => 'a',
            };
            format!("{}{part}", p.step)
        };
        plan.iter().map(|s| s.iter().map(piece).collect::<Vec<_>>().join(" ")).collect::<Vec<_>>().join(" | ")
    }

    #[test]
    fn steps_are_grouped_slow_and_split_fast() {
        let a = Step::Affine { mul: vec![1], add: vec![0], frac: 0 };
        let q = Step::Requant { width: 8, frac_width: 4, signed: true };
        let (wide, narrow) = (Range { lo: -1 << 12, hi: 1 << 12, frac: 8 }, Range { lo: -16, hi: 15, frac: 6 });
        // (steps, input range, split, plan). Slow (100 MHz): an affine alone, rescales and relus
        // together. Fast (200 MHz): a rescale dropping 4 bits of a range it can leave is round,
        // carry and clamp; dropping 2 bits of [-16, 15] gives [-4, 4], which needs no clamp; a
        // rescale appending bits (the affine's 0 fraction bits to 4) is one stage; an affine is
        // its product and its sum; a relu joins the piece after it, or the one before at the end.
        // With instantiated multipliers an affine is its product and its sum at 100 MHz too.
        let (slow, fast) = (Pipelining::clock(100.0), Pipelining::clock(200.0));
        let dsp = Pipelining { clock_mhz: 100.0, multipliers: Multipliers::Ecp5Dsp, feeds_slice: false };
        let cases: &[(Vec<Step>, Range, Pipelining, &str)] = &[
            (vec![], wide, slow, ""),
            (vec![Step::Relu], wide, slow, "0w"),
            (vec![a.clone(), Step::Relu, q.clone()], wide, slow, "0w | 1w 2w"),
            (vec![Step::Relu, q.clone(), a.clone()], wide, slow, "0w 1w | 2w"),
            (vec![q.clone(), a.clone(), a.clone()], wide, slow, "0w | 1w | 2w"),
            (vec![Step::Relu], wide, fast, "0w"),
            (vec![Step::Relu, q.clone()], wide, fast, "0w 1r | 1c | 1k"),
            (vec![q.clone(), Step::Relu], narrow, fast, "0r | 0c 1w"),
            (vec![a.clone(), Step::Relu, q.clone()], wide, fast, "0m | 0a | 1w 2w"),
            (vec![a.clone(), Step::Relu, q.clone()], wide, dsp, "0m | 0a | 1w 2w"),
            (vec![Step::Relu, a.clone()], wide, dsp, "0w | 1m | 1a"),
        ];
        for (steps, from, p, want) in cases {
            assert_eq!(short(&step_plan(steps, *from, p)), *want, "{steps:?} {p:?}");
        }
        // 200 MHz splits (one adder level per stage), 100 MHz does not (three).
        assert_eq!((splits_steps(200.0), splits_steps(125.0), splits_steps(100.0)), (true, true, false));
    }

    /// A layer of `k` inputs and `n` outputs with every weight 3 and bias 1, folded by `r`.
    fn layer(k: usize, n: usize, r: usize, pre: Vec<Step>, post: Vec<Step>) -> Layer {
        let input = Range { lo: -8, hi: 7, frac: 0 };
        Layer {
            node: "l".into(),
            input,
            pre,
            in_features: k,
            out_features: n,
            weight: vec![3; k * n],
            bias: vec![1; n],
            acc: Range { lo: -24 * k as i64 + 1, hi: 21 * k as i64 + 1, frac: 0 },
            post,
            reuse: r,
            products: Default::default(),
        }
    }

    #[test]
    fn schedules_count_every_stage() {
        let q = Step::Requant { width: 4, frac_width: 0, signed: true };
        // (layer, clock, tree stages, latency). Unrolled: 16 products and the bias, 2 per stage
        // at 200 MHz: 17 -> 9 -> 5 -> 3 -> 2 -> 1, five stages; with the multiply and the output
        // buffer, 7 cycles. At 100 MHz, 8 per stage: 17 -> 3 -> 1; a rescale before adds a
        // stage. Folded by 4: 4 multipliers per output (the bias enters the accumulator),
        // 4 -> 2 -> 1 at 200 MHz; the pre stage, the feeder taking the sample, 4 beats, the
        // select-to-multiply and accumulator hand-overs (2), the tree (2) and the output FIFO:
        // 1 + 1 + 4 + 2 + 2 + 1. Folded by 16: one multiplier per output, no tree. In a
        // MULT18X18D (`ecp5-dsp`) every product takes four stages, three more than inferred, and
        // so does an affine's product: a batch norm before the layer is 6 stages (4 of product,
        // the sum, the relu with the rescale that needs no rounding).
        let (i, e) = (Multipliers::Inferred, Multipliers::Ecp5Dsp);
        let a = Step::Affine { mul: vec![3, -2], add: vec![1, 0], frac: 0 };
        let cases: &[(Layer, f64, Multipliers, usize, usize)] = &[
            (layer(16, 4, 1, vec![], vec![]), 200.0, i, 5, 7),
            (layer(16, 4, 1, vec![], vec![Step::Relu, q.clone()]), 100.0, i, 2, 4),
            (layer(16, 4, 1, vec![q.clone()], vec![]), 100.0, i, 2, 5),
            (layer(16, 4, 4, vec![q.clone()], vec![]), 200.0, i, 2, 11),
            (layer(16, 4, 16, vec![], vec![]), 200.0, i, 0, 20),
            (layer(16, 4, 1, vec![], vec![]), 200.0, e, 5, 10),
            (layer(16, 4, 4, vec![q.clone()], vec![]), 200.0, e, 2, 14),
            (layer(16, 4, 1, vec![a.clone(), Step::Relu, q.clone()], vec![]), 200.0, i, 5, 10),
            (layer(16, 4, 1, vec![a.clone(), Step::Relu, q.clone()], vec![]), 200.0, e, 5, 16),
        ];
        for (l, f, mult, tree, latency) in cases {
            let s = schedule(l, &Pipelining { clock_mhz: *f, multipliers: *mult, feeds_slice: false });
            assert_eq!(
                (s.tree_stages, s.latency, s.initiation_interval),
                (*tree, *latency, l.reuse),
                "{f} MHz, {mult:?}, reuse {}",
                l.reuse
            );
        }
    }
}
