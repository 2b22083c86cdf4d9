//! Every model the repository can build or ships — each zoo model on the data set it is made
//! for, every ONNX/QONNX file under the test fixtures, every model file under `models/`, every
//! Lightning checkpoint among the fixtures — through `ch train` (zoo models and model files),
//! `ch test`, `ch analyze`, `ch run` (float and integer executor) and `ch export` at 1, 2 and 3
//! threads: each must succeed (no panic), and the outputs must be the same at every thread count
//! (results are the same bits whatever the threads).
//!
//! The lists are found, not written down: a zoo model added to the registry or a model file
//! added to the fixtures is covered without touching this file. A model whose input matches none
//! of the shipped data sets goes through `analyze` (with `--input-shape`), `run` and `export`.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

const THREADS: [&str; 3] = ["1", "2", "3"];

/// A data folder with every shipped data set: the repository's MNIST test images and digits, and
/// the jsc and CIFAR-10 fixtures.
fn data_dir(root: &Path) -> PathBuf {
    let d = root.join("data");
    let repo = repo_root();
    std::fs::create_dir_all(d.join("jsc")).unwrap();
    std::fs::copy(repo.join("crates/io/tests/fixtures/jsc/jsc_fixture.h5"), d.join("jsc/jsc_fixture.h5")).unwrap();
    for (name, from) in
        [("mnist", "data/mnist"), ("digits", "data/digits"), ("tabular", "data/tabular"), ("cifar10", "crates/io/tests/fixtures/cifar10")]
    {
        std::os::unix::fs::symlink(repo.join(from), d.join(name)).unwrap();
    }
    d
}

/// How `ch` is told which model to use.
#[derive(Clone, Debug)]
struct Model {
    label: String,
    args: Vec<String>,
}

impl Model {
    fn new(label: impl Into<String>, args: &[&str]) -> Model {
        Model { label: label.into(), args: args.iter().map(|a| a.to_string()).collect() }
    }
}

/// Files under `dir` (recursively) whose name ends with `suffix`, sorted.
fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn fixture_dirs() -> Vec<PathBuf> {
    let crates = repo_root().join("crates");
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(&crates).unwrap().map(|e| e.unwrap().path().join("tests/fixtures")).filter(|p| p.is_dir()).collect();
    dirs.sort();
    dirs
}

/// Runs `ch` and returns its JSON, failing on a non-zero exit or a panic.
fn run_json(args: &[String], cwd: &Path, what: &str) -> Value {
    let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
    a.push("--json");
    let out = ch(&a, cwd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked") && !stderr.contains("internal error"), "{what}: ch {args:?} panicked: {stderr}");
    assert!(out.status.success(), "{what}: ch {args:?} failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e})"))
}

/// Removes the keys whose values are measured times, which differ between any two runs.
fn without_timings(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(k, _)| !(k.contains("seconds") || k.ends_with("_s") || k.contains("time") || k.contains("per_second")))
                .map(|(k, v)| (k, without_timings(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(without_timings).collect()),
        other => other,
    }
}

/// Runs one action of one model at every thread count, each in its own folder, and asserts that
/// the JSON (with the folder's path taken out) and the files it names in `compare` are the same at
/// every count. Returns the folder of the one-thread run.
fn same_at_every_thread_count(
    root: &Path,
    model: &Model,
    action: &[&str],
    dataset: Option<&str>,
    data: &Path,
    compare: &[&str],
) -> PathBuf {
    let mut first: Option<(Value, Vec<Vec<u8>>)> = None;
    for threads in THREADS {
        let what = format!("{} {} at {threads} threads", model.label, action[0]);
        let cwd = root.join(format!("{}-{}-{threads}", model.label.replace(['/', ' '], "_"), action[0]));
        std::fs::create_dir_all(&cwd).unwrap();
        let mut args: Vec<String> = vec![action[0].to_string()];
        args.extend(model.args.iter().cloned());
        args.extend(dataset.map(str::to_string));
        args.extend(action[1..].iter().map(|a| a.to_string()));
        args.extend(["--threads".to_string(), threads.to_string(), "--data-dir".to_string(), data.display().to_string()]);
        let json = without_timings(run_json(&args, &cwd, &what));
        let json: Value = serde_json::from_str(&json.to_string().replace(cwd.to_str().unwrap(), "<cwd>")).unwrap();
        let files: Vec<Vec<u8>> = compare.iter().map(|f| content(&cwd.join(f), &what)).collect();
        match &first {
            None => first = Some((json, files)),
            Some((json1, files1)) => {
                assert_eq!(&json, json1, "{what}: the JSON differs from one thread's");
                for (k, f) in compare.iter().enumerate() {
                    assert!(files[k] == files1[k], "{what}: {f} differs from one thread's");
                }
            }
        }
    }
    root.join(format!("{}-{}-1", model.label.replace(['/', ' '], "_"), action[0]))
}

