//! A design: the integer pipeline of a network, layer by layer, with every constant, range and
//! width that the RTL needs. [`Design::eval`] computes what the RTL computes, bit for bit, so the
//! lowering can be checked against the integer executor without a simulator.

use crate::shift_add::Products;
use mase_quant::Fixed;
use serde::{Deserialize, Serialize};

/// The codes a stream element can hold: integers in `[lo, hi]` with `frac` fraction bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Range {
    pub lo: i64,
    pub hi: i64,
    pub frac: i32,
}

impl Range {
    /// The codes of a fixed-point format.
    pub fn of(f: Fixed) -> Range {
        Range { lo: f.lo(), hi: f.hi(), frac: f.frac_width }
    }

    /// Bits of the narrowest two's-complement signal holding every code (at least 1).
    pub fn width(&self) -> u32 {
        signed_bits(self.lo as i128, self.hi as i128)
    }
}

/// Bits of the narrowest two's-complement signal holding `[lo, hi]` (at least 1).
pub fn signed_bits(lo: i128, hi: i128) -> u32 {
    let mut w = 1;
    while w < 127 && (lo < -(1i128 << (w - 1)) || hi > (1i128 << (w - 1)) - 1) {
        w += 1;
    }
    w
}

/// An element-wise step between layers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// Re-expresses a code in the format `to`: an arithmetic shift by the difference of fraction
    /// bits (rounding half to even when bits are dropped), then clamping to the format's range.
    Requant { width: u32, frac_width: i32, signed: bool },
    /// `max(v, 0)`, in the same format.
    Relu,
    /// A per-channel integer affine (a batch norm in affine form): element `k` becomes
    /// `mul[k] v + add[k]`, with `frac` fraction bits. `mul` and `add` are the weight and bias codes
    /// already moved to that scale, as a linear layer's are (one product per element).
    Affine { mul: Vec<i64>, add: Vec<i64>, frac: i32 },
    /// A comparison with one integer threshold per channel (a binarized layer's batch norm and
    /// sign, [`crate::bipolar`]): element `k` of channel `c` becomes the bit 1 where `v >=
    /// at[c]` (or `v <= at[c]` where `descending[c]`), else 0.
    Threshold { at: Vec<i64>, descending: Vec<bool> },
}

impl Step {
    /// A requantizing step to `f`.
    pub fn requant(f: Fixed) -> Step {
        Step::Requant { width: f.width, frac_width: f.frac_width, signed: f.signed }
    }

    /// The step's name in the manifest (`requant`, `relu`, `affine`).
    pub fn name(&self) -> &'static str {
        match self {
            Step::Requant { .. } => "requant",
            Step::Relu => "relu",
            Step::Affine { .. } => "affine",
            Step::Threshold { .. } => "threshold",
        }
    }

    /// The value of a code `v` of range `from`, element `k` of its stream, after the step.
    pub fn apply(&self, v: i64, k: usize, from: Range) -> i64 {
        match self {
            Step::Requant { width, frac_width, signed } => {
                let to = Fixed { width: *width, frac_width: *frac_width, signed: *signed };
                shift_rne(v, from.frac - to.frac_width).clamp(to.lo(), to.hi())
            }
            Step::Relu => v.max(0),
            Step::Affine { mul, add, .. } => {
                let c = k % mul.len().max(1);
                let (m, a) = (mul.get(c).copied().unwrap_or(0), add.get(c).copied().unwrap_or(0));
                saturate(m as i128 * v as i128 + a as i128)
            }
            Step::Threshold { at, descending } => {
                let c = k % at.len().max(1);
                let (t, down) = (at.get(c).copied().unwrap_or(0), descending.get(c).copied().unwrap_or(false));
                i64::from(if down { v <= t } else { v >= t })
            }
        }
    }

    /// The range of the step's results over `from`, for every element (each step is monotone
    /// in `v` for each element; an affine's range is the union over its channels).
    pub fn range(&self, from: Range) -> Range {
        match self {
            Step::Requant { frac_width, .. } => {
                Range { lo: self.apply(from.lo, 0, from), hi: self.apply(from.hi, 0, from), frac: *frac_width }
            }
            Step::Relu => Range { lo: from.lo.max(0), hi: from.hi.max(0), frac: from.frac },
            Step::Affine { mul, add, frac } => {
                let (lo, hi) = affine_bounds(mul, add, from);
                Range { lo: saturate(lo), hi: saturate(hi), frac: *frac }
            }
            Step::Threshold { .. } => Range { lo: 0, hi: 1, frac: 0 },
        }
    }
}

