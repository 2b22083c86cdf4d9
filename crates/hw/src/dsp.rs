//! How a pipelined design builds its products (`ch emit --multipliers`): Verilog `*` that the
//! synthesis tool maps as it likes (portable), or the Lattice ECP5 `MULT18X18D` instantiated with
//! its input and output registers, which Yosys 0.23 does not pack by itself (doc/hardware.md,
//! "Multipliers").
//!
//! An instantiated product goes through [`ECP5_WRAPPER`], a module of the design's `rtl/` that
//! sign-extends both operands to 18 bits and takes the low bits of the 36-bit product. Yosys's
//! ECP5 library declares `MULT18X18D` as a black box without a simulation model, so the design's
//! folder also holds [`mult18x18d_model`], a behavioural model of the primitive that Verilator
//! (and Yosys's other targets) read in its place.

use crate::design::{signed_bits, Design, Step};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// How the products of a pipelined design are built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Multipliers {
    /// Verilog `x * w` into a register of the stage: portable; Yosys chooses DSP or LUTs.
    #[default]
    Inferred,
    /// A Lattice ECP5 `MULT18X18D` with its input registers (A and B) and its output register,
    /// clocked on the stage enable, between two flip-flop registers in the fabric that take
    /// the routes to and from the DSP: four register stages per product.
    Ecp5Dsp,
}

impl Multipliers {
    /// The option's values, as `--multipliers` and `multipliers` take them.
    pub const NAMES: &'static str = "inferred, ecp5-dsp";

    /// The multipliers called `name` (`inferred`, `ecp5-dsp`).
    pub fn from_name(name: &str) -> Option<Multipliers> {
        match name {
            "inferred" => Some(Multipliers::Inferred),
            "ecp5-dsp" => Some(Multipliers::Ecp5Dsp),
            _ => None,
        }
    }

    /// The option's value for these multipliers.
    pub fn name(self) -> &'static str {
        match self {
            Multipliers::Inferred => "inferred",
            Multipliers::Ecp5Dsp => "ecp5-dsp",
        }
    }

    /// Register stages from a product's operands to its registered result.
    pub fn product_cycles(self) -> usize {
        match self {
            Multipliers::Inferred => 1,
            Multipliers::Ecp5Dsp => 4,
        }
    }

    /// Whether products are primitives instantiated by name.
    pub fn instantiated(self) -> bool {
        self != Multipliers::Inferred
    }
}

/// Bits of each operand of a `MULT18X18D` (signed).
pub const ECP5_OPERAND_BITS: u32 = 18;

/// The name of the module wrapping a `MULT18X18D`.
pub const ECP5_WRAPPER: &str = "mase_mul_ecp5";

/// The file, in a design's folder, of the behavioural model of `MULT18X18D`.
pub const ECP5_MODEL_FILE: &str = "sim/MULT18X18D.v";

