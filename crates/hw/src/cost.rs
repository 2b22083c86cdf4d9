//! A resource and latency model of a design, layer by layer, without synthesis: LUTs,
//! flip-flops and DSPs from the layer's widths, constants and reuse factor, fitted to Yosys's
//! `synth_xilinx` (7-series, [`crate::synth::SynthTarget::Xilinx`]) on the calibration matrix of
//! [`crate::calibration`]; latency and initiation interval are the design's own schedule
//! ([`Layer::latency`], [`Layer::initiation_interval`]), which simulation confirms cycle for
//! cycle. For a design pipelined with instantiated multipliers, a second model gives the ECP5
//! LUT4s of Yosys's `synth_ecp5` ([`lut4_regressors`], calibrated on
//! [`crate::calibration::ecp5_cases`]). The models, their features and their measured errors
//! are in doc/hardware.md ("Cost model").

use crate::design::{signed_bits, Design, Layer};
use serde::Serialize;
use std::collections::BTreeSet;

/// What the model estimates: Yosys 0.23's `synth_xilinx -flatten -noiopad` (7-series LUT6).
pub const MODEL: &str = "cost model of Yosys 0.23 synth_xilinx (7-series)";

/// What the LUT4 figure ([`DesignCost::lut4`]) estimates: Yosys 0.23's `synth_ecp5` LUT4s
/// (a `LUT4`, or two per carry cell), before placement.
pub const LUT4_MODEL: &str = "cost model of Yosys 0.23 synth_ecp5, before placement";

/// What the model reads from one layer: counts and widths of the RTL that `verilog.rs` writes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerFeatures {
    pub in_features: usize,
    pub out_features: usize,
    pub reuse: usize,
    /// Bits of the codes arriving at the layer, entering the products, of the sums, and of the
    /// layer's output codes.
    pub input_width: u32,
    pub product_input_width: u32,
    pub accumulator_width: u32,
    pub output_width: u32,
    /// Bits of the widest weight constant.
    pub weight_width: u32,
    /// Whether the layer rescales its inputs (a `pre` step) and has steps after the sums.
    pub rescales_input: bool,
    pub has_post: bool,
    /// Weights that are not zero.
    pub nonzero_weights: usize,
    /// Products Yosys maps to DSP48s: those whose operands have at least 2 bits and whose result
    /// needs at least 9 (`mul2dsp`'s minimum for 7-series), once `wreduce` has trimmed the
    /// constant to its bits. Unrolled, products by a constant whose magnitude is not a power of
    /// two (those are shifts), counting equal products (an input by the same constant in two
    /// outputs) once, as Yosys merges them; folded, each of the `K / R` multipliers per output.
    pub dsp_products: usize,
    /// Products of the element-wise affines before and after the sums (a batch norm in affine
    /// form: `m_c v` for every element `v` of channel `c`) that Yosys maps to DSP48s, by the
    /// same rule as an unrolled layer's; each element has its own product.
    pub step_dsp_products: usize,
    /// Unrolled: partial-product rows of the products left to LUTs, one per set bit of the
    /// constant's magnitude (Yosys adds them at the sum's width); with shift-add products, one
    /// per signed digit of every weight.
    pub lut_product_rows: usize,
    /// Folded: size of the multipliers left to LUTs, the code's bits times the weight's times
    /// `1 + log2 R` (each product is a function of the code and the cycle counter).
    pub lut_multiplier_bits: usize,
    /// Shift-add products only ([`crate::shift_add`]): bits of the logic that builds their
    /// terms, counted from the RTL's structure: unrolled, the negated terms (one adder each at
    /// the term's width); folded, the weight's register, the select of every bit term and the
    /// input negated once per lane and group of outputs (for the sign bits' terms). The adder
    /// tree that sums the terms is counted from the pipelined RTL
    /// ([`crate::pipeline::LayerRtl::tree_adder_bits`]) in [`estimate_pipelined_layer`].
    pub shift_add_bits: usize,
    /// Terms added into each sum per cycle, over all outputs: unrolled, the products in DSPs and
    /// the bias; folded, the accumulator and the `K / R` products of each output.
    pub addends: usize,
    /// Bits of the output register and its valid bit.
    pub output_register_bits: usize,
    /// Folded only: bits of the sample's shift register, the accumulators, the counter and the
    /// busy flag.
    pub state_register_bits: usize,
}