/// The bytes of a written file; for a checkpoint, of its tensors only (its metadata holds the
/// settings, the thread count among them, and the epochs' times).
fn content(path: &Path, what: &str) -> Vec<u8> {
    if path.extension().is_some_and(|e| e == "ckpt") {
        let ck = mase_io::load_checkpoint(path).unwrap_or_else(|e| panic!("{what}: {e}"));
        ck.params
            .iter()
            .flat_map(|(name, p)| name.bytes().chain(p.tensor.data.iter().flat_map(|v| v.to_le_bytes())).collect::<Vec<u8>>())
            .collect()
    } else {
        std::fs::read(path).unwrap_or_else(|e| panic!("{what}: {}: {e}", path.display()))
    }
}

/// Where `ch train --project p` puts its checkpoints.
const CKPTS: &str = "mase_output/p/software/training_ckpts";

/// How much work each action of a model gets: small models take batches large enough to be cut
/// on every thread count; the large ones (a million parameters or more: vgg7, resnet18,
/// mobilenet_v2, vit-tiny), whose every op is covered on a small model too, take one small
/// training step, a small random batch and the reports that need no pass over the data set, so
/// that their thread-count checks stay within the CI budget.
#[derive(Clone, Copy)]
struct Work {
    train_batch: usize,
    random_batch: usize,
    reports: &'static str,
}

const SMALL: Work = Work { train_batch: 200, random_batch: 256, reports: "graph,meta,type,shape,stats,flops,bitops,verify" };
const LARGE: Work = Work { train_batch: 16, random_batch: 8, reports: "graph,meta,type,shape,flops,bitops" };

/// `test` (batches large enough to be cut on every thread count), `analyze` (every report but the
/// measured latency), `run` on a random batch (float and integer executor) and `export` of one
/// model whose samples have the shape `sample`.
fn check_model(root: &Path, model: &Model, dataset: Option<&str>, sample: &[usize], data: &Path) {
    check_model_with(root, model, dataset, sample, data, SMALL)
}

fn check_model_with(root: &Path, model: &Model, dataset: Option<&str>, sample: &[usize], data: &Path, work: Work) {
    let shape = |batch: usize| std::iter::once(batch).chain(sample.iter().copied()).map(|d| d.to_string()).collect::<Vec<_>>().join(",");
    let per_sample = sample.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",");
    let reports = work.reports;
    match dataset {
        Some(_) => {
            same_at_every_thread_count(root, model, &["test", "--batch-size", "256"], dataset, data, &[]);
            same_at_every_thread_count(root, model, &["analyze", "--report", reports], dataset, data, &[]);
        }
        None => {
            // No data set fits: `analyze` takes the sample shape (the statistics and the
            // verification need samples, so they are left out).
            let args = ["analyze", "--report", "graph,meta,type,shape,flops,bitops", "--input-shape", &per_sample];
            same_at_every_thread_count(root, model, &args, dataset, data, &[]);
        }
    }
    let random = shape(work.random_batch);
    for integer in [false, true] {
        let mut args = vec!["run", "--random", &random, "--seed", "3", "-o", "y.npy"];
        args.extend(integer.then_some("--integer"));
        same_at_every_thread_count(root, model, &args, dataset, data, &["y.npy"]);
    }
    same_at_every_thread_count(root, model, &["export", "--format", "qonnx", "-o", "model.onnx"], dataset, data, &["model.onnx"]);
}

/// A few training steps (and a validation) at every thread count, with the same weights at the
/// end; then the one-thread checkpoint through `check_model`.
fn train_then_check(root: &Path, model: &Model, dataset: &str, data: &Path, work: Work) {
    let sample = sample_shape(dataset, data);
    let batch = work.train_batch.to_string();
    let steps = if work.train_batch < SMALL.train_batch { "1" } else { "3" };
    let train = ["train", "--max-epochs", "1", "--max-steps", steps, "--batch-size", &batch, "--project", "p"];
    let last = format!("{CKPTS}/last.ckpt");
    let dir = same_at_every_thread_count(root, model, &train, Some(dataset), data, &[&last]);
    let mut trained = model.clone();
    trained.args.extend(["--load".to_string(), dir.join(&last).display().to_string()]);
    check_model_with(root, &trained, Some(dataset), &sample, data, work);
}

