//! Bad input gives one clear error line and a non-zero exit, never a panic.

mod common;
use common::*;

/// (arguments, fragments the error line must contain). Every line, as users read it, is also kept
/// under snapshot in `snapshots/error_lines.txt` (`UPDATE_EXPECT=1` rewrites it).
fn check(dir: &std::path::Path, cases: &[(Vec<String>, Vec<&str>)]) {
    let mut all = String::new();
    for (args, want) in cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let line = ch_error(&a, dir);
        let shown = |s: &str| s.replace(dir.to_str().unwrap(), "<dir>").replace(repo_root().to_str().unwrap(), "<repo>");
        all += &format!("$ ch {}\n{}\n", shown(&args.join(" ")), shown(&line));
        for w in want {
            assert!(line.contains(w), "error for {args:?} should mention `{w}`: {line}");
        }
        // A cause already quoted by its error is not printed again.
        let parts: Vec<&str> = line.split(": ").filter(|p| p.len() > 12).collect();
        let distinct: std::collections::HashSet<&&str> = parts.iter().collect();
        assert_eq!(distinct.len(), parts.len(), "error for {args:?} repeats a cause: {line}");
    }
    expect_test::expect_file!["snapshots/error_lines.txt"].assert_eq(&all);
}

fn v(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

#[test]
fn bad_input_gives_one_line() {
    let dir = scratch("errors");
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(dir.join("typo.toml"), "model = \"jsc-tiny\"\ndataset = \"jsc\"\nbatch_sise = 64\n").unwrap();
    for (file, key) in [("batch0.toml", "batch_size"), ("accumulate0.toml", "accumulate_grad_batches"), ("epochs0.toml", "max_epochs")] {
        std::fs::write(dir.join(file), format!("model = \"tfc\"\ndataset = \"mnist\"\n{key} = 0\n")).unwrap();
    }
    std::fs::write(dir.join("corrupt.ckpt"), b"this is not a checkpoint at all, just text").unwrap();
    std::fs::write(dir.join("empty.ckpt"), b"").unwrap();
    // A safetensors file whose 8-byte header length is damaged (it announces 4 GiB).
    std::fs::write(dir.join("damaged.ckpt"), [&u32::MAX.to_le_bytes()[..], &[0; 4], b"{}"].concat()).unwrap();
    let onnx_dir = repo_root().join("crates/interop/tests/fixtures/models");
    let keras_conv = onnx_dir.join("conv2d_small_keras.onnx").display().to_string();
    let jsc_onnx = onnx_dir.join("jsc-tiny_lab_model_dynbatch.onnx").display().to_string();
    // Files whose announced sizes no memory holds: a table header, IDX dimensions, a layer width.
    let huge_table = dir.join("huge-table");
    std::fs::create_dir_all(huge_table.join("tabular")).unwrap();
    std::fs::write(huge_table.join("tabular/iris.csv"), "18446744073709551615,4,a,b\n1,2,3,4,0\n").unwrap();
    let huge_idx = dir.join("huge-idx");
    std::fs::create_dir_all(huge_idx.join("mnist")).unwrap();
    let idx = |dims: &[u32]| [vec![0, 0, 8, dims.len() as u8], dims.iter().flat_map(|d| d.to_be_bytes()).collect()].concat();
    std::fs::write(huge_idx.join("mnist/t10k-images-idx3-ubyte"), idx(&[u32::MAX; 3])).unwrap();
    std::fs::write(huge_idx.join("mnist/t10k-labels-idx1-ubyte"), idx(&[0])).unwrap();
    std::fs::write(dir.join("wide.toml"), "[[layers]]\nop = \"flatten\"\n[[layers]]\nop = \"linear\"\nout_features = 1073741824\n")
        .unwrap();
    let cases = vec![
        (v(&["train", "no-such-model", "mnist"]), vec!["no-such-model", "jsc-tiny", "vgg7"]),
        (v(&["test", "mnist", "--model-file", "typo.toml"]), vec!["--model-file typo.toml", "not an ONNX model", "--load CKPT"]),
        (v(&["train", "tfc", "no-such-data"]), vec!["no-such-data", "mnist", "digits"]),
        (v(&["train", "tfc", "mnist", "--bogus-flag"]), vec!["--bogus-flag"]),
        (v(&["train", "--config", "typo.toml"]), vec!["batch_sise", "typo.toml"]),
        (v(&["train", "jsc-tiny", "jsc", "--data-dir", empty.to_str().unwrap()]), vec!["jsc", "MASE_DATA_DIR"]),
        (
            v(&["test", "tfc", "mnist", "--load", "corrupt.ckpt"]),
            vec!["corrupt.ckpt", "unknown format (first bytes 74 68 69 73", "--load takes"],
        ),
        (v(&["test", "tfc", "mnist", "--load", "empty.ckpt"]), vec!["empty.ckpt", "the file is empty (0 bytes)", "--load takes"]),
        (
            v(&["test", "tfc", "mnist", "--load", "damaged.ckpt"]),
            vec!["damaged.ckpt", "header length (its first 8 bytes) is damaged: it says 4294967295 bytes, the file has 10"],
        ),
        (v(&["test", "tfc", "mnist", "--load", &jsc_onnx]), vec!["jsc-tiny_lab_model_dynbatch.onnx", "an ONNX model", "--model-file"]),
        (
            v(&["test", "--model-file", &keras_conv, "digits"]),
            vec!["conv2d_small_keras.onnx", "takes samples of shape [8, 8, 1], the data set gives samples of shape [1, 8, 8]"],
        ),
        (
            v(&["test", "--model-file", &jsc_onnx, "digits"]),
            vec!["jsc-tiny_lab_model_dynbatch.onnx", "takes samples of shape [16], the data set gives samples of shape [1, 8, 8]"],
        ),
        (v(&["test", "tfc", "mnist", "--load", "missing.ckpt"]), vec!["missing.ckpt"]),
        (v(&["test", "tfc", "mnist"]), vec!["--load"]),
        (v(&["train", "jsc-tiny", "digits"]), vec!["jsc-tiny"]),
        (v(&["train", "tfc", "mnist", "--optimizer", "lion"]), vec!["lion", "adam"]),
        (
            v(&["train", "tfc", "mnist", "--conv-algo", "fft"]),
            vec!["`fft`", "--conv-algo", "conv_algo", "expected fast, exact or winograd"],
        ),
        // Flags refuse 0 as they parse (see refusals.rs); the TOML keys are checked after the merge.
        (v(&["train", "--config", "batch0.toml"]), vec!["batch size"]),
        (v(&["train", "--config", "accumulate0.toml"]), vec!["accumulate_grad_batches", "at least 1"]),
        (v(&["train", "--config", "epochs0.toml"]), vec!["max_epochs = 0", "at least 1"]),
        (v(&["train", "--model-file", "nothere.toml", "mnist"]), vec!["cannot read model file nothere.toml", "(os error 2)"]),
        (v(&["train", "tfc", "mnist", "--learning-rate", "-1"]), vec!["learning rate must be a positive number, got -1"]),
        (v(&["train", "tfc", "mnist", "--weight-decay", "-3"]), vec!["weight decay must be a number >= 0, got -3"]),
        (v(&["train", "tfc", "mnist", "--threads", "100000"]), vec!["threads = 100000: at most 256"]),
        (
            v(&["train", "mlp", "iris", "--data-dir", huge_table.to_str().unwrap()]),
            vec!["iris.csv", "header announces 18446744073709551615 samples, the file has 1"],
        ),
        (
            v(&["train", "tfc", "mnist", "--data-dir", huge_idx.to_str().unwrap()]),
            vec!["t10k-images-idx3-ubyte", "need more than 2^64 data bytes"],
        ),
        (
            v(&["train", "--model-file", "wide.toml", "digits"]),
            vec!["wide.toml: layer 1 (op `linear`)", "key `out_features`", "[1073741824, 64]", "more than 2147483648 elements"],
        ),
    ];
    check(&dir, &cases);
}

#[test]
fn wrong_input_width_for_a_checkpoint() {
    let dir = scratch("width");
    let t = ch_json(&["train", "mlp", "digits", "--max-epochs", "1", "--project", "w"], &dir);
    let ck = t["best_checkpoint"].as_str().unwrap().to_string();
    let line = ch_error(&["test", "mlp", "iris", "--load", &ck], &dir);
    expect_test::expect!["error: input has 4 features per sample, graph `x` expects 64"].assert_eq(&line);
}

/// A panic that escapes an action (a bug) ends `ch` with one line and exit status 70, never a
/// backtrace. The `panic-in-action` test hook makes the action panic.
#[test]
fn a_panic_becomes_one_line() {
    let dir = scratch("panic");
    for action in ["info", "train", "search"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ch"))
            .arg(action)
            .current_dir(&dir)
            .env("MASE_FAILPOINT", "panic-in-action")
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(70), "{action}: {stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{action}: one line, got {stderr}");
        assert!(
            lines[0].starts_with(&format!("error: internal error in {action}: failpoint panic-in-action at crates/cli/src/lib.rs:")),
            "{}",
            lines[0]
        );
        assert!(lines[0].ends_with("; please report"), "{}", lines[0]);
    }
}

/// A reader that closes stdout early (`ch info | head -1`) ends `ch` quietly with status 141, as
/// SIGPIPE ends Unix tools, not with an internal error. stdout is a socket whose other end is
/// closed before `ch` starts, so its first write fails as a pipe's does once `head` has exited.
#[test]
fn a_closed_stdout_ends_ch_quietly() {
    use std::os::fd::OwnedFd;
    let dir = scratch("closed-stdout");
    let (stdout, reader) = std::os::unix::net::UnixStream::pair().unwrap();
    drop(reader);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ch"))
        .arg("info")
        .current_dir(&dir)
        .stdout(std::process::Stdio::from(OwnedFd::from(stdout)))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!((out.status.code(), stderr.as_ref()), (Some(141), ""));
}
