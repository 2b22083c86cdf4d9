//! The acceptance tests of the search issue, on the library.

mod common;
use common::*;
use mase_search::objective::{MetricSpec, Objective};
use mase_search::pareto::dominates;
use mase_search::storage::OpenMode;
use mase_search::{
    best_trials, build_runners, build_sampler, run_study, Direction, MemoryStorage, ParamKind, Runner, SearchConfig, Silent, SqliteStorage,
    StopReason, TrialState,
};
use serde_json::{json, Value};
use std::collections::HashSet;

#[test]
fn brute_force_enumerates_the_lab_space_exactly_once_and_stops() {
    let search = example_search("jsc_toy_by_type.toml");
    let cfg = SearchConfig::parse(&search).unwrap();
    let splits = jsc_splits();
    let space = space(&search, base_model("jsc-tiny", &splits, 0)).unwrap();
    // doc/mase-semantics.md#search-worked-example: nine flattened keys, in node order, with 2 x 3 x 3 = 18 points.
    let names: Vec<&str> = space.params().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "seq_blocks_1/config/name",
            "seq_blocks_2/config/name",
            "seq_blocks_2/config/data_in_width",
            "seq_blocks_2/config/data_in_frac_width",
            "seq_blocks_2/config/weight_width",
            "seq_blocks_2/config/weight_frac_width",
            "seq_blocks_2/config/bias_width",
            "seq_blocks_2/config/bias_frac_width",
            "seq_blocks_3/config/name"
        ]
    );
    let out = brute_force("t", space.as_ref(), &cfg, &Value::Null, splits, 20, 42);
    assert_eq!(out.stop, StopReason::Exhausted);
    assert_eq!(out.trials.len(), 18, "n_trials = 20 but the space has 18 points");
    let points: HashSet<Vec<u64>> = out.trials.iter().map(|t| t.point.iter().map(|&x| x as u64).collect()).collect();
    assert_eq!(points.len(), 18);
    assert!(out.trials.iter().all(|t| t.state == TrialState::Complete));
    // The sampled config has MASE's shape (no `by`, `default` appended, NA as null) and the
    // average bit width is the weight width of the one quantized Linear.
    let t = &out.trials[17];
    assert_eq!(t.config["seq_blocks_1"], json!({"config": {"name": null}}));
    assert_eq!(
        t.config["seq_blocks_2"],
        json!({"config": {"name": "integer", "data_in_width": 8, "data_in_frac_width": null, "weight_width": 8, "weight_frac_width": null, "bias_width": 8, "bias_frac_width": null}})
    );
    assert_eq!(t.config["default"]["config"]["bypass"], json!(true));
    assert!(t.config.get("by").is_none());
    for t in &out.trials {
        let w = t.config["seq_blocks_2"]["config"]["weight_width"].as_f64().unwrap();
        assert_eq!(t.hardware_metrics["average_bitwidth"], w);
        assert_eq!(t.hardware_metrics["memory_density"], 32.0 / w);
        assert_eq!(t.scaled_metrics["average_bitwidth"], 0.2 * w);
        assert_eq!(t.software_metrics.keys().collect::<Vec<_>>(), ["loss", "accuracy"]);
    }
}

/// Trials until the quadratic's optimum (f = 0) is first found, capped at `cap`.
fn trials_to_optimum(sampler: &str, seed: u64, cap: usize) -> usize {
    let space = PointGrid(Grid::new(3, 8));
    let target = vec![5.0, 2.0, 6.0];
    let runners: Vec<Box<dyn Runner>> = vec![Box::new(QuadraticRunner { target })];
    let objective = Objective::new(
        vec![MetricSpec { name: "f".into(), scale: 1.0, direction: Direction::Minimize }],
        Some(Direction::Minimize),
        vec![],
    );
    let s = build_sampler(sampler, &Value::Null).unwrap();
    let mut store = MemoryStorage::new();
    let out = run_study(&one_thread_setup("t", &space, s.as_ref(), &objective, &runners, cap, seed), &mut store, OpenMode::Fresh, &Silent)
        .unwrap();
    out.trials.iter().position(|t| t.values.as_ref().unwrap()[0] == 0.0).map_or(cap, |i| i + 1)
}

#[test]
fn tpe_finds_a_known_optimum_in_fewer_trials_than_random() {
    // 512 points; the optimum is one of them. Ten fixed seeds, the same for both samplers.
    let cap = 300;
    let seeds: Vec<u64> = (1..=10).collect();
    let mean = |s: &str| seeds.iter().map(|&seed| trials_to_optimum(s, seed, cap)).sum::<usize>() as f64 / seeds.len() as f64;
    let (tpe, random) = (mean("tpe"), mean("random"));
    assert!(tpe < random, "TPE needed {tpe} trials on average, random {random}");
    assert!(tpe < 0.5 * random, "TPE should be clearly better: {tpe} vs {random}");
}

