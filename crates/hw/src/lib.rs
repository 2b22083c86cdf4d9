//! Hardware of mase-rs: a quantized network as a streaming integer pipeline in Verilog, simulated
//! with Verilator against the integer executor, which is the golden model (doc/hardware.md).
//!
//! [`lower`] turns a quantized graph into a [`Design`] (layers, constants, ranges, widths),
//! [`emit`] writes its folder (RTL, testbench, build script, manifest), and [`simulate`] builds
//! and runs it and compares every output code with [`simulate::golden`]. [`cost::estimate`] gives a
//! design's LUTs, flip-flops, DSPs, latency and initiation interval without synthesis, and
//! [`fit::fit`] folds a design until it fits a part by that estimate.

pub mod bipolar;
pub mod calibration;
pub mod conv;
pub mod cost;
pub mod design;
mod design_check;
pub mod dsp;
pub mod ecp5;
pub mod emit;
mod error;
pub mod fit;
pub mod integrity;
pub mod lower;
pub mod pipeline;
pub mod reset;
pub mod shift_add;
pub mod simulate;
pub mod slice;
pub mod synth;
pub mod testbench;
pub mod verilog;

pub use design::{Design, Layer, Range, Step};
pub use design_check::check_design;
pub use dsp::Multipliers;
pub use emit::{emit, manifest, parse_design, read_design};
pub use error::{HwError, Result};
pub use lower::{lower, metadata_reuse, LowerOptions, REUSE_FACTOR};
pub use shift_add::Products;
