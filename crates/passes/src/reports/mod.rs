//! Report passes (doc/mase-semantics.md#report-passes): the graph listing, node types, shapes and the
//! metadata table. Each returns its text (printed by the CLI) and a JSON value, and writes the
//! text to `file_name`/`save_path` when given, else to `<out_dir>/<pass>.txt` when the context
//! has an output folder.

pub mod graph;
pub mod meta_param;
pub mod node_shape;
pub mod node_type;

use crate::report::write_file;
use crate::{PassContext, PassError, Result};
use mase_ir::Graph;
use std::path::{Path, PathBuf};

/// Writes a report's text to the explicit path, else into the context's output folder.
pub(crate) fn save_text(ctx: &PassContext, pass: &str, explicit: Option<&Path>, text: &str) -> Result<Vec<PathBuf>> {
    let path = match (explicit, &ctx.out_dir) {
        (Some(p), _) => p.to_path_buf(),
        (None, Some(d)) => d.join(format!("{pass}.txt")),
        (None, None) => return Ok(Vec::new()),
    };
    Ok(vec![write_file(&path, text)?])
}

/// Fails with a hint when the graph has no common metadata.
pub(crate) fn require_common(graph: &Graph, pass: &str) -> Result<()> {
    match graph.nodes().iter().find(|n| n.meta.common.mase_type.is_none()) {
        Some(n) => Err(PassError::MissingMeta {
            pass: pass.into(),
            node: n.name.clone(),
            what: "common metadata".into(),
            needed: "add_common_metadata".into(),
        }),
        None => Ok(()),
    }
}