/// Whether Yosys's `synth_xilinx` maps the product of a `xw`-bit code by the constant `w` to a
/// DSP48 (see [`LayerFeatures::dsp_products`]).
fn dsp_product(xw: u32, w: i64) -> bool {
    let wb = signed_bits(w as i128, w as i128);
    w != 0 && !w.unsigned_abs().is_power_of_two() && wb >= 2 && xw >= 2 && xw + wb >= 9
}

/// Products of the affines among `steps` (on a stream of `len` elements of range `from`) that
/// Yosys maps to DSP48s.
fn step_dsps(steps: &[crate::Step], from: crate::Range, len: usize) -> usize {
    let mut r = from;
    let mut count = 0;
    for s in steps {
        if let crate::Step::Affine { mul, .. } = s {
            count += (0..len).filter(|&e| dsp_product(r.width(), mul.get(e % mul.len().max(1)).copied().unwrap_or(0))).count();
        }
        r = s.range(r);
    }
    count
}

/// The features of one layer.
pub fn layer_features(layer: &Layer) -> LayerFeatures {
    let (k, n, r) = (layer.in_features, layer.out_features, layer.reuse.max(1));
    let xw = layer.product_input().width();
    let aw = layer.acc.width();
    let ow = layer.output().width();
    let weight_width = layer.weight.iter().map(|&v| signed_bits(v as i128, v as i128)).max().unwrap_or(1);
    let nonzero_weights = layer.weight.iter().filter(|&&w| w != 0).count();
    let output_register_bits = 1 + n * ow as usize;
    let folded = r > 1;
    let wb = |w: i64| signed_bits(w as i128, w as i128);
    let (mut dsp_products, mut lut_product_rows, mut lut_multiplier_bits) = (0, 0, 0);
    let (addends, state_register_bits) = if folded {
        // Multiplier `q` of output `j` takes the weights `(j, t p + q)` over the cycles `t`,
        // chosen by a case statement on the counter. Yosys 0.23 makes it a `$mux` for 2 cases
        // and a ROM (`proc_rom`) for 8 or more, trimmed to the widest weight for 2 and for 8 to
        // 15 cases; for 3 to 7 cases a `$pmux` that `pmux2shiftx` turns into a `$shiftx` of the
        // declared width, which nothing trims, and a ROM of 16 cases or more reaches the
        // multiplier at its declared width too (calibration cases 30 and 31: 4-bit weights by
        // 4-bit codes, folded by 16, each product in a DSP48). A multiplier whose weights are
        // all zero is removed, except behind a ROM of 16 entries or more: tfc at 4 bits folded
        // by 16 has 172 such lanes in its first layer, and Yosys's 3,688 DSPs count them.
        let p = k / r;
        let declared = layer.weight.iter().chain(&layer.bias).map(|&v| wb(v)).max().unwrap_or(1).max(aw).max(xw) + 1;
        // Shift-add lanes are counted in `shift_add_bits`, a binarized layer's XNORs in
        // `popcount_luts`: neither has multipliers.
        let has_multipliers = layer.products == crate::Products::Multipliers && !layer.is_popcount();
        let rom_kept = r >= 16;
        for j in 0..if has_multipliers { n } else { 0 } {
            for q in 0..p {
                let ws: Vec<i64> = (0..r).map(|t| layer.weight[j * k + t * p + q]).collect();
                if !rom_kept && ws.iter().all(|&w| w == 0) {
                    continue;
                }
                let trimmed = ws.iter().map(|&w| wb(w)).max().unwrap_or(1);
                let w = if r == 2 || (8..16).contains(&r) { trimmed } else { declared };
                if w >= 2 && xw >= 2 && xw + w >= 9 {
                    dsp_products += 1;
                } else {
                    // A product of the code by one of `R` constants chosen by the counter.
                    lut_multiplier_bits += (xw * w * (1 + r.ilog2())) as usize;
                }
            }
        }
        let counter = signed_bits(0, r as i128) as usize;
        (n * (p + 1), k * xw as usize + n * aw as usize + counter + 1)
    } else if layer.products == crate::Products::ShiftAdd {
        // No product is a multiplier; the terms are counted in `shift_add_bits`.
        (n, 0)
    } else {
        // Yosys merges equal products (the same input by the same constant in two outputs).
        let products: BTreeSet<(usize, i64)> = layer.weight.iter().enumerate().filter(|(_, &w)| w != 0).map(|(i, &w)| (i % k, w)).collect();
        dsp_products = products.iter().filter(|(_, w)| dsp_product(xw, *w)).count();
        let in_dsp = layer.weight.iter().filter(|&&w| dsp_product(xw, w)).count();
        lut_product_rows =
            layer.weight.iter().filter(|&&w| w != 0 && !dsp_product(xw, w)).map(|&w| w.unsigned_abs().count_ones() as usize).sum();
        (in_dsp + n, 0)
    };
    LayerFeatures {
        in_features: k,
        out_features: n,
        reuse: r,
        input_width: layer.input.width(),
        product_input_width: xw,
        accumulator_width: aw,
        output_width: ow,
        weight_width,
        rescales_input: !layer.pre.is_empty(),
        has_post: !layer.post.is_empty(),
        nonzero_weights,
        dsp_products,
        step_dsp_products: step_dsps(&layer.pre, layer.input, k) + step_dsps(&layer.post, layer.acc, n),
        lut_product_rows,
        lut_multiplier_bits,
        shift_add_bits: if layer.products == crate::Products::ShiftAdd { shift_add_bits(layer) } else { 0 },
        addends,
        output_register_bits,
        state_register_bits,
    }
}

