//! What users read, under snapshot: `ch info`, the analysis reports (graph listing, node types,
//! shapes, metadata, FLOPs and BitOPs tables), the transform's quantization summary and the pass
//! listing. A change to any of these texts shows up as a diff in review; after a deliberate
//! change, `UPDATE_EXPECT=1 cargo test -p mase-cli --test snapshots` rewrites the files under
//! `tests/snapshots/`.

mod common;
use common::*;
use expect_test::{expect_file, ExpectFile};
use std::path::Path;

/// A data folder with the jsc fixture.
fn jsc_data(root: &Path) -> String {
    let d = root.join("data");
    std::fs::create_dir_all(d.join("jsc")).unwrap();
    std::fs::copy(repo_root().join("crates/io/tests/fixtures/jsc/jsc_fixture.h5"), d.join("jsc/jsc_fixture.h5")).unwrap();
    d.display().to_string()
}

/// Runs `ch` in `root`, asserts success and returns stdout followed by stderr, with the folder's
/// path replaced by `<dir>` and the repository's by `<repo>`.
fn text(args: &[&str], root: &Path) -> String {
    let out = ch(args, root);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "ch {args:?} failed: {stderr}");
    let all = format!("$ ch {}\n{stdout}--- stderr\n{stderr}", args.join(" "));
    all.replace(root.to_str().unwrap(), "<dir>").replace(repo_root().to_str().unwrap(), "<repo>")
}

fn check(args: &[&str], root: &Path, expect: ExpectFile) {
    expect.assert_eq(&text(args, root));
}

#[test]
fn what_users_read() {
    let root = scratch("snapshots");
    let data = jsc_data(&root);
    let config = repo_root().join("configs/examples/jsc_toy_by_type.toml").display().to_string();
    let reports = "graph,type,shape,meta,flops,bitops";
    check(&["info"], &root, expect_file!["snapshots/info.txt"]);
    check(&["analyze", "jsc-toy", "jsc", "--data-dir", &data, "--report", reports], &root, expect_file!["snapshots/analyze_jsc_toy.txt"]);
    check(&["transform", "--list-passes"], &root, expect_file!["snapshots/list_passes.txt"]);
    check(
        &["transform", "--config", &config, "--data-dir", &data, "--project", "t"],
        &root,
        expect_file!["snapshots/transform_jsc_tiny.txt"],
    );
}
