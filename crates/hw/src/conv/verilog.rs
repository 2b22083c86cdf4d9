//! Verilog of the streaming stages: the sliding-window generator over a line buffer, the max
//! pool's comparators, the collector that flattens the last image, and the top module chaining
//! stages, collector and layers.

use super::{Stage, Window};
use crate::design::{Design, Range};
use crate::verilog::{layer_module, layer_verilog, lit, steps_wires, TOP};
use std::fmt::Write;

/// Bits of an unsigned counter holding `0..=n`.
fn ubits(n: usize) -> usize {
    (usize::BITS - n.leading_zeros()).max(1) as usize
}

/// The module name of a stage's window generator.
pub fn window_module(stage: &Stage) -> String {
    format!("mase_{}_win", stage.node())
}

/// The module name of a stage's computation: the convolution's matrix-vector unit (the layer
/// module of its `mvu`) or the max pool.
pub fn stage_module(stage: &Stage) -> String {
    format!("mase_{}", stage.node())
}

/// The module name of the collector that flattens the last stage's image.
pub const COLLECTOR: &str = "mase_flatten";

/// The Verilog of one stage: its window generator and its computation, one file.
pub fn stage_verilog(stage: &Stage, pipe: Option<crate::pipeline::Pipelining>) -> String {
    let mut o = window_verilog(stage);
    match stage {
        Stage::Conv(s) => o.push_str(&layer_verilog(&s.mvu, pipe)),
        Stage::MaxPool(_) => o.push_str(&pool_verilog(stage)),
    }
    o
}