/// The smallest and largest `mul[c] v + add[c]` over `v` in `from` and every channel `c`.
pub fn affine_bounds(mul: &[i64], add: &[i64], from: Range) -> (i128, i128) {
    let (mut lo, mut hi) = (i128::MAX, i128::MIN);
    for (&m, &a) in mul.iter().zip(add) {
        let (p, q) = (m as i128 * from.lo as i128, m as i128 * from.hi as i128);
        lo = lo.min(p.min(q) + a as i128);
        hi = hi.max(p.max(q) + a as i128);
    }
    if mul.is_empty() {
        (0, 0)
    } else {
        (lo, hi)
    }
}

fn saturate(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// `v * 2^-shift`, rounded half to even when `shift > 0` (bits dropped), exact when
/// `shift <= 0`, saturating at the ends of `i64`. This is the integer executor's rescale.
pub fn shift_rne(v: i64, shift: i32) -> i64 {
    if shift <= 0 {
        let k = (-shift) as u32;
        if k >= 63 {
            return if v == 0 { 0 } else { v.signum() * i64::MAX };
        }
        return v.checked_mul(1i64 << k).unwrap_or(v.signum() * i64::MAX);
    }
    mase_runtime::shift_right_rne(v, shift as u32)
}

/// One layer: element-wise steps on its input stream, a matrix-vector product with constant
/// weights and biases, element-wise steps on the sums. One RTL module.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Layer {
    /// The graph node of the product (`seq_blocks_2`).
    pub node: String,
    /// The range of the stream arriving at the layer.
    pub input: Range,
    /// Steps before the product (the rescale to the layer's `data_in` format).
    pub pre: Vec<Step>,
    pub in_features: usize,
    pub out_features: usize,
    /// Weight codes `[out][in]`, already shifted to the accumulator's scale.
    pub weight: Vec<i64>,
    /// Bias codes at the accumulator's scale (zeros without a bias).
    pub bias: Vec<i64>,
    /// The range of every sum (worst case over all inputs in range, over every output).
    pub acc: Range,
    /// Steps after the product (relu, the rescale to a `data_out` format).
    pub post: Vec<Step>,
    /// Input terms each multiplier handles, one per cycle (1 = fully unrolled).
    pub reuse: usize,
    /// How the products by the weights are built: in multipliers, or (pipelined) as shifts and
    /// adds in LUTs ([`crate::shift_add`]).
    #[serde(default, skip_serializing_if = "Products::is_multipliers")]
    pub products: Products,
}

impl Layer {
    /// The range after the steps before the product.
    pub fn product_input(&self) -> Range {
        self.pre.iter().fold(self.input, |r, s| s.range(r))
    }

    /// The range of the layer's output stream.
    pub fn output(&self) -> Range {
        self.post.iter().fold(self.acc, |r, s| s.range(r))
    }

    /// Cycles between two samples this layer accepts.
    pub fn initiation_interval(&self) -> usize {
        self.reuse.max(1)
    }

    /// Cycles from accepting a sample to presenting its result: one register stage unrolled;
    /// the `R` cycles of the products and the output register folded.
    pub fn latency(&self) -> usize {
        if self.reuse <= 1 {
            1
        } else {
            self.reuse + 1
        }
    }

    /// Multipliers the layer's RTL has: unrolled, one per nonzero weight; folded by `R`, one
    /// per output and lane (lane `q` takes inputs `q`, `q + K/R`, ..., one a cycle) that has a
    /// nonzero weight in some cycle; none with shift-add products or in a binarized layer (its
    /// products are XNORs, [`Layer::is_popcount`]).
    pub fn multipliers(&self) -> usize {
        if self.products == Products::ShiftAdd || self.is_popcount() {
            return 0;
        }
        (0..self.out_features).map(|j| self.lanes_in_use(j)).sum()
    }

    /// Lanes of output `j` with a nonzero weight: unrolled, its nonzero weights; folded by `R`,
    /// the lanes `q` (inputs `q`, `q + K/R`, ..., one a cycle) with a nonzero weight in some
    /// cycle.
    pub fn lanes_in_use(&self, j: usize) -> usize {
        let (k, r) = (self.in_features, self.reuse.max(1));
        let (lanes, w) = (k / r, &self.weight[j * k..][..k]);
        (0..lanes).filter(|&q| (0..r).any(|t| w[t * lanes + q] != 0)).count()
    }

