//! Named models: parameter counts, fx node names, shapes and context checks.

use mase_ir::{validate, NodeKind, Op};
use mase_zoo::{build_model, model_info, model_names, trainable_params, ModelContext};

fn ctx(shape: &[usize], classes: usize) -> ModelContext {
    ModelContext::new(shape, classes)
}

/// The data sets the models were made for: jsc (16 features, 5 classes), toy_tiny (1x2x2, 2),
/// digits (1x8x8, 10), mnist (1x28x28, 10), cifar10 (3x32x32, 10).
/// A data set: per-sample shape and class count.
type Data = (&'static [usize], usize);

const JSC: Data = (&[16], 5);
const TOY_TINY: Data = (&[1, 2, 2], 2);
const DIGITS: Data = (&[1, 8, 8], 10);
const MNIST: Data = (&[1, 28, 28], 10);
const CIFAR10: Data = (&[3, 32, 32], 10);

#[test]
fn trainable_counts_match_closed_forms() {
    // Linear(i, o) has i*o + o parameters, BatchNorm(n) 2n, Conv2d(i, o, 3) 9*i*o + o.
    let cases: &[(&str, Data, usize)] = &[
        ("jsc-tiny", JSC, 117),                    // 32 + 85
        ("jsc-toy", JSC, 327),                     // 32 + 136 + 16 + 72 + 16 + 45 + 10
        ("jsc-s", JSC, 5615),                      // 32 + 1088 + 128 + 2080 + 1056 + 1056 + 165 + 10
        ("jsc-three-linear", JSC, 661),            // 32 + 272 + 272 + 85
        ("jsc-three-layer", JSC, 4389),            // 1088 + 2080 + 1056 + 165
        ("toy", TOY_TINY, 130),                    // 40 + 72 + 18
        ("toy_tiny", TOY_TINY, 10),                // l1 = Linear(4, 2): 8 + 2 (the unused l2 is not built)
        ("mlp", DIGITS, 4810),                     // 64*64 + 64 + 64*10 + 10
        ("mlp", (&[4], 3), 515),                   // iris: 4*64 + 64 + 64*3 + 3
        ("tfc", MNIST, 59594),                     // 50240 + 128 + 4160 + 128 + 4160 + 128 + 650
        ("mnist-cnn", MNIST, 9098),                // 80 + 1168 + (16*7*7*10 + 10 = 7850)
        ("mnist-cnn", DIGITS, 1898),               // 80 + 1168 + (16*2*2*10 + 10 = 650)
        ("vgg7", CIFAR10, 14_029_450),             // doc/mase-semantics.md#models-vgg7
        ("vgg7", (&[3, 32, 32], 100), 14_121_700), // last layer 1024*100 + 100 instead of 10250
        // torchvision's counts for the same modules: resnet18 (11,689,512 on ImageNet) less its
        // 7x7 stem (9408) plus the 3x3 one (1728), less fc's 513,000 plus 5130.
        ("resnet18", CIFAR10, 11_173_962),
        ("resnet18", (&[3, 32, 32], 100), 11_173_962 - 5130 + 51_300), // fc 512*100 + 100
        // mobilenet_v2 (3,504,872 on ImageNet) less classifier.1's 1,281,000 plus 12,810.
        ("mobilenet_v2", CIFAR10, 2_236_682),
        ("mobilenet_v2", MNIST, 2_236_682 - 2 * 32 * 9), // one input channel: stem 32*1*9 instead of 32*3*9
        ("mobilenet_v2", (&[3, 64, 64], 10), 2_236_682), // the stride-2 stem has the same weights
        // VisionTransformer(32, 4, 6, 3, 192, 768): six blocks of 444,864 (layer norms 768,
        // in_proj 576*192 + 576, out_proj 192*192 + 192, MLP 192*768 + 768 + 768*192 + 192),
        // conv_proj 192*3*16 + 192, class token 192, position embedding 65*192, encoder.ln 384,
        // head 1930.
        ("vit-tiny", CIFAR10, 6 * 444_864 + 9408 + 192 + 65 * 192 + 384 + 1930),
        ("vit-tiny", CIFAR10, 2_693_578),
        // MNIST: patches of 7 from one channel (conv_proj 192*49 + 192), 17 tokens.
        ("vit-tiny", MNIST, 6 * 444_864 + 9600 + 192 + 17 * 192 + 384 + 1930),
        ("jsc-tiny", (&[10], 3), 53), // widths from the data set: 20 + 33
        ("jsc-three-layer", (&[10], 3), 10 * 64 + 64 + 2080 + 1056 + 32 * 3 + 3),
    ];
    for &(name, (shape, classes), want) in cases {
        let g = build_model(name, &ctx(shape, classes)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(trainable_params(&g), want, "{name} on {shape:?}/{classes}");
    }
}

fn node_names(name: &str, (shape, classes): Data) -> Vec<String> {
    let g = build_model(name, &ctx(shape, classes)).unwrap();
    g.nodes().iter().map(|n| n.name.clone()).collect()
}

#[test]
fn node_names_are_torch_fx_names() {
    let seq = |n: usize| -> Vec<String> {
        let mut v = vec!["x".to_string()];
        v.extend((0..n).map(|i| format!("seq_blocks_{i}")));
        v.push("output".into());
        v
    };
    let cases: &[(&str, Data, Vec<String>)] = &[
        ("jsc-tiny", JSC, ["x", "seq_blocks_0", "seq_blocks_1", "seq_blocks_2", "seq_blocks_3", "output"].map(String::from).to_vec()),
        ("jsc-toy", JSC, seq(11)),
        ("jsc-s", JSC, seq(14)),
        ("jsc-three-linear", JSC, seq(8)),
        ("jsc-three-layer", JSC, seq(7)),
        (
            "toy",
            TOY_TINY,
            ["x", "size", "view", "seq_blocks_0", "seq_blocks_1", "seq_blocks_2", "seq_blocks_3", "seq_blocks_4", "output"]
                .map(String::from)
                .to_vec(),
        ),
        ("toy_tiny", TOY_TINY, ["x", "size", "view", "l1", "relu_1", "output"].map(String::from).to_vec()),
        ("tfc", MNIST, seq(11)),
        ("mnist-cnn", MNIST, seq(8)),
    ];
    for (name, data, want) in cases {
        assert_eq!(&node_names(name, *data), want, "{name}");
    }
    let mut vgg: Vec<String> = vec!["x".into()];
    vgg.extend((0..21).map(|i| format!("feature_layers_{i}")));
    vgg.push("view".into());
    vgg.extend((0..4).map(|i| format!("classifier_{i}")));
    vgg.extend(["last_layer".into(), "output".into()]);
    assert_eq!(node_names("vgg7", CIFAR10), vgg);
}

#[test]
fn toy_prints_as_torch_fx_traces_it() {
    let g = build_model("toy", &ctx(TOY_TINY.0, TOY_TINY.1)).unwrap();
    let want = "graph():
    %x : [num_users=2] = placeholder[target=x]
    %size : [num_users=1] = call_method[target=size](args = (%x, 0), kwargs = {})
    %view : [num_users=1] = call_method[target=view](args = (%x, %size, -1), kwargs = {})
    %seq_blocks_0 : [num_users=1] = call_module[target=seq_blocks.0](args = (%view,), kwargs = {})
    %seq_blocks_1 : [num_users=1] = call_module[target=seq_blocks.1](args = (%seq_blocks_0,), kwargs = {})
    %seq_blocks_2 : [num_users=1] = call_module[target=seq_blocks.2](args = (%seq_blocks_1,), kwargs = {})
    %seq_blocks_3 : [num_users=1] = call_module[target=seq_blocks.3](args = (%seq_blocks_2,), kwargs = {})
    %seq_blocks_4 : [num_users=1] = call_module[target=seq_blocks.4](args = (%seq_blocks_3,), kwargs = {})
    return seq_blocks_4
";
    assert_eq!(g.to_string(), want);
}

#[test]
fn shapes_propagate_from_natural_inputs() {
    let cases: &[(&str, Data, usize)] = &[
        ("jsc-tiny", JSC, 5),
        ("jsc-toy", JSC, 5),
        ("jsc-s", JSC, 5),
        ("jsc-three-linear", JSC, 5),
        ("jsc-three-layer", JSC, 5),
        ("toy", TOY_TINY, 2),
        ("toy_tiny", TOY_TINY, 2),
        ("mlp", DIGITS, 10),
        ("tfc", MNIST, 10),
        ("mnist-cnn", MNIST, 10),
        ("mnist-cnn", (&[3, 17, 17], 4), 4),
        ("vgg7", CIFAR10, 10),
    ];
    for &(name, (shape, classes), out) in cases {
        let c = ctx(shape, classes);
        let g = build_model(name, &c).unwrap();
        validate(&g, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let shapes = g.infer_shapes(&[c.batch_shape(8)], &|_| None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let last = g.output_node().unwrap();
        assert_eq!(shapes[last.0].shape(), [8, out], "{name}");
    }
}

#[test]
fn intermediate_shapes_follow_the_architecture() {
    // (model, data set, node, shape for a batch of 8)
    let cases: &[(&str, Data, &str, &[usize])] = &[
        ("toy", TOY_TINY, "view", &[8, 4]),
        ("mnist-cnn", MNIST, "seq_blocks_2", &[8, 8, 14, 14]),
        ("mnist-cnn", MNIST, "seq_blocks_6", &[8, 784]),
        ("vgg7", CIFAR10, "feature_layers_20", &[8, 512, 4, 4]),
        ("vgg7", CIFAR10, "view", &[8, 8192]),
        ("tfc", MNIST, "seq_blocks_0", &[8, 784]),
        ("resnet18", CIFAR10, "relu", &[8, 64, 32, 32]),
        ("resnet18", CIFAR10, "layer2_0_downsample_1", &[8, 128, 16, 16]),
        ("resnet18", CIFAR10, "layer4_1_relu_1", &[8, 512, 4, 4]),
        ("resnet18", CIFAR10, "flatten", &[8, 512]),
        ("mobilenet_v2", CIFAR10, "features_0_2", &[8, 32, 32, 32]),
        ("mobilenet_v2", CIFAR10, "features_2_conv_0_2", &[8, 96, 32, 32]),
        ("mobilenet_v2", CIFAR10, "features_2_conv_1_2", &[8, 96, 16, 16]),
        ("mobilenet_v2", CIFAR10, "features_18_2", &[8, 1280, 2, 2]),
        ("mobilenet_v2", (&[3, 64, 64], 10), "features_0_2", &[8, 32, 32, 32]),
        ("mobilenet_v2", (&[3, 64, 64], 10), "features_18_2", &[8, 1280, 2, 2]),
        ("vit-tiny", CIFAR10, "permute", &[8, 64, 192]),
        ("vit-tiny", CIFAR10, "cat", &[8, 65, 192]),
        ("vit-tiny", CIFAR10, "matmul", &[8, 65, 576]),
        ("vit-tiny", CIFAR10, "transpose_1", &[8, 3, 65, 64]),
        ("vit-tiny", CIFAR10, "scaled_dot_product_attention", &[8, 3, 65, 64]),
        ("vit-tiny", CIFAR10, "encoder_ln", &[8, 65, 192]),
        ("vit-tiny", CIFAR10, "getitem_18", &[8, 192]), // after the 18 chunk pieces
        ("vit-tiny", MNIST, "cat", &[8, 17, 192]),
    ];
    for &(name, (shape, classes), node, want) in cases {
        let c = ctx(shape, classes);
        let g = build_model(name, &c).unwrap();
        let shapes = g.infer_shapes(&[c.batch_shape(8)], &|_| None).unwrap();
        assert_eq!(shapes[g.require(node).unwrap().0].shape(), want, "{name}.{node}");
    }
}

#[test]
fn parameter_names_are_state_dict_names() {
    let g = build_model("jsc-tiny", &ctx(JSC.0, JSC.1)).unwrap();
    let got: Vec<(String, Vec<usize>, bool)> = g.param_specs().into_iter().map(|(n, s)| (n, s.shape, s.trainable)).collect();
    let want: Vec<(String, Vec<usize>, bool)> = vec![
        ("seq_blocks.0.weight".into(), vec![16], true),
        ("seq_blocks.0.bias".into(), vec![16], true),
        ("seq_blocks.0.running_mean".into(), vec![16], false),
        ("seq_blocks.0.running_var".into(), vec![16], false),
        ("seq_blocks.2.weight".into(), vec![5, 16], true),
        ("seq_blocks.2.bias".into(), vec![5], true),
    ];
    assert_eq!(got, want);
    let tiny = build_model("toy_tiny", &ctx(TOY_TINY.0, TOY_TINY.1)).unwrap();
    let names: Vec<String> = tiny.param_specs().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["l1.weight", "l1.bias"]);
}

#[test]
fn vgg7_uses_pytorch_momentum_and_module_paths() {
    let g = build_model("vgg7", &ctx(CIFAR10.0, CIFAR10.1)).unwrap();
    let bn = g.node(g.require("feature_layers_1").unwrap());
    assert_eq!(bn.target, "feature_layers.1");
    match &bn.op {
        Op::BatchNorm2d(n) => assert_eq!((n.num_features, n.momentum, n.eps), (128, 0.9, 1e-5)),
        other => panic!("feature_layers_1 is {other:?}"),
    }
    let view = g.node(g.require("view").unwrap());
    assert_eq!((view.kind, view.target.as_str()), (NodeKind::CallMethod, "view"));
    assert_eq!(g.node(g.require("last_layer").unwrap()).op, Op::Linear { in_features: 1024, out_features: 10, bias: true });
}

#[test]
fn three_linear_has_linears_at_lab_positions() {
    let g = build_model("jsc-three-linear", &ctx(JSC.0, JSC.1)).unwrap();
    let linears: Vec<&str> = g.nodes().iter().filter(|n| n.op.mase_op() == "linear").map(|n| n.name.as_str()).collect();
    assert_eq!(linears, ["seq_blocks_2", "seq_blocks_4", "seq_blocks_6"]);
}

#[test]
fn data_sets_that_do_not_fit_are_errors() {
    let cases: &[(&str, &[usize], usize, &str)] = &[
        ("jsc-tiny", &[1, 28, 28], 10, "1-D samples"),
        ("jsc-s", &[], 5, "at least one dimension"),
        ("vgg7", &[1, 28, 28], 10, "32x32"),
        ("vgg7", &[16], 5, "[channels, height, width]"),
        ("mnist-cnn", &[16], 5, "[channels, height, width]"),
        ("mnist-cnn", &[1, 3, 3], 10, "at least 4x4"),
        ("resnet18", &[3, 7, 7], 10, "at least 8x8"),
        ("mobilenet_v2", &[16], 10, "[channels, height, width]"),
        ("vit-tiny", &[3, 32, 16], 10, "square images"),
        ("vit-tiny", &[3, 30, 30], 10, "multiple of 4 or 7"),
        ("toy", &[1, 2, 2], 0, "no classes"),
        ("mlp", &[3, 0], 2, "zero-sized"),
    ];
    for &(name, shape, classes, msg) in cases {
        let e = build_model(name, &ctx(shape, classes)).expect_err(name).to_string();
        assert!(e.contains(msg) && e.contains(&format!("`{name}`")), "{name}: {e}");
    }
}

#[test]
fn unknown_model_lists_known_ones() {
    let e = build_model("resnet9000", &ctx(JSC.0, JSC.1)).unwrap_err().to_string();
    assert!(e.contains("`resnet9000`"), "{e}");
    for name in model_names() {
        assert!(e.contains(name), "{e} lacks {name}");
    }
}

#[test]
fn registry_lists_every_model_with_info() {
    let names = model_names();
    assert_eq!(
        names,
        [
            "jsc-tiny",
            "jsc-toy",
            "jsc-s",
            "jsc-three-linear",
            "jsc-three-layer",
            "toy",
            "toy_tiny",
            "mlp",
            "tfc",
            "mnist-cnn",
            "vgg7",
            "resnet18",
            "mobilenet_v2",
            "vit-tiny",
            "bert-tiny"
        ]
    );
    for name in names {
        let info = model_info(name).unwrap();
        assert_eq!(info.name, name);
        assert!(["physical", "vision", "sequence", "toy"].contains(&info.family), "{name}");
        assert!(!info.description.is_empty());
    }
    assert_eq!(model_info("JSC-Tiny").map(|i| i.name), Some("jsc-tiny"));
    assert_eq!(model_info("jsc-m"), None);
    assert_eq!(build_model("JSC-TOY", &ctx(JSC.0, JSC.1)).map(|g| trainable_params(&g)).ok(), Some(327));
}

#[test]
fn torchvision_models_keep_torchvision_state_dict_names() {
    // (model, number of state-dict tensors less `num_batches_tracked`, as torchvision's model
    // has them, and a few names with their shapes). Python's test_zoo_torchvision.py compares
    // every name and value with torchvision itself.
    let cases: &[(&str, usize, &[(&str, &[usize])])] = &[
        (
            "resnet18",
            102,
            &[
                ("conv1.weight", &[64, 3, 3, 3]),
                ("bn1.running_mean", &[64]),
                ("layer1.0.conv2.weight", &[64, 64, 3, 3]),
                ("layer2.0.downsample.0.weight", &[128, 64, 1, 1]),
                ("layer4.1.bn2.running_var", &[512]),
                ("fc.bias", &[10]),
            ],
        ),
        (
            "mobilenet_v2",
            262,
            &[
                ("features.0.0.weight", &[32, 3, 3, 3]),
                ("features.1.conv.0.0.weight", &[32, 1, 3, 3]),
                ("features.1.conv.1.weight", &[16, 32, 1, 1]),
                ("features.2.conv.0.0.weight", &[96, 16, 1, 1]),
                ("features.2.conv.1.0.weight", &[96, 1, 3, 3]),
                ("features.2.conv.3.running_mean", &[24]),
                ("features.18.0.weight", &[1280, 320, 1, 1]),
                ("classifier.1.weight", &[10, 1280]),
            ],
        ),
        (
            "vit-tiny",
            80,
            &[
                ("class_token", &[1, 1, 192]),
                ("conv_proj.weight", &[192, 3, 4, 4]),
                ("encoder.pos_embedding", &[1, 65, 192]),
                ("encoder.layers.encoder_layer_0.ln_1.weight", &[192]),
                ("encoder.layers.encoder_layer_0.self_attention.in_proj_weight", &[576, 192]),
                ("encoder.layers.encoder_layer_0.self_attention.in_proj_bias", &[576]),
                ("encoder.layers.encoder_layer_5.self_attention.out_proj.weight", &[192, 192]),
                ("encoder.layers.encoder_layer_5.mlp.0.weight", &[768, 192]),
                ("encoder.layers.encoder_layer_5.mlp.3.bias", &[192]),
                ("encoder.ln.bias", &[192]),
                ("heads.head.weight", &[10, 192]),
            ],
        ),
    ];
    for &(name, count, named) in cases {
        let specs = build_model(name, &ctx(CIFAR10.0, CIFAR10.1)).unwrap().param_specs();
        assert_eq!(specs.len(), count, "{name}");
        for &(param, shape) in named {
            let spec = specs.iter().find(|(n, _)| n == param).unwrap_or_else(|| panic!("{name} has no {param}"));
            assert_eq!(spec.1.shape, shape, "{name}: {param}");
        }
    }
}
