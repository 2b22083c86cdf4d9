//! The behavioural model of the ECP5 `MULT18X18D` that a design with `--multipliers ecp5-dsp`
//! simulates with, checked in Verilator against the primitive's documented behaviour: `P` is
//! the 36-bit product of `A` and `B`, each signed when `SIGNEDA`/`SIGNEDB` is high; each
//! register set to `CLK0` adds one clock of latency, holds while `CE0` is low and clears on
//! `RST0` (synchronous).

use mase_hw::dsp::{ecp5_wrapper, mult18x18d_model};
use mase_hw::simulate::tool_available;
use std::path::PathBuf;
use std::process::Command;

/// One line per product: `A` and `B` as 18-bit patterns, `SIGNEDA`, `SIGNEDB`, and `P` as the
/// unsigned 36-bit pattern the primitive outputs (computed by hand).
const PRODUCTS: &[(u32, u32, u8, u8, u64)] = &[
    // 3 * 5.
    (3, 5, 1, 1, 15),
    // -1 * 5 signed: 2^36 - 5.
    (0x3ffff, 5, 1, 1, 68_719_476_731),
    // The same bits unsigned: 262143 * 5.
    (0x3ffff, 5, 0, 0, 1_310_715),
    // -1 signed times 5 unsigned: -5.
    (0x3ffff, 5, 1, 0, 68_719_476_731),
    // -131072 * -131072 = 2^34, the largest signed product.
    (0x20000, 0x20000, 1, 1, 17_179_869_184),
    // 131071 * -131072 = -17179738112: 2^36 - 17179738112.
    (0x1ffff, 0x20000, 1, 1, 51_539_738_624),
    // 262143^2 unsigned = 68718952449, the largest unsigned product.
    (0x3ffff, 0x3ffff, 0, 0, 68_718_952_449),
    // -100 * 37 = -3700: 2^36 - 3700.
    (0x3ff9c, 37, 1, 1, 68_719_473_036),
    (0, 0x2aaaa, 1, 1, 0),
];

/// The 36-bit pattern of the product `a * b` of signed values.
fn wrapper_case(a: i64, b: i64) -> u64 {
    ((a * b) as u64) & ((1u64 << 36) - 1)
}

/// Port connections `.{port}{i}({sig}[i])` for `n` bits.
fn bits(port: &str, sig: &str, n: usize) -> String {
    (0..n).map(|i| format!(".{port}{i}({sig}[{i}])")).collect::<Vec<_>>().join(", ")
}

/// An instance of the model with `regs` (input A and B, pipeline, output: each "NONE" or
/// "CLK0") writing `p`.
fn instance(name: &str, regs: [&str; 4], p: &str) -> String {
    format!(
        "  MULT18X18D #(.REG_INPUTA_CLK(\"{}\"), .REG_INPUTB_CLK(\"{}\"), .REG_PIPELINE_CLK(\"{}\"), .REG_OUTPUT_CLK(\"{}\")) {name} ({}, {}, {}, .SIGNEDA(sa), .SIGNEDB(sb), .SOURCEA(1'b0), .SOURCEB(1'b0), .CLK0(clk), .CE0(ce), .RST0(rst), {});\n",
        regs[0],
        regs[1],
        regs[2],
        regs[3],
        bits("A", "a", 18),
        bits("B", "b", 18),
        bits("C", "c", 18),
        bits("P", p, 36)
    )
}

