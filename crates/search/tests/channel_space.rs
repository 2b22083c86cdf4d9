//! The architecture spaces: `graph/architecture/channel_multiplier` (MASE lab 4) and its
//! combination with mixed-precision quantization. Parameters, stored configs, candidates and
//! their costs are checked against widths and counts worked out by hand.

mod common;

use common::{base_model, config_search, env, jsc_splits};
use mase_ir::{Graph, Op};
use mase_search::runner::RunContext;
use mase_search::space::SpaceInputs;
use mase_search::{build_runners, build_space, Candidate, ParamKind, PassesQuantizer, Result, SearchSpace};
use serde_json::{json, Value};
use std::sync::Arc;

fn space_of(search_space: &Value) -> Result<Box<dyn SearchSpace>> {
    let splits = jsc_splits();
    let base = base_model("jsc-three-linear", &splits, 1);
    build_space(&SpaceInputs { config: search_space, base, quantizer: Arc::new(PassesQuantizer) })
}

fn linear_shapes(g: &Graph) -> Vec<(usize, usize)> {
    g.nodes()
        .iter()
        .filter_map(|n| match n.op {
            Op::Linear { in_features, out_features, .. } => Some((in_features, out_features)),
            _ => None,
        })
        .collect()
}

/// Runs the cost runners on a candidate: parameter count, MACs and BitOPs of one sample.
fn costs(cand: &mut Candidate) -> (f64, f64, f64) {
    let hw: Vec<(String, Value)> = ["model_size", "flops", "bitops"].iter().map(|n| (n.to_string(), json!({}))).collect();
    let runners = build_runners(&[], &hw, &env(jsc_splits())).unwrap();
    let mut m = mase_search::Metrics::new();
    for r in &runners {
        m.extend(r.run(cand, &RunContext { threads: 1, trial: 0 }).unwrap());
    }
    (m["param_count"], m["macs"], m["bitops"])
}

#[test]
fn lab4_space_lists_its_choices_and_builds_widened_candidates() {
    let search = config_search("jsc_three_linear_channel_search.toml");
    let space = space_of(&search["search_space"]).unwrap();
    let params: Vec<(&str, &ParamKind)> = space.params().iter().map(|p| (p.name.as_str(), &p.kind)).collect();
    assert_eq!(
        params,
        [
            ("seq_blocks_2/config/name", &ParamKind::Index { choices: 1 }),
            ("seq_blocks_2/config/channel_multiplier", &ParamKind::Index { choices: 6 }),
            ("seq_blocks_4/config/name", &ParamKind::Index { choices: 1 }),
            ("seq_blocks_4/config/channel_multiplier", &ParamKind::Index { choices: 6 }),
            ("seq_blocks_6/config/name", &ParamKind::Index { choices: 1 }),
        ]
    );
    // Multipliers [1, 2, 4, 6, 8, 10]: index 2 is 4, index 5 is 10.
    let cfg = space.to_config(&[0.0, 2.0, 0.0, 5.0, 0.0]).unwrap();
    assert_eq!(
        cfg,
        json!({"by": "name",
               "seq_blocks_2": {"config": {"name": "output_only", "channel_multiplier": 4}},
               "seq_blocks_4": {"config": {"name": "both", "channel_multiplier": 10}},
               "seq_blocks_6": {"config": {"name": "input_only"}}})
    );
    // (point, widths a and b of the two hidden layers)
    for (point, a, b) in [([0.0, 2.0, 0.0, 5.0, 0.0], 64, 160), ([0.0, 0.0, 0.0, 0.0, 0.0], 16, 16), ([0.0, 3.0, 0.0, 1.0, 0.0], 96, 32)] {
        let mut cand = space.build(&space.to_config(&point).unwrap()).unwrap();
        assert_eq!(linear_shapes(&cand.graph), [(16, a), (a, b), (b, 5)], "{point:?}");
        let (count, macs, bitops) = costs(&mut cand);
        assert_eq!(count, (32 + 17 * a + a * b + b + 5 * b + 5) as f64, "{point:?}");
        assert_eq!(macs, (16 * a + a * b + b * 5) as f64, "{point:?}");
        // Float candidates: 32 x 32 bits per MAC, and 32 bits per operation of the batch norm
        // (4 x 16), the ReLUs (16, a, b, 5), as the bitops pass counts them.
        let other = (4 * 16 + 16 + a + b + 5) as f64;
        assert_eq!(bitops, macs * 32.0 * 32.0 + other * 32.0, "{point:?}");
    }
    // Candidates come from the unmodified base model: building twice gives the same bits.
    let c1 = space.build(&cfg).unwrap();
    let c2 = space.build(&cfg).unwrap();
    assert!(c1.params == c2.params && c1.graph == c2.graph);
}