/// The Verilog of [`ECP5_WRAPPER`]: `p = a * b` for signed `a` (`AW` bits) and `b` (`BW` bits,
/// both at most 18), registered in the fabric, at the DSP's inputs, at its output and in the
/// fabric again, on `clk` while `ce` is high: four clocks of latency.
pub fn ecp5_wrapper() -> String {
    let mut o = String::from("/* verilator lint_off WIDTH */\n");
    let _ = writeln!(
        o,
        "// A signed product in a Lattice ECP5 MULT18X18D with its input registers (A, B) and its output\n// register, all on CLK0 with clock enable CE0, between two fabric registers (the routes to and\n// from the DSP get a clock each): `p` is `a * b` four enabled clocks after `a` and `b`."
    );
    let _ = writeln!(o, "module {ECP5_WRAPPER} #(parameter AW = 18, parameter BW = 18, parameter PW = 36) (");
    let _ = writeln!(o, "  input clk, input ce,");
    let _ = writeln!(o, "  input signed [AW-1:0] a, input signed [BW-1:0] b,");
    let _ = writeln!(o, "  output reg signed [PW-1:0] p");
    let _ = writeln!(o, ");");
    let _ = writeln!(o, "  reg signed [AW-1:0] ar;");
    let _ = writeln!(o, "  reg signed [BW-1:0] br;");
    let _ = writeln!(o, "  always @(posedge clk) if (ce) begin ar <= a; br <= b; end");
    let _ = writeln!(o, "  wire signed [17:0] ax = ar;");
    let _ = writeln!(o, "  wire signed [17:0] bx = br;");
    let _ = writeln!(o, "  wire [35:0] px;");
    let _ = writeln!(o, "  MULT18X18D #(");
    let _ = writeln!(o, "    .REG_INPUTA_CLK(\"CLK0\"), .REG_INPUTB_CLK(\"CLK0\"), .REG_PIPELINE_CLK(\"NONE\"), .REG_OUTPUT_CLK(\"CLK0\")");
    let _ = writeln!(o, "  ) dsp (");
    let bits = |port: &str, sig: &str, n: usize| (0..n).map(|i| format!(".{port}{i}({sig}[{i}])")).collect::<Vec<_>>().join(", ");
    let _ = writeln!(o, "    {},", bits("A", "ax", 18));
    let _ = writeln!(o, "    {},", bits("B", "bx", 18));
    let zeros = (0..18).map(|i| format!(".C{i}(1'b0)")).collect::<Vec<_>>().join(", ");
    let _ = writeln!(o, "    {zeros},");
    let _ = writeln!(o, "    .SIGNEDA(1'b1), .SIGNEDB(1'b1), .SOURCEA(1'b0), .SOURCEB(1'b0),");
    let _ = writeln!(o, "    .CLK0(clk), .CE0(ce), .RST0(1'b0),");
    let _ = writeln!(o, "    {}", bits("P", "px", 36));
    let _ = writeln!(o, "  );");
    let _ = writeln!(o, "  always @(posedge clk) if (ce) p <= px[PW-1:0];");
    let _ = writeln!(o, "endmodule");
    o
}

