//! What each pass's JSON report holds: every key with its unit and meaning. The registry
//! ([`crate::PASSES`]) carries one of these lists per pass, so `ch transform --list-passes
//! --json`, the table in `doc/pass-reports.md` and the test that checks the keys against real
//! reports all come from here.
//!
//! A key is a path into the report: `total.model_size_bits` is a key of the object `total`;
//! `nodes[].bitops` a key of every element of the array `nodes`; `<node>` stands for a key that
//! is a node's name and `<entry>`, `<stat>`, `<fx_op>` for keys named by the data. Counts per
//! node or per batch are for the batch size the report gives.

use serde::Serialize;

/// One key of a pass report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ReportKey {
    /// Path of the key in the report (see the module documentation).
    pub key: &'static str,
    /// Unit of its value, or what kind of value it is (`count`, `bits`, `us`, `name`, `shape`).
    pub unit: &'static str,
    pub meaning: &'static str,
}

const fn k(key: &'static str, unit: &'static str, meaning: &'static str) -> ReportKey {
    ReportKey { key, unit, meaning }
}

pub(crate) const INIT_METADATA: &[ReportKey] = &[k("nodes", "count", "nodes in the graph")];

pub(crate) const ADD_COMMON_METADATA: &[ReportKey] = &[
    k("input_shape", "shape", "shape of the dummy batch the shapes were inferred with (batch first)"),
    k("nodes", "count", "nodes in the graph"),
    k("nodes_in", "names", "the nodes that read the graph's input"),
    k("nodes_out", "names", "the nodes that feed the graph's output"),
];

pub(crate) const ADD_SOFTWARE_METADATA: &[ReportKey] =
    &[k("entries", "count", "statistics slots created (one per tensor a node reads or writes)")];

pub(crate) const ADD_HARDWARE_METADATA: &[ReportKey] = &[
    k("hardware_nodes", "count", "nodes that get a hardware component (implicit nodes excluded)"),
    k("verilog_sources", "paths", "Verilog files the components depend on (MASE's names)"),
];

pub(crate) const REPORT_GRAPH: &[ReportKey] = &[
    k("counts", "object", "nodes per fx op"),
    k("counts.<fx_op>", "count", "nodes of this fx op (placeholder, get_attr, call_function, call_method, call_module, output)"),
    k("layer_types", "text", "PyTorch's repr of every call_module node, in graph order"),
    k("graph", "text", "the graph listing, as torch.fx prints it"),
];

/// The rows of the type table (`report_node_type`), also the first keys of `report_node_meta_param`.
pub(crate) const REPORT_NODE_TYPE: &[ReportKey] = &[
    k("nodes", "array", "one row per node, in graph order"),
    k("nodes[].name", "name", "node name"),
    k("nodes[].fx_op", "name", "fx op (placeholder, call_module, ...)"),
    k("nodes[].mase_type", "name", "MASE's type (module_related_func, builtin_func, ...)"),
    k("nodes[].mase_op", "name", "MASE's op (linear, relu, ...)"),
    k("nodes[].value_type", "name", "number type of the first data input (float, integer, ...; NA without one)"),
];

pub(crate) const REPORT_NODE_SHAPE: &[ReportKey] = &[
    k("<node>", "object", "one entry per node, keyed by its name"),
    k("<node>.in", "object", "shape of each data input (`data_in_0`, ...)"),
    k("<node>.out", "object", "shape of each result (`data_out_0`, ...)"),
];

pub(crate) const REPORT_NODE_META_PARAM: &[ReportKey] = &[
    k("nodes", "array", "one row per node, in graph order"),
    k("nodes[].name", "name", "node name"),
    k("nodes[].fx_op", "name", "fx op"),
    k("nodes[].mase_type", "name", "MASE's type"),
    k("nodes[].mase_op", "name", "MASE's op"),
    k("nodes[].common", "object", "the node's common metadata (with `which` = all or common)"),
    k("nodes[].hardware", "object", "the node's hardware metadata (with `which` = all or hardware)"),
    k("nodes[].software", "object", "the node's software metadata (with `which` = all or software)"),
];

pub(crate) const PROFILE_STATISTICS: &[ReportKey] = &[
    k("samples", "count", "input samples the activation statistics saw"),
    k("split", "name", "the data split they came from"),
    k("nodes", "object", "per profiled node"),
    k("nodes.<node>.<entry>.<stat>", "object", "one statistic of one tensor (`weight`, `data_in_0`): its values and `count`"),
];