#[test]
fn bad_channel_spaces_fail_before_any_trial() {
    let seeded = |seed: Value| json!({"name": "graph/architecture/channel_multiplier", "setup": {"by": "name"}, "seed": seed});
    let cases: Vec<(Value, &str)> = vec![
        (
            seeded(json!({"seq_blocks_1": {"config": {"name": ["output_only"], "channel_multiplier": [2]}}})),
            "`relu` node cannot be widened",
        ),
        (seeded(json!({"seq_blocks_9": {"config": {"name": ["output_only"], "channel_multiplier": [2]}}})), "no node `seq_blocks_9`"),
        (seeded(json!({"seq_blocks_2": {"config": {"name": ["output_only"], "channel_multiplier": []}}})), "empty choice list"),
        (seeded(json!({"seq_blocks_2": {"config": {"name": ["output_only"], "width": [2]}}})), "seq_blocks_2.config.width"),
        (seeded(json!({"seq_blocks_4": {"config": {"name": ["input_only"]}}})), "`seq_blocks_4`: `input_only` takes a widened input"),
        (
            seeded(json!({"seq_blocks_6": {"config": {"name": ["output_only"], "channel_multiplier": [1, 2]}}})),
            "the model output would change",
        ),
        (json!({"name": "graph/architecture/channel_multiplier", "setup": {"by": "type"}, "seed": {}}), "seeded by node name"),
        (
            json!({"name": "graph/architecture/channel_multiplier", "setup": {"tie": "channel_multiplier"}, "seed": {
                "seq_blocks_2": {"config": {"name": ["output_only"], "channel_multiplier": [1, 2]}},
                "seq_blocks_4": {"config": {"name": ["both"], "channel_multiplier": [1, 4]}}}}),
            "`search.search_space.seed.seq_blocks_4.config.channel_multiplier`: differs from `seq_blocks_2`'s list [1,2]",
        ),
        (json!({"name": "graph/architecture/channel_multiplier", "setup": {"tie": "type"}, "seed": {}}), "must be \"channel_multiplier\""),
        (json!({"name": "graph/architecture/channel_multiplier", "setup": {"by": "name"}}), "search.search_space.seed"),
    ];
    for (cfg, words) in cases {
        let e = space_of(&cfg).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains(words), "{cfg}: `{words}` missing from: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn a_shared_multiplier_widens_every_layer_alike() {
    let search = config_search("jsc_three_linear_shared_multiplier_search.toml");
    let space = space_of(&search["search_space"]).unwrap();
    let params: Vec<(&str, &ParamKind)> = space.params().iter().map(|p| (p.name.as_str(), &p.kind)).collect();
    assert_eq!(
        params,
        [
            ("seq_blocks_2/config/name", &ParamKind::Index { choices: 1 }),
            ("channel_multiplier", &ParamKind::Index { choices: 6 }),
            ("seq_blocks_4/config/name", &ParamKind::Index { choices: 1 }),
            ("seq_blocks_6/config/name", &ParamKind::Index { choices: 1 }),
        ]
    );
    assert_eq!(space.params()[1].values, Some(vec![json!(1), json!(2), json!(4), json!(6), json!(8), json!(10)]));
    // Multipliers [1, 2, 4, 6, 8, 10]: index 3 is 6, for both widened layers.
    let cfg = space.to_config(&[0.0, 3.0, 0.0, 0.0]).unwrap();
    assert_eq!(
        cfg,
        json!({"by": "name",
               "seq_blocks_2": {"config": {"name": "output_only", "channel_multiplier": 6}},
               "seq_blocks_4": {"config": {"name": "both", "channel_multiplier": 6}},
               "seq_blocks_6": {"config": {"name": "input_only"}}})
    );
    // The hidden layers are 16 wide; multiplier m makes both 16 m.
    for (index, m) in [(0.0, 1), (1.0, 2), (3.0, 6), (5.0, 10)] {
        let cand = space.build(&space.to_config(&[0.0, index, 0.0, 0.0]).unwrap()).unwrap();
        assert_eq!(linear_shapes(&cand.graph), [(16, 16 * m), (16 * m, 16 * m), (16 * m, 5)], "multiplier {m}");
    }
}

#[test]
fn widths_and_formats_are_searched_together() {
    let search = config_search("jsc_three_linear_channel_quantize_search.toml");
    let space = space_of(&search["search_space"]).unwrap();
    let names: Vec<&str> = space.params().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        &names[..5],
        [
            "architecture/seq_blocks_2/config/name",
            "architecture/seq_blocks_2/config/channel_multiplier",
            "architecture/seq_blocks_4/config/name",
            "architecture/seq_blocks_4/config/channel_multiplier",
            "architecture/seq_blocks_6/config/name",
        ]
    );
    assert!(names.contains(&"quantize/seq_blocks_4/config/weight_width"), "{names:?}");
    // Multipliers 8 and 2; every quantize choice at its first value except weight widths 2 bits.
    let mut point = vec![0.0; names.len()];
    point[1] = 3.0;
    point[3] = 1.0;
    for (i, n) in names.iter().enumerate() {
        if n.ends_with("/weight_width") {
            point[i] = 0.0;
        }
    }
    let cfg = space.to_config(&point).unwrap();
    assert_eq!(cfg["architecture"]["seq_blocks_2"]["config"]["channel_multiplier"], 8);
    assert_eq!(cfg["quantize"]["seq_blocks_4"]["config"]["weight_width"], 2);
    let mut cand = space.build(&cfg).unwrap();
    let (a, b) = (128, 32);
    assert_eq!(linear_shapes(&cand.graph), [(16, a), (a, b), (b, 5)]);
    let q = cand.graph.node(cand.graph.find("seq_blocks_4").unwrap()).quant.clone().expect("quantized");
    assert_eq!(q.weight.map(|f| f.bits()), Some(2.0));
    // BitOPs: MACs x 4-bit inputs x 2-bit weights on each Linear; the float batch norm and
    // ReLUs at 32 bits per operation.
    let (_, macs, bitops) = costs(&mut cand);
    assert_eq!(macs, (16 * a + a * b + b * 5) as f64);
    assert_eq!(bitops, macs * 4.0 * 2.0 + (4 * 16 + 16 + a + b + 5) as f64 * 32.0);
}