#[test]
fn same_seed_same_study_and_parallel_jobs_finish_the_budget() {
    let space = PointGrid(Grid::new(4, 6));
    let runners: Vec<Box<dyn Runner>> = vec![Box::new(QuadraticRunner { target: vec![1.0, 2.0, 3.0, 4.0] })];
    let objective = Objective::new(
        vec![
            MetricSpec { name: "f".into(), scale: 1.0, direction: Direction::Minimize },
            MetricSpec { name: "g".into(), scale: 1.0, direction: Direction::Maximize },
        ],
        None,
        vec![],
    );
    for name in ["tpe", "random", "nsgaii", "qmc", "brute"] {
        let s = build_sampler(name, &json!(if name == "nsgaii" { json!({"population_size": 8}) } else { Value::Null })).unwrap();
        let run = |jobs: usize| {
            let mut st = one_thread_setup("t", &space, s.as_ref(), &objective, &runners, 30, 7);
            st.n_jobs = jobs;
            let mut store = MemoryStorage::new();
            run_study(&st, &mut store, OpenMode::Fresh, &Silent).unwrap().trials
        };
        let (a, b) = (run(1), run(1));
        let pts = |t: &[mase_search::TrialRecord]| t.iter().map(|t| t.point.clone()).collect::<Vec<_>>();
        assert_eq!(pts(&a), pts(&b), "{name}: same seed, same points");
        let par = run(3);
        assert_eq!(par.iter().filter(|t| t.state == TrialState::Complete).count(), 30, "{name} with 3 jobs");
        let numbers: HashSet<u64> = par.iter().map(|t| t.number).collect();
        assert_eq!(numbers.len(), par.len(), "{name}: trial numbers are unique");
        if name == "nsgaii" {
            assert_eq!(a[20].system_attrs["nsga2:generation"], json!(2));
            assert!(a[20].system_attrs.contains_key("nsga2:parents"));
        }
    }
}

#[test]
fn multi_objective_tfc_on_mnist_gives_a_pareto_front_and_plots() {
    let splits = mnist_splits();
    let base = base_model("tfc", &splits, 0);
    let search: Value = serde_json::to_value(
        r#"
        [search_space]
        name = "graph/quantize/mixed_precision_ptq"
        [search_space.setup]
        by = "type"
        [search_space.seed.default.config]
        name = ["NA"]
        [search_space.seed.linear.config]
        name = ["integer"]
        data_in_width = [8]
        data_in_frac_width = ["NA"]
        weight_width = [2, 3, 4, 8]
        weight_frac_width = ["NA"]
        bias_width = [8]
        bias_frac_width = ["NA"]
        [strategy.sw_runner.basic_evaluation]
        data_loader = "val_dataloader"
        num_samples = 500
        [strategy.hw_runner.average_bitwidth]
        compare_to = 32
        [strategy.setup]
        sampler = "tpe"
        n_trials = 24
        sum_scaled_metrics = false
        [strategy.metrics]
        accuracy = { scale = 1.0, direction = "maximize" }
        average_bitwidth = { scale = 0.2, direction = "minimize" }
        "#
        .parse::<toml::Table>()
        .unwrap(),
    )
    .unwrap();
    let cfg = SearchConfig::parse(&search).unwrap();
    let space = space(&search, base).unwrap();
    assert_eq!(space.params().len(), 4 * 7 + 3, "four linear layers with 7 fields each, three relus with a name");
    let sampler = build_sampler("tpe", &Value::Null).unwrap();
    let runners = build_runners(&cfg.sw_runners, &cfg.hw_runners, &env(splits)).unwrap();
    let dir = scratch("pareto");
    let mut store = SqliteStorage::open(&dir.join("study.db")).unwrap();
    let out = run_study(
        &one_thread_setup("t", space.as_ref(), sampler.as_ref(), &cfg.objective, &runners, 24, 3),
        &mut store,
        OpenMode::Fresh,
        &Silent,
    )
    .unwrap();
    assert_eq!(out.trials.len(), 24);
    let best = best_trials(&out.trials, &cfg.objective);
    assert!(!best.is_empty());
    let losses: Vec<Vec<f64>> = best.iter().map(|t| cfg.objective.losses(t.values.as_ref().unwrap())).collect();
    for a in &losses {
        for b in &losses {
            assert!(!dominates(a, b), "Pareto front point {a:?} dominates {b:?}");
        }
    }
    // Every non-front trial is dominated by (or equal to) some front trial.
    for t in &out.trials {
        let l = cfg.objective.losses(t.values.as_ref().unwrap());
        assert!(losses.iter().any(|f| dominates(f, &l) || *f == l), "trial {} is neither on nor behind the front", t.number);
    }
    mase_search::report::write_reports(&dir, &out.trials, &cfg.objective, space.params()).unwrap();
    let best_json: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("best.json")).unwrap()).unwrap();
    assert_eq!(best_json.as_object().unwrap().len(), best.len());
    assert!(best_json["0"]["value"].as_array().unwrap().len() == 2);
    let all: Vec<(f64, f64)> =
        out.trials.iter().map(|t| (t.hardware_metrics["average_bitwidth"], t.software_metrics["accuracy"])).collect();
    let front: Vec<(f64, f64)> = best.iter().map(|t| (t.hardware_metrics["average_bitwidth"], t.software_metrics["accuracy"])).collect();
    let files = mase_search::plot::plot_pareto(&dir.join("pareto"), "tfc on MNIST", "average bit width", "accuracy", &all, &front).unwrap();
    let png = image::open(&files[0]).expect("the PNG decodes");
    assert_eq!((png.width(), png.height()), (900, 600));
    let svg = std::fs::read_to_string(&files[1]).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>") && svg.contains("Pareto front"), "SVG with text");
}