/// Builds and runs `tb` (a Verilog module `tb`) with the model and the wrapper; returns its
/// output lines.
fn run_tb(name: &str, tb: &str) -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("MULT18X18D.v"), mult18x18d_model()).unwrap();
    std::fs::write(dir.join("wrapper.v"), ecp5_wrapper()).unwrap();
    std::fs::write(dir.join("tb.v"), tb).unwrap();
    let out = Command::new("verilator")
        .args(["--binary", "--timing", "-Wno-fatal", "--top-module", "tb", "-Mdir", "obj", "tb.v", "MULT18X18D.v", "wrapper.v"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(dir.join("obj/Vtb")).current_dir(&dir).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    String::from_utf8_lossy(&run.stdout).lines().filter(|l| !l.starts_with('-')).map(str::to_string).collect()
}

#[test]
fn the_mult18x18d_model_has_the_primitives_products_latencies_enable_and_reset() {
    if !tool_available("verilator") {
        assert!(std::env::var("CI").map_or(true, |v| v != "true"), "verilator is not installed and CI=true");
        eprintln!("SKIP: verilator is not installed");
        return;
    }
    // Three instances: no register (P follows A and B), input and output registers (two
    // clocks), and every register (three). Each cycle applies the next product at the falling
    // edge and prints the three outputs before the next rising edge.
    let mut tb = String::from("module tb;\n  reg clk = 1'b0, ce = 1'b1, rst = 1'b0, sa = 1'b0, sb = 1'b0;\n  reg [17:0] a = 18'd0, b = 18'd0, c = 18'd0;\n  wire [35:0] p0, p2, p3;\n");
    tb += &instance("none", ["NONE"; 4], "p0");
    tb += &instance("io", ["CLK0", "CLK0", "NONE", "CLK0"], "p2");
    tb += &instance("all", ["CLK0"; 4], "p3");
    tb += "  always #5 clk = ~clk;\n  initial begin\n";
    let step = "    #4 $display(\"%0d %0d %0d\", p0, p2, p3);\n    @(negedge clk);\n";
    for &(a, b, sa, sb, _) in PRODUCTS {
        tb += &format!("    a = 18'd{a}; b = 18'd{b}; sa = 1'b{sa}; sb = 1'b{sb};\n{step}");
    }
    // Two cycles with the clock enable low, then one with reset, then two more.
    tb += &format!("    a = 18'd7; b = 18'd7; sa = 1'b1; sb = 1'b1; ce = 1'b0;\n{step}{step}");
    tb += &format!("    ce = 1'b1; rst = 1'b1;\n{step}    rst = 1'b0;\n{step}{step}");
    tb += "    $finish;\n  end\nendmodule\n";
    let lines = run_tb("dsp_model", &tb);
    let got: Vec<[u64; 3]> = lines
        .iter()
        .map(|l| {
            let v: Vec<u64> = l.split_whitespace().map(|t| t.parse().unwrap()).collect();
            [v[0], v[1], v[2]]
        })
        .collect();
    // The expected outputs cycle by cycle: the combinational product of the cycle's inputs,
    // and the registered ones two and three enabled clocks later (zeros before).
    let n = PRODUCTS.len();
    let p = |i: usize| PRODUCTS[i].4;
    let mut want: Vec<[u64; 3]> = (0..n).map(|i| [p(i), if i >= 2 { p(i - 2) } else { 0 }, if i >= 3 { p(i - 3) } else { 0 }]).collect();
    // Clock enable low (inputs 7 * 7): the registers hold what they had after the last product.
    let held = [p(n - 2), p(n - 3)];
    want.push([49, held[0], held[1]]);
    want.push([49, held[0], held[1]]);
    // Reset: the printout before the clock edge still shows the held values; after it every
    // register is zero, and 7 * 7 fills the registers again, two and three clocks later.
    want.push([49, held[0], held[1]]);
    want.push([49, 0, 0]);
    want.push([49, 0, 0]);
    assert_eq!(got, want);
}

#[test]
fn the_wrapper_multiplies_signed_operands_narrower_than_18_bits() {
    if !tool_available("verilator") {
        assert!(std::env::var("CI").map_or(true, |v| v != "true"), "verilator is not installed and CI=true");
        eprintln!("SKIP: verilator is not installed");
        return;
    }
    // (a, b) as 7-bit and 5-bit signed values; `p` is 12 bits, printed sign-extended to 36.
    let cases: &[(i64, i64)] = &[(-64, -16), (63, 15), (-64, 15), (0, -1), (-1, -1), (37, -11)];
    let mut tb = String::from("module tb;\n  reg clk = 1'b0, ce = 1'b1;\n  reg signed [6:0] a = 7'sd0;\n  reg signed [4:0] b = 5'sd0;\n  wire signed [11:0] p;\n  wire signed [35:0] px = p;\n");
    tb += "  mase_mul_ecp5 #(.AW(7), .BW(5), .PW(12)) m (.clk(clk), .ce(ce), .a(a), .b(b), .p(p));\n";
    tb += "  always #5 clk = ~clk;\n  initial begin\n";
    let step = "    #4 $display(\"%0d\", px & 36'hfffffffff);\n    @(negedge clk);\n";
    for &(a, b) in cases {
        tb += &format!("    a = {a}; b = {b};\n{step}");
    }
    tb += &format!("{step}{step}{step}{step}    $finish;\n  end\nendmodule\n");
    let got: Vec<u64> = run_tb("dsp_wrapper", &tb).iter().map(|l| l.trim().parse().unwrap()).collect();
    // Four clocks of latency (a fabric register, the DSP's input and output registers, a
    // fabric register): zeros, then each product in turn.
    let mut want = vec![0, 0, 0, 0];
    want.extend(cases.iter().map(|&(a, b)| wrapper_case(a, b)));
    assert_eq!(got, want);
}
