//! Search spaces sample the microscaling formats (`mxint`, `mxfp`) with MASE's config keys, and
//! the cost runners count their bits with the block scale shared out: `width + 8 / block_size`.

mod common;

use common::{base_model, config_search, env, jsc_splits};
use mase_ir::QuantFormat;
use mase_search::runner::RunContext;
use mase_search::space::SpaceInputs;
use mase_search::{build_runners, build_space, Candidate, PassesQuantizer};
use serde_json::{json, Value};
use std::sync::Arc;

/// MACs and BitOPs of one sample of a candidate.
fn costs(cand: &mut Candidate) -> (f64, f64) {
    let hw: Vec<(String, Value)> = ["flops", "bitops"].iter().map(|n| (n.to_string(), json!({}))).collect();
    let runners = build_runners(&[], &hw, &env(jsc_splits())).unwrap();
    let mut m = mase_search::Metrics::new();
    for r in &runners {
        m.extend(r.run(cand, &RunContext { threads: 1, trial: 0 }).unwrap());
    }
    (m["macs"], m["bitops"])
}

#[test]
fn mixed_precision_spaces_sample_mx_formats_and_count_their_scales() {
    let search_space = json!({
        "name": "graph/quantize/mixed_precision_ptq",
        "setup": {"by": "type"},
        "seed": {
            "default": {"config": {"name": ["NA"]}},
            "linear": {"config": {"name": ["mxint"], "data_in_width": [8], "data_in_block_size": [16],
                                  "weight_width": [4, 8], "weight_block_size": [16, 32]}},
        },
    });
    let splits = jsc_splits();
    let space = build_space(&SpaceInputs {
        config: &search_space,
        base: base_model("jsc-three-linear", &splits, 1),
        quantizer: Arc::new(PassesQuantizer),
    })
    .unwrap();
    let names: Vec<String> = space.params().iter().map(|p| p.name.clone()).collect();
    // Each point picks a choice index per parameter: all first choices (4-bit weights in blocks
    // of 16), then 8-bit weights in blocks of 32 everywhere.
    let point = |w: f64, b: f64| -> Vec<f64> {
        names
            .iter()
            .map(|n| {
                if n.ends_with("/weight_width") {
                    w
                } else if n.ends_with("/weight_block_size") {
                    b
                } else {
                    0.0
                }
            })
            .collect()
    };
    let mut bitops = Vec::new();
    for (p, want) in [
        (point(0.0, 0.0), QuantFormat::Mxint { width: 4, block_size: 16, block_dim: -1 }),
        (point(1.0, 1.0), QuantFormat::Mxint { width: 8, block_size: 32, block_dim: -1 }),
    ] {
        let cfg = space.to_config(&p).unwrap();
        let mut cand = space.build(&cfg).unwrap();
        let q = cand.graph.node(cand.graph.find("seq_blocks_2").unwrap()).quant.clone().expect("quantized");
        assert_eq!(q.weight.as_ref(), Some(&want));
        assert_eq!(q.data_in[0], Some(QuantFormat::Mxint { width: 8, block_size: 16, block_dim: -1 }));
        bitops.push((costs(&mut cand), want.bits()));
    }
    // Bits per value: 4 + 8/16 = 4.5 and 8 + 8/32 = 8.25 for the weights, 8 + 8/16 = 8.5 for the
    // inputs. Only the linear layers change between the two points, so the BitOPs differ by
    // MACs x 8.5 x (8.25 - 4.5).
    let (((macs, a), wa), ((_, b), wb)) = (bitops[0], bitops[1]);
    assert_eq!((wa, wb), (4.5, 8.25));
    assert_eq!(b - a, macs * 8.5 * (8.25 - 4.5));
}

#[test]
fn the_example_space_picks_an_element_format_and_block_per_layer() {
    // configs/jsc_toy_mx_search.toml: (exponent_width, frac_width) tuples and two block sizes for
    // the weights of every Linear layer (tied by type), MXFP8 E4M3 inputs.
    let search = config_search("jsc_toy_mx_search.toml");
    let splits = jsc_splits();
    let space = build_space(&SpaceInputs {
        config: &search["search_space"],
        base: base_model("jsc-toy", &splits, 1),
        quantizer: Arc::new(PassesQuantizer),
    })
    .unwrap();
    let names: Vec<String> = space.params().iter().map(|p| p.name.clone()).collect();
    // The fifth pair (E2M1) in blocks of 32 (the second choice).
    let point: Vec<f64> = names
        .iter()
        .map(|n| {
            if n.ends_with("/weight") {
                4.0
            } else if n.ends_with("/weight_block_size") {
                1.0
            } else {
                0.0
            }
        })
        .collect();
    let mut cand = space.build(&space.to_config(&point).unwrap()).unwrap();
    let linears: Vec<_> = cand.graph.nodes().iter().filter(|n| matches!(n.op, mase_ir::Op::Linear { .. })).collect();
    assert!(!linears.is_empty());
    for n in linears {
        let q = n.quant.as_ref().expect("every Linear is quantized");
        assert_eq!(q.weight, Some(QuantFormat::Mxfp { exponent_width: 2, frac_width: 1, block_size: 32, block_dim: -1 }), "{}", n.name);
        assert_eq!(q.data_in[0], Some(QuantFormat::Mxfp { exponent_width: 4, frac_width: 3, block_size: 32, block_dim: -1 }));
    }
    // Every weight is E2M1 in blocks of 32: 4 bits and 8 / 32 of a scale.
    let hw = vec![("average_bitwidth".to_string(), json!({"compare_to": 32}))];
    let runners = build_runners(&[], &hw, &env(jsc_splits())).unwrap();
    let m = runners[0].run(&mut cand, &RunContext { threads: 1, trial: 0 }).unwrap();
    assert_eq!(m["average_bitwidth"], 4.25);
    assert_eq!(m["memory_density"], 32.0 / 4.25);
}
