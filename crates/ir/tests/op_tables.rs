//! Checks that the Python package's string-keyed op tables in
//! `python/mase_rs/ir/graph/torch_fx.py` know every [`Op`] variant, walking [`Op::examples`]:
//!
//! - the tracer's tables (`_module_table`, `_function_table`, `_METHODS` and the node kinds)
//!   produce every op's serialized name (`{"op": "mat_mul"}`), and no name that is no op;
//! - `_module_table` has an `nn.<Class>` entry for every op with a PyTorch module class;
//! - `module_from_op`'s `makers` has an entry for exactly the ops with a module class.
//!
//! The tables are read as text (the tests of the package itself run under Python): a name is
//! produced where the file writes `"op": "<name>"`, `_binary("<name>")`, `_compare("<name>")` or
//! `_reduce("<name>")`,
//! and the f-strings of the conv, batch-norm and pool helpers are expanded over their one or two
//! dimensions.

use mase_ir::Op;
use std::collections::BTreeSet;
use std::path::Path;

fn torch_fx() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/mase_rs/ir/graph/torch_fx.py");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The name an op has in graph JSON (`#[serde(tag = "op")]`).
fn serde_name(op: &Op) -> String {
    let v = serde_json::to_value(op).expect("an op serializes");
    v["op"].as_str().expect("the tag is a string").to_string()
}

/// The text from the line that starts with `start` to the next line that is exactly `end`.
fn block<'t>(text: &'t str, start: &str, end: &str) -> &'t str {
    let i = text.find(start).unwrap_or_else(|| panic!("torch_fx.py has no `{start}`"));
    let rest = &text[i..];
    let j = rest.find(&format!("\n{end}\n")).unwrap_or_else(|| panic!("`{start}` is not closed by `{end}`"));
    &rest[..j]
}

/// The strings quoted right after each occurrence of `prefix` (`"op": "relu"` gives `relu`).
fn quoted_after<'t>(text: &'t str, prefix: &str) -> Vec<&'t str> {
    text.match_indices(prefix).filter_map(|(i, _)| text[i + prefix.len()..].split('"').next()).collect()
}

/// Every op name the tracer writes, with the f-strings expanded.
fn traced_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let helpers = ["_binary(\"", "_compare(\"", "_reduce(\""].into_iter().flat_map(|h| quoted_after(text, h));
    for raw in quoted_after(text, "\"op\": \"").into_iter().chain(helpers) {
        names.insert(raw.to_string());
    }
    for template in quoted_after(text, "\"op\": f\"") {
        for dims in ["1", "2"] {
            for kind in ["max", "avg"] {
                names.insert(template.replace("{dims}", dims).replace("{kind}", kind));
            }
        }
    }
    names
}

#[test]
fn the_tracer_writes_every_op_and_only_ops() {
    let text = torch_fx();
    let traced = traced_names(&text);
    let ops: BTreeSet<String> = Op::examples().iter().map(serde_name).collect();
    let missing: Vec<_> = ops.difference(&traced).collect();
    assert!(missing.is_empty(), "torch_fx.py never writes the ops {missing:?}: add them to its tables");
    let unknown: Vec<_> = traced.difference(&ops).collect();
    assert!(unknown.is_empty(), "torch_fx.py writes {unknown:?}, which are no op names");
}

#[test]
fn every_module_class_has_a_tracer_entry_and_a_maker() {
    let text = torch_fx();
    let modules = block(&text, "def _module_table(nn):", "");
    let makers: BTreeSet<&str> = quoted_after(block(&text, "    makers = {", "    }"), "\n        \"").into_iter().collect();
    let mut with_class = BTreeSet::new();
    for op in Op::examples() {
        let Some(class) = op.module_class() else { continue };
        assert!(modules.contains(&format!("nn.{class}:")), "_module_table has no `nn.{class}` entry");
        with_class.insert(serde_name(&op));
    }
    let makers: BTreeSet<String> = makers.into_iter().map(str::to_string).collect();
    assert_eq!(makers, with_class, "module_from_op's makers must name exactly the ops with a module class");
}
