//! `hw_runner.rtl` and the reuse factor as a search dimension: the five metrics of every trial
//! are the cost model's on the candidate lowered with its sampled reuse factor, brute force
//! visits every reuse factor, bad options are one-line errors, and `synth = true` runs Yosys.

mod common;
use common::*;
use mase_hw::{cost, lower, LowerOptions};
use mase_ir::{Graph, Op, Rng};
use mase_search::runner::RunContext;
use mase_search::space::{BaseModel, Candidate, REUSE_FACTOR};
use mase_search::{build_runners, Quantizer, SearchConfig, StopReason};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Multiplications of jsc-three-layer (16-64-32-32-5): each folded output has `K / R` multipliers.
const JSC3_MACS: f64 = (16 * 64 + 64 * 32 + 32 * 32 + 32 * 5) as f64;

#[test]
fn every_trial_reports_the_cost_model_of_its_sampled_formats_and_reuse_factor() {
    let search = config_search("jsc_three_layer_hw_search.toml");
    let cfg = SearchConfig::parse(&search).unwrap();
    let splits = jsc_splits();
    let base = base_model("jsc-three-layer", &splits, 0);
    let space = space(&search, base.clone()).unwrap();
    let names: Vec<&str> = space.params().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "linear/config/name",
            "linear/config/data_in",
            "linear/config/weight",
            "linear/config/bias",
            "linear/hardware/reuse_factor",
            "relu/config/name"
        ]
    );
    let out = brute_force("rtl", space.as_ref(), &cfg, &Value::Null, splits, 60, 1);
    // 3 data_in pairs x 3 weight pairs x 5 reuse factors, each once.
    assert_eq!((out.stop, out.trials.len()), (StopReason::Exhausted, 45));
    let mut reuses = BTreeSet::new();
    for t in &out.trials {
        let r = t.config["seq_blocks_0"]["hardware"][REUSE_FACTOR].as_u64().unwrap() as usize;
        // Every linear shares the sampled reuse factor (tie = "type").
        for node in ["seq_blocks_2", "seq_blocks_4", "seq_blocks_6"] {
            assert_eq!(t.config[node]["hardware"][REUSE_FACTOR], json!(r), "{node}");
        }
        reuses.insert(r);
        let m = &t.hardware_metrics;
        assert_eq!(m.keys().collect::<Vec<_>>(), ["luts", "ffs", "dsps", "latency_cycles", "ii"]);
        // Four layers: one register stage each unrolled, R + 1 cycles each folded.
        let latency = if r == 1 { 4.0 } else { 4.0 * (r as f64 + 1.0) };
        assert_eq!((m["latency_cycles"], m["ii"]), (latency, r as f64), "reuse {r}");
        // The runner's figures are the cost model's on the candidate lowered with that factor.
        let cand = space.build(&t.config).unwrap();
        let design =
            lower(&cand.graph, &cand.params, "c", &LowerOptions { reuse: vec![], default_reuse: r, ..Default::default() }).unwrap();
        let c = cost::estimate(&design);
        assert_eq!((m["luts"], m["ffs"], m["dsps"]), (c.luts, c.ffs, c.dsps), "reuse {r}");
        // At most one DSP per multiplier: `K / R` per output folded, one per product unrolled.
        assert!(m["dsps"] <= JSC3_MACS / r as f64, "reuse {r}: {} DSPs", m["dsps"]);
        assert!(m["luts"] > 0.0);
    }
    assert_eq!(reuses.into_iter().collect::<Vec<_>>(), [1, 2, 4, 8, 16]);
    // Folding trades LUTs for cycles: at the same formats, reuse 16 needs fewer LUTs than 1.
    let luts = |din: u64, r: u64| {
        out.trials
            .iter()
            .find(|t| {
                t.config["seq_blocks_0"]["hardware"][REUSE_FACTOR] == json!(r)
                    && t.config["seq_blocks_0"]["config"]["data_in_width"] == json!(din)
                    && t.config["seq_blocks_0"]["config"]["weight_width"] == json!(din)
            })
            .unwrap()
            .hardware_metrics["luts"]
    };
    assert!(luts(8, 16) < luts(8, 1), "{} vs {}", luts(8, 16), luts(8, 1));
    assert!(luts(4, 1) < luts(8, 1), "{} vs {}", luts(4, 1), luts(8, 1));
    // Two objectives: the Pareto front of accuracy against LUTs has no dominated trial.
    let best = mase_search::best_trials(&out.trials, &cfg.objective);
    assert!(!best.is_empty());
}