/// A behavioural model of the ECP5 `MULT18X18D` for simulation, covering the ports and
/// parameters [`ecp5_wrapper`] uses: `P = A * B` (36 bits), each operand signed when its
/// `SIGNEDA`/`SIGNEDB` is high; with `REG_INPUTA_CLK`, `REG_INPUTB_CLK`, `REG_PIPELINE_CLK`
/// or `REG_OUTPUT_CLK` set to `"CLK0"` the operand, the product or the output is registered on
/// `CLK0` while `CE0` is high, and cleared by `RST0` (synchronous, the primitive's
/// `RESETMODE = "SYNC"`); `"NONE"` leaves that register out. A clock other than `CLK0` is not
/// modelled: the simulation stops with an error.
pub fn mult18x18d_model() -> String {
    let mut o = String::from("/* verilator lint_off WIDTH */\n/* verilator lint_off UNUSEDSIGNAL */\n");
    let _ = writeln!(o, "// Behavioural model of the Lattice ECP5 MULT18X18D (written by `ch emit`; simulation only).");
    let _ = writeln!(o, "module MULT18X18D #(");
    let _ = writeln!(o, "  parameter REG_INPUTA_CLK = \"NONE\", parameter REG_INPUTB_CLK = \"NONE\",");
    let _ = writeln!(o, "  parameter REG_PIPELINE_CLK = \"NONE\", parameter REG_OUTPUT_CLK = \"NONE\"");
    let _ = writeln!(o, ") (");
    let ports = |p: &str, n: usize| (0..n).map(|i| format!("{p}{i}")).collect::<Vec<_>>();
    let _ = writeln!(o, "  input {},", ports("A", 18).join(", "));
    let _ = writeln!(o, "  input {},", ports("B", 18).join(", "));
    let _ = writeln!(o, "  input {},", ports("C", 18).join(", "));
    let _ = writeln!(o, "  input SIGNEDA, input SIGNEDB, input SOURCEA, input SOURCEB,");
    let _ = writeln!(o, "  input CLK0, input CE0, input RST0,");
    let _ = writeln!(o, "  output {}", ports("P", 36).join(", "));
    let _ = writeln!(o, ");");
    let rev = |p: &str, n: usize| (0..n).rev().map(|i| format!("{p}{i}")).collect::<Vec<_>>().join(", ");
    let _ = writeln!(o, "  wire [17:0] a = {{{}}};", rev("A", 18));
    let _ = writeln!(o, "  wire [17:0] b = {{{}}};", rev("B", 18));
    let _ = writeln!(o, "  initial begin");
    for reg in ["REG_INPUTA_CLK", "REG_INPUTB_CLK", "REG_PIPELINE_CLK", "REG_OUTPUT_CLK"] {
        let _ = writeln!(
            o,
            "    if ({reg} != \"NONE\" && {reg} != \"CLK0\") begin $display(\"MULT18X18D model: {reg} other than NONE or CLK0\"); $stop; end"
        );
    }
    let _ = writeln!(o, "  end");
    let _ = writeln!(o, "  reg [17:0] ra = 18'd0, rb = 18'd0;");
    let _ = writeln!(o, "  reg rsa = 1'b0, rsb = 1'b0;");
    let _ = writeln!(o, "  always @(posedge CLK0) begin");
    let _ = writeln!(o, "    if (RST0) begin ra <= 18'd0; rb <= 18'd0; rsa <= 1'b0; rsb <= 1'b0; end");
    let _ = writeln!(o, "    else if (CE0) begin ra <= a; rb <= b; rsa <= SIGNEDA; rsb <= SIGNEDB; end");
    let _ = writeln!(o, "  end");
    let _ = writeln!(o, "  wire [17:0] ia = (REG_INPUTA_CLK == \"NONE\") ? a : ra;");
    let _ = writeln!(o, "  wire [17:0] ib = (REG_INPUTB_CLK == \"NONE\") ? b : rb;");
    let _ = writeln!(o, "  wire sa = (REG_INPUTA_CLK == \"NONE\") ? SIGNEDA : rsa;");
    let _ = writeln!(o, "  wire sb = (REG_INPUTB_CLK == \"NONE\") ? SIGNEDB : rsb;");
    let _ = writeln!(o, "  // Each operand widened by its sign bit (signed) or a zero (unsigned); the product fits 36 bits.");
    let _ = writeln!(o, "  wire signed [18:0] xa = {{sa & ia[17], ia}};");
    let _ = writeln!(o, "  wire signed [18:0] xb = {{sb & ib[17], ib}};");
    let _ = writeln!(o, "  wire signed [37:0] prod = xa * xb;");
    let _ = writeln!(o, "  wire [35:0] m = prod[35:0];");
    let _ = writeln!(o, "  reg [35:0] rp = 36'd0, ro = 36'd0;");
    let _ = writeln!(o, "  wire [35:0] mp = (REG_PIPELINE_CLK == \"NONE\") ? m : rp;");
    let _ = writeln!(o, "  always @(posedge CLK0) begin");
    let _ = writeln!(o, "    if (RST0) begin rp <= 36'd0; ro <= 36'd0; end");
    let _ = writeln!(o, "    else if (CE0) begin rp <= m; ro <= mp; end");
    let _ = writeln!(o, "  end");
    let _ = writeln!(o, "  wire [35:0] p = (REG_OUTPUT_CLK == \"NONE\") ? mp : ro;");
    let _ = writeln!(o, "  assign {{{}}} = p;", rev("P", 36));
    let _ = writeln!(o, "endmodule");
    o
}

/// An instance of [`ECP5_WRAPPER`] named `inst`, clocked while `ce` is high: the wire `p` (its
/// name and width; declared here) is `a * b` (each an expression and its width)
/// [`Multipliers::product_cycles`] enabled clocks later.
pub(crate) fn ecp5_product(out: &mut String, inst: &str, ce: &str, a: (&str, u32), b: (&str, u32), p: (&str, u32)) {
    let ((a, aw), (b, bw), (p, pw)) = (a, b, p);
    let _ = writeln!(out, "  wire signed [{}:0] {p};", pw - 1);
    let _ = writeln!(out, "  {ECP5_WRAPPER} #(.AW({aw}), .BW({bw}), .PW({pw})) {inst} (.clk(clk), .ce({ce}), .a({a}), .b({b}), .p({p}));");
}