/// [`LayerFeatures::shift_add_bits`] of a layer with shift-add products.
fn shift_add_bits(layer: &Layer) -> usize {
    let (k, r) = (layer.in_features, layer.reuse.max(1));
    let x = layer.product_input();
    let term_width = |shift: u32| x.width() as usize + shift as usize + 1;
    let terms: usize = if r <= 1 {
        // One register per input and digit, shared by the outputs; the negative ones negate.
        let made: BTreeSet<(usize, crate::shift_add::Digit)> =
            layer.weight.iter().enumerate().flat_map(|(i, &w)| crate::shift_add::digits(w).into_iter().map(move |d| (i % k, d))).collect();
        made.iter().filter(|(_, d)| d.negative).map(|(_, d)| term_width(d.shift)).sum()
    } else {
        // Per lane, the weight's register and a select per bit of it; per lane and group of
        // outputs whose sign bits are set, a negation of the input into its register.
        let p = k / r;
        let mut negated = BTreeSet::new();
        let lanes: usize = (0..layer.out_features)
            .flat_map(|j| (0..p).map(move |q| (j, q)))
            .map(|(j, q)| {
                let ws: Vec<i64> = (0..r).map(|t| layer.weight[j * k + t * p + q]).collect();
                let (width, set) = (crate::pipeline::lane_weight_bits(&ws), crate::pipeline::lane_bits(&ws));
                if set.last().is_some_and(|&i| i + 1 == width) {
                    negated.insert((q, j / crate::pipeline::SELECT_GROUP_OUTPUTS));
                }
                // The weight's register, from a ROM on the cycle counter: a LUT per bit.
                width as usize + set.len() * x.width() as usize
            })
            .sum();
        lanes + negated.len() * term_width(0)
    };
    terms
}

/// LUT6s per bit of [`LayerFeatures::shift_add_bits`]: one, as a 7-series slice adds a bit
/// per LUT on its carry chain and a select of two operands fits one LUT.
pub const SHIFT_ADD_LUTS_PER_BIT: f64 = 1.0;

/// Number of LUT regressors.
pub const LUT_TERMS: usize = 6;