pub(crate) const FLOPS: &[ReportKey] = &[
    k("batch_size", "samples", "the batch the per-batch counts are for"),
    k("nodes", "array", "one row per node that computes, in graph order"),
    k("nodes[].name", "name", "node name"),
    k("nodes[].mase_op", "name", "MASE's op"),
    k("nodes[].flops", "FLOPs", "forward floating-point operations for the batch (linear, conv and matmul count one per multiply-add; ReLU one per value; batch norm four)"),
    k("nodes[].backward_flops", "FLOPs", "backward floating-point operations for the batch (twice the forward for linear, conv and matmul)"),
    k("nodes[].params", "count", "trainable parameters of the node"),
    k("nodes[].buffers", "count", "non-trainable tensors' values (batch-norm running statistics)"),
    k("nodes[].input_elements", "elements", "values read for the batch"),
    k("nodes[].output_elements", "elements", "values written for the batch"),
    k("total", "object", "sums over the nodes"),
    k("total.flops", "FLOPs", "forward FLOPs of the model for the batch"),
    k("total.backward_flops", "FLOPs", "backward FLOPs of the model for the batch"),
    k("total.params", "count", "trainable parameters of the model"),
    k("total.buffers", "count", "buffer values of the model"),
    k("total.input_elements", "elements", "values read by all nodes for the batch"),
    k("total.output_elements", "elements", "values written by all nodes for the batch"),
    k("total.memory_elements", "elements", "input + output elements + params + buffers"),
];

pub(crate) const BITOPS: &[ReportKey] = &[
    k("batch_size", "samples", "the batch the per-batch counts are for"),
    k("nodes", "array", "one row per node that computes, in graph order"),
    k("nodes[].name", "name", "node name"),
    k("nodes[].mase_op", "name", "MASE's op"),
    k("nodes[].data_in_width", "bits", "width of the node's data input (32 in float)"),
    k("nodes[].weight_width", "bits", "width of the node's weight (null without a weight)"),
    k("nodes[].bitops", "BitOPs", "bit operations for the batch: each multiply-add costs input width x weight width"),
    k("nodes[].input_bits", "bits", "bits read for the batch"),
    k("nodes[].output_bits", "bits", "bits written for the batch"),
    k("nodes[].param_bits", "bits", "bits of the node's parameters and buffers as stored (quantized widths where quantized, else 32)"),
    k("total", "object", "sums over the nodes"),
    k("total.bitops", "BitOPs", "bit operations of the model for the batch"),
    k("total.input_bits", "bits", "bits read by all nodes for the batch"),
    k("total.output_bits", "bits", "bits written by all nodes for the batch"),
    k("total.model_size_bits", "bits", "model size: the sum of the nodes' param_bits (parameters and buffers as stored)"),
    k("total.w_avg_bit", "bits", "average weight width over the weights of layers with weights (null without any)"),
    k("total.data_avg_bit", "bits", "average input width over those layers' inputs (null without any)"),
];

pub(crate) const LATENCY: &[ReportKey] = &[
    k("batch_size", "samples", "the batch timed"),
    k("repeats", "count", "timed runs; each figure is their median"),
    k("nodes", "array", "one row per node, in graph order"),
    k("nodes[].name", "name", "node name"),
    k("nodes[].mase_op", "name", "MASE's op"),
    k("nodes[].latency_us", "us", "the node's forward time alone on this machine (microseconds)"),
    k("sum_of_nodes_us", "us", "sum of the nodes' times"),
    k("model_us", "us", "forward time of the whole model"),
];

pub(crate) const QUANTIZE: &[ReportKey] = &[
    k("by", "name", "how nodes were selected: type, name or regex_name"),
    k("quantized", "count", "nodes that got a number format"),
    k("nodes", "array", "one row per quantizable node, in graph order"),
    k("nodes[].node", "name", "node name"),
    k("nodes[].mase_op", "name", "MASE's op"),
    k("nodes[].selected_by", "name", "the config key that selected the node, or `default`"),
    k("nodes[].config", "object", "the config as written"),
    k("nodes[].quant", "object", "the resulting formats of data_in, weight, bias and data_out (null: left in float)"),
];

pub(crate) const FOLD_BATCH_NORM: &[ReportKey] = &[
    k("folded", "count", "batch norms folded into a linear or convolution and removed"),
    k("affine", "count", "batch norms kept as per-channel affines (running mean 0, variance 1, eps 0)"),
    k("changes", "array", "every batch norm, in graph order of processing"),
    k("changes[].node", "name", "the batch norm's node name"),
    k("changes[].action", "name", "after (folded into the layer before it), before (into the linear after it) or affine"),
    k("changes[].into", "name", "the layer it was folded into (null for affine)"),
];

pub(crate) const CHANNEL_MULTIPLIER: &[ReportKey] = &[
    k("changed", "array", "every node whose op changed, in graph order"),
    k("changed[].node", "name", "node name"),
    k("changed[].mase_op", "name", "MASE's op"),
    k("changed[].mode", "name", "output_only, both or input_only (null: follows a widened producer)"),
    k("changed[].channel_multiplier", "factor", "the multiplier its config gave (null if none)"),
    k("changed[].before", "text", "PyTorch's repr of the module before"),
    k("changed[].after", "text", "PyTorch's repr of the module after"),
    k("trainable_params_before", "count", "trainable parameters before"),
    k("trainable_params_after", "count", "trainable parameters after"),
    k("keep_weights", "bool", "whether old weights were copied into the new tensors"),
    k("input_shape", "shape", "one sample's shape used to follow the widths"),
];

