//! bert-tiny: parameter count, HuggingFace BERT state-dict names, shapes and the data sets it fits.

use mase_ir::{Init, Op};
use mase_zoo::{build_model, model_info, trainable_params, ModelContext};

/// digits-seq: 64 tokens per sample, 10 classes.
fn digits_seq() -> ModelContext {
    ModelContext::new([64], 10)
}

#[test]
fn bert_tiny_trainable_count_is_the_closed_form() {
    // Embeddings: words 17*128, positions L*128, token types 2*128, LayerNorm 2*128.
    let embeddings = |l: usize| 17 * 128 + l * 128 + 2 * 128 + 2 * 128;
    // One layer: q, k, v and the attention output 4 * (128*128 + 128), two LayerNorms 2 * 256,
    // intermediate 128*512 + 512, output 512*128 + 128.
    let layer = 4 * (128 * 128 + 128) + 2 * 256 + (128 * 512 + 512) + (512 * 128 + 128);
    let head = |c: usize| (128 * 128 + 128) + (128 * c + c);
    // (sequence length, classes, trainable parameters)
    let cases = [(64, 10, 425_226), (64, 10, embeddings(64) + 2 * layer + head(10)), (16, 3, embeddings(16) + 2 * layer + head(3))];
    for (len, classes, want) in cases {
        let g = build_model("bert-tiny", &ModelContext::new([len], classes)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(trainable_params(&g), want, "L = {len}, {classes} classes");
    }
    assert!(model_info("bert-tiny").is_some_and(|i| i.description.contains("425226 params on digits-seq") && i.dataset == "digits-seq"));
}

#[test]
fn bert_tiny_has_huggingface_state_dict_names() {
    let g = build_model("bert-tiny", &digits_seq()).unwrap();
    let specs = g.param_specs();
    let find = |name: &str| specs.iter().find(|(n, _)| n == name).map(|(_, s)| (s.shape.clone(), s.trainable, s.init.clone()));
    // (state-dict name, shape, trainable)
    let cases: &[(&str, &[usize], bool)] = &[
        ("bert.embeddings.word_embeddings.weight", &[17, 128], true),
        ("bert.embeddings.position_embeddings.weight", &[64, 128], true),
        ("bert.embeddings.token_type_embeddings.weight", &[2, 128], true),
        ("bert.embeddings.LayerNorm.weight", &[128], true),
        ("bert.embeddings.LayerNorm.bias", &[128], true),
        ("bert.encoder.layer.0.attention.self.query.weight", &[128, 128], true),
        ("bert.encoder.layer.0.attention.self.key.bias", &[128], true),
        ("bert.encoder.layer.1.attention.self.value.weight", &[128, 128], true),
        ("bert.encoder.layer.0.attention.output.dense.weight", &[128, 128], true),
        ("bert.encoder.layer.0.attention.output.LayerNorm.weight", &[128], true),
        ("bert.encoder.layer.1.intermediate.dense.weight", &[512, 128], true),
        ("bert.encoder.layer.1.output.dense.weight", &[128, 512], true),
        ("bert.encoder.layer.1.output.LayerNorm.bias", &[128], true),
        ("bert.pooler.dense.weight", &[128, 128], true),
        ("classifier.weight", &[10, 128], true),
        ("classifier.bias", &[10], true),
        // BERT's id buffers: not trained, counted 0, 1, ... and all 0.
        ("bert.embeddings.position_ids", &[1, 64], false),
        ("bert.embeddings.token_type_ids", &[1, 64], false),
    ];
    for &(name, shape, trainable) in cases {
        let (s, t, _) = find(name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!((s.as_slice(), t), (shape, trainable), "{name}");
    }
    assert_eq!(find("bert.embeddings.position_ids").map(|f| f.2), Some(Init::Arange));
    assert_eq!(find("bert.embeddings.token_type_ids").map(|f| f.2), Some(Init::Zeros));
    // 5 embedding tensors and 2 buffers, 16 per layer, 2 pooler and 2 classifier tensors.
    assert_eq!(specs.len(), 7 + 2 * 16 + 4);
    let eps: Vec<f32> = g.nodes().iter().filter_map(|n| if let Op::LayerNorm { eps, .. } = n.op { Some(eps) } else { None }).collect();
    assert_eq!(eps, [1e-12; 5]);
}

#[test]
fn bert_tiny_shapes_follow_the_architecture() {
    let c = digits_seq();
    let g = build_model("bert-tiny", &c).unwrap();
    let shapes = g.infer_shapes(&[c.batch_shape(8)], &|_| None).unwrap();
    let shape = |node: &str| shapes[g.require(node).unwrap().0].shape().to_vec();
    // (node, shape for a batch of 8)
    let cases: &[(&str, &[usize])] = &[
        ("bert_embeddings_word_embeddings", &[8, 64, 128]),
        ("bert_embeddings_position_embeddings", &[1, 64, 128]),
        ("bert_encoder_layer_0_attention_self_query", &[8, 64, 128]),
        ("permute", &[8, 2, 64, 64]),
        ("scaled_dot_product_attention", &[8, 2, 64, 64]),
        ("bert_encoder_layer_0_intermediate_dense", &[8, 64, 512]),
        ("getitem", &[8, 128]),
        ("classifier", &[8, 10]),
    ];
    for &(node, want) in cases {
        assert_eq!(shape(node), want, "{node}");
    }
}

#[test]
fn bert_tiny_refuses_data_that_are_not_sequences() {
    // (sample shape, classes)
    let cases: &[(&[usize], usize)] = &[(&[1, 8, 8], 10), (&[0], 10), (&[64], 0)];
    for &(shape, classes) in cases {
        let e = build_model("bert-tiny", &ModelContext::new(shape, classes)).expect_err("refused").to_string();
        assert!(e.contains("`bert-tiny`") && e.contains("1-D samples [sequence length]"), "{e}");
    }
}
