//! The reset of a pipelined design's modules (doc/hardware.md, "Pipelining to a clock"): each
//! module of the top reads a register of its own holding `rst` of the cycle before, kept apart
//! from the others, so that no net carries the reset from one register to every layer across
//! the part (on jsc-three-layer fitted to the 85F, `rst` to the first layer's FIFO pointer was
//! the critical path, 11.32 ns of routing, 80.1 MHz).
//!
//! The modules leave their reset a cycle after the design's `rst` falls. In that cycle the
//! first module may say it is ready (a layer's stage enable is high in reset), so the top's
//! `in_ready` is its ready gated by its reset copy: no sample is taken by a module still in
//! reset. Nothing else of the handshake or the latency changes.

use crate::design::Design;
use std::fmt::Write;

/// Cycles after `rst` falls in which the modules of a design with reset copies are still in
/// reset (and the top's `in_ready` low).
pub const RESET_LATENCY: u64 = 1;

/// Whether each module of `d`'s top reads a reset register of its own: every pipelined design.
pub fn has_reset_copies(d: &Design) -> bool {
    d.clock_mhz.is_some()
}

/// The reset module `u{i}` of a top reads: where `d` has reset copies, the register `rst_u{i}`
/// declared and loaded here, else `rst`.
pub(crate) fn write_reset(o: &mut String, d: &Design, i: usize) -> String {
    if !has_reset_copies(d) {
        return "rst".into();
    }
    let name = format!("rst_u{i}");
    let _ = writeln!(o, "  reg {name};");
    let _ = writeln!(o, "  (* keep *) always @(posedge clk) {name} <= rst;");
    name
}

/// The top's input stream into its first module, whose reset is `rst` ([`write_reset`]):
/// with reset copies, the module's ready is the wire `in_ready_u0`, and the top's `in_ready`
/// that ready while the module is out of reset.
pub(crate) fn input_ready(o: &mut String, d: &Design, rst: &str) -> String {
    if !has_reset_copies(d) {
        return "in_ready".into();
    }
    let _ = writeln!(o, "  wire in_ready_u0;");
    let _ = writeln!(o, "  assign in_ready = in_ready_u0 && !{rst};");
    "in_ready_u0".into()
}
