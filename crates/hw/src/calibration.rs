//! The calibration matrix of the cost model: single-layer designs over input and output
//! features, bit widths, reuse factors and positions in a network, with seeded weights. The
//! example `calibrate_cost` synthesizes each with Yosys and writes the measured resources to
//! `crates/hw/calibration/xilinx.csv`; a test rebuilds the same designs (same seeds, same
//! weights) and checks the model against that file.

use crate::design::{signed_bits, Design, Layer, Range, Step};
use crate::lower::sum_bounds;
use mase_ir::Rng;
use mase_quant::Fixed;

/// Where a layer sits in a network: what arrives at it and what follows its sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// Codes of its `data_in` format arrive; a relu follows.
    First,
    /// The relu'd sums of a previous layer arrive and are rescaled; a relu follows.
    Middle,
    /// As `Middle`, with no relu (the logits).
    Last,
}

impl Position {
    pub fn name(self) -> &'static str {
        match self {
            Position::First => "first",
            Position::Middle => "middle",
            Position::Last => "last",
        }
    }
}

/// One layer of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Case {
    pub in_features: usize,
    pub out_features: usize,
    /// Bits of the `integer` formats of data in, weight and bias (half of them fractional).
    pub bits: u32,
    pub reuse: usize,
    pub position: Position,
}

const fn case(in_features: usize, out_features: usize, bits: u32, reuse: usize, position: Position) -> Case {
    Case { in_features, out_features, bits, reuse, position }
}

use Position::{First, Last, Middle};

/// The matrix: one line per layer (inputs, outputs, bits, reuse factor, position).
pub const MATRIX: &[Case] = &[
    case(4, 4, 4, 1, First),
    case(8, 4, 6, 1, First),
    case(16, 4, 8, 1, First),
    case(4, 8, 6, 1, First),
    case(8, 8, 4, 1, Middle),
    case(16, 8, 6, 1, Middle),
    case(32, 4, 8, 1, Middle),
    case(8, 8, 8, 1, Middle),
    case(16, 16, 4, 1, Middle),
    case(32, 8, 4, 1, Middle),
    case(16, 4, 4, 1, Last),
    case(32, 5, 6, 1, Last),
    case(8, 4, 4, 2, Middle),
    case(8, 4, 8, 2, Middle),
    case(16, 4, 6, 4, First),
    case(8, 8, 6, 4, First),
    case(16, 8, 8, 4, Middle),
    case(32, 4, 4, 4, Middle),
    case(32, 4, 6, 8, Middle),
    case(16, 8, 4, 8, Middle),
    case(64, 4, 6, 16, Middle),
    case(32, 8, 8, 8, Middle),
    case(16, 4, 8, 2, Last),
    case(32, 5, 6, 4, Last),
    case(64, 8, 6, 4, Middle),
    case(64, 8, 8, 4, Middle),
    case(32, 16, 6, 4, Middle),
    case(32, 16, 6, 1, Middle),
    case(64, 8, 8, 1, Middle),
    case(16, 32, 6, 1, First),
    case(64, 4, 4, 16, Middle),
    case(64, 8, 4, 16, Middle),
];

/// The seeded single-layer design of case `index` of [`MATRIX`].
///
/// Weight and bias codes are normal with a standard deviation of a sixth of the format's range
/// (most codes small, as in a trained layer), rounded and clamped. A `Middle` or `Last` layer
/// receives unsigned codes of `2 bits + 2` bits with `2 (bits / 2)` fraction bits (a previous
/// layer's relu'd sums) and rescales them to its `data_in` format.
pub fn design(index: usize) -> Design {
    let c = MATRIX[index];
    let fx = Fixed { width: c.bits, frac_width: c.bits as i32 / 2, signed: true };
    let mut rng = Rng::new(1000 + index as u64);
    let sd = (fx.hi() - fx.lo()) as f64 / 6.0;
    let mut codes = |n: usize| -> Vec<i64> { (0..n).map(|_| ((rng.normal() * sd).round() as i64).clamp(fx.lo(), fx.hi())).collect() };
    let weight = codes(c.in_features * c.out_features);
    // The bias moves up to the products' scale: `f_x + f_w` fraction bits from its `f_b`.
    let up = 1i64 << fx.frac_width;
    let bias: Vec<i64> = codes(c.out_features).into_iter().map(|b| b * up).collect();
    let (input_format, pre) = match c.position {
        Position::First => (fx, vec![]),
        Position::Middle | Position::Last => {
            (Fixed { width: 2 * c.bits + 2, frac_width: 2 * fx.frac_width, signed: false }, vec![Step::requant(fx)])
        }
    };
    let input = Range::of(input_format);
    let xr = pre.iter().fold(input, |r, s: &Step| s.range(r));
    let (lo, hi) = sum_bounds(&weight, &bias, c.in_features, xr);
    debug_assert!(signed_bits(lo, hi) <= 64);
    let post = if c.position == Position::Last { vec![] } else { vec![Step::Relu] };
    let layer = Layer {
        node: format!("cal{index}"),
        input,
        pre,
        in_features: c.in_features,
        out_features: c.out_features,
        weight,
        bias,
        acc: Range { lo: lo as i64, hi: hi as i64, frac: 2 * fx.frac_width },
        post,
        reuse: c.reuse,
        products: Default::default(),
    };
    Design {
        model: format!("calibration_{index}"),
        input_format: (input_format.width, input_format.frac_width, input_format.signed),
        layers: vec![layer],
        clock_mhz: None,
        stages: Vec::new(),
        multipliers: Default::default(),
        bipolar: None,
        part: None,
    }
}

/// How a matrix layer is built for the ECP5 calibration ([`ecp5_design`]): the two kinds of
/// products that `ch emit --clock-mhz 200 --multipliers ecp5-dsp` (and `--part`) write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ecp5Products {
    /// Every product in an instantiated `MULT18X18D`.
    Dsp,
    /// Every product as shift-adds of the weight's digits in LUTs ([`crate::shift_add`]).
    ShiftAdd,
}

impl Ecp5Products {
    pub fn name(self) -> &'static str {
        match self {
            Ecp5Products::Dsp => "dsp",
            Ecp5Products::ShiftAdd => "shift_add",
        }
    }
}

/// The clock the ECP5 calibration designs are pipelined for, in MHz.
pub const ECP5_CLOCK_MHZ: f64 = 200.0;

/// The ECP5 calibration cases: every case of [`MATRIX`] with each kind of products, case
/// `2 i` with DSPs and `2 i + 1` with shift-adds.
pub fn ecp5_cases() -> Vec<(usize, Ecp5Products)> {
    (0..MATRIX.len()).flat_map(|i| [(i, Ecp5Products::Dsp), (i, Ecp5Products::ShiftAdd)]).collect()
}

/// Case `index` of [`MATRIX`] pipelined for [`ECP5_CLOCK_MHZ`] with instantiated multipliers,
/// its products as `products` says.
pub fn ecp5_design(index: usize, products: Ecp5Products) -> Design {
    let mut d = design(index);
    d.clock_mhz = Some(ECP5_CLOCK_MHZ);
    d.multipliers = crate::dsp::Multipliers::Ecp5Dsp;
    if products == Ecp5Products::ShiftAdd {
        for l in &mut d.layers {
            l.products = crate::Products::ShiftAdd;
        }
    }
    d
}
