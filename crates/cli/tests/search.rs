//! `ch search`: MASE's example configs run unchanged, brute force stops, samplers compare, a
//! killed search resumes, and bad configs fail with one line.

mod common;
use common::*;
use std::path::{Path, PathBuf};

/// A data dir holding the jsc fixture in MASE's HDF5 format.
fn jsc_data(root: &Path) -> PathBuf {
    let d = root.join("data");
    std::fs::create_dir_all(d.join("jsc")).unwrap();
    std::fs::copy(repo_root().join("crates/io/tests/fixtures/jsc/jsc_fixture.h5"), d.join("jsc/jsc_fixture.h5")).unwrap();
    d
}

fn example(name: &str) -> String {
    repo_root().join("configs/examples").join(name).to_str().unwrap().to_string()
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

#[test]
fn lab_config_searches_with_tpe_and_brute_force() {
    let root = scratch("search-lab");
    let data = jsc_data(&root);
    let cfg = example("jsc_toy_by_type.toml");
    let r = ch_json(&["search", "--config", &cfg, "--data-dir", data.to_str().unwrap(), "--accelerator", "cpu"], &root);
    let study = &r["studies"][0];
    assert_eq!(study["sampler"], "tpe");
    assert_eq!(study["complete"], 20);
    let dir = root.join("mase_output/jsc-tiny/software/search_ckpts");
    for f in ["study.db", "log.json", "best.json", "trials.csv", "best_so_far.png", "best_so_far.svg", "pareto.png", "pareto.svg"] {
        assert!(dir.join(f).exists(), "{f} is written");
    }
    let log = read_json(&dir.join("log.json"));
    let rec = log["0"].as_object().unwrap();
    let keys: Vec<&str> = rec.keys().map(|k| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "number",
            "values_0",
            "values_1",
            "user_attrs_hardware_metrics",
            "user_attrs_sampled_config",
            "user_attrs_scaled_metrics",
            "user_attrs_software_metrics",
            "state",
            "datetime_start",
            "datetime_complete",
            "duration"
        ]
    );
    let best = read_json(&dir.join("best.json"));
    let b0 = best["0"].as_object().unwrap();
    assert_eq!(
        b0.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
        ["number", "value", "software_metrics", "hardware_metrics", "scaled_metrics", "sampled_config"]
    );
    assert_eq!(b0["value"].as_array().unwrap().len(), 2);
    assert_eq!(std::fs::read_to_string(dir.join("trials.csv")).unwrap().lines().count(), 21);

    let r =
        ch_json(&["search", "--config", &cfg, "--data-dir", data.to_str().unwrap(), "--sampler", "brute", "--accelerator", "cpu"], &root);
    assert_eq!(r["studies"][0]["complete"], 18, "the by-name space has 2 x 3 x 3 points");
    assert_eq!(r["studies"][0]["stop"], "exhausted");
}

/// MASE's search_toy_tpe.toml unchanged (toy on toy_tiny, by-name default seed over five nodes).
/// It samples integer formats with frac_width > width, which compute (every bit fractional).
#[test]
fn toy_tpe_config_runs_unchanged() {
    let root = scratch("search-toy");
    let cfg = example("search_toy_tpe.toml");
    let r = ch_json(&["search", "--config", &cfg, "--accelerator", "cpu"], &root);
    assert_eq!(r["studies"][0]["complete"], 20);
    let best = read_json(&root.join("mase_output/toy_toy_tiny/software/search_ckpts/best.json"));
    assert!(best["0"]["sampled_config"]["seq_blocks_0"]["config"]["weight_width"].is_number());
}

