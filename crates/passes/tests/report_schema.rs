//! The report schema of every pass (its registry entry's `report`) names exactly the keys the
//! pass's JSON report has, level by level, and `doc/pass-reports.md` is the text generated from it.

mod common;
use common::*;
use mase_passes::{report_schema, ReportKey, PASSES};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// One step of a documented key path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Key(String),
    /// `[]`: every element of an array.
    Elem,
    /// `<node>`, `<entry>`, ...: every key of an object.
    Any,
}

/// The documented keys as a tree of steps.
#[derive(Debug, Default)]
struct Tree(BTreeMap<Step, Tree>);

fn tree(keys: &[ReportKey]) -> Tree {
    let mut root = Tree::default();
    for k in keys {
        let mut at = &mut root;
        for seg in k.key.split('.') {
            let (name, elem) = match seg.strip_suffix("[]") {
                Some(n) => (n, true),
                None => (seg, false),
            };
            let step = if name.starts_with('<') { Step::Any } else { Step::Key(name.to_string()) };
            at = at.0.entry(step).or_default();
            if elem {
                at = at.0.entry(Step::Elem).or_default();
            }
        }
    }
    root
}

/// Checks `v` against the documented subtree at `path`: arrays and wildcard objects must be
/// non-empty (so every documented key is seen), and an object with named children must have
/// exactly those keys.
fn check(pass: &str, path: &str, v: &Value, t: &Tree) {
    if t.0.is_empty() {
        return;
    }
    if let Some(elem) = t.0.get(&Step::Elem) {
        let items = v.as_array().unwrap_or_else(|| panic!("{pass}: `{path}` should be an array, got {v}"));
        assert!(!items.is_empty(), "{pass}: `{path}` is empty, so its documented keys cannot be checked");
        for item in items {
            check(pass, &format!("{path}[]"), item, elem);
        }
        return;
    }
    let obj = v.as_object().unwrap_or_else(|| panic!("{pass}: `{path}` should be an object, got {v}"));
    if let Some(any) = t.0.get(&Step::Any) {
        assert!(!obj.is_empty(), "{pass}: `{path}` is empty, so its documented keys cannot be checked");
        for (k, x) in obj {
            check(pass, &format!("{path}.{k}"), x, any);
        }
        return;
    }
    let documented: Vec<&str> = t.0.keys().map(|s| if let Step::Key(k) = s { k.as_str() } else { "" }).collect();
    let actual: Vec<&str> = {
        let mut a: Vec<&str> = obj.keys().map(String::as_str).collect();
        a.sort_unstable();
        a
    };
    assert_eq!(actual, documented, "{pass}: keys of `{path}` (actual, documented)");
    for (step, sub) in &t.0 {
        if let Step::Key(k) = step {
            let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
            check(pass, &p, &obj[k], sub);
        }
    }
}

fn schema_of(pass: &str) -> &'static [ReportKey] {
    PASSES.iter().find(|p| p.name == pass).unwrap_or_else(|| panic!("no pass {pass}")).report
}

#[test]
fn every_report_has_exactly_its_documented_keys() {
    let out = std::env::temp_dir().join(format!("mase-passes-schema-{}", std::process::id()));
    // One pipeline over jsc-three-linear, one line per pass of the registry, in an order where
    // each finds what it needs.
    let (mut g, mut ctx) = model("jsc-three-linear", &[16], 5);
    ctx.out_dir = Some(out.clone());
    let pipeline: Vec<(&str, Value)> = vec![
        ("init_metadata", json!(null)),
        ("add_common_metadata", json!(null)),
        ("add_software_metadata", json!(null)),
        ("add_hardware_metadata", json!(null)),
        ("report_graph", json!({})),
        ("report_node_type", json!({})),
        ("report_node_shape", json!({})),
        ("report_node_meta_param", json!({})),
        (
            "profile_statistics",
            json!({"by": "type", "target_weight_nodes": ["linear"], "target_activation_nodes": ["relu"],
                "weight_statistics": {"range_min_max": {"dims": "all"}}, "activation_statistics": {"range_quantile": {"dims": "all", "quantile": 0.97}},
                "num_samples": 16}),
        ),
        ("flops", json!({})),
        ("bitops", json!({})),
        ("latency", json!({"repeats": 1, "warmup": 0})),
        ("fold_batch_norm", json!(null)),
        ("quantize", lab_linear_8_4()),
        ("summarize_quantization", json!({})),
        ("verify_quantization", json!({"num_samples": 16})),
        ("save_node_meta_param", json!({})),
        ("load_node_meta_param", json!({})),
        ("channel_multiplier", json!({"by": "name", "seq_blocks_2": {"config": {"name": "output_only", "channel_multiplier": 2}}})),
    ];
    let mut seen: Vec<&str> = pipeline.iter().map(|(p, _)| *p).collect();
    seen.sort_unstable();
    let mut registry: Vec<&str> = PASSES.iter().map(|p| p.name).collect();
    registry.sort_unstable();
    assert_eq!(seen, registry, "every pass of the registry has one line here");
    for (name, args) in pipeline {
        let r = pass(name, &mut g, &mut ctx, args);
        check(name, "", &r.json, &tree(schema_of(name)));
    }
    let _ = std::fs::remove_dir_all(out);
}

#[test]
fn bitops_documents_model_size_bits_in_bits() {
    // Users guessed `param_bits` for the model size; the schema says where it is and in what unit.
    let k = schema_of("bitops").iter().find(|k| k.key == "total.model_size_bits").expect("documented");
    assert_eq!(k.unit, "bits");
    let (mut g, mut ctx) = jsc_tiny();
    with_metadata(&mut g, &mut ctx);
    // jsc-tiny in float: BatchNorm1d(16) stores 4 x 16 values (weight, bias, running mean and
    // variance) and Linear(16, 5) 16 x 5 + 5, each at 32 bits.
    let r = pass("bitops", &mut g, &mut ctx, json!({}));
    assert_eq!(r.json["total"]["model_size_bits"], json!((64.0 + 85.0) * 32.0));
}

#[test]
fn the_pass_reports_doc_is_generated_from_the_registry() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../doc/pass-reports.md");
    let want = report_schema::markdown_doc();
    if std::env::var_os("MASE_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(have == want, "doc/pass-reports.md is out of date: rerun this test with MASE_UPDATE_DOCS=1 to regenerate it");
}
