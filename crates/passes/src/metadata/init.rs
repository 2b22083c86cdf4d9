//! `init_metadata` (doc/mase-semantics.md#init_metadata): fresh, empty metadata on every node and on the graph.

use crate::{PassContext, PassReport, Result};
use mase_ir::{Graph, GraphMeta, NodeMeta};
use serde::Deserialize;
use serde_json::json;

/// Arguments of `init_metadata`: none.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitArgs {}

/// The pass. Quantization (`node.quant`) is not metadata and is kept.
pub fn init_metadata(graph: &mut Graph, _ctx: &mut PassContext, _args: &InitArgs) -> Result<PassReport> {
    for n in graph.nodes_mut() {
        n.meta = NodeMeta::default();
    }
    graph.meta = GraphMeta::default();
    Ok(PassReport::new("init_metadata", json!({"nodes": graph.len()})))
}
