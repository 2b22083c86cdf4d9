//! `report_node_meta_param`: a grid table of every node's metadata (common, hardware, software
//! or all), each cell pretty-printed as Python's `pprint` would, with sorted keys.

use super::save_text;
use crate::pyfmt::{pformat, Py};
use crate::table::{Table, TableFormat};
use crate::{PassContext, PassError, PassReport, Result};
use mase_ir::Graph;
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::PathBuf;

/// Arguments of `report_node_meta_param`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetaParamArgs {
    /// Any of `all`, `common`, `hardware`, `software` (default `["all"]`).
    pub which: Option<Vec<String>>,
    /// Where to write the table (default: `<out_dir>/report_node_meta_param.txt`).
    pub save_path: Option<PathBuf>,
}

/// The pass. Works on any graph; nodes without metadata show empty cells.
pub fn report_node_meta_param(graph: &mut Graph, ctx: &mut PassContext, args: &MetaParamArgs) -> Result<PassReport> {
    const PASS: &str = "report_node_meta_param";
    let which = args.which.clone().unwrap_or_else(|| vec!["all".into()]);
    for w in &which {
        if !["all", "common", "hardware", "software"].contains(&w.as_str()) {
            return Err(PassError::args(PASS, format!("`which` entry `{w}`: expected all, common, hardware or software")));
        }
    }
    let all = which.iter().any(|w| w == "all");
    let parts: Vec<&str> = ["common", "hardware", "software"].into_iter().filter(|p| all || which.iter().any(|w| w == p)).collect();
    let mut headers = vec!["Node name", "Fx Node op", "Mase type", "Mase op"];
    for p in &parts {
        headers.push(match *p {
            "common" => "Common Param",
            "hardware" => "Hardware Param",
            _ => "Software Param",
        });
    }
    let mut t = Table::new(headers);
    let mut rows = Vec::new();
    for n in graph.nodes() {
        let c = &n.meta.common;
        let mut row =
            vec![n.name.clone(), n.kind.as_str().into(), c.mase_type.clone().unwrap_or_default(), c.mase_op.clone().unwrap_or_default()];
        let mut entry = json!({"name": n.name, "fx_op": n.kind.as_str(), "mase_type": c.mase_type, "mase_op": c.mase_op});
        for p in &parts {
            let v = match *p {
                "common" => serde_json::to_value(c).unwrap_or(Value::Null),
                "hardware" => Value::Object(n.meta.hardware.clone()),
                _ => Value::Object(n.meta.software.clone()),
            };
            row.push(pformat(&Py::from_json(&v)));
            entry[*p] = v;
        }
        t.push(row);
        rows.push(entry);
    }
    let text = t.render(TableFormat::Grid);
    let files = save_text(ctx, PASS, args.save_path.as_deref(), &text)?;
    let mut r = PassReport::new(PASS, json!({"nodes": rows})).with_text(text);
    r.files = files;
    Ok(r)
}
