#![allow(dead_code, unused_imports)]
//! Helpers for running the `ch` binary in tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../../../io/tests/common/scratch.rs"]
mod scratch;
pub use scratch::{scratch, Scratch};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

pub fn ch(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ch")).args(args).current_dir(cwd).env_remove("MASE_DATA_DIR").output().expect("run ch")
}

/// Runs `ch ... --json`, asserts success and returns the JSON object printed on stdout.
pub fn ch_json(args: &[&str], cwd: &Path) -> serde_json::Value {
    let mut a = args.to_vec();
    a.push("--json");
    let out = ch(&a, cwd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ch {args:?} failed: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("stdout of ch {args:?} is not one JSON object ({e}): {stdout}"))
}

/// Runs `ch`, asserts it failed with exactly one line on stderr (besides warnings and the notes
/// of ONNX imports), and returns that line.
pub fn ch_error(args: &[&str], cwd: &Path) -> String {
    let out = ch(args, cwd);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "ch {args:?} should fail, stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "ch {args:?} panicked: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("WARNING") && !l.starts_with("NOTE")).collect();
    assert_eq!(lines.len(), 1, "ch {args:?} should print one error line, got: {stderr}");
    lines[0].to_string()
}

/// Whether a tool is there; without it the test says SKIP in one line, unless CI=true.
pub fn have(tool: &str) -> bool {
    let flag = if tool == "yosys" { "-V" } else { "--version" };
    if std::process::Command::new(tool).arg(flag).output().is_ok_and(|o| o.status.success()) {
        return true;
    }
    assert!(std::env::var("CI").map_or(true, |v| v != "true"), "{tool} is not installed and CI=true");
    eprintln!("SKIP: {tool} is not installed");
    false
}