/// The model's LUT regressors of one layer, in the order of [`LUT_COEFFICIENTS`]:
///
/// - `sum_bits`: addends times the sum's width (the adders after the DSPs, and a folded
///   layer's accumulating adders);
/// - `row_bits`: unrolled, the partial-product rows of LUT products times the sum's width times
///   `log2(1 + rows per output)` (the depth of the tree that adds them);
/// - `step_bits`: the rescale of the inputs (inputs times their width) and the steps after the
///   sums (outputs times the sum's width);
/// - `lut_multiplier_bits`: folded, [`LayerFeatures::lut_multiplier_bits`];
/// - `fold_bits`: folded, the weight each DSP multiplier selects by the cycle counter
///   (multipliers times weight bits) and the sample's shift register (inputs times their width);
/// - 1.
pub fn lut_regressors(f: &LayerFeatures) -> [f64; LUT_TERMS] {
    let (k, n) = (f.in_features as f64, f.out_features as f64);
    let (iw, xw, aw) = (f.input_width as f64, f.product_input_width as f64, f.accumulator_width as f64);
    let sum_bits = f.addends as f64 * aw;
    // The rows of one output are summed in a tree whose depth grows with their number.
    let row_bits = f.lut_product_rows as f64 * aw * (1.0 + f.lut_product_rows as f64 / n).log2();
    let step_bits = if f.rescales_input { k * iw } else { 0.0 } + if f.has_post { n * aw } else { 0.0 };
    let fold_bits = if f.reuse > 1 { f.dsp_products as f64 * f.weight_width as f64 + k * xw } else { 0.0 };
    [sum_bits, row_bits, step_bits, f.lut_multiplier_bits as f64, fold_bits, 1.0]
}

/// LUTs per unit of each regressor of [`lut_regressors`], fitted by least relative squares to the
/// calibration data (`crates/hw/calibration/xilinx.csv`, 30 layers, `cargo run -p mase-hw --example
/// calibrate_cost`).
pub const LUT_COEFFICIENTS: [f64; LUT_TERMS] = [0.4174, 0.2320, 0.9043, 1.305, -0.4133, 46.21];

/// Number of ECP5 LUT4 regressors.
pub const LUT4_TERMS: usize = 6;

/// The ECP5 LUT4 regressors of `layer` pipelined as `pipe` says (`rtl` its Verilog), in the
/// order of [`LUT4_COEFFICIENTS`], counted from the RTL as written:
///
/// - `adder_bits`: the adder tree's adders ([`crate::pipeline::LayerRtl::tree_adder_bits`])
///   and the adds of the affines among the steps (a batch norm in affine form: an adder per
///   element at the affine's output width), a carry cell per two bits;
/// - `step_bits`: as in [`lut_regressors`], the rescale of the inputs and the steps after the
///   sums;
/// - `rom_bits`: folded, the weight registers loaded from a case on the cycle counter, times
///   `ceil(R / 16)` (a LUT4 holds 16 entries of one bit);
/// - `select_bits`: folded, the sample's lanes (`K` times the product input's width), shifted
///   or loaded each cycle;
/// - `fifo_bits`: the output FIFO's entries, read through a multiplexer;
/// - 1.
pub fn lut4_regressors(layer: &Layer, rtl: &crate::pipeline::LayerRtl) -> [f64; LUT4_TERMS] {
    let f = layer_features(layer);
    let r = layer.reuse.max(1);
    let step_bits = lut_regressors(&f)[2];
    let (rom_bits, select_bits) =
        if r > 1 { ((rtl.rom_bits * r.div_ceil(16)) as f64, (f.in_features as u32 * f.product_input_width) as f64) } else { (0.0, 0.0) };
    let adder_bits = rtl.tree_adder_bits
        + affine_adder_bits(&layer.pre, layer.input, f.in_features)
        + affine_adder_bits(&layer.post, layer.acc, f.out_features);
    [adder_bits as f64, step_bits, rom_bits, select_bits, rtl.fifo_bits as f64, 1.0]
}