#[test]
fn bad_rtl_options_and_reuse_choices_are_one_line_errors() {
    let search = config_search("jsc_three_layer_hw_search.toml");
    let splits = jsc_splits();
    let model = base_model("jsc-three-layer", &splits, 0);
    let env = env(splits);
    // (what to change in the [search] table, words the error must contain)
    type Edit = fn(&mut Value);
    let cases: &[(Edit, &[&str])] = &[
        (|s| s["strategy"]["hw_runner"]["rtl"]["synth"] = json!("yes"), &["search.strategy.hw_runner.rtl.synth", "true or false"]),
        (|s| s["strategy"]["hw_runner"]["rtl"]["sinth"] = json!(true), &["search.strategy.hw_runner.rtl.sinth", "unknown key"]),
        (|s| s["strategy"]["hw_runner"]["rtl"]["target"] = json!("asic"), &["search.strategy.hw_runner.rtl.target", "\"xilinx\""]),
        (|s| s["strategy"]["hw_runner"]["rtl"]["reuse_factor"] = json!(0), &["search.strategy.hw_runner.rtl.reuse_factor", "positive"]),
        (|s| s["strategy"]["hw_runner"]["rtl"]["clock_mhz"] = json!(0), &["search.strategy.hw_runner.rtl.clock_mhz", "positive number"]),
        (|s| s["strategy"]["hw_runner"]["rtl"]["clock_mhz"] = json!(1e6), &["search.strategy.hw_runner.rtl.clock_mhz", "MHz"]),
        (
            |s| s["strategy"]["hw_runner"]["rtl"]["multipliers"] = json!("dsp48"),
            &["search.strategy.hw_runner.rtl.multipliers", "inferred, ecp5-dsp"],
        ),
        (
            |s| s["strategy"]["hw_runner"]["rtl"]["multipliers"] = json!("ecp5-dsp"),
            &["search.strategy.hw_runner.rtl.multipliers", "needs a pipelined design: set clock_mhz too"],
        ),
        (
            |s| s["search_space"]["seed"]["linear"]["hardware"]["reuse_factor"] = json!([1, 3]),
            &[
                "search.search_space.seed.linear.hardware.reuse_factor",
                "reuse factor 3 does not divide the 16 inputs of node `seq_blocks_0`",
            ],
        ),
        (
            |s| s["search_space"]["seed"]["linear"]["hardware"]["reuse_factor"] = json!([2, 0]),
            &["search.search_space.seed.linear.hardware.reuse_factor", "positive integers, got 0"],
        ),
        (
            |s| s["search_space"]["seed"]["linear"]["hardware"] = json!({"reuse": [2]}),
            &["search.search_space.seed.linear.hardware.reuse", "unknown key", "reuse_factor"],
        ),
        (|s| s["search_space"]["seed"]["linear"]["hardware"] = json!(4), &["search.search_space.seed.linear.hardware"]),
        (
            |s| s["search_space"]["seed"]["linear"]["hardware"]["reuse_factor"] = json!([]),
            &["search.search_space.seed.linear.hardware.reuse_factor", "empty choice list"],
        ),
    ];
    for (edit, words) in cases {
        let mut s = search.clone();
        edit(&mut s);
        let e = mase_search::check_search_config(&s, model.clone(), Arc::new(mase_search::PassesQuantizer), &env)
            .err()
            .unwrap_or_else(|| panic!("must fail: {words:?}"))
            .to_string();
        assert!(!e.contains('\n'), "one line: {e}");
        for w in *words {
            assert!(e.contains(w), "`{e}` should mention `{w}`");
        }
    }
}