#[test]
fn vgg7_example_space_builds_on_the_recorded_input_shape() {
    let ctx = mase_zoo::ModelContext::new(vec![3, 32, 32], 10);
    let mut graph = mase_zoo::build_model("vgg7", &ctx).unwrap();
    let params = mase_runtime::init_params(&graph, &mut mase_ir::Rng::new(0));
    let search = config_search("vgg7_channel_search.toml");
    let base = |graph: Graph| Arc::new(mase_search::BaseModel { graph, params: Arc::new(params.clone()) });
    // Without a recorded input shape a conv-first model cannot be followed: the error says what to give.
    let e = build_space(&SpaceInputs { config: &search["search_space"], base: base(graph.clone()), quantizer: Arc::new(PassesQuantizer) })
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("setup.input_shape"), "{e}");
    // `ch search` records the data set's sample shape on the input, as here.
    mase_search::space::record_input_shape(&mut graph, &[3, 32, 32]);
    let space =
        build_space(&SpaceInputs { config: &search["search_space"], base: base(graph), quantizer: Arc::new(PassesQuantizer) }).unwrap();
    // Six convolutions with a name and a multiplier each, and the classifier's name.
    assert_eq!(space.params().len(), 13);
    let cand = space.build(&space.to_config(&[0.0; 13]).unwrap()).unwrap();
    assert_eq!(cand.params.trainable_count(), 14_029_450, "all multipliers 1: the base model");
}