/// The sliding-window generator of a stage. The image arrives one pixel per beat in raster
/// order; the steps of a convolution's `pre` act on each arriving code; the line buffer keeps the
/// last `KH + 1` rows (row `r` in slot `r mod (KH + 1)`, [`Window::buffer_rows`]). Once the last
/// row that output row `oy` reads has arrived, the generator presents that row's windows, one per
/// cycle while the output register is free, with the padding's code outside the image; all the
/// while it takes the pixels of the rows before [`Window::row_limit`] (the next row, for a stride
/// of 1), whose slots no window still to come reads, so arriving and presenting overlap. After
/// the last window it takes the image's remaining rows, and it starts over on the next image.
/// `in_ready` is a function of its own registers only.
fn window_verilog(stage: &Stage) -> String {
    let win: &Window = stage.window();
    let (c, h, w) = (win.channels, win.height, win.width);
    let [kh, kw] = win.kernel;
    let [oh, ow] = win.out_hw();
    let input = stage.input();
    let buffered = stage.buffered();
    let (iw, bw) = (input.width() as usize, buffered.width() as usize);
    let l = win.window_len();
    let slots = win.buffer_rows();
    let (rb, cb, ab, yb, xb) = (ubits(h), ubits(w), ubits(slots * w), ubits(oh), ubits(ow));
    let mut o = String::from("/* verilator lint_off WIDTH */\n");
    let _ = writeln!(
        o,
        "// Window generator of `{}`: {c}x{h}x{w} image, kernel {kh}x{kw}, stride {:?}, padding {:?}; {oh}x{ow} windows of {l} codes.",
        stage.node(),
        win.stride,
        win.padding
    );
    let _ = writeln!(o, "module {} (", window_module(stage));
    let _ = writeln!(o, "  input clk, input rst,");
    let _ = writeln!(o, "  input in_valid, output in_ready, input [{}:0] in_data,", c * iw - 1);
    let _ = writeln!(o, "  output reg out_valid, input out_ready, output reg [{}:0] out_data", l * bw - 1);
    let _ = writeln!(o, ");");
    let mut px = Vec::new();
    for ch in 0..c {
        let _ = writeln!(o, "  wire signed [{}:0] in_{ch} = in_data[{}:{}];", iw - 1, (ch + 1) * iw - 1, ch * iw);
        let pre: &[crate::design::Step] = match stage {
            Stage::Conv(s) => &s.pre,
            Stage::MaxPool(_) => &[],
        };
        let (x, _) = steps_wires(&mut o, &format!("in_{ch}"), input, pre, ch, &format!("x_{ch}"));
        px.push(format!("{x}[{}:0]", bw - 1));
    }
    px.reverse();
    let _ = writeln!(o, "  wire [{}:0] px = {{{}}};", c * bw - 1, px.join(", "));
    let _ = writeln!(o, "  reg [{}:0] lb [0:{}];", c * bw - 1, slots * w - 1);
    let _ = writeln!(o, "  reg [{}:0] rin;  // rows received", rb - 1);
    let _ = writeln!(o, "  reg [{}:0] cin;  // column of the next pixel", cb - 1);
    let _ = writeln!(o, "  reg [{}:0] base; // (rin mod {slots}) * {w}: the slot of the row arriving", ab - 1);
    let _ = writeln!(o, "  reg [{}:0] oy;", yb - 1);
    let _ = writeln!(o, "  reg [{}:0] ox;", xb - 1);
    let _ = writeln!(o, "  reg done;       // every window of the image presented");
    // The rows output row `oy` needs have arrived once `rin` reaches `need`.
    let _ = writeln!(o, "  reg [{}:0] need;", rb - 1);
    let _ = writeln!(o, "  always @* case (oy)");
    for y in 0..oh {
        let _ = writeln!(o, "    {yb}'d{y}: need = {rb}'d{};", win.last_row(y) + 1);
    }
    let _ = writeln!(o, "    default: need = {rb}'d{h};");
    let _ = writeln!(o, "  endcase");
    // Rows before `lim` may arrive while output row `oy` is current.
    let _ = writeln!(o, "  reg [{}:0] lim;", rb - 1);
    let _ = writeln!(o, "  always @* case (oy)");
    for y in 0..oh {
        let _ = writeln!(o, "    {yb}'d{y}: lim = {rb}'d{};", win.row_limit(y));
    }
    let _ = writeln!(o, "    default: lim = {rb}'d{h};");
    let _ = writeln!(o, "  endcase");
    // Per kernel row: the slot base of its input row for this `oy`, and whether it is inside.
    for ky in 0..kh {
        let _ = writeln!(o, "  reg [{}:0] rs_{ky}; reg rv_{ky};", ab - 1);
        let _ = writeln!(o, "  always @* case (oy)");
        for y in 0..oh {
            let (base, valid) = win.row(y, ky).map_or((0, 0), |r| ((r % slots) * w, 1));
            let _ = writeln!(o, "    {yb}'d{y}: begin rs_{ky} = {ab}'d{base}; rv_{ky} = 1'b{valid}; end");
        }
        let _ = writeln!(o, "    default: begin rs_{ky} = {ab}'d0; rv_{ky} = 1'b0; end");
        let _ = writeln!(o, "  endcase");
    }
    for kx in 0..kw {
        let _ = writeln!(o, "  reg [{}:0] cs_{kx}; reg cv_{kx};", ab - 1);
        let _ = writeln!(o, "  always @* case (ox)");
        for x in 0..ow {
            let (col, valid) = win.col(x, kx).map_or((0, 0), |cc| (cc, 1));
            let _ = writeln!(o, "    {xb}'d{x}: begin cs_{kx} = {ab}'d{col}; cv_{kx} = 1'b{valid}; end");
        }
        let _ = writeln!(o, "    default: begin cs_{kx} = {ab}'d0; cv_{kx} = 1'b0; end");
        let _ = writeln!(o, "  endcase");
    }
    let pad = lit(stage.pad_code(), bw as u32);
    let mut elems = Vec::new();
    for ky in 0..kh {
        for kx in 0..kw {
            let _ = writeln!(o, "  wire [{}:0] p_{ky}_{kx} = lb[rs_{ky} + cs_{kx}];", c * bw - 1);
            for ch in 0..c {
                let e = format!("e_{ky}_{kx}_{ch}");
                let _ = writeln!(
                    o,
                    "  wire [{}:0] {e} = (rv_{ky} && cv_{kx}) ? p_{ky}_{kx}[{}:{}] : {pad};",
                    bw - 1,
                    (ch + 1) * bw - 1,
                    ch * bw
                );
                elems.push(e);
            }
        }
    }
    elems.reverse();
    let _ = writeln!(o, "  wire emit = !done && (rin >= need);");
    let _ = writeln!(o, "  wire free = !out_valid || out_ready;");
    let _ = writeln!(o, "  assign in_ready = (rin != {rb}'d{h}) && (done || rin < lim);");
    let _ = writeln!(o, "  always @(posedge clk) begin");
    let _ = writeln!(o, "    if (rst) begin");
    let _ = writeln!(
        o,
        "      out_valid <= 1'b0; rin <= {rb}'d0; cin <= {cb}'d0; base <= {ab}'d0; oy <= {yb}'d0; ox <= {xb}'d0; done <= 1'b0;"
    );
    let _ = writeln!(o, "    end else begin");
    let _ = writeln!(o, "      if (free) out_valid <= emit;");
    let _ = writeln!(o, "      if (free && emit) begin");
    let _ = writeln!(o, "        out_data <= {{{}}};", elems.join(", "));
    let _ = writeln!(o, "        if (ox == {xb}'d{}) begin", ow - 1);
    let _ = writeln!(o, "          ox <= {xb}'d0;");
    let _ = writeln!(o, "          if (oy == {yb}'d{}) done <= 1'b1; else oy <= oy + {yb}'d1;", oh - 1);
    let _ = writeln!(o, "        end else ox <= ox + {xb}'d1;");
    let _ = writeln!(o, "      end");
    let _ = writeln!(o, "      if (in_valid && in_ready) begin");
    let _ = writeln!(o, "        lb[base + cin] <= px;");
    let _ = writeln!(o, "        if (cin == {cb}'d{}) begin", w - 1);
    let _ = writeln!(o, "          cin <= {cb}'d0;");
    let _ = writeln!(o, "          rin <= rin + {rb}'d1;");
    let _ = writeln!(o, "          base <= (base == {ab}'d{}) ? {ab}'d0 : base + {ab}'d{w};", (slots - 1) * w);
    let _ = writeln!(o, "        end else cin <= cin + {cb}'d1;");
    let _ = writeln!(o, "      end");
    // The image is over once every window is out and every row in: start the next one.
    let _ = writeln!(o, "      if (done && rin == {rb}'d{h}) begin");
    let _ = writeln!(o, "        rin <= {rb}'d0; base <= {ab}'d0; oy <= {yb}'d0; done <= 1'b0;");
    let _ = writeln!(o, "      end");
    let _ = writeln!(o, "    end");
    let _ = writeln!(o, "  end");
    let _ = writeln!(o, "endmodule");
    o
}

