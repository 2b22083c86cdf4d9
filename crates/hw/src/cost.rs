//! A resource and latency model of a design, layer by layer, without synthesis: LUTs,
//! flip-flops and DSPs from the layer's widths, constants and reuse factor, fitted to Yosys's
//! `synth_xilinx` (7-series, [`crate::synth::SynthTarget::Xilinx`]) on the calibration matrix of
//! [`crate::calibration`]; latency and initiation interval are the design's own schedule
//! ([`Layer::latency`], [`Layer::initiation_interval`]), which simulation confirms cycle for
//! cycle. The model, its features and its measured error are in doc/hardware.md ("Cost model").

use crate::design::{signed_bits, Design, Layer};
use serde::Serialize;

/// What the model estimates: Yosys 0.23's `synth_xilinx -flatten -noiopad` (7-series LUT6).
pub const MODEL: &str = "cost model of Yosys 0.23 synth_xilinx (7-series)";

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
    /// Products Yosys maps to DSP48s: unrolled, products by a constant that is not a positive
    /// power of two whose result needs at least 9 bits (`mul2dsp`'s minimum for 7-series, after
    /// `wreduce` trims the constant to its bits); folded, every multiplier (`K / R` per output).
    pub dsp_products: usize,
    /// Unrolled products left to LUTs, as shift-and-add: per such product, one adder of the
    /// product's width per set bit of the constant's magnitude beyond the first.
    pub lut_product_adder_bits: usize,
    /// Terms added into each sum per cycle, over all outputs: the nonzero weights and the bias
    /// unrolled; the accumulator and the `K / R` products of each output folded.
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
    w != 0 && !(w > 0 && w.unsigned_abs().is_power_of_two()) && wb >= 2 && xw >= 2 && xw + wb >= 9
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
    let (dsp_products, lut_product_adder_bits, addends, state_register_bits) = if folded {
        let counter = signed_bits(0, r as i128) as usize;
        (n * (k / r), 0, n * (k / r + 1), k * xw as usize + n * aw as usize + counter + 1)
    } else {
        let lut_bits = layer
            .weight
            .iter()
            .filter(|&&w| w != 0 && !dsp_product(xw, w))
            .map(|&w| (w.unsigned_abs().count_ones() as usize - 1) * (xw + signed_bits(w as i128, w as i128)) as usize)
            .sum();
        let dsps = layer.weight.iter().filter(|&&w| dsp_product(xw, w)).count();
        (dsps, lut_bits, nonzero_weights + n, 0)
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
        lut_product_adder_bits,
        addends,
        output_register_bits,
        state_register_bits,
    }
}

/// Number of LUT regressors.
pub const LUT_TERMS: usize = 6;

/// The model's LUT regressors of one layer, in the order of [`LUT_COEFFICIENTS`]:
///
/// - `adder_bits`: addends times the sum's width (the adder trees, and a folded layer's
///   accumulating adders);
/// - `lut_product_bits`: [`LayerFeatures::lut_product_adder_bits`];
/// - `step_bits`: the rescale of the inputs (inputs times their width) and the steps after the
///   sums (outputs times the sum's width);
/// - `rom_bits`: folded, the weight each multiplier selects by the cycle counter (multipliers
///   times weight bits);
/// - `shift_bits`: folded, the sample's shift register (inputs times their width);
/// - 1.
pub fn lut_regressors(f: &LayerFeatures) -> [f64; LUT_TERMS] {
    let (k, n) = (f.in_features as f64, f.out_features as f64);
    let (iw, xw, aw) = (f.input_width as f64, f.product_input_width as f64, f.accumulator_width as f64);
    let adder_bits = f.addends as f64 * aw;
    let step_bits = if f.rescales_input { k * iw } else { 0.0 } + if f.has_post { n * aw } else { 0.0 };
    let folded = f.reuse > 1;
    let rom_bits = if folded { f.dsp_products as f64 * f.weight_width as f64 } else { 0.0 };
    let shift_bits = if folded { k * xw } else { 0.0 };
    [adder_bits, f.lut_product_adder_bits as f64, step_bits, rom_bits, shift_bits, 1.0]
}

/// LUTs per unit of each regressor of [`lut_regressors`], fitted by least relative squares to the
/// calibration data (`crates/hw/calibration/xilinx.csv`, `cargo run -p mase-hw --example
/// calibrate_cost`).
pub const LUT_COEFFICIENTS: [f64; LUT_TERMS] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0];

/// Flip-flops per output register bit and per folded state register bit (synthesis drops bits
/// that never change, such as a relu's sign bit, and DSP48s absorb some).
pub const FF_COEFFICIENTS: [f64; 2] = [1.0, 1.0];

/// The estimate of one layer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerCost {
    pub node: String,
    pub luts: f64,
    pub ffs: f64,
    pub dsps: f64,
    pub latency_cycles: usize,
    pub ii: usize,
    pub features: LayerFeatures,
}

/// The estimate of a design: the sums over its layers, its latency and initiation interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DesignCost {
    pub luts: f64,
    pub ffs: f64,
    pub dsps: f64,
    pub latency_cycles: usize,
    pub ii: usize,
    pub layers: Vec<LayerCost>,
}

/// The estimate of one layer.
pub fn estimate_layer(layer: &Layer) -> LayerCost {
    let f = layer_features(layer);
    let luts: f64 = lut_regressors(&f).iter().zip(LUT_COEFFICIENTS).map(|(x, c)| x * c).sum();
    LayerCost {
        node: layer.node.clone(),
        luts: luts.max(0.0).round(),
        ffs: (f.output_register_bits as f64 * FF_COEFFICIENTS[0] + f.state_register_bits as f64 * FF_COEFFICIENTS[1]).round(),
        dsps: f.dsp_products as f64,
        latency_cycles: layer.latency(),
        ii: layer.initiation_interval(),
        features: f,
    }
}

/// The estimate of a design.
pub fn estimate(design: &Design) -> DesignCost {
    let layers: Vec<LayerCost> = design.layers.iter().map(estimate_layer).collect();
    DesignCost {
        luts: layers.iter().map(|l| l.luts).sum(),
        ffs: layers.iter().map(|l| l.ffs).sum(),
        dsps: layers.iter().map(|l| l.dsps).sum(),
        latency_cycles: design.latency(),
        ii: design.initiation_interval(),
        layers,
    }
}