#[test]
fn by_name_each_layer_has_its_own_reuse_factor() {
    let mut search = config_search("jsc_three_layer_hw_search.toml");
    search["search_space"]["setup"] = json!({"by": "name"});
    let linear = search["search_space"]["seed"]["linear"].clone();
    let seed = search["search_space"]["seed"].as_object_mut().unwrap();
    seed.remove("linear");
    // The first and third linears folded by 4 and 8; the others take the runner's default.
    for (node, reuse) in
        [("seq_blocks_0", json!([4])), ("seq_blocks_4", json!([8])), ("seq_blocks_2", json!(null)), ("seq_blocks_6", json!(null))]
    {
        let mut e = linear.clone();
        match reuse {
            Value::Null => {
                e.as_object_mut().unwrap().remove("hardware");
            }
            r => e["hardware"]["reuse_factor"] = r,
        }
        seed.insert(node.into(), e);
    }
    let splits = jsc_splits();
    let space = space(&search, base_model("jsc-three-layer", &splits, 0)).unwrap();
    assert!(space.params().iter().any(|p| p.name == "seq_blocks_4/hardware/reuse_factor"));
    assert!(!space.params().iter().any(|p| p.name == "seq_blocks_2/hardware/reuse_factor"));
    let config = space.to_config(&vec![0.0; space.params().len()]).unwrap();
    let mut cand = space.build(&config).unwrap();
    let runners = build_runners(&[], &[("rtl".into(), json!({"reuse_factor": 2}))], &env(splits)).unwrap();
    let m = runners[0].run(&mut cand, &RunContext { threads: 1, trial: 0 }).unwrap();
    // 4 + 1, 2 + 1, 8 + 1 and 2 + 1 cycles; a sample every 8.
    assert_eq!((m["latency_cycles"], m["ii"]), (20.0, 8.0));
}

/// With `clock_mhz` the candidate is pipelined for that clock (with the chosen multipliers) and
/// ranked by speed too: `fmax_mhz` is the delay model's clock and `throughput` samples per
/// microsecond at it.
#[test]
fn clock_mhz_pipelines_the_candidate_and_reports_its_clock_and_throughput() {
    let search = config_search("jsc_three_layer_hw_search.toml");
    let splits = jsc_splits();
    let space = space(&search, base_model("jsc-three-layer", &splits, 0)).unwrap();
    let config = space.to_config(&vec![0.0; space.params().len()]).unwrap();
    let env = env(splits);
    // (runner options, the design they must measure)
    let cases: Vec<(Value, Option<(f64, mase_hw::Multipliers)>)> = vec![
        (json!({}), None),
        (json!({"clock_mhz": 200}), Some((200.0, mase_hw::Multipliers::Inferred))),
        (json!({"clock_mhz": 200, "multipliers": "ecp5-dsp"}), Some((200.0, mase_hw::Multipliers::Ecp5Dsp))),
        (json!({"clock_mhz": 100}), Some((100.0, mase_hw::Multipliers::Inferred))),
    ];
    for (opts, pipe) in cases {
        let mut cand = space.build(&config).unwrap();
        let runners = build_runners(&[], &[("rtl".into(), opts.clone())], &env).unwrap();
        let m = runners[0].run(&mut cand, &RunContext { threads: 1, trial: 0 }).unwrap();
        let reuse = config["seq_blocks_0"]["hardware"][REUSE_FACTOR].as_u64().unwrap() as usize;
        let mut d =
            lower(&cand.graph, &cand.params, "c", &LowerOptions { reuse: vec![], default_reuse: reuse, ..Default::default() }).unwrap();
        if let Some((f, mult)) = pipe {
            d = d.pipelined(f).unwrap().with_multipliers(mult).unwrap();
        }
        let c = cost::estimate(&d);
        let want_keys: &[&str] = match pipe {
            None => &["luts", "ffs", "dsps", "latency_cycles", "ii"],
            Some((_, mase_hw::Multipliers::Inferred)) => &["luts", "ffs", "dsps", "latency_cycles", "ii", "fmax_mhz", "throughput"],
            // With instantiated multipliers, the ECP5 LUT4 model's figure too.
            Some((_, mase_hw::Multipliers::Ecp5Dsp)) => &["luts", "ffs", "dsps", "latency_cycles", "ii", "fmax_mhz", "throughput", "lut4"],
        };
        assert_eq!(m.get("lut4").copied(), c.lut4, "{opts}");
        assert_eq!(runners[0].reports().len(), want_keys.len(), "{opts}");
        assert_eq!(m.keys().map(String::as_str).collect::<BTreeSet<_>>(), want_keys.iter().copied().collect(), "{opts}");
        assert_eq!((m["luts"], m["ffs"], m["dsps"]), (c.luts, c.ffs, c.dsps), "{opts}");
        assert_eq!((m["latency_cycles"], m["ii"]), (d.latency() as f64, d.initiation_interval() as f64), "{opts}");
        if let Some((f, _)) = pipe {
            let fmax = c.fmax_mhz.unwrap();
            assert_eq!(m["fmax_mhz"], fmax, "{opts}");
            assert_eq!(m["throughput"], fmax / d.initiation_interval() as f64, "{opts}");
            // Pipelining adds register stages: more cycles of latency than one stage a layer.
            assert!(m["latency_cycles"] > 4.0, "{opts}: {}", m["latency_cycles"]);
            assert!(fmax > 0.0 && fmax <= 2.0 * f, "{opts}: {fmax}");
        }
    }
}