pub(crate) const SUMMARIZE_QUANTIZATION: &[ReportKey] = &[
    k("table", "array", "one row per node: the compare table"),
    k("table[].ori_name", "name", "node name before"),
    k("table[].new_name", "name", "node name after"),
    k("table[].mase_type", "name", "MASE's type"),
    k("table[].mase_op", "name", "MASE's op"),
    k("table[].original_type", "name", "PyTorch type before (Linear)"),
    k("table[].quantized_type", "name", "PyTorch type after (LinearInteger)"),
    k("table[].changed", "bool", "whether quantize changed the node"),
    k("histogram", "array", "one row per (type, op)"),
    k("histogram[].original_type", "name", "PyTorch type"),
    k("histogram[].op", "name", "MASE's op"),
    k("histogram[].total", "count", "nodes of this type"),
    k("histogram[].changed", "count", "of them quantized"),
    k("histogram[].unchanged", "count", "of them left as they were"),
    k("quantizable_nodes", "count", "nodes whose op quantize can change"),
    k("compare_table", "text", "the compare table as MASE prints it (org-mode)"),
];

pub(crate) const VERIFY_QUANTIZATION: &[ReportKey] = &[
    k("off_grid", "count", "quantized weight and bias values that are off their format's grid (0 when correct)"),
    k("grid", "array", "one row per quantized weight or bias"),
    k("grid[].node", "name", "node name"),
    k("grid[].tensor", "name", "weight or bias"),
    k("grid[].format", "text", "the number format"),
    k("grid[].checked", "bool", "whether the tensor was checked"),
    k("grid[].values", "count", "values in the tensor"),
    k("grid[].off_grid", "count", "of them off the grid"),
    k("grid[].levels", "count", "distinct quantized values"),
    k("grid[].max_abs_error", "value", "largest |float - quantized|"),
    k("values", "object", "the first float and quantized weights of the nodes shown"),
    k("values.<node>", "object", "`float`, `quantized` (lists of values) and `format`"),
    k("outputs", "object", "float against quantized model outputs (null with num_samples = 0)"),
    k("outputs.samples", "count", "samples compared"),
    k("outputs.max_abs_diff", "value", "largest |float - quantized| output"),
    k("outputs.mean_abs_diff", "value", "mean |float - quantized| output"),
    k("outputs.argmax_agreement", "ratio", "fraction of samples whose predicted class agrees (0 to 1)"),
    k("outputs.accuracy_quantized", "ratio", "accuracy of the quantized model (null without labels)"),
    k("outputs.accuracy_float", "ratio", "accuracy of the float model (null without labels)"),
];

pub(crate) const SAVE_NODE_META_PARAM: &[ReportKey] =
    &[k("path", "path", "the node_meta_param.toml written"), k("nodes", "count", "nodes whose metadata was written")];

pub(crate) const LOAD_NODE_META_PARAM: &[ReportKey] =
    &[k("path", "path", "the node_meta_param.toml read"), k("nodes", "count", "nodes whose metadata was loaded")];

/// The report keys as a Markdown table (`doc/pass-reports.md` holds this text for every pass).
pub fn markdown_table(keys: &[ReportKey]) -> String {
    let mut s = String::from("| key | unit | meaning |\n|---|---|---|\n");
    for r in keys {
        s.push_str(&format!("| `{}` | {} | {} |\n", r.key, r.unit, r.meaning));
    }
    s
}

/// `doc/pass-reports.md`: one section per pass of the registry.
pub fn markdown_doc() -> String {
    let mut s = String::from(
        "# Pass reports\n\n\
         Every pass returns a JSON report: `ch transform` writes it to \
         `transform/reports/NN_<table>.json` (under `\"json\"`) and `--json` prints it under \
         `passes[].report`; `ch analyze` writes `analyze/<pass>.json` and prints it under \
         `reports.<report>`. This file is generated from the pass registry \
         (`crates/passes/src/report_schema.rs`), as is `ch transform --list-passes --json`; a test \
         keeps the three in step.\n\n\
         A key is a path: `total.model_size_bits` is a key of the object `total`; `nodes[].bitops` a \
         key of every element of the array `nodes`; `<node>` is a node's name and `<entry>`, \
         `<stat>`, `<fx_op>` keys named by the data. Counts per node are for the report's \
         `batch_size` (1 unless the pass is given one).\n",
    );
    for p in crate::PASSES {
        s.push_str(&format!("\n## `{}`\n\n{}.\n\n{}", p.name, p.doc, markdown_table(p.report)));
    }
    s
}