/// Bits of the adders of the affines among `steps` (on a stream of `len` elements of range
/// `from`): each element adds its channel's constant at the affine's output width.
fn affine_adder_bits(steps: &[crate::Step], from: crate::Range, len: usize) -> usize {
    let mut r = from;
    let mut bits = 0;
    for s in steps {
        r = s.range(r);
        if matches!(s, crate::Step::Affine { .. }) {
            bits += len * r.width() as usize;
        }
    }
    bits
}

/// LUT4s per unit of each regressor of [`lut4_regressors`], fitted by least relative squares to
/// the ECP5 calibration data (`crates/hw/calibration/ecp5.csv`, Yosys 0.23 `synth_ecp5`,
/// `cargo run -p mase-hw --example calibrate_cost -- fit ecp5 crates/hw/calibration/ecp5.csv`).
pub const LUT4_COEFFICIENTS: [f64; LUT4_TERMS] = [1.016, 1.733, 0.7751, 2.104, 0.9524, -2.121];

/// Flip-flops per output register bit and per folded state register bit (synthesis drops bits
/// that never change, such as a relu's sign bit, and DSP48s absorb some).
pub const FF_COEFFICIENTS: [f64; 2] = [0.8946, 0.9150];

/// The estimate of one layer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerCost {
    pub node: String,
    pub luts: f64,
    pub ffs: f64,
    pub dsps: f64,
    pub latency_cycles: usize,
    pub ii: usize,
    /// Bits of the layer's registers as written: the output register and valid bit, a folded
    /// layer's state, and when pipelined every stage's registers and the output buffer.
    pub register_bits: usize,
    /// Register bits that pipelining added (0 without a clock).
    pub registers_added: usize,
    /// ECP5 LUT4s (Yosys `synth_ecp5`) of a layer pipelined with instantiated multipliers
    /// ([`lut4_regressors`]); `None` for other layers, which the LUT4 model does not cover.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lut4: Option<f64>,
    pub features: LayerFeatures,
}

/// Nanoseconds of a pipeline stage whose product is in a MULT18X18D, as nextpnr-ecp5 routes it:
/// Yosys 0.23 leaves the DSP's registers unused, so the stage holds the multiplier's 3.9 ns, the
/// 0.5 ns of the register before it and about 3.9 ns of routing to and from the DSP (jsc-tiny
/// at 6 bits pipelined for 200 MHz: 8.25 ns, 121.2 MHz).
pub const DSP_STAGE_NS: f64 = 8.3;

/// The post-route clock of a pipelined design on an ECP5 by the delay model, in MHz: its
/// slowest stage, an adder stage of [`crate::pipeline::adder_levels`] levels or, when a product
/// goes to a DSP, [`DSP_STAGE_NS`]. `None` for a design that is not pipelined (its stages are
/// whole layers, which the model does not time).
pub fn fmax_estimate_mhz(design: &Design, layers: &[LayerCost]) -> Option<f64> {
    use crate::pipeline::{adder_levels, ADDER_LEVEL_NS, STAGE_OVERHEAD_NS};
    let f = design.clock_mhz?;
    let mut ns = STAGE_OVERHEAD_NS + adder_levels(f) as f64 * ADDER_LEVEL_NS;
    if !design.multipliers.instantiated() && layers.iter().any(|l| l.dsps > 0.0) {
        ns = ns.max(DSP_STAGE_NS);
    }
    Some((10000.0 / ns).round() / 10.0)
}

/// The estimate of a design: the sums over its layers, its latency and initiation interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DesignCost {
    pub luts: f64,
    pub ffs: f64,
    pub dsps: f64,
    /// The post-route clock on an ECP5 by the delay model ([`fmax_estimate_mhz`]).
    pub fmax_mhz: Option<f64>,
    /// ECP5 LUT4s of the layers ([`LayerCost::lut4`]), when every layer has the figure and the
    /// design has no streaming stages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lut4: Option<f64>,
    pub latency_cycles: usize,
    pub ii: usize,
    pub layers: Vec<LayerCost>,
    /// The streaming stages of a convolutional network and its collector
    /// ([`crate::conv::cost`]); empty for an MLP.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<crate::conv::cost::StageCost>,
}