/// Why the operands of some product of `d` do not fit `multipliers`' primitive, naming the
/// layer and the widths; `Ok` when they all fit. An operand is the layer's input after its
/// steps (range [`crate::Layer::product_input`]) or an affine's input, times a weight or an
/// affine's factor, each as a signed value.
pub fn check_operands(d: &Design, multipliers: Multipliers) -> Result<(), String> {
    if !multipliers.instantiated() {
        return Ok(());
    }
    let max = ECP5_OPERAND_BITS;
    let constant_bits = |v: &[i64]| v.iter().map(|&w| signed_bits(w as i128, w as i128)).max().unwrap_or(1);
    // The matrix-vector units of a convolutional front end are layers too.
    let mvus = d.stages.iter().filter_map(|s| match s {
        crate::conv::Stage::Conv(c) => Some(&c.mvu),
        crate::conv::Stage::MaxPool(_) => None,
    });
    for l in d.layers.iter().chain(mvus) {
        let mut checks = vec![("its products", l.product_input().width(), constant_bits(&l.weight))];
        for (steps, from) in [(&l.pre, l.input), (&l.post, l.acc)] {
            let mut r = from;
            for s in steps {
                if let Step::Affine { mul, .. } = s {
                    checks.push(("its batch norm's products", r.width(), constant_bits(mul)));
                }
                r = s.range(r);
            }
        }
        for (what, a, b) in checks {
            if a > max || b > max {
                return Err(format!(
                    "multipliers {}: layer `{}`: {what} take {a}-bit and {b}-bit operands, more than a MULT18X18D's {max} bits (narrower formats, or --multipliers inferred)",
                    multipliers.name(),
                    l.node
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::design::{Layer, Range};

    /// A design of one 2 -> 1 layer on 6-bit inputs with the weights `w` and `pre` before it.
    fn design(w: Vec<i64>, pre: Vec<Step>) -> Design {
        let layer = Layer {
            node: "fc".into(),
            input: Range { lo: -32, hi: 31, frac: 0 },
            pre,
            in_features: 2,
            out_features: 1,
            weight: w,
            bias: vec![0],
            acc: Range { lo: -1 << 30, hi: 1 << 30, frac: 0 },
            post: vec![],
            reuse: 1,
            products: Default::default(),
        };
        Design {
            model: "m".into(),
            input_format: (6, 0, true),
            layers: vec![layer],
            clock_mhz: None,
            stages: Vec::new(),
            multipliers: Multipliers::Inferred,
            bipolar: None,
            part: None,
        }
    }

    #[test]
    fn operands_wider_than_the_primitive_and_unpipelined_designs_are_refused_in_one_line() {
        let wide_affine = Step::Affine { mul: vec![1 << 20, 1], add: vec![0, 0], frac: 0 };
        let narrow = Step::Requant { width: 6, frac_width: 0, signed: true };
        // (weights, steps before the product, clock, the error or none).
        let cases: Vec<(Vec<i64>, Vec<Step>, Option<f64>, &str)> = vec![
            (vec![3, -131072], vec![], Some(200.0), ""),
            (vec![3, 131072], vec![], Some(200.0), "multipliers ecp5-dsp: layer `fc`: its products take 6-bit and 19-bit operands, more than a MULT18X18D's 18 bits (narrower formats, or --multipliers inferred)"),
            (vec![3, 1], vec![wide_affine.clone()], Some(200.0), "multipliers ecp5-dsp: layer `fc`: its products take 26-bit and 3-bit operands, more than a MULT18X18D's 18 bits (narrower formats, or --multipliers inferred)"),
            (vec![3, 1], vec![wide_affine, narrow], Some(200.0), "multipliers ecp5-dsp: layer `fc`: its batch norm's products take 6-bit and 22-bit operands, more than a MULT18X18D's 18 bits (narrower formats, or --multipliers inferred)"),
            (vec![3, 1], vec![], None, "multipliers ecp5-dsp: needs a pipelined design (a clock_mhz)"),
        ];
        for (w, pre, clock, want) in cases {
            let mut d = design(w.clone(), pre);
            if let Some(f) = clock {
                d = d.pipelined(f).unwrap();
            }
            match d.with_multipliers(Multipliers::Ecp5Dsp) {
                Ok(d) => assert!(want.is_empty() && d.multipliers == Multipliers::Ecp5Dsp, "{w:?}"),
                Err(e) => assert_eq!(e.to_string(), want, "{w:?}"),
            }
        }
        assert_eq!(Multipliers::from_name("ecp5-dsp"), Some(Multipliers::Ecp5Dsp));
        assert_eq!(Multipliers::from_name("dsp"), None);
        assert_eq!((Multipliers::Inferred.product_cycles(), Multipliers::Ecp5Dsp.product_cycles()), (1, 4));
    }
}