#[test]
fn a_killed_study_resumes_from_sqlite() {
    let dir = scratch("resume");
    let db = dir.join("study.db");
    let space = PointGrid(Grid::new(2, 5));
    let runners: Vec<Box<dyn Runner>> = vec![Box::new(QuadraticRunner { target: vec![1.0, 3.0] })];
    let objective = Objective::new(
        vec![MetricSpec { name: "f".into(), scale: 1.0, direction: Direction::Minimize }],
        Some(Direction::Minimize),
        vec![],
    );
    let s = build_sampler("brute", &Value::Null).unwrap();
    {
        let mut store = SqliteStorage::open(&db).unwrap();
        run_study(&one_thread_setup("t", &space, s.as_ref(), &objective, &runners, 6, 1), &mut store, OpenMode::Fresh, &Silent).unwrap();
        // A trial claimed by a process that then died: it stays RUNNING in the file.
        use mase_search::storage::{Claim, Storage};
        store
            .claim("t", None, &mut |_, _| {
                Ok(Some(Claim { point: vec![1.0, 1.0], config: json!({"x": [1.0, 1.0]}), system_attrs: Default::default() }))
            })
            .unwrap();
    }
    let mut store = SqliteStorage::open(&db).unwrap();
    let out =
        run_study(&one_thread_setup("t", &space, s.as_ref(), &objective, &runners, 25, 1), &mut store, OpenMode::Resume, &Silent).unwrap();
    assert_eq!(out.interrupted, 1);
    let complete: Vec<_> = out.trials.iter().filter(|t| t.state == TrialState::Complete).collect();
    assert_eq!(complete.len(), 25, "the 5 x 5 grid, each point once");
    let pts: HashSet<Vec<u64>> = complete.iter().map(|t| t.point.iter().map(|&x| x as u64).collect()).collect();
    assert_eq!(pts.len(), 25);
    assert_eq!(out.trials.iter().filter(|t| t.state == TrialState::Fail).count(), 1);
    // Resuming with another space is refused with the study named.
    let other = PointGrid(Grid::new(3, 5));
    let e = run_study(&one_thread_setup("t", &other, s.as_ref(), &objective, &runners, 25, 1), &mut store, OpenMode::Resume, &Silent)
        .unwrap_err()
        .to_string();
    assert!(e.contains("study `t`") && e.contains("space") && !e.contains('\n'), "{e}");
}