/// LUTs of a binarized layer in popcount form ([`Layer::is_popcount`]): per output and cycle,
/// `K / R` XNOR terms (the input bit, and folded the weight bit the cycle counter selects)
/// summed by a tree of adders, and per output the accumulator and a threshold comparator, at
/// [`POPCOUNT_LUTS`] LUTs per term and per bit of each output's sum.
pub fn popcount_luts(f: &LayerFeatures) -> f64 {
    let terms = (f.out_features * f.in_features / f.reuse.max(1)) as f64;
    let per_output_bits = (f.out_features as u32 * f.accumulator_width) as f64;
    POPCOUNT_LUTS[0] * terms + POPCOUNT_LUTS[1] * per_output_bits
}

/// LUTs per XNOR term and per bit of each output's sum in [`popcount_luts`], fitted by least
/// relative squares to Yosys 0.23 `synth_xilinx` of the three distinct layers of TFC_1W1A folded
/// by 16 (784 -> 64: 16,234 LUTs; 64 -> 64: 1,288; 64 -> 10: 258), two coefficients on three
/// points (doc/hardware.md, "Cost model").
pub const POPCOUNT_LUTS: [f64; 2] = [5.127, 0.2204];

/// The estimate of one layer.
pub fn estimate_layer(layer: &Layer) -> LayerCost {
    let f = layer_features(layer);
    let luts: f64 = if layer.is_popcount() {
        popcount_luts(&f)
    } else {
        lut_regressors(&f).iter().zip(LUT_COEFFICIENTS).map(|(x, c)| x * c).sum::<f64>() + f.shift_add_bits as f64 * SHIFT_ADD_LUTS_PER_BIT
    };
    LayerCost {
        node: layer.node.clone(),
        luts: luts.max(0.0).round(),
        ffs: (f.output_register_bits as f64 * FF_COEFFICIENTS[0] + f.state_register_bits as f64 * FF_COEFFICIENTS[1]).round(),
        dsps: (f.dsp_products + f.step_dsp_products) as f64,
        latency_cycles: layer.latency(),
        ii: layer.initiation_interval(),
        register_bits: f.output_register_bits + f.state_register_bits,
        registers_added: 0,
        lut4: None,
        features: f,
    }
}

/// The estimate of one layer pipelined as `pipe` says: the schedule's latency, and the
/// registers that pipelining adds counted bit for bit on top of the unpipelined estimate's
/// flip-flops (their LUTs are the unpipelined layer's; Yosys maps product registers into DSPs
/// where it can, so the count is an upper bound). With instantiated multipliers, the DSPs are
/// the instances.
pub fn estimate_pipelined_layer(layer: &Layer, pipe: &crate::pipeline::Pipelining) -> LayerCost {
    let mut c = estimate_layer(layer);
    let rtl = crate::pipeline::pipelined_layer(layer, pipe);
    let bits = rtl.register_bits;
    // Instantiated multipliers are counted as written: one DSP each.
    if pipe.multipliers.instantiated() {
        c.dsps = rtl.dsps as f64;
        if !layer.is_popcount() {
            let x = lut4_regressors(layer, &rtl);
            c.lut4 = Some(x.iter().zip(LUT4_COEFFICIENTS).map(|(x, k)| x * k).sum::<f64>().max(0.0).round());
        }
    }
    // Shift-add products: the adders that sum their terms, as written.
    if layer.products == crate::Products::ShiftAdd {
        c.luts += (rtl.tree_adder_bits as f64 * SHIFT_ADD_LUTS_PER_BIT).round();
    }
    c.registers_added = bits.saturating_sub(c.register_bits);
    c.register_bits = bits;
    c.ffs += c.registers_added as f64;
    c.latency_cycles = crate::pipeline::schedule(layer, pipe).latency;
    c
}