/// Whether a tool is there; without it the test says SKIP in one line, unless CI=true.
fn have(tool: &str) -> bool {
    if mase_hw::simulate::tool_available(tool) {
        return true;
    }
    assert!(std::env::var("CI").map_or(true, |v| v != "true"), "{tool} is not installed and CI=true");
    eprintln!("SKIP: {tool} is not installed");
    false
}

#[test]
fn synth_true_measures_the_trial_with_yosys() {
    if !have("yosys") {
        return;
    }
    // Linear(16, 4), ReLU, Linear(4, 3) at 4 bits: seconds of synthesis.
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let a = g.call_module("seq_blocks.0", Op::Linear { in_features: 16, out_features: 4, bias: true }, &[x]);
    let r = g.call_module("seq_blocks.1", Op::Relu, &[a]);
    let b = g.call_module("seq_blocks.2", Op::Linear { in_features: 4, out_features: 3, bias: true }, &[r]);
    g.output(b);
    let params = mase_runtime::init_params(&g, &mut Rng::new(7));
    let q = json!({"by": "type", "linear": {"config": {"name": "integer", "data_in_width": 4, "data_in_frac_width": 2,
        "weight_width": 4, "weight_frac_width": 2, "bias_width": 4, "bias_frac_width": 2}}});
    mase_search::PassesQuantizer.apply(&mut g, &q).unwrap();
    // The first layer folded by 4 through its hardware metadata, the second by the default.
    g.nodes_mut().iter_mut().find(|n| n.name == "seq_blocks_0").unwrap().meta.hardware.insert(REUSE_FACTOR.into(), json!(4));
    let work = scratch("rtl-synth");
    let runners = build_runners(
        &[],
        &[("rtl".into(), json!({"synth": true, "target": "generic", "reuse_factor": 2, "work_dir": work.to_str().unwrap()}))],
        &env(jsc_splits()),
    )
    .unwrap();
    let base = BaseModel { graph: g, params: Arc::new(params) };
    let mut cand = Candidate { graph: base.graph.clone(), params: base.params.clone() };
    let m = runners[0].run(&mut cand, &RunContext { threads: 1, trial: 3 }).unwrap();
    // Folded by 4 (5 cycles, a sample every 4) and by 2 (3 cycles).
    assert_eq!((m["latency_cycles"], m["ii"]), (8.0, 4.0));
    let d = lower(
        &base.graph,
        &base.params,
        "c",
        &LowerOptions { reuse: vec![("seq_blocks_0".into(), 4)], default_reuse: 2, ..Default::default() },
    )
    .unwrap();
    let est = cost::estimate(&d);
    // The generic LUT6 mapping has no DSP cells; the registers are the ones the RTL declares, less
    // those synthesis finds constant.
    assert_eq!(m["dsps"], 0.0);
    let reg_bits: usize = est.layers.iter().map(|l| l.features.output_register_bits + l.features.state_register_bits).sum();
    assert!(m["ffs"] <= reg_bits as f64 && m["ffs"] >= reg_bits as f64 / 2.0, "{} flip-flops of {reg_bits}", m["ffs"]);
    assert!(m["luts"] > 20.0, "{m:?}");
    // The trial's folder is removed after synthesis.
    assert!(!work.join("trial3").exists());
}
