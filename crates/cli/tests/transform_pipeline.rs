//! The `[passes.*]` pipeline of `ch transform`: a pass can run several times (a table's `pass`
//! key), each run keeps its table's name in its report file and JSON, a summary the config asks
//! for is not printed twice, an untrained model is warned about, and `--list-passes --json`
//! (with every pass's report keys) is pinned by a snapshot.

mod common;
use common::*;
use std::path::Path;

/// MASE lab 2's before/after comparison on jsc-tiny: BitOPs, quantize, summary, BitOPs again.
const LAB2: &str = r#"
model = "jsc-tiny"
dataset = "jsc"
project = "lab2"

[passes.bitops]

[passes.quantize]
by = "type"
[passes.quantize.default.config]
name = "NA"
[passes.quantize.linear.config]
name = "integer"
data_in_width = 8
data_in_frac_width = 4
weight_width = 8
weight_frac_width = 4
bias_width = 8
bias_frac_width = 4

[passes.summarize_quantization]

[passes.bitops_after]
pass = "bitops"
"#;

fn setup(name: &str) -> (Scratch, String) {
    let root = scratch(name);
    let data = root.join("data/jsc");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::copy(repo_root().join("crates/io/tests/fixtures/jsc/jsc_fixture.h5"), data.join("jsc_fixture.h5")).unwrap();
    let d = root.join("data").to_str().unwrap().to_string();
    (root, d)
}

fn write_config(root: &Path, text: &str) -> String {
    let p = root.join("c.toml");
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn a_pass_runs_twice_under_two_names() {
    let (root, d) = setup("pipeline-twice");
    let cfg = write_config(&root, LAB2);
    let out = ch(&["transform", "--config", &cfg, "--data-dir", &d, "--json"], &root);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("WARNING  no --load: the passes run on the untrained initial weights"), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps: Vec<(&str, &str)> =
        v["passes"].as_array().unwrap().iter().map(|p| (p["name"].as_str().unwrap(), p["pass"].as_str().unwrap())).collect();
    assert_eq!(
        steps,
        [("bitops", "bitops"), ("quantize", "quantize"), ("summarize_quantization", "summarize_quantization"), ("bitops_after", "bitops")]
    );
    // jsc-tiny for one sample, every value 32 bits in float: batch norm 4 x 16 FLOPs, ReLUs 16
    // and 5, the linear layer 16 x 5 multiply-adds at 32 x 32 bits: 84,640 BitOPs. With the
    // lab's 8-bit inputs and weights the linear layer costs 80 x 8 x 8: 7,840.
    let bitops = |i: usize| v["passes"][i]["report"]["total"]["bitops"].as_f64().unwrap();
    assert_eq!((bitops(0), bitops(3)), (84_640.0, 7_840.0));
    let reports = root.join("mase_output/lab2/software/transform/reports");
    for (file, pass) in [
        ("01_bitops", "bitops"),
        ("02_quantize", "quantize"),
        ("03_summarize_quantization", "summarize_quantization"),
        ("04_bitops_after", "bitops"),
    ] {
        let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(reports.join(format!("{file}.json"))).unwrap()).unwrap();
        assert_eq!(r["pass"], pass, "{file}");
    }
    assert_eq!(std::fs::read_dir(&reports).unwrap().count(), 4, "one report per table, no second summary");
    // The histogram is printed once (human text goes to stderr under --json).
    let row = "| Linear          | linear       |       1 |         1 |           0 |";
    assert_eq!(stderr.matches(row).count(), 1, "{stderr}");
}

#[test]
fn a_quantize_without_a_summary_table_still_prints_one() {
    let (root, d) = setup("pipeline-summary");
    let cfg = write_config(&root, &LAB2.replace("[passes.summarize_quantization]\n", ""));
    let out = ch(&["transform", "--config", &cfg, "--data-dir", &d], &root);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.matches("| Linear          | linear       |       1 |         1 |           0 |").count(), 1, "{stdout}");
}

#[test]
fn bad_pass_tables_are_named() {
    let (root, d) = setup("pipeline-errors");
    let cases: &[(&str, &str)] = &[
        ("[passes.after]\npass = \"bitopz\"\n", "unknown pass `bitopz` (named by `passes.after.pass`); known passes: init_metadata"),
        ("[passes.after]\npass = 3\n", "`passes.after.pass` must name a pass (a string), got 3"),
        ("[passes.bitopz]\n", "unknown pass `bitopz`; known passes: init_metadata"),
        ("[passes]\nbitops = 1\n", "`passes.bitops` must be a table ([passes.bitops]), not a value"),
    ];
    for (tables, want) in cases {
        let cfg = write_config(&root, &format!("model = \"jsc-tiny\"\ndataset = \"jsc\"\n{tables}"));
        let line = ch_error(&["transform", "--config", &cfg, "--data-dir", &d], &root);
        assert!(line.contains(want) && line.contains("c.toml"), "{tables}: `{line}` should contain `{want}`");
    }
}

#[test]
fn list_passes_json_matches_its_snapshot() {
    let root = scratch("pipeline-list");
    let v = ch_json(&["transform", "--list-passes"], &root);
    let text = serde_json::to_string_pretty(&v).unwrap() + "\n";
    let snap = repo_root().join("crates/cli/tests/snapshots/list_passes.json");
    if std::env::var_os("MASE_UPDATE_DOCS").is_some() {
        std::fs::write(&snap, &text).unwrap();
    }
    let want = std::fs::read_to_string(&snap).unwrap_or_default();
    assert!(
        text == want,
        "`ch transform --list-passes --json` changed: rerun with MASE_UPDATE_DOCS=1 and review the diff of {}",
        snap.display()
    );
    // Users guessed `param_bits` for the model size: the listing names the key and its unit.
    let bitops = v["passes"].as_array().unwrap().iter().find(|p| p["name"] == "bitops").unwrap();
    let key = bitops["report"].as_array().unwrap().iter().find(|k| k["key"] == "total.model_size_bits").unwrap();
    assert_eq!(key["unit"], "bits");
}
