//! The drivers of the fuzz targets `node_meta`, `hw_config` and `design_json` (`fuzz/drivers/`,
//! included here as the targets include them), so that they compile and run as ordinary code:
//! every seed of `fuzz/corpus/<target>/` reaches the end of its driver, and hostile inputs are
//! refused with one line each (kept under snapshot in `snapshots/fuzz_refusals.txt`;
//! `UPDATE_EXPECT=1` rewrites it).

#[path = "../../../fuzz/drivers/design_json.rs"]
mod design_json;
#[path = "../../../fuzz/drivers/hw_config.rs"]
mod hw_config;
#[path = "../../../fuzz/drivers/node_meta.rs"]
mod node_meta;

use std::path::PathBuf;

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    files
}

#[test]
fn every_seed_reaches_the_end_of_its_driver() {
    let mut latencies = Vec::new();
    for (name, bytes) in corpus("hw_config") {
        let latency = hw_config::run(&bytes).unwrap_or_else(|e| panic!("hw_config/{name}: {e}"));
        latencies.push((name, latency));
    }
    // The schedules `ch transform` prints for these configs: reuse R costs R + 1 cycles a layer.
    let want = [("three_layer_int8.toml".to_string(), 5 + 3 + 3 + 3), ("toy_folded_4bit.toml".to_string(), 3 + 3 + 3)];
    assert_eq!(latencies, want);
    for (name, bytes) in corpus("design_json") {
        design_json::run(&bytes).unwrap_or_else(|e| panic!("design_json/{name}: {e}"));
    }
    let seeds = corpus("node_meta");
    assert_eq!(seeds.len(), 4);
    for (name, bytes) in seeds {
        node_meta::run(&bytes).unwrap_or_else(|e| panic!("node_meta/{name}: {e}"));
    }
}

/// A seed of `target` with `from` replaced by `to` (which must occur in it).
fn edited(target: &str, seed: &str, from: &str, to: &str) -> Vec<u8> {
    let (_, bytes) = corpus(target).into_iter().find(|(n, _)| n == seed).unwrap_or_else(|| panic!("no seed {target}/{seed}"));
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.contains(from), "{target}/{seed} lacks {from:?}");
    text.replacen(from, to, 1).into_bytes()
}

/// A `node_meta` input: the pick byte (part << 4 | node index), then the JSON.
fn meta(part: usize, node: u8, json: &str) -> Vec<u8> {
    [&[(part as u8) << 4 | node][..], json.as_bytes()].concat()
}

#[test]
fn hostile_inputs_are_refused_with_one_line() {
    let toy = |from: &str, to: &str| edited("design_json", "jsc_toy_folded_4bit.json", from, to);
    let int8 = |from: &str, to: &str| edited("hw_config", "three_layer_int8.toml", from, to);
    let cases: Vec<(&str, &str, Vec<u8>)> = vec![
        ("design_json", "a weight missing", toy("\"weight\":[-2,1,", "\"weight\":[1,")),
        ("design_json", "no input features", toy("\"in_features\":16", "\"in_features\":0")),
        ("design_json", "a reuse factor of 0", toy("\"reuse\":2", "\"reuse\":0")),
        ("design_json", "no layers", b"{\"model\":\"m\",\"input_format\":[8,4,true],\"layers\":[]}".to_vec()),
        ("design_json", "a 40-bit input", toy("\"input_format\":[4,2,true]", "\"input_format\":[40,2,true]")),
        ("design_json", "an input range off the format", toy("\"input\":{\"lo\":-8", "\"input\":{\"lo\":-9")),
        ("design_json", "a 0-bit requantizer", toy("\"width\":4,\"frac_width\":2", "\"width\":0,\"frac_width\":2")),
        ("design_json", "an affine without channels", toy("\"mul\":[4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4]", "\"mul\":[]")),
        ("design_json", "sums past 64 bits", toy("\"weight\":[-2,", "\"weight\":[9223372036854775807,")),
        ("design_json", "not JSON", b"{\"model\":".to_vec()),
        ("design_json", "an unknown part", toy("\"input_format\":[4,2,true]", "\"input_format\":[4,2,true],\"part\":\"LFE5U-12F\"")),
        ("hw_config", "a reuse factor that divides no layer", int8("seq_blocks_0 = 4", "seq_blocks_0 = 3")),
        ("hw_config", "a reuse factor of a node that is none", int8("seq_blocks_0 = 4", "seq_blocks_9 = 4")),
        ("hw_config", "a 40-bit weight", int8("weight_width = 8", "weight_width = 40")),
        ("hw_config", "an unknown emit key", int8("reuse = 2", "reuse = 2\nrefuse = 3")),
        ("hw_config", "a float model", int8("name = \"integer\"", "name = \"NA\"")),
        ("hw_config", "not TOML", b"[passes.quantize\n".to_vec()),
        ("node_meta", "a common part of the wrong shape", meta(0, 3, "{\"mase_type\": 5}")),
        ("node_meta", "a reuse factor of 0", meta(2, 3, "{\"reuse_factor\": 0}")),
        ("node_meta", "software metadata that is no table", meta(1, 3, "[1, 2]")),
        ("node_meta", "an input of another width", meta(0, 0, "{\"mase_type\": \"placeholder\", \"mase_op\": \"placeholder\", \"args\": {}, \"results\": {\"data_out_0\": {\"shape\": [8, 7], \"torch_dtype\": \"torch.float32\", \"type\": \"float\", \"precision\": [32]}}}")),
    ];
    let mut text = String::new();
    for (target, what, input) in &cases {
        let result = std::panic::catch_unwind(|| match *target {
            "design_json" => design_json::run(input),
            "hw_config" => hw_config::run(input).map(drop),
            _ => node_meta::run(input),
        });
        let line = match result {
            Err(_) => panic!("{target}, {what}: the driver panicked"),
            Ok(Ok(())) => panic!("{target}, {what}: accepted"),
            Ok(Err(line)) => line,
        };
        assert!(!line.contains('\n'), "{target}, {what}: not one line: {line}");
        text += &format!("{target}, {what}:\n  {line}\n");
    }
    expect_test::expect_file!["snapshots/fuzz_refusals.txt"].assert_eq(&text);
}