    /// Whether the layer is a binarized one in popcount form ([`crate::bipolar`]): input bits
    /// (codes 0 and 1), weights `±1` and as bias the number of `-1` weights of each output, so
    /// that each sum is the popcount of `xnor(w, b)`, which the RTL computes so.
    pub fn is_popcount(&self) -> bool {
        self.product_input() == Range { lo: 0, hi: 1, frac: 0 }
            && self.weight.iter().all(|&w| w == 1 || w == -1)
            && self
                .weight
                .chunks(self.in_features.max(1))
                .zip(&self.bias)
                .all(|(row, &b)| row.iter().filter(|&&w| w < 0).count() as i64 == b)
    }

    /// The layer on one sample's codes.
    pub fn eval(&self, x: &[i64]) -> Vec<i64> {
        let xin: Vec<i64> = x.iter().enumerate().map(|(k, &v)| apply_steps(&self.pre, v, k, self.input)).collect();
        (0..self.out_features)
            .map(|j| {
                let w = &self.weight[j * self.in_features..][..self.in_features];
                let sum = self.bias[j] + w.iter().zip(&xin).map(|(&a, &b)| a * b).sum::<i64>();
                apply_steps(&self.post, sum, j, self.acc)
            })
            .collect()
    }
}

/// `v` (element `k`, of range `from`) after every step of `steps`.
pub(crate) fn apply_steps(steps: &[Step], v: i64, k: usize, from: Range) -> i64 {
    let mut r = from;
    let mut v = v;
    for s in steps {
        v = s.apply(v, k, r);
        r = s.range(r);
    }
    v
}

/// The integer pipeline of a network.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Design {
    /// The model's name (for the manifest).
    pub model: String,
    /// The format the testbench feeds: the `data_in` format of the first layer.
    pub input_format: (u32, i32, bool),
    pub layers: Vec<Layer>,
    /// The clock the design is pipelined for, in MHz (`ch emit --clock-mhz`); `None`: one
    /// register stage per layer (doc/hardware.md, "Pipelining to a clock").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_mhz: Option<f64>,
    /// The streaming front end of a convolutional network, before `layers` (empty for an MLP):
    /// the image arrives one pixel per beat and the last stage's output, flattened, is the
    /// first layer's input ([`crate::conv`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<crate::conv::Stage>,
    /// How the products of a pipelined design are built (`ch emit --multipliers`; doc/hardware.md,
    /// "Multipliers").
    #[serde(default, skip_serializing_if = "is_inferred")]
    pub multipliers: crate::dsp::Multipliers,
    /// The float ends of a binarized network ([`crate::bipolar`]): the input stream holds the
    /// bits of the input's signs, and the outputs are the last layer's popcounts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bipolar: Option<crate::bipolar::BipolarEnds>,
    /// The ECP5 part the design was fitted to (`ch emit --part`), by Lattice's name
    /// (`LFE5U-45F`): the part `ch synth --target ecp5` places it on unless told another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
}

fn is_inferred(m: &crate::dsp::Multipliers) -> bool {
    *m == crate::dsp::Multipliers::Inferred
}

impl Design {
    /// The fixed-point format of the input codes.
    pub fn input_fixed(&self) -> Fixed {
        let (width, frac_width, signed) = self.input_format;
        Fixed { width, frac_width, signed }
    }

    /// Input codes per sample.
    pub fn input_len(&self) -> usize {
        match self.stages.first() {
            Some(s) => s.window().channels * s.window().pixels(),
            None => self.layers.first().map_or(0, |l| l.in_features),
        }
    }

    /// Input codes per beat: one pixel's channels for a convolutional front end, else the whole
    /// sample.
    pub fn beat_len(&self) -> usize {
        self.input_len() / self.input_beats().max(1)
    }

    /// Beats of one sample on the input stream: its pixels for a convolutional front end (each
    /// beat one pixel's channels), else 1 (the whole sample in one beat).
    pub fn input_beats(&self) -> usize {
        self.stages.first().map_or(1, |s| s.window().pixels())
    }

    /// The shape of one sample as the integer executor takes it: `[C, H, W]` for a
    /// convolutional front end, else `[features]`.
    pub fn input_shape(&self) -> Vec<usize> {
        match self.stages.first() {
            Some(s) => vec![s.window().channels, s.window().height, s.window().width],
            None => vec![self.input_len()],
        }
    }