/// The max pool: its window generator, the largest code of each channel (signed comparisons),
/// the steps after it, and an output register.
fn pool_verilog(stage: &Stage) -> String {
    let Stage::MaxPool(p) = stage else { return String::new() };
    let win = &p.window;
    let c = win.channels;
    let n = win.kernel[0] * win.kernel[1];
    let bw = p.input.width() as usize;
    let out = stage.output();
    let ow = out.width() as usize;
    let mut o = String::new();
    let _ = writeln!(o, "// Max pool `{}`: the largest of {n} codes per channel, {c} channels.", p.node);
    let _ = writeln!(o, "module {} (", stage_module(stage));
    let _ = writeln!(o, "  input clk, input rst,");
    let _ = writeln!(o, "  input in_valid, output in_ready, input [{}:0] in_data,", c * bw - 1);
    let _ = writeln!(o, "  output reg out_valid, input out_ready, output reg [{}:0] out_data", c * ow - 1);
    let _ = writeln!(o, ");");
    let _ = writeln!(o, "  wire wv, wr;");
    let _ = writeln!(o, "  wire [{}:0] wd;", win.window_len() * bw - 1);
    let _ = writeln!(
        o,
        "  {} win (.clk(clk), .rst(rst), .in_valid(in_valid), .in_ready(in_ready), .in_data(in_data), .out_valid(wv), .out_ready(wr), .out_data(wd));",
        window_module(stage)
    );
    let mut ys = Vec::new();
    for ch in 0..c {
        for i in 0..n {
            let e = i * c + ch;
            let _ = writeln!(o, "  wire signed [{}:0] e_{ch}_{i} = wd[{}:{}];", bw - 1, (e + 1) * bw - 1, e * bw);
            if i == 0 {
                let _ = writeln!(o, "  wire signed [{}:0] m_{ch}_0 = e_{ch}_0;", bw - 1);
            } else {
                let _ = writeln!(
                    o,
                    "  wire signed [{}:0] m_{ch}_{i} = (e_{ch}_{i} > m_{ch}_{}) ? e_{ch}_{i} : m_{ch}_{};",
                    bw - 1,
                    i - 1,
                    i - 1
                );
            }
        }
        let (y, _) = steps_wires(&mut o, &format!("m_{ch}_{}", n - 1), p.input, &p.post, ch, &format!("y_{ch}"));
        ys.push(format!("{y}[{}:0]", ow - 1));
    }
    ys.reverse();
    let _ = writeln!(o, "  assign wr = !out_valid || out_ready;");
    let _ = writeln!(o, "  always @(posedge clk) begin");
    let _ = writeln!(o, "    if (rst) out_valid <= 1'b0;");
    let _ = writeln!(o, "    else if (wr) begin");
    let _ = writeln!(o, "      out_valid <= wv;");
    let _ = writeln!(o, "      if (wv) out_data <= {{{}}};", ys.join(", "));
    let _ = writeln!(o, "    end");
    let _ = writeln!(o, "  end");
    let _ = writeln!(o, "endmodule");
    o
}

