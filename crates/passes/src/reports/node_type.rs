//! `report_node_type`: name, fx op, mase type, mase op and input number type of every node.

use super::{require_common, save_text};
use crate::table::{Table, TableFormat};
use crate::{PassContext, PassReport, Result};
use mase_ir::{ArgMeta, Graph};
use serde::Deserialize;
use serde_json::json;

/// Arguments of `report_node_type`: none.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeTypeArgs {}

/// The pass. Needs `add_common_metadata`.
pub fn report_node_type(graph: &mut Graph, ctx: &mut PassContext, _args: &NodeTypeArgs) -> Result<PassReport> {
    const PASS: &str = "report_node_type";
    require_common(graph, PASS)?;
    let mut t = Table::new(["Node name", "Fx Node op", "Mase type", "Mase op", "Value type"]);
    let mut rows = Vec::new();
    for n in graph.nodes() {
        let c = &n.meta.common;
        let value_type = match c.args.get("data_in_0") {
            Some(ArgMeta::Tensor(m)) => m.kind.clone(),
            _ => "NA".to_string(),
        };
        let row = [
            n.name.clone(),
            n.kind.as_str().to_string(),
            c.mase_type.clone().unwrap_or_default(),
            c.mase_op.clone().unwrap_or_default(),
            value_type,
        ];
        rows.push(json!({"name": row[0], "fx_op": row[1], "mase_type": row[2], "mase_op": row[3], "value_type": row[4]}));
        t.push(row);
    }
    let text = format!("Inspecting graph [add_common_node_type_analysis_pass]\n{}", t.render(TableFormat::Simple));
    let files = save_text(ctx, PASS, None, &text)?;
    let mut r = PassReport::new(PASS, json!({"nodes": rows})).with_text(text);
    r.files = files;
    Ok(r)
}