/// The estimate of a design.
pub fn estimate(design: &Design) -> DesignCost {
    let mut layers: Vec<LayerCost> = design
        .layers
        .iter()
        .enumerate()
        .map(|(i, l)| match design.layer_pipelining(i) {
            Some(p) => estimate_pipelined_layer(l, &p),
            None => estimate_layer(l),
        })
        .collect();
    // The register slice before a layer: its flip-flops and its cycle ([`crate::slice`]).
    for (i, (c, l)) in layers.iter_mut().zip(&design.layers).enumerate() {
        if crate::slice::has_slice(design, i) {
            let bits = crate::slice::slice_bits(l.in_features * l.input.width() as usize);
            c.register_bits += bits;
            c.registers_added += bits;
            c.ffs += bits as f64;
            c.latency_cycles += crate::slice::SLICE_LATENCY;
        }
    }
    let stages = crate::conv::cost::estimate_stages(design);
    let mvus: Vec<LayerCost> = stages.iter().filter_map(|s| s.mvu.clone()).chain(layers.iter().cloned()).collect();
    DesignCost {
        fmax_mhz: fmax_estimate_mhz(design, &mvus),
        luts: layers.iter().map(|l| l.luts).sum::<f64>() + stages.iter().map(|s| s.luts).sum::<f64>(),
        ffs: layers.iter().map(|l| l.ffs).sum::<f64>() + stages.iter().map(|s| s.ffs).sum::<f64>(),
        dsps: layers.iter().map(|l| l.dsps).sum::<f64>() + stages.iter().map(|s| s.dsps).sum::<f64>(),
        lut4: if stages.is_empty() { layers.iter().map(|l| l.lut4).sum() } else { None },
        stages,
        latency_cycles: design.latency(),
        ii: design.initiation_interval(),
        layers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Products, Range};

    /// One output of two 4-bit inputs ([-8, 7]) with the weights 7 and -3, shift-add products.
    fn layer(reuse: usize) -> Layer {
        Layer {
            node: "l".into(),
            input: Range { lo: -8, hi: 7, frac: 0 },
            pre: vec![],
            in_features: 2,
            out_features: 1,
            weight: vec![7, -3],
            bias: vec![0],
            acc: Range { lo: -77, hi: 73, frac: 0 },
            post: vec![],
            reuse,
            products: Products::ShiftAdd,
        }
    }

    #[test]
    fn shift_add_bits_count_the_negations_and_the_selects() {
        // Unrolled: 7 = 8 - 1 and -3 = -4 + 1, the negations of x0 and x1 << 2 (5 and 7 bits).
        // Folded by 2: one lane holding 7 and -3 in a 4-bit register whose four bits are all
        // used: the register (4), four selects of the 4-bit input (16) and the input's
        // negation (5 bits) for the sign bit.
        for (reuse, want) in [(1, 5 + 7), (2, 4 + 16 + 5)] {
            assert_eq!(layer_features(&layer(reuse)).shift_add_bits, want, "reuse {reuse}");
            assert_eq!(layer_features(&layer(reuse)).dsp_products, 0, "reuse {reuse}");
        }
    }

    #[test]
    fn the_tree_adds_each_pair_at_the_width_of_its_range() {
        // At 200 MHz two terms per register. Unrolled, the terms -x0 [-7, 8], 8 x0 [-64, 56],
        // x1 [-8, 7] and -4 x1 [-28, 32]: pairs of 8 bits ([-71, 64]) and 7 bits ([-36, 39]),
        // then the root, 8 bits ([-107, 103]). Folded, the bit terms x, 2x, 4x and -8x of the
        // input [-8, 7] with 0: pairs of 6 bits ([-24, 21]) and 8 bits ([-88, 92]), then 8
        // ([-112, 113]).
        let p = crate::pipeline::Pipelining::clock(200.0);
        for (reuse, want) in [(1, 8 + 7 + 8), (2, 6 + 8 + 8)] {
            assert_eq!(crate::pipeline::pipelined_layer(&layer(reuse), &p).tree_adder_bits, want, "reuse {reuse}");
        }
    }
}
