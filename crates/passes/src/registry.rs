//! The table of passes: name, one-line doc, argument type and function. `ch transform` runs the
//! passes a TOML names through [`run_pass`]; adding a pass is one file and one line here
//! (doc/how-to-add-a-pass.md).

use crate::report::parse_args;
use crate::report_schema::{self as schema, ReportKey};
use crate::{architecture, cost, fold_batch_norm, interface, metadata, quantize, reports, stats};
use crate::{PassContext, PassError, PassReport, Result};
use mase_ir::Graph;
use serde_json::Value;

/// A pass as the registry sees it: arguments arrive as JSON and are parsed into the pass's type.
pub type PassFn = fn(&mut Graph, &mut PassContext, &Value) -> Result<PassReport>;

/// One entry of the registry.
#[derive(Clone, Copy)]
pub struct PassInfo {
    pub name: &'static str,
    /// What the pass does, in one line.
    pub doc: &'static str,
    /// The Rust type of its arguments (whose fields are the TOML keys).
    pub args: &'static str,
    /// The keys of its JSON report, with units and meanings (`crate::report_schema`).
    pub report: &'static [ReportKey],
    pub run: PassFn,
}

impl std::fmt::Debug for PassInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassInfo").field("name", &self.name).field("args", &self.args).field("report", &self.report).finish()
    }
}

/// A registry line: parses the arguments into `$args` (rejecting unknown keys), then calls `$f`,
/// whose report has the keys `$report`.
macro_rules! pass {
    ($name:literal, $doc:literal, $args:ty, $f:path, $report:expr) => {
        PassInfo {
            name: $name,
            doc: $doc,
            args: stringify!($args),
            report: $report,
            run: |g, cx, v| {
                let a: $args = parse_args($name, v)?;
                $f(g, cx, &a)
            },
        }
    };
}

/// Every pass, in the order `ch transform --list-passes` prints them.
pub static PASSES: &[PassInfo] = &[
    pass!(
        "init_metadata",
        "empty metadata on every node and on the graph",
        metadata::init::InitArgs,
        metadata::init::init_metadata,
        schema::INIT_METADATA
    ),
    pass!(
        "add_common_metadata",
        "mase_type, mase_op, shapes, dtypes and number formats of every node",
        metadata::common::CommonArgs,
        metadata::common::add_common_metadata,
        schema::ADD_COMMON_METADATA
    ),
    pass!(
        "add_software_metadata",
        "empty statistics slots for every tensor a node reads or writes",
        metadata::software::SoftwareArgs,
        metadata::software::add_software_metadata,
        schema::ADD_SOFTWARE_METADATA
    ),
    pass!(
        "add_hardware_metadata",
        "toolchain, interface, parallelism and Verilog parameters (MASE's defaults)",
        metadata::hardware::HardwareArgs,
        metadata::hardware::add_hardware_metadata,
        schema::ADD_HARDWARE_METADATA
    ),
    pass!(
        "report_graph",
        "the graph listing, node counts per fx op and the layer types",
        reports::graph::GraphArgs,
        reports::graph::report_graph,
        schema::REPORT_GRAPH
    ),
    pass!(
        "report_node_type",
        "name, fx op, mase type, mase op and value type of every node",
        reports::node_type::NodeTypeArgs,
        reports::node_type::report_node_type,
        schema::REPORT_NODE_TYPE
    ),
    pass!(
        "report_node_shape",
        "input and output shapes of every node",
        reports::node_shape::NodeShapeArgs,
        reports::node_shape::report_node_shape,
        schema::REPORT_NODE_SHAPE
    ),
    pass!(
        "report_node_meta_param",
        "grid table of the common, hardware and software metadata",
        reports::meta_param::MetaParamArgs,
        reports::meta_param::report_node_meta_param,
        schema::REPORT_NODE_META_PARAM
    ),
    pass!(
        "profile_statistics",
        "weight and activation statistics into software metadata",
        stats::profile::ProfileArgs,
        stats::profile::profile_statistics,
        schema::PROFILE_STATISTICS
    ),
    pass!("flops", "FLOPs, parameters and memory traffic per node and in total", cost::CostArgs, cost::flops, schema::FLOPS),
    pass!("bitops", "BitOPs, traffic and model size in bits with the quantized widths", cost::CostArgs, cost::bitops, schema::BITOPS),
    pass!(
        "latency",
        "measured forward time per node and of the model on this machine",
        cost::latency::LatencyArgs,
        cost::latency::latency,
        schema::LATENCY
    ),
    pass!(
        "quantize",
        "set number formats on nodes chosen by type, name or regex",
        quantize::QuantizeArgs,
        quantize::quantize,
        schema::QUANTIZE
    ),
    pass!(
        "fold_batch_norm",
        "batch norms folded into the adjacent linear/conv where exact, the others as per-channel affines",
        fold_batch_norm::FoldArgs,
        fold_batch_norm::fold_batch_norm,
        schema::FOLD_BATCH_NORM
    ),
    pass!(
        "channel_multiplier",
        "widen linear/conv layers by a channel multiplier; consumers, batch norms and views follow",
        architecture::ChannelArgs,
        architecture::channel_multiplier,
        schema::CHANNEL_MULTIPLIER
    ),
    pass!(
        "summarize_quantization",
        "compare table and histogram of what quantize changed",
        quantize::summary::SummaryArgs,
        quantize::summary::summarize_quantization,
        schema::SUMMARIZE_QUANTIZATION
    ),
    pass!(
        "verify_quantization",
        "quantized weights on their grid, float vs quantized values and outputs",
        quantize::verify::VerifyArgs,
        quantize::verify::verify_quantization,
        schema::VERIFY_QUANTIZATION
    ),
    pass!(
        "save_node_meta_param",
        "write every node's metadata to node_meta_param.toml",
        interface::SaveMetaArgs,
        interface::save_node_meta_param,
        schema::SAVE_NODE_META_PARAM
    ),
    pass!(
        "load_node_meta_param",
        "read node metadata back from node_meta_param.toml",
        interface::LoadMetaArgs,
        interface::load_node_meta_param,
        schema::LOAD_NODE_META_PARAM
    ),
];

/// The registry entry called `name`.
pub fn find_pass(name: &str) -> Option<&'static PassInfo> {
    PASSES.iter().find(|p| p.name == name)
}

/// Runs the pass called `name` with JSON arguments (`null` for none).
pub fn run_pass(name: &str, graph: &mut Graph, ctx: &mut PassContext, args: &Value) -> Result<PassReport> {
    let p = find_pass(name).ok_or_else(|| PassError::UnknownPass {
        name: name.to_string(),
        known: PASSES.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
    })?;
    (p.run)(graph, ctx, args)
}
