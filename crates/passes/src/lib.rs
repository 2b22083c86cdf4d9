//! Analysis and transform passes of mase-rs (MASE's behaviour: doc/mase-semantics.md, sections Analysis passes and Quantize).
//!
//! A pass is a function `fn(&mut Graph, &mut PassContext, &Args) -> Result<PassReport>`: it
//! changes the graph (metadata, `node.quant`) in place, reads parameters and input samples from
//! the [`PassContext`], and returns a [`PassReport`] (JSON for machines, text for people). Every
//! pass is one line of the registry ([`PASSES`]); [`run_pass`] runs one by name with JSON
//! arguments, which it parses into the pass's typed arguments, rejecting unknown keys.
//!
//! ```
//! use mase_ir::{Graph, NormSpec, Op, Rng};
//! use mase_passes::{run_pass, PassContext, InputSource};
//! use serde_json::json;
//!
//! let mut g = Graph::new();
//! let x = g.placeholder("x");
//! let bn = g.call_module("seq_blocks.0", Op::BatchNorm1d(NormSpec::new(16)), &[x]);
//! let fc = g.call_module("seq_blocks.1", Op::Linear { in_features: 16, out_features: 5, bias: true }, &[bn]);
//! g.output(fc);
//! let params = mase_runtime::init_params(&g, &mut Rng::new(0));
//! let mut ctx = PassContext::new(params);
//! ctx.inputs = InputSource::Random { sample_shape: vec![16] };
//! run_pass("add_common_metadata", &mut g, &mut ctx, &json!(null)).unwrap();
//! let q = json!({"by": "type", "linear": {"config": {"name": "integer",
//!     "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8, "weight_frac_width": 4,
//!     "bias_width": 8, "bias_frac_width": 4}}});
//! let r = run_pass("quantize", &mut g, &mut ctx, &q).unwrap();
//! assert_eq!(r.json["quantized"], 1);
//! ```

pub mod architecture;
mod context;
pub mod cost;
mod error;
pub mod fold_batch_norm;
pub mod interface;
mod keyed;
pub mod metadata;
pub mod pyfmt;
pub mod quantize;
mod registry;
mod report;
pub mod report_schema;
pub mod reports;
pub mod select;
pub mod stats;
pub mod table;

pub use context::{Batch, InputSource, PassContext, Split};
pub use error::{PassError, Result};
pub use registry::{find_pass, run_pass, PassFn, PassInfo, PASSES};
pub use report::{parse_args, PassReport};
pub use report_schema::ReportKey;
