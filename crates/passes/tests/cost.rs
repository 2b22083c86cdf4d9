//! FLOPs, BitOPs, sizes and latency against closed forms.

mod common;
use common::*;
use serde_json::json;

#[test]
fn jsc_tiny_flops_closed_form() {
    let (mut g, mut ctx) = jsc_tiny();
    let r = pass("flops", &mut g, &mut ctx, json!({}));
    // Per sample: BN 4 * 16, ReLU 16, Linear 16 * 5, ReLU 5.
    let per_node: Vec<u64> = r.json["nodes"].as_array().unwrap().iter().map(|n| n["flops"].as_u64().unwrap()).collect();
    assert_eq!(per_node, [64, 16, 80, 5]);
    let t = &r.json["total"];
    assert_eq!(t["flops"], 64 + 16 + 80 + 5);
    assert_eq!(t["backward_flops"], 64 + 16 + 2 * 80 + 5);
    assert_eq!(t["params"], 117, "PyTorch's trainable parameter count");
    assert_eq!(t["buffers"], 32, "running mean and variance");
    // A batch scales every count but the parameters.
    let r = pass("flops", &mut g, &mut ctx, json!({"batch_size": 10}));
    assert_eq!(r.json["total"]["flops"], 1650);
    assert_eq!(r.json["total"]["params"], 117);
}

#[test]
fn jsc_tiny_bitops_drop_after_quantization() {
    let (mut g, mut ctx) = jsc_tiny();
    with_metadata(&mut g, &mut ctx);
    let float = pass("bitops", &mut g, &mut ctx, json!({}));
    // Float: 32-bit operands everywhere: 80 MACs * 32 * 32, and 85 other operations * 32.
    let float_bitops = 80.0 * 32.0 * 32.0 + 32.0 * (64.0 + 16.0 + 5.0);
    assert_eq!(float.json["total"]["bitops"], float_bitops);
    assert_eq!(float.json["total"]["model_size_bits"], (117.0 + 32.0) * 32.0);
    pass("quantize", &mut g, &mut ctx, lab_linear_8_4());
    let q = pass("bitops", &mut g, &mut ctx, json!({}));
    // The lab's 8/4 config: the linear layer's 80 MACs now take 8-bit inputs and weights.
    assert_eq!(q.json["total"]["bitops"], 80.0 * 8.0 * 8.0 + 32.0 * (64.0 + 16.0 + 5.0));
    assert!(q.json["total"]["bitops"].as_f64().unwrap() < float_bitops);
    // Weight 80 * 8 and bias 5 * 8 bits; batch norm's 32 parameters and 32 buffers stay 32-bit.
    assert_eq!(q.json["total"]["model_size_bits"], 80.0 * 8.0 + 5.0 * 8.0 + 64.0 * 32.0);
    assert_eq!(q.json["total"]["w_avg_bit"], 8.0);
    let lin = &q.json["nodes"][2];
    assert_eq!((lin["data_in_width"].clone(), lin["weight_width"].clone()), (json!(8.0), json!(8.0)));
    assert_eq!(lin["input_bits"], 16.0 * 8.0);
}

#[test]
fn conv_and_pool_counts() {
    // mnist-cnn on 1x28x28: conv 1->8 3x3 pad 1, ReLU, pool 2, conv 8->16, ReLU, pool 2, flatten, linear 784->10.
    let (mut g, mut ctx) = model("mnist-cnn", &[1, 28, 28], 10);
    let r = pass("flops", &mut g, &mut ctx, json!({}));
    let f: Vec<u64> = r.json["nodes"].as_array().unwrap().iter().map(|n| n["flops"].as_u64().unwrap()).collect();
    let want = [8 * 28 * 28 * 9, 8 * 28 * 28, 8 * 14 * 14 * 4, 16 * 14 * 14 * 9 * 8, 16 * 14 * 14, 16 * 7 * 7 * 4, 0, 784 * 10];
    assert_eq!(f, want);
}

#[test]
fn latency_reports_every_node() {
    let (mut g, mut ctx) = model("toy", &[784], 10);
    let r = pass("latency", &mut g, &mut ctx, json!({"repeats": 3, "warmup": 1, "batch_size": 4}));
    let nodes = r.json["nodes"].as_array().unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["size", "view", "seq_blocks_0", "seq_blocks_1", "seq_blocks_2", "seq_blocks_3", "seq_blocks_4"]);
    assert_eq!(nodes[0]["latency_us"], 0.0, "size does no tensor work");
    assert!(nodes.iter().all(|n| n["latency_us"].as_f64().unwrap() >= 0.0));
    assert!(r.json["model_us"].as_f64().unwrap() > 0.0);
}
