//! Input that `ch` once accepted without a word, or refused with a line that did not say what
//! was wrong: each is one error line naming the flag, key, file or node and what was expected.
//! One line per case, with the whole line.

mod common;
use common::*;
use std::path::Path;

/// Runs every case in `dir` and compares its one error line (`dir` shown as `<dir>`); all
/// differences are reported together.
fn check(dir: &Path, cases: &[(&str, &str)]) {
    let mut wrong = Vec::new();
    for (args, want) in cases {
        let args: Vec<&str> = args.split_whitespace().collect();
        let line = ch_error(&args, dir).replace(dir.to_str().unwrap(), "<dir>");
        if line != format!("error: {want}") {
            wrong.push(format!("$ ch {}\n  want error: {want}\n  got  {line}", args.join(" ")));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every numeric flag takes a negative value as a value (not as an unknown flag) and refuses it
/// naming the flag; counts that must be positive refuse 0 too.
#[test]
fn numeric_flags_refuse_negative_values_by_name() {
    let dir = scratch("numeric-flags");
    let help = " (see `ch --help`)";
    let positive = |flag: &str, v: &str| format!("{flag} {v}: expected a positive integer{help}");
    let whole = |flag: &str, v: &str| format!("{flag} {v}: expected an integer >= 0{help}");
    let cases: Vec<(&str, String)> = vec![
        ("train tfc mnist --batch-size -5", positive("--batch-size", "-5")),
        ("train tfc mnist --batch-size 0", positive("--batch-size", "0")),
        ("train tfc mnist --batch-size many", positive("--batch-size", "many")),
        ("train tfc mnist --max-epochs -1", positive("--max-epochs", "-1")),
        ("train tfc mnist --accumulate-grad-batches -2", positive("--accumulate-grad-batches", "-2")),
        ("train tfc mnist --seed -1", whole("--seed", "-1")),
        ("train tfc mnist --threads -4", whole("--threads", "-4")),
        ("train tfc mnist --log-every-n-steps -10", whole("--log-every-n-steps", "-10")),
        ("train tfc mnist --cpu -1", whole("--cpu", "-1")),
        ("train tfc mnist --num-workers -1", whole("--cpu", "-1")),
        ("train tfc mnist --gpu -1", whole("--gpu", "-1")),
        ("train tfc mnist --nodes -3", whole("--nodes", "-3")),
        ("search --n-trials -3", positive("--n-trials", "-3")),
        ("search --n-trials 0", positive("--n-trials", "0")),
        ("search --n-jobs -2", format!("--n-jobs -2: expected -1 (all cores) or an integer >= 1{help}")),
        ("search --n-jobs 0", format!("--n-jobs 0: expected -1 (all cores) or an integer >= 1{help}")),
        ("search --seeds 1,-2", whole("--seeds", "-2")),
        ("transform --input-shape 1,-28,28", whole("--input-shape", "-28")),
        ("analyze jsc-tiny --num-classes -5", whole("--num-classes", "-5")),
        ("analyze jsc-tiny --num-samples -32", whole("--num-samples", "-32")),
        ("run jsc-tiny --random 4,-16", whole("--random", "-16")),
        ("emit --reuse -2", whole("--reuse", "-2")),
        ("simulate some-dir --random -8", whole("--random", "-8")),
        ("simulate some-dir --stall-seed -1", whole("--stall-seed", "-1")),
    ];
    let cases: Vec<(&str, &str)> = cases.iter().map(|(a, w)| (*a, w.as_str())).collect();
    check(&dir, &cases);
}

/// A search that would have run without a word: a seed that names no node, no trials, a resume
/// with nothing stored, a store in a folder that does not exist.
#[test]
fn searches_refuse_what_they_once_accepted() {
    let dir = scratch("search-refusals");
    let base =
        std::fs::read_to_string(repo_root().join("configs/examples/search_toy_tpe.toml")).unwrap().replace("n_trials = 20", "n_trials = 2");
    std::fs::write(dir.join("s.toml"), &base).unwrap();
    std::fs::write(dir.join("zero.toml"), base.replace("n_trials = 2", "n_trials = 0")).unwrap();
    let typo = base.replace("[search.search_space.seed.default.config]", "[search.search_space.seed.seq_blocks_9.config]")
        + "[search.search_space.seed.default.config]\nname = [\"NA\"]\n";
    std::fs::write(dir.join("typo.toml"), typo).unwrap();
    let not_searched = base.replace("[search.search_space.seed.default.config]", "[search.search_space.seed.view.config]")
        + "[search.search_space.seed.default.config]\nname = [\"NA\"]\n";
    std::fs::write(dir.join("view.toml"), not_searched).unwrap();
    std::fs::create_dir_all(dir.join("a-folder")).unwrap();
    check(
        &dir,
        &[
            (
                "search --config typo.toml",
                "search config: `search.search_space.seed.seq_blocks_9`: the model has no node `seq_blocks_9` (with setup.by = \"name\", a seed key is a node name, `default` or an op type)",
            ),
            (
                "search --config view.toml",
                "search config: `search.search_space.seed.view`: node `view` is a `view` node, which is not searched (quantizable ops: add, bmm, conv1d, conv2d, matmul, mul, linear, relu, sub)",
            ),
            (
                "search --config zero.toml",
                "search config: `search.strategy.setup.n_trials`: must be at least 1, got 0 (a study without trials has no result)",
            ),
            (
                "search --config s.toml --resume",
                "study storage mase_output/toy_toy_tiny/software/search_ckpts/study.db: holds no study `toy_toy_tiny` to resume (start it without --resume, or with mode \"fresh\")",
            ),
            (
                "search --config s.toml --storage sqlite:///no/such/folder/study.db",
                "study storage sqlite:///no/such/folder/study.db: the folder no/such/folder does not exist; create it first (a storage URL never creates folders)",
            ),
            (
                "search --config s.toml --storage no/such/folder/study.db",
                "study storage no/such/folder/study.db: the folder no/such/folder does not exist; create it first (a storage URL never creates folders)",
            ),
            // Reading a store never created one.
            ("study list --storage sqlite:///no/such/folder/study.db", "study storage no/such/folder/study.db: no such file"),
            (
                "test --model-file a-folder digits",
                "--model-file a-folder: is a folder; expected a model file (`*.toml`, or `*.onnx` beside its weights)",
            ),
        ],
    );
    assert!(!dir.join("no").exists(), "no folder was created for the storage");
}

/// `ch simulate` of a design beside a float checkpoint (the design's nodes lost their integer
/// formats): the node that runs in float is named, with what to do, before Verilator is needed.
#[test]
fn simulate_names_a_float_layer() {
    let dir = scratch("simulate-float");
    let data = dir.join("data/jsc");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::copy(repo_root().join("crates/io/tests/fixtures/jsc/jsc_fixture.h5"), data.join("jsc_fixture.h5")).unwrap();
    let layer = "name = \"integer\"\ndata_in_width = 8\ndata_in_frac_width = 4\nweight_width = 8\nweight_frac_width = 4\nbias_width = 8\nbias_frac_width = 4\n";
    let config = format!(
        "model = \"jsc-three-layer\"\ndataset = \"jsc\"\n[passes.quantize]\nby = \"type\"\n[passes.quantize.linear.config]\n{layer}[passes.emit_verilog]\noutput_dir = \"design\"\n"
    );
    std::fs::write(dir.join("emit.toml"), config).unwrap();
    ch_json(&["transform", "--config", "emit.toml", "--data-dir", "data"], &dir);
    let float = ch_json(&["train", "jsc-three-layer", "jsc", "--max-epochs", "1", "--data-dir", "data", "--project", "float"], &dir);
    std::fs::copy(float["best_checkpoint"].as_str().unwrap(), dir.join("design/model.ckpt")).unwrap();
    check(
        &dir,
        &[(
            "simulate design --random 3",
            "graph: node `seq_blocks_0` (linear) runs in float (not quantized), so the design's integer codes have no reference; quantize every layer to `integer` formats (`ch transform` with [passes.quantize]) and emit again",
        )],
    );
}
