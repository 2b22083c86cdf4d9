//! Register slices between the layers of a pipelined design (doc/hardware.md, "Pipelining to
//! a clock"): one register on the data and the valid bit of the stream from a layer's output
//! FIFO to the next layer, so that the route between two layers, which can cross much of the
//! part, has a cycle of its own instead of sharing one with the FIFO's read multiplexer and the
//! next layer's first stage.
//!
//! The slice has no ready and holds nothing: a word the producer's FIFO gives up in one cycle
//! is in the slice the next, and the consumer takes it then. So the producer gives up a word
//! only when the consumer will take one in the next cycle: the consumer says so a cycle ahead,
//! twice: `in_ready_ahead_idle` is the value its `in_ready` has in the next cycle if no word
//! is then offered, `in_ready_ahead_valid` if one is (both decided by the same registers and
//! logic as `in_ready`, and registers themselves where the consumer's enable is decided two
//! cycles ahead). The producer knows which holds, as it knows whether it gave up a word in the
//! cycle before (`out_ready`, `out_ready_popped`; `crate::pipeline::output_fifo`), and so does
//! the slice. The slice's data register has no enable and no reset (a word counts only with
//! its valid bit), so the placer is free to put it anywhere between the two layers.

use crate::design::Design;
use std::fmt::Write;

/// Cycles a register slice adds to a sample's way through the design.
pub const SLICE_LATENCY: usize = 1;

/// Whether layer `index` of `d.layers` begins with a register slice: every layer of a
/// pipelined design that another layer feeds (not the first, which the design's input or a
/// convolutional front end feeds).
pub fn has_slice(d: &Design, index: usize) -> bool {
    d.clock_mhz.is_some() && index > 0 && index < d.layers.len()
}

/// Whether layer `index` of `d.layers` feeds a register slice: the layer after it has one.
pub fn feeds_slice(d: &Design, index: usize) -> bool {
    has_slice(d, index + 1)
}

/// Flip-flops of the slice before a layer of `in_bits` input bits: the data and the valid bit.
pub fn slice_bits(in_bits: usize) -> usize {
    in_bits + 1
}

/// The slice `s{i}` in a top module between the producer's stream (`valid`, `data`, `bits`
/// wide) and the consumer's readies ahead, the wires `(idle, valid)`, its valid bit cleared by
/// the consumer's reset `rst`: declares and registers `s{i}_v` and `s{i}_d`, and returns their
/// names.
pub fn write_slice(o: &mut String, i: usize, (valid, data, bits): (&str, &str, usize), ahead: (&str, &str), rst: &str) -> (String, String) {
    let (v, d) = (format!("s{i}_v"), format!("s{i}_d"));
    let _ = writeln!(o, "  reg {v};");
    let _ = writeln!(o, "  reg [{}:0] {d};", bits - 1);
    let _ = writeln!(o, "  always @(posedge clk) begin {v} <= !{rst} && {valid} && ({v} ? {} : {}); {d} <= {data}; end", ahead.1, ahead.0);
    (v, d)
}