#[test]
fn samplers_compare_on_one_chart() {
    let root = scratch("search-compare");
    let data = jsc_data(&root);
    let r = ch_json(
        &[
            "search",
            "--config",
            &example("jsc_toy_by_type.toml"),
            "--data-dir",
            data.to_str().unwrap(),
            "--compare-samplers",
            "brute,tpe,random",
            "--n-trials",
            "12",
            "--accelerator",
            "cpu",
        ],
        &root,
    );
    let names: Vec<&str> = r["studies"].as_array().unwrap().iter().map(|s| s["sampler"].as_str().unwrap()).collect();
    assert_eq!(names, ["brute", "tpe", "random"]);
    let dir = root.join("mase_output/jsc-tiny/software/search_ckpts");
    for f in ["compare_samplers.png", "compare_samplers.svg", "compare/tpe/best.json", "compare/brute/log.json"] {
        assert!(dir.join(f).exists(), "{f}");
    }
    let png = std::fs::read(dir.join("compare_samplers.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

/// The kill is an abort at the `after-finish` failpoint (`MASE_FAILPOINT`), which leaves the store
/// as SIGKILL does.
#[test]
fn a_search_killed_with_sigkill_resumes_to_its_budget() {
    let root = scratch("search-kill");
    // A tfc search of 40 trials on MNIST, killed after 5 and resumed.
    let cfg = root.join("tfc_search.toml");
    std::fs::write(
        &cfg,
        r#"
model = "tfc"
dataset = "mnist"
project = "killed"
batch_size = 500
[search.search_space]
name = "graph/quantize/mixed_precision_ptq"
[search.search_space.setup]
by = "type"
[search.search_space.seed.default.config]
name = ["NA"]
[search.search_space.seed.linear.config]
name = ["integer"]
data_in_width = [4, 6, 8]
data_in_frac_width = ["NA"]
weight_width = [2, 3, 4, 5, 6, 8]
weight_frac_width = ["NA"]
bias_width = [8]
bias_frac_width = ["NA"]
[search.strategy.sw_runner.basic_evaluation]
dataloader = "train_dataloader"
num_samples = 4000
[search.strategy.hw_runner.average_bitwidth]
compare_to = 32
[search.strategy.setup]
n_trials = 40
sampler = "random"
sum_scaled_metrics = false
[search.strategy.metrics]
accuracy = { scale = 1.0, direction = "maximize" }
average_bitwidth = { scale = 0.2, direction = "minimize" }
"#,
    )
    .unwrap();
    let data = repo_root().join("data");
    let args = ["search", "--config", cfg.to_str().unwrap(), "--data-dir", data.to_str().unwrap(), "--threads", "1", "--json"];
    // The failpoint aborts `ch search` right after its fifth result is committed: no cleanup
    // runs, so the store is left as `kill -9` at that moment leaves it, without a race.
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_ch"))
        .args(args)
        .current_dir(&root)
        .env("MASE_FAILPOINT", "after-finish:5")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the failpoint stopped the search ({status})");
    let db = root.join("mase_output/killed/software/search_ckpts/study.db");
    let before = {
        use mase_search::Storage;
        let mut st = mase_search::SqliteStorage::open(&db).unwrap();
        st.trials("killed").unwrap().iter().filter(|t| t.state == mase_search::TrialState::Complete).count()
    };
    assert_eq!(before, 5, "killed right after its fifth trial");
    let r = ch_json(&[&args[..7], &["--resume"]].concat(), &root);
    assert_eq!(r["studies"][0]["complete"], 40);
    let dir = db.parent().unwrap();
    let log = read_json(&dir.join("log.json"));
    let complete: Vec<&serde_json::Value> = log.as_object().unwrap().values().filter(|t| t["state"] == "COMPLETE").collect();
    assert_eq!(complete.len(), 40);
    let numbers: std::collections::HashSet<u64> = complete.iter().map(|t| t["number"].as_u64().unwrap()).collect();
    assert_eq!(numbers.len(), 40, "distinct trials");
    let best = read_json(&dir.join("best.json"));
    assert!(best["0"]["value"].as_array().is_some_and(|v| v.len() == 2) && best["0"]["sampled_config"]["seq_blocks_1"].is_object());
}

/// A comparison killed during its first study resumes that study and starts the ones it never
/// reached (a resume of a run with no stored study at all is an error: refusals.rs).
#[test]
fn a_killed_comparison_resumes_and_starts_the_studies_it_never_reached() {
    let root = scratch("search-compare-kill");
    let text = std::fs::read_to_string(repo_root().join("configs/examples/search_toy_tpe.toml")).unwrap();
    std::fs::write(root.join("s.toml"), text.replace("n_trials = 20", "n_trials = 3")).unwrap();
    let args = ["search", "--config", "s.toml", "--compare-samplers", "random,brute", "--threads", "1", "--accelerator", "cpu"];
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_ch"))
        .args(args)
        .current_dir(&root)
        .env("MASE_FAILPOINT", "after-finish:2")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the failpoint stopped the search ({status})");
    let r = ch_json(&[&args[..], &["--resume"]].concat(), &root);
    let complete: Vec<u64> = r["studies"].as_array().unwrap().iter().map(|s| s["complete"].as_u64().unwrap()).collect();
    assert_eq!(complete, [3, 3], "the first study resumed to its budget, the second run whole");
}

#[test]
fn bad_search_configs_fail_with_one_line() {
    let root = scratch("search-bad");
    let data = jsc_data(&root);
    let text = std::fs::read_to_string(example("jsc_toy_by_type.toml")).unwrap();
    // (replace this, by that, words the error line must contain)
    let cases = [
        ("sampler = \"tpe\"", "sampler = \"anneal\"", "unknown sampler `anneal`"),
        (
            "weight_width = [2, 4, 8]\nweight_frac_width = [\"NA\"]\nbias_width",
            "weight_width = []\nweight_frac_width = [\"NA\"]\nbias_width",
            "empty choice list",
        ),
        (
            "average_bitwidth.direction = \"minimize\"",
            "average_bitwidth.direction = \"minimize\"\nbitops.scale = 1.0\nbitops.direction = \"minimize\"",
            "metric `bitops`",
        ),
    ];
    for (i, (from, to, words)) in cases.iter().enumerate() {
        assert!(text.contains(from), "case {i}: the example has `{from}`");
        let p = root.join(format!("bad{i}.toml"));
        std::fs::write(&p, text.replacen(from, to, 1)).unwrap();
        let line =
            ch_error(&["search", "--config", p.to_str().unwrap(), "--data-dir", data.to_str().unwrap(), "--accelerator", "cpu"], &root);
        assert!(line.contains(words), "case {i}: {line}");
    }
    let line = ch_error(&["search", "jsc-tiny", "jsc", "--data-dir", data.to_str().unwrap()], &root);
    assert!(line.contains("--config"), "{line}");
}

/// A `configs/` file (not one of MASE's examples).
fn config(name: &str) -> String {
    repo_root().join("configs").join(name).to_str().unwrap().to_string()
}

#[test]
fn lab3_tied_space_runs_brute_force_to_exactly_16_trials() {
    let root = scratch("search-lab3");
    let data = jsc_data(&root);
    let r = ch_json(&["search", "--config", &config("lab3_tied_pairs_search.toml"), "--data-dir", data.to_str().unwrap()], &root);
    let study = &r["studies"][0];
    assert_eq!(
        (study["sampler"].as_str(), study["complete"].as_u64(), study["stop"].as_str()),
        (Some("brute"), Some(16), Some("exhausted"))
    );
    let dir = root.join("mase_output/lab3_tied_pairs_search/software/search_ckpts");
    let csv = std::fs::read_to_string(dir.join("trials.csv")).unwrap();
    assert_eq!(csv.lines().count(), 17);
    // The last point takes the last pair for both groups, on every Linear layer.
    let log = read_json(&dir.join("log.json"));
    let last = &log["15"]["user_attrs_sampled_config"];
    for n in ["seq_blocks_2", "seq_blocks_5", "seq_blocks_8"] {
        let c = &last[n]["config"];
        assert_eq!(
            (&c["data_in_width"], &c["data_in_frac_width"], &c["weight_width"], &c["weight_frac_width"]),
            (&4.into(), &2.into(), &4.into(), &2.into()),
            "{n}: {c}"
        );
    }
}

/// The running minimum of a study's objective values, in trial order, from its `log.json`.
fn running_min(log: &serde_json::Value) -> Vec<f64> {
    let mut rows: Vec<(u64, f64)> =
        log.as_object().unwrap().values().map(|t| (t["number"].as_u64().unwrap(), t["value"].as_f64().unwrap())).collect();
    rows.sort_by_key(|r| r.0);
    rows.iter()
        .scan(f64::INFINITY, |m, r| {
            *m = m.min(r.1);
            Some(*m)
        })
        .collect()
}

#[test]
fn samplers_compare_over_seeds_with_their_own_options_and_a_band() {
    let root = scratch("search-seeds");
    let data = jsc_data(&root);
    // Lab 3's tied space with one objective, the mean bits per weight, which is the sampled weight
    // width (16, 8, 8 or 4 for the four pairs): brute force's best so far is 16, 8, 8, then 4.
    let text = std::fs::read_to_string(config("lab3_tied_pairs_search.toml")).unwrap();
    let (head, _) = text.split_once("[search.strategy.setup]").unwrap();
    let cfg = root.join("seeds.toml");
    std::fs::write(
        &cfg,
        format!(
            "{head}[search.strategy.setup]\nsampler = \"brute\"\nsum_scaled_metrics = true\ndirection = \"minimize\"\n\
             [search.strategy.sampler_options]\nn_startup_trials = 4\n[search.strategy.sampler_options.nsgaii]\npopulation_size = 4\n\
             [search.strategy.metrics]\naverage_bitwidth = {{ scale = 1.0, direction = \"minimize\" }}\n"
        ),
    )
    .unwrap();
    let args =
        ["search", "--config", cfg.to_str().unwrap(), "--data-dir", data.to_str().unwrap(), "--compare-samplers", "brute,tpe,random"];
    let r = ch_json(&[&args[..], &["--seeds", "1,2", "--n-trials", "16"]].concat(), &root);
    let studies: Vec<(&str, u64, &str)> = r["studies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["sampler"].as_str().unwrap(), s["seed"].as_u64().unwrap(), s["study"].as_str().unwrap()))
        .collect();
    assert_eq!(
        studies,
        [
            ("brute", 1, "lab3_tied_pairs_search-brute-seed1"),
            ("brute", 2, "lab3_tied_pairs_search-brute-seed2"),
            ("tpe", 1, "lab3_tied_pairs_search-tpe-seed1"),
            ("tpe", 2, "lab3_tied_pairs_search-tpe-seed2"),
            ("random", 1, "lab3_tied_pairs_search-random-seed1"),
            ("random", 2, "lab3_tied_pairs_search-random-seed2"),
        ]
    );
    let dir = root.join("mase_output/lab3_tied_pairs_search/software/search_ckpts");
    let png = std::fs::read(dir.join("compare_samplers.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!((u32::from_be_bytes(png[16..20].try_into().unwrap()), u32::from_be_bytes(png[20..24].try_into().unwrap())), (900, 600));
    let svg = std::fs::read_to_string(dir.join("compare_samplers.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>") && svg.contains("over seeds 1, 2"));
    let csv = std::fs::read_to_string(dir.join("compare_samplers.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("sampler,trial,seed_1,seed_2,mean,min,max"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let brute: Vec<String> = rows.iter().filter(|r| r[0] == "brute").map(|r| r[1..].join(",")).collect();
    let mut expected = vec!["0,16,16,16,16,16".to_string(), "1,8,8,8,8,8".into(), "2,8,8,8,8,8".into()];
    expected.extend((3..16).map(|k| format!("{k},4,4,4,4,4")));
    assert_eq!(brute, expected, "brute force ignores the seed");
    // TPE and random: each seed's column is its study's running minimum, and mean, min and max
    // are taken over the two seeds.
    for sampler in ["tpe", "random"] {
        let per_seed: Vec<Vec<f64>> =
            [1, 2].iter().map(|s| running_min(&read_json(&dir.join(format!("compare/{sampler}/seed{s}/log.json"))))).collect();
        let mine: Vec<&Vec<&str>> = rows.iter().filter(|r| r[0] == sampler).collect();
        assert_eq!(mine.len(), 16, "{sampler}");
        for (k, r) in mine.iter().enumerate() {
            let v: Vec<f64> = r[1..].iter().map(|x| x.parse().unwrap()).collect();
            let (a, b) = (per_seed[0][k], per_seed[1][k]);
            assert_eq!(v, [k as f64, a, b, (a + b) / 2.0, a.min(b), a.max(b)], "{sampler} trial {k}");
        }
    }
    let summary = read_json(&dir.join("compare_samplers.json"));
    assert_eq!(summary["seeds"], serde_json::json!([1, 2]));
    assert_eq!(summary["samplers"][0]["final"]["mean"], 4.0);
    // A seed given twice would name one study twice.
    let line = ch_error(&[&args[..], &["--seeds", "1,1"]].concat(), &root);
    assert!(line.contains("seed 1 is given twice"), "{line}");
}