#[test]
fn bad_search_configs_fail_with_one_line() {
    let base = toml::from_str::<toml::Table>(&std::fs::read_to_string(repo_root().join("configs/examples/jsc_toy_by_type.toml")).unwrap())
        .unwrap();
    let splits = jsc_splits();
    let model = base_model("jsc-tiny", &splits, 0);
    let env = env(splits);
    // (what to change in the [search] table, words the error must contain)
    type Edit = fn(&mut Value);
    let cases: &[(Edit, &[&str])] = &[
        (|s| s["strategy"]["setup"]["sampler"] = json!("annealing"), &["unknown sampler `annealing`", "tpe"]),
        (
            |s| s["search_space"]["seed"]["seq_blocks_2"]["config"]["weight_width"] = json!([]),
            &["empty choice list", "seq_blocks_2.config.weight_width"],
        ),
        (
            |s| s["strategy"]["metrics"]["bitops"] = json!({"scale": 1.0, "direction": "minimize"}),
            &["metric `bitops`", "no configured runner"],
        ),
        (|s| s["strategy"]["sw_runner"]["basic_evaluaton"] = json!({}), &["unknown software runner `basic_evaluaton`"]),
        (|s| s["strategy"]["setup"]["n_trails"] = json!(3), &["search.strategy.setup.n_trails", "unknown key"]),
        (|s| s["search_space"]["setup"]["by"] = json!("regex"), &["search.search_space.setup.by"]),
        (|s| s["search_space"]["name"] = json!("graph/prune"), &["unknown search space `graph/prune`"]),
        (|s| s["strategy"]["metrics"]["accuracy"]["direction"] = json!("up"), &["search.strategy.metrics.accuracy.direction"]),
        (|s| s["storage"] = json!({"urll": "study.db"}), &["search.storage.urll", "unknown key"]),
        (
            |s| s["storage"] = json!({"stale_after": 2, "heartbeat_interval": 5}),
            &["search.storage.heartbeat_interval", "shorter than stale_after"],
        ),
        (|s| s["storage"] = json!({"stale_after": -1}), &["search.storage.stale_after", "positive number of seconds"]),
        (|s| s["strategy"]["setup"]["n_jobs"] = json!(1_000_000), &["search.strategy.setup.n_jobs", "from 1 to 256", "1000000"]),
    ];
    for (edit, words) in cases {
        let mut search = serde_json::to_value(&base["search"]).unwrap();
        edit(&mut search);
        let e = mase_search::check_search_config(&search, model.clone(), std::sync::Arc::new(mase_search::LocalQuantizer), &env)
            .err()
            .expect("must fail")
            .to_string();
        assert!(!e.contains('\n'), "one line: {e}");
        for w in *words {
            assert!(e.contains(w), "`{e}` should mention `{w}`");
        }
    }
}

/// The (width, frac_width) pairs of lab 3, for data_in and for weight.
const LAB3_PAIRS: [(u64, u64); 4] = [(16, 8), (8, 6), (8, 4), (4, 2)];

