//! Buffers a graph defines itself (`Graph::parameter`, not trainable): bert-tiny's position and token-type id
//! buffers are created by `init_params`, survive a JSON round trip of the graph, and feed its
//! embeddings with the same bits at any thread count.

use mase_ir::{Graph, Init, Op, Rng};
use mase_runtime::{init_params, ExecOptions, Executor, Mode};
use mase_zoo::{build_model, ModelContext};

#[test]
fn init_params_fills_defined_constants_as_buffers() {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let ids = g.parameter("pos_ids", vec![2, 3], false, Init::Arange);
    let e = g.call_module("emb", Op::Embedding { num_embeddings: 3, embedding_dim: 1, padding_idx: None, functional: false }, &[ids]);
    let y = g.call_function("operator.add", Op::Add, &[x, e]);
    g.output(y);
    let p = init_params(&g, &mut Rng::new(0));
    let t = p.get("pos_ids").expect("created");
    assert_eq!((t.shape.clone(), t.data.clone()), (vec![2, 3], vec![0.0, 1.0, 2.0, 0.0, 1.0, 2.0]));
    // A buffer: only the embedding's 3 weights are trainable.
    assert_eq!(p.trainable_count(), 3);
    // The spec travels with the graph.
    let back: Graph = serde_json::from_str(&serde_json::to_string(&g).expect("serialises")).expect("parses");
    assert_eq!(back, g);
    assert_eq!(back.param_specs().len(), 2);
    // Shape inference needs no store for it.
    let shapes = g.infer_shapes(&[vec![1, 2, 3, 1]], &|_| None).expect("shapes");
    assert_eq!(shapes[ids.0].shape(), [2, 3]);
}

#[test]
fn bert_tiny_runs_with_the_same_bits_on_any_thread_count() {
    let g = build_model("bert-tiny", &ModelContext::new([64], 10)).expect("builds");
    let params = init_params(&g, &mut Rng::new(1));
    let pos = params.get("bert.embeddings.position_ids").expect("position ids");
    assert_eq!(pos.data, (0..64).map(|i| i as f32).collect::<Vec<_>>());
    assert!(params.get("bert.embeddings.token_type_ids").is_some_and(|t| t.shape == [1, 64] && t.data.iter().all(|&v| v == 0.0)));
    let mut rng = Rng::new(2);
    let x: Vec<f32> = (0..3 * 64).map(|_| rng.below(17) as f32).collect();
    let run = |threads| {
        let mut e = Executor::new(&g, &params, ExecOptions { threads, seed: 0 }).expect("plans");
        e.forward(&x, &[3, 64], Mode::Eval).expect("runs").to_vec()
    };
    let one = run(1);
    assert_eq!(one.len(), 30);
    assert!(one.iter().all(|v| v.is_finite()));
    assert_eq!(run(2), one);
}
