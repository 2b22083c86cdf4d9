//! A model file is usable by name: `ch train my-net jsc` finds `./models/my-net.toml`, then
//! `<dir>/my-net.toml` for each folder of `$MASE_MODELS_DIR`; zoo names come first, and a name
//! found nowhere is an error listing where it looked.

mod common;
use common::*;
use std::path::Path;
use std::process::{Command, Output};

/// Two linear layers: 16 x 8 + 8 + 8 x 5 + 5 = 181 trainable parameters on jsc.
const SMALL: &str =
    "[[layers]]\nop = \"linear\"\nout_features = 8\n[[layers]]\nop = \"relu\"\n[[layers]]\nop = \"linear\"\nout_features = \"classes\"\n";
/// One linear layer: 16 x 5 + 5 = 85.
const ONE_LAYER: &str = "[[layers]]\nop = \"linear\"\nout_features = \"classes\"\n";

/// Model files to write: (path under the test folder, text).
type Files = &'static [(&'static str, &'static str)];

/// `ch` in `cwd` with `$MASE_MODELS_DIR` set to `models_dir` (or unset).
fn ch_env(args: &[&str], cwd: &Path, models_dir: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ch"));
    c.args(args).current_dir(cwd).env_remove("MASE_DATA_DIR").env_remove("MASE_MODELS_DIR");
    if let Some(d) = models_dir {
        c.env("MASE_MODELS_DIR", d);
    }
    c.output().expect("run ch")
}

fn json_of(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn setup(name: &str) -> (Scratch, String) {
    let root = scratch(name);
    let data = root.join("data/jsc");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::copy(repo_root().join("crates/io/tests/fixtures/jsc/jsc_fixture.h5"), data.join("jsc_fixture.h5")).unwrap();
    std::fs::create_dir_all(root.join("models")).unwrap();
    std::fs::create_dir_all(root.join("lib/a")).unwrap();
    std::fs::create_dir_all(root.join("lib/b")).unwrap();
    let d = root.join("data").to_str().unwrap().to_string();
    (root, d)
}

/// Trainable parameters of the model `name` resolves to, via `ch analyze --report flops`.
fn params_of(root: &Path, data: &str, name: &str, models_dir: Option<&str>) -> u64 {
    let out = ch_env(&["analyze", name, "jsc", "--data-dir", data, "--report", "flops", "--json"], root, models_dir);
    json_of(&out)["reports"]["flops"]["total"]["params"].as_u64().unwrap()
}

#[test]
fn train_and_test_a_model_file_by_name() {
    let (root, d) = setup("models-train");
    std::fs::write(root.join("models/my-net.toml"), SMALL).unwrap();
    let out = ch_env(&["train", "my-net", "jsc", "--data-dir", &d, "--max-epochs", "1", "--project", "p", "--json"], &root, None);
    let v = json_of(&out);
    assert_eq!(v["trainable_params"], 181);
    let best = v["best_checkpoint"].as_str().unwrap().to_string();
    let t = json_of(&ch_env(&["test", "my-net", "jsc", "--data-dir", &d, "--load", &best, "--json"], &root, None));
    assert_eq!(t["model"], "my-net");
}

#[test]
fn search_order_is_models_then_each_folder_of_the_variable() {
    let (root, d) = setup("models-order");
    let path_list = std::env::join_paths([root.join("lib/a"), root.join("lib/b")]).unwrap();
    let list = path_list.to_str().unwrap();
    // (files written, name asked, expected trainable parameters): one line per rule.
    let cases: &[(Files, &str, u64)] = &[
        (&[("lib/b/net.toml", SMALL)], "net", 181),
        (&[("lib/a/net.toml", ONE_LAYER), ("lib/b/net.toml", SMALL)], "net", 85),
        (&[("models/net.toml", SMALL), ("lib/a/net.toml", ONE_LAYER)], "net", 181),
        // A zoo name wins over a file of the same name: jsc-tiny has 117.
        (&[("models/jsc-tiny.toml", SMALL)], "jsc-tiny", 117),
    ];
    for (files, name, want) in cases {
        for dir in ["models", "lib/a", "lib/b"] {
            for e in std::fs::read_dir(root.join(dir)).unwrap() {
                std::fs::remove_file(e.unwrap().path()).unwrap();
            }
        }
        for (file, text) in *files {
            std::fs::write(root.join(file), text).unwrap();
        }
        assert_eq!(params_of(&root, &d, name, Some(list)), *want, "{files:?}");
    }
}

#[test]
fn a_name_found_nowhere_lists_where_it_looked() {
    let (root, d) = setup("models-missing");
    let out = ch_env(&["train", "nope", "jsc", "--data-dir", &d], &root, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("unknown model `nope`") && stderr.contains("jsc-tiny"), "{stderr}");
    assert!(stderr.contains("models/nope.toml") && stderr.contains("$MASE_MODELS_DIR is not set"), "{stderr}");
    let lib = root.join("lib/a");
    let out = ch_env(&["train", "nope", "jsc", "--data-dir", &d], &root, Some(lib.to_str().unwrap()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("models/nope.toml, {}", lib.join("nope.toml").display())), "{stderr}");
}