#[test]
fn lab3_tied_pairs_are_16_points_and_brute_force_runs_exactly_16_trials() {
    let search = config_search("lab3_tied_pairs_search.toml");
    let cfg = SearchConfig::parse(&search).unwrap();
    let splits = jsc_splits();
    let base = base_model("jsc-toy", &splits, 0);
    let linears: Vec<String> = base.graph.nodes().iter().filter(|n| n.op.mase_op() == "linear").map(|n| n.name.clone()).collect();
    let relus: Vec<String> = base.graph.nodes().iter().filter(|n| n.op.mase_op() == "relu").map(|n| n.name.clone()).collect();
    assert_eq!((linears.len(), relus.len()), (3, 4), "jsc-toy: three Linear layers, four ReLUs");
    let space = space(&search, base).unwrap();
    // One parameter per field group of an op type (the first ReLU comes before the first Linear),
    // not one per node.
    let params: Vec<(&str, &ParamKind)> = space.params().iter().map(|p| (p.name.as_str(), &p.kind)).collect();
    assert_eq!(
        params,
        [
            ("relu/config/name", &ParamKind::Index { choices: 1 }),
            ("linear/config/name", &ParamKind::Index { choices: 1 }),
            ("linear/config/data_in", &ParamKind::Categorical { choices: 4 }),
            ("linear/config/weight", &ParamKind::Categorical { choices: 4 }),
            ("linear/config/bias", &ParamKind::Categorical { choices: 1 }),
        ]
    );
    assert_eq!(space.params()[2].values, Some(LAB3_PAIRS.iter().map(|&(w, f)| json!([w, f])).collect()));
    let out = brute_force("t", space.as_ref(), &cfg, &cfg.sampler_options, splits, 20, 42);
    assert_eq!(out.stop, StopReason::Exhausted);
    assert_eq!(out.trials.len(), 16, "n_trials = 20 but the space has 4 x 4 points");
    assert!(out.trials.iter().all(|t| t.state == TrialState::Complete));
    for (k, t) in out.trials.iter().enumerate() {
        // Lexicographic order: data_in varies slowest.
        let ((dw, df), (ww, wf)) = (LAB3_PAIRS[k / 4], LAB3_PAIRS[k % 4]);
        let expected = json!({"config": {"name": "integer", "data_in_width": dw, "data_in_frac_width": df,
            "weight_width": ww, "weight_frac_width": wf, "bias_width": 8, "bias_frac_width": 4}});
        for n in &linears {
            assert_eq!(t.config[n], expected, "trial {k}, node {n}");
        }
        for n in &relus {
            assert_eq!(t.config[n], json!({"config": {"name": null}}), "trial {k}, node {n}");
        }
        // Every Linear weight has the sampled width, so the mean bits per weight is that width.
        assert_eq!(t.hardware_metrics["average_bitwidth"], ww as f64, "trial {k}");
    }
    // trials.csv shows the chosen pair of a tuple parameter.
    let dir = scratch("lab3-csv");
    mase_search::report::write_reports(&dir, &out.trials, &cfg.objective, space.params()).unwrap();
    let csv = std::fs::read_to_string(dir.join("trials.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "linear/config/weight").unwrap();
    let row5 = csv.lines().nth(6).unwrap();
    assert!(row5.starts_with("5,COMPLETE,"), "{row5}");
    assert!(row5.contains("\"[8,6]\""), "trial 5 takes weight pair 1: {row5} (column {col})");
}

#[test]
fn every_sampler_proposes_tuple_choices_and_repeats_itself_with_the_same_seed() {
    let search = config_search("lab3_tied_pairs_search.toml");
    let splits = jsc_splits();
    let space = space(&search, base_model("jsc-toy", &splits, 0)).unwrap();
    let hw = vec![("average_bitwidth".to_string(), json!({"compare_to": 32}))];
    let runners = build_runners(&[], &hw, &env(splits)).unwrap();
    let objective = Objective::new(
        vec![MetricSpec { name: "average_bitwidth".into(), scale: 1.0, direction: Direction::Minimize }],
        Some(Direction::Minimize),
        vec![],
    );
    for name in ["tpe", "random", "nsgaii", "qmc", "brute"] {
        let options = match name {
            "nsgaii" => json!({"population_size": 4}),
            "tpe" => json!({"n_startup_trials": 4}),
            _ => Value::Null,
        };
        let s = build_sampler(name, &options).unwrap();
        let run = || {
            let mut store = MemoryStorage::new();
            run_study(&one_thread_setup("t", space.as_ref(), s.as_ref(), &objective, &runners, 12, 5), &mut store, OpenMode::Fresh, &Silent)
                .unwrap()
                .trials
        };
        let (a, b) = (run(), run());
        assert_eq!(a.len(), 12, "{name}");
        assert_eq!(a.iter().map(|t| &t.point).collect::<Vec<_>>(), b.iter().map(|t| &t.point).collect::<Vec<_>>(), "{name}: same seed");
        for t in &a {
            assert_eq!(t.state, TrialState::Complete, "{name}");
            let (i, j) = (t.point[2], t.point[3]);
            assert!([i, j].iter().all(|x| x.fract() == 0.0 && (0.0..4.0).contains(x)), "{name}: {:?}", t.point);
            assert_eq!(t.hardware_metrics["average_bitwidth"], LAB3_PAIRS[j as usize].0 as f64, "{name}");
        }
    }
}

#[test]
fn the_seed_band_plot_decodes_and_shades_only_a_spread() {
    use mase_search::plot::{plot_bands, BandSeries};
    let dir = scratch("bands");
    let spread = BandSeries { label: "tpe".into(), points: vec![(0.0, 12.0, 8.0, 16.0), (1.0, 8.0, 8.0, 8.0), (5.0, 6.0, 4.0, 8.0)] };
    let flat = BandSeries { label: "brute".into(), points: vec![(0.0, 16.0, 16.0, 16.0), (3.0, 4.0, 4.0, 4.0)] };
    // Pixels of the first colour's band tint (20 % of (31, 119, 180) over white).
    let tinted =
        |png: &image::RgbImage| png.pixels().filter(|p| p.0.iter().zip([210u8, 228, 240]).all(|(&a, b)| a.abs_diff(b) <= 2)).count();
    for (series, shaded) in [(vec![spread.clone(), flat.clone()], true), (vec![flat], false)] {
        let files = plot_bands(&dir.join(format!("band_{shaded}")), "samplers over seeds", "best value so far", &series).unwrap();
        let png = image::open(&files[0]).expect("the PNG decodes").to_rgb8();
        assert_eq!((png.width(), png.height()), (900, 600));
        let svg = std::fs::read_to_string(&files[1]).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>") && svg.contains("(mean, min–max band)"));
        assert_eq!(svg.contains("<polygon"), shaded, "a band only where seeds differ");
        if shaded {
            assert!(tinted(&png) > 5000, "the band is drawn: {} tinted pixels", tinted(&png));
        } else {
            assert_eq!(tinted(&png), 0);
        }
    }
}