    /// Output codes per sample.
    pub fn output_len(&self) -> usize {
        self.layers.last().map_or(0, |l| l.out_features)
    }

    /// The range of the input stream.
    pub fn input_range(&self) -> Range {
        Range::of(self.input_fixed())
    }

    /// The range of the output stream.
    pub fn output_range(&self) -> Range {
        self.layers.last().map_or(self.input_range(), Layer::output)
    }

    /// The design pipelined for `clock_mhz` (`ch emit --clock-mhz`); a clock outside
    /// [`crate::pipeline::CLOCK_RANGE_MHZ`] is an error.
    pub fn pipelined(mut self, clock_mhz: f64) -> crate::Result<Design> {
        crate::pipeline::check_clock(clock_mhz).map_err(|reason| crate::HwError::Clock { reason })?;
        self.clock_mhz = Some(clock_mhz);
        Ok(self)
    }

    /// The pipelined design with its products built by `multipliers`
    /// (`ch emit --multipliers`). Instantiated multipliers need a pipelined design and operands
    /// the primitive takes (18 bits signed for a `MULT18X18D`); otherwise an error naming the
    /// layer.
    pub fn with_multipliers(mut self, multipliers: crate::dsp::Multipliers) -> crate::Result<Design> {
        if multipliers.instantiated() {
            if self.clock_mhz.is_none() {
                return Err(crate::HwError::Clock {
                    reason: format!("multipliers {}: needs a pipelined design (a clock_mhz)", multipliers.name()),
                });
            }
            crate::dsp::check_operands(&self, multipliers).map_err(|reason| crate::HwError::Clock { reason })?;
        }
        self.multipliers = multipliers;
        Ok(self)
    }

    /// The design with shift-add products ([`crate::shift_add`]) in the layers named `nodes`,
    /// each of which must be a linear layer of this pipelined design; otherwise an error
    /// naming the layer.
    pub fn with_shift_add(mut self, nodes: &[String]) -> crate::Result<Design> {
        for node in nodes {
            let clock_mhz = self.clock_mhz;
            let products = |reason: String| crate::HwError::Products { node: node.clone(), reason };
            let layer = self
                .layers
                .iter_mut()
                .find(|l| &l.node == node)
                .ok_or_else(|| products("shift-add products: not a linear layer of the design".into()))?;
            layer.products = Products::ShiftAdd;
            crate::shift_add::check_products(layer, clock_mhz).map_err(products)?;
        }
        Ok(self)
    }

    /// How the design is pipelined: its clock and its multipliers, for a layer whose output is
    /// read directly; `None` when it is not pipelined.
    pub fn pipelining(&self) -> Option<crate::pipeline::Pipelining> {
        self.clock_mhz.map(|clock_mhz| crate::pipeline::Pipelining { clock_mhz, multipliers: self.multipliers, feeds_slice: false })
    }

    /// How layer `index` of `self.layers` is pipelined: [`Design::pipelining`], with the
    /// register slice that its output feeds where the layer after it has one.
    pub fn layer_pipelining(&self, index: usize) -> Option<crate::pipeline::Pipelining> {
        let feeds_slice = crate::slice::feeds_slice(self, index);
        self.pipelining().map(|p| crate::pipeline::Pipelining { feeds_slice, ..p })
    }

    /// Cycles from accepting a sample to presenting layer `layer`'s result: its schedule at
    /// the design's clock and the register slice before it, or one register stage (unrolled)
    /// or `R + 1` cycles (folded).
    pub fn layer_latency(&self, layer: &Layer) -> usize {
        match self.pipelining() {
            Some(p) => crate::pipeline::schedule(layer, &p).latency + self.slice_latency(layer),
            None => layer.latency(),
        }
    }

    /// Cycles of the register slice before `layer` ([`crate::slice`]): a layer of a pipelined
    /// design that another layer feeds begins with one.
    pub fn slice_latency(&self, layer: &Layer) -> usize {
        match self.layers.iter().position(|l| l.node == layer.node) {
            Some(i) if crate::slice::has_slice(self, i) => crate::slice::SLICE_LATENCY,
            _ => 0,
        }
    }

    /// Cycles from accepting a sample to presenting its result: the sum of the layers', or for a
    /// design with stages, from its first pixel, as the cycle model steps it
    /// ([`crate::conv::timing`]).
    pub fn latency(&self) -> usize {
        if !self.stages.is_empty() {
            return crate::conv::timing::timing(self, 1).latency as usize;
        }
        self.layers.iter().map(|l| self.layer_latency(l)).sum()
    }