/// The collector: the last stage's pixels, one per beat, shifted into one register per channel,
/// so that after the image's `P` beats element `c P + p` of its output is channel `c` of pixel
/// `p` (PyTorch's `flatten` of `[C, H, W]`). It holds the vector until it is read, then takes the
/// next image.
pub fn collector_verilog(channels: usize, pixels: usize, r: Range) -> String {
    let w = r.width() as usize;
    let pb = ubits(pixels);
    let mut o = String::from("/* verilator lint_off WIDTH */\n");
    let _ = writeln!(o, "// Flatten: {pixels} pixels of {channels} channels into one vector of {} codes.", channels * pixels);
    let _ = writeln!(o, "module {COLLECTOR} (");
    let _ = writeln!(o, "  input clk, input rst,");
    let _ = writeln!(o, "  input in_valid, output in_ready, input [{}:0] in_data,", channels * w - 1);
    let _ = writeln!(o, "  output out_valid, input out_ready, output [{}:0] out_data", channels * pixels * w - 1);
    let _ = writeln!(o, ");");
    let _ = writeln!(o, "  reg full;");
    let _ = writeln!(o, "  reg [{}:0] cnt;", pb - 1);
    for ch in 0..channels {
        let _ = writeln!(o, "  reg [{}:0] ch_{ch};", pixels * w - 1);
    }
    let _ = writeln!(o, "  assign in_ready = !full;");
    let _ = writeln!(o, "  assign out_valid = full;");
    let all: Vec<String> = (0..channels).rev().map(|ch| format!("ch_{ch}")).collect();
    let _ = writeln!(o, "  assign out_data = {{{}}};", all.join(", "));
    let _ = writeln!(o, "  always @(posedge clk) begin");
    let _ = writeln!(o, "    if (rst) begin full <= 1'b0; cnt <= {pb}'d0; end");
    let _ = writeln!(o, "    else begin");
    let _ = writeln!(o, "      if (full && out_ready) full <= 1'b0;");
    let _ = writeln!(o, "      if (in_valid && !full) begin");
    for ch in 0..channels {
        let shifted = if pixels > 1 {
            format!("{{in_data[{}:{}], ch_{ch}[{}:{w}]}}", (ch + 1) * w - 1, ch * w, pixels * w - 1)
        } else {
            format!("in_data[{}:{}]", (ch + 1) * w - 1, ch * w)
        };
        let _ = writeln!(o, "        ch_{ch} <= {shifted};");
    }
    let _ = writeln!(o, "        if (cnt == {pb}'d{}) begin cnt <= {pb}'d0; full <= 1'b1; end else cnt <= cnt + {pb}'d1;", pixels - 1);
    let _ = writeln!(o, "      end");
    let _ = writeln!(o, "    end");
    let _ = writeln!(o, "  end");
    let _ = writeln!(o, "endmodule");
    o
}