/// A folder under `root` for one model's runs.
fn own_folder(root: &Path, label: &str) -> PathBuf {
    let dir = root.join(label.replace(['/', ' '], "_"));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// The trainable and buffer values of zoo model `name` on `dataset`.
fn parameters(name: &str, dataset: &str, data: &Path) -> usize {
    let opts = mase_io::DataOptions { data_dir: Some(data.to_path_buf()), ..Default::default() };
    let splits = mase_io::load_dataset(dataset, &opts).unwrap_or_else(|e| panic!("{dataset}: {e}"));
    let ctx = mase_zoo::ModelContext::new(splits.test.sample_shape.clone(), splits.info.num_classes);
    let g = mase_zoo::build_model(name, &ctx).unwrap_or_else(|e| panic!("{name}: {e}"));
    g.param_specs().iter().map(|(_, s)| s.shape.iter().product::<usize>()).sum()
}

/// The shape of one sample of a shipped data set.
fn sample_shape(dataset: &str, data: &Path) -> Vec<usize> {
    let opts = mase_io::DataOptions { data_dir: Some(data.to_path_buf()), ..Default::default() };
    mase_io::load_dataset(dataset, &opts).unwrap_or_else(|e| panic!("{dataset}: {e}")).test.sample_shape
}

/// The shipped data set whose samples have the shape `sample`, if any.
fn dataset_for(sample: &[usize], data: &Path) -> Option<&'static str> {
    let opts = mase_io::DataOptions { data_dir: Some(data.to_path_buf()), ..Default::default() };
    mase_io::dataset_names().iter().copied().find(|name| mase_io::load_dataset(name, &opts).is_ok_and(|s| s.test.sample_shape == sample))
}

#[test]
fn every_zoo_model_at_every_thread_count() {
    let root = scratch("every-zoo");
    let data = data_dir(&root);
    for name in mase_zoo::model_names() {
        let info = mase_zoo::model_info(name).unwrap();
        let work = if parameters(name, info.dataset, &data) >= 1_000_000 { LARGE } else { SMALL };
        // Each model's folders go when it is done: the large models write hundreds of MB.
        let dir = own_folder(&root, name);
        train_then_check(&dir, &Model::new(name, &[name]), info.dataset, &data, work);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn every_shipped_onnx_file_at_every_thread_count() {
    let root = scratch("every-onnx");
    let data = data_dir(&root);
    let mut count = 0;
    for dir in fixture_dirs() {
        for file in files(&dir, ".onnx") {
            let imported = mase_interop::import_file(&file, &mase_interop::ImportOptions::default())
                .unwrap_or_else(|e| panic!("{}: shipped model does not import: {e}", file.display()));
            // `ch` feeds one input tensor and reads one output: a model with several of either
            // is refused by every command here, and runs through the library and Python instead
            // (crates/interop/tests/multi_io.rs checks it against onnxruntime).
            if imported.sample_shapes.len() != 1 || imported.output_shapes.len() != 1 {
                count += 1;
                continue;
            }
            // A model that does not end in class scores has no data set to be tested on.
            let dataset = dataset_for(&imported.sample_shape, &data).filter(|_| imported.output_shape.len() == 1);
            let label = file.strip_prefix(repo_root()).unwrap().display().to_string();
            let model = Model::new(label, &["--model-file", file.to_str().unwrap()]);
            check_model(&root, &model, dataset, &imported.sample_shape, &data);
            count += 1;
        }
    }
    assert!(count >= 40, "only {count} ONNX files found under the fixtures");
}

#[test]
fn every_model_file_and_checkpoint_at_every_thread_count() {
    let root = scratch("every-file");
    let data = data_dir(&root);
    let mut count = 0;
    for file in files(&repo_root().join("models"), ".toml") {
        let label = file.strip_prefix(repo_root()).unwrap().display().to_string();
        let model = Model::new(label.clone(), &["--model-file", file.to_str().unwrap()]);
        // A model file adapts to the data set it is built for: the first shipped data set it
        // builds on is its data set.
        let graph_of = |d: &str| ch(&["analyze", "--model-file", file.to_str().unwrap(), d, "--data-dir", data.to_str().unwrap()], &root);
        let dataset = mase_io::dataset_names()
            .iter()
            .copied()
            .find(|d| graph_of(d).status.success())
            .unwrap_or_else(|| panic!("{label}: builds on no shipped data set"));
        let dir = own_folder(&root, &label);
        train_then_check(&dir, &model, dataset, &data, SMALL);
        let _ = std::fs::remove_dir_all(&dir);
        count += 1;
    }
    // Lightning checkpoints hold weights only; the zoo model is the one their file name starts with.
    for dir in fixture_dirs() {
        for file in files(&dir, ".ckpt") {
            let stem = file.file_name().unwrap().to_string_lossy().to_string();
            let Some(name) = mase_zoo::model_names().into_iter().filter(|n| stem.starts_with(n)).max_by_key(|n| n.len()) else {
                panic!("{}: names no zoo model", file.display());
            };
            let label = file.strip_prefix(repo_root()).unwrap().display().to_string();
            let model = Model::new(label, &[name, "--load", file.to_str().unwrap(), "--load-type", "pl"]);
            let dataset = mase_zoo::model_info(name).unwrap().dataset;
            check_model(&root, &model, Some(dataset), &sample_shape(dataset, &data), &data);
            count += 1;
        }
    }
    assert!(count >= 3, "only {count} model files and checkpoints found");
}