    /// Cycles between two samples the pipeline accepts: its slowest layer's, or for a design
    /// with stages, the cycles between the results of samples streamed back to back, as the
    /// cycle model steps them (the same between every two samples).
    pub fn initiation_interval(&self) -> usize {
        if !self.stages.is_empty() {
            return crate::conv::timing::timing(self, 3).initiation_interval.round() as usize;
        }
        self.layers.iter().map(Layer::initiation_interval).max().unwrap_or(1)
    }

    /// The pipeline on one sample's input codes: what the RTL computes.
    pub fn eval(&self, x: &[i64]) -> Vec<i64> {
        let flat = self.stages.iter().fold(x.to_vec(), |v, s| s.eval(&v));
        self.layers.iter().fold(flat, |v, l| l.eval(&v))
    }

    /// The input codes of float samples (`clamp(round(x 2^f), lo, hi)`, as the integer executor
    /// quantizes the input of its first integer node); NaN becomes 0. A binarized network's
    /// codes are the bits of the signs ([`crate::bipolar::BipolarEnds::input_bit`]).
    pub fn input_codes(&self, x: &[f32]) -> Vec<i64> {
        if let Some(ends) = &self.bipolar {
            return x.iter().map(|&v| ends.input_bit(v)).collect();
        }
        let f = self.input_fixed();
        x.iter().map(|&v| f.code(v).unwrap_or(0)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multipliers_are_the_lanes_with_a_nonzero_weight() {
        // Two outputs of four inputs: weights [1 0 0 2] and [0 0 0 0].
        let layer = |reuse| Layer {
            node: "l".into(),
            input: Range { lo: -8, hi: 7, frac: 0 },
            pre: vec![],
            in_features: 4,
            out_features: 2,
            weight: vec![1, 0, 0, 2, 0, 0, 0, 0],
            bias: vec![0, 0],
            acc: Range { lo: -100, hi: 100, frac: 0 },
            post: vec![],
            reuse,
            products: Default::default(),
        };
        // Unrolled: the two nonzero weights. By 2: lanes {0, 2} and {1, 3} of the first output,
        // both with a nonzero weight. By 4: one lane per output, the second all zero.
        for (reuse, want) in [(1, 2), (2, 2), (4, 1)] {
            assert_eq!(layer(reuse).multipliers(), want, "reuse {reuse}");
        }
    }

    #[test]
    fn shift_rne_is_the_float_formula() {
        let f = Fixed { width: 8, frac_width: 4, signed: true };
        // (value, fraction bits, expected code): ties go to even, large values clamp.
        let cases =
            [(40, 8, 2), (24, 8, 2), (-24, 8, -2), (-40, 8, -2), (41, 8, 3), (1_000_000, 8, 127), (-1_000_000, 8, -128), (3, 2, 12)];
        for (v, from, want) in cases {
            let got = Step::requant(f).apply(v, 0, Range { lo: -1 << 40, hi: 1 << 40, frac: from });
            assert_eq!(got, want, "{v} at {from}");
            assert_eq!(f.code((v as f64 / 2f64.powi(from)) as f32), Some(want), "{v} at {from}");
        }
    }

    #[test]
    fn an_affine_is_per_channel_and_its_range_the_union() {
        let s = Step::Affine { mul: vec![3, -2], add: vec![1, 10], frac: 6 };
        let r = Range { lo: -4, hi: 5, frac: 2 };
        // (code, element, expected): 3 v + 1 for element 0, -2 v + 10 for element 1.
        for (v, k, want) in [(5, 0, 16), (-4, 0, -11), (5, 1, 0), (-4, 1, 18), (0, 1, 10)] {
            assert_eq!(s.apply(v, k, r), want, "{v} at {k}");
        }
        // Channel 0 spans [-11, 16], channel 1 [0, 18].
        assert_eq!(s.range(r), Range { lo: -11, hi: 18, frac: 6 });
    }

    #[test]
    fn widths_are_the_narrowest_twos_complement() {
        let cases = [((0, 0), 1), ((-1, 0), 1), ((0, 1), 2), ((-128, 127), 8), ((0, 255), 9), ((-129, 0), 9), ((0, 127), 8)];
        for ((lo, hi), w) in cases {
            assert_eq!(signed_bits(lo, hi), w, "[{lo}, {hi}]");
        }
    }
}