/// The top module of a design with stages: the pixel stream through each stage (window
/// generator, then matrix-vector unit or max pool), the collector, then the layers.
pub fn top_verilog(d: &Design) -> String {
    let mut o = String::new();
    let (iw, ow) = (d.input_range().width() as usize, d.output_range().width() as usize);
    let _ = writeln!(o, "// Model `{}`: {} streaming stages and {} layers.", d.model, d.stages.len(), d.layers.len());
    let _ = writeln!(o, "module {TOP} (");
    let _ = writeln!(o, "  input clk, input rst,");
    let _ = writeln!(o, "  input in_valid, output in_ready, input [{}:0] in_data,", d.beat_len() * iw - 1);
    let _ = writeln!(o, "  output out_valid, input out_ready, output [{}:0] out_data", d.output_len() * ow - 1);
    let _ = writeln!(o, ");");
    // Every module in order, with the width of its output and whether it is a layer (a
    // convolution's matrix-vector unit or a layer after the collector).
    let mut units: Vec<(String, usize, bool)> = Vec::new();
    for s in &d.stages {
        if let Stage::Conv(c) = s {
            units.push((window_module(s), c.window.window_len() * s.buffered().width() as usize, false));
            units.push((layer_module(&c.mvu), c.mvu.out_features * s.output().width() as usize, true));
        } else {
            units.push((stage_module(s), s.out_channels() * s.output().width() as usize, false));
        }
    }
    if let Some(last) = d.stages.last() {
        units.push((COLLECTOR.to_string(), last.out_len() * last.output().width() as usize, false));
    }
    for l in &d.layers {
        units.push((layer_module(l), l.out_features * l.output().width() as usize, true));
    }
    // The units of the layers after the collector are the last `d.layers.len()`.
    let first_layer = units.len() - d.layers.len();
    let outputs: Vec<String> = units
        .iter()
        .enumerate()
        .map(|(i, (_, w, _))| crate::verilog::unit_output(&mut o, i, *w, i >= first_layer && crate::slice::feeds_slice(d, i - first_layer)))
        .collect();
    for (i, (m, _, is_layer)) in units.iter().enumerate() {
        let (rst, feed) = crate::verilog::unit_feed(&mut o, d, i, d.beat_len() * iw, if i > 0 { units[i - 1].1 } else { 0 });
        let ports = if i >= first_layer {
            crate::verilog::layer_ports(&mut o, d, i - first_layer, &feed, &rst)
        } else {
            feed.ports(d.clock_mhz.is_some() && *is_layer)
        };
        let _ = writeln!(o, "  {m} u{i} (.clk(clk), .rst({rst}), {ports}, {});", outputs[i]);
    }
    let n = units.len() - 1;
    let _ = writeln!(o, "  assign out_valid = v{n};");
    let _ = writeln!(o, "  assign r{n} = out_ready;");
    let _ = writeln!(o, "  assign out_data = d{n};");
    let _ = writeln!(o, "endmodule");
    o
}
