//! Image models: a generic MLP, FINN's TFC, a small CNN and MASE's CIFAR VGG7 (doc/mase-semantics.md#models-vgg7).

use crate::context::ModelContext;
use crate::layers::{bn1d, bn2d, chain, conv2d, flatten, linear, max_pool2d, probe_shape};
use crate::Result;
use mase_ir::{DimArg, Graph, Op};

/// A small MLP for any sample shape: `seq_blocks = Sequential(Flatten, Linear(in, 64), ReLU,
/// Linear(64, c))` with in = prod(sample_shape). 4810 trainable parameters on digits (8x8, 10
/// classes).
pub(crate) fn mlp(name: &str, ctx: &ModelContext) -> Result<Graph> {
    ctx.check_basic(name)?;
    let (f, c) = (ctx.sample_numel(), ctx.num_classes);
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let y = chain(&mut g, "seq_blocks", 0, x, vec![flatten(), linear(f, 64), Op::Relu, linear(64, c)]);
    g.output(y);
    Ok(g)
}

/// FINN's TFC topology in floating point: Flatten, then three Linear(64)+BN+ReLU stages and a
/// Linear(64, c) classifier. 59594 trainable parameters on MNIST.
pub(crate) fn tfc(name: &str, ctx: &ModelContext) -> Result<Graph> {
    ctx.check_basic(name)?;
    let (f, c) = (ctx.sample_numel(), ctx.num_classes);
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let y = chain(
        &mut g,
        "seq_blocks",
        0,
        x,
        vec![
            flatten(),
            linear(f, 64),
            bn1d(64),
            Op::Relu,
            linear(64, 64),
            bn1d(64),
            Op::Relu,
            linear(64, 64),
            bn1d(64),
            Op::Relu,
            linear(64, c),
        ],
    );
    g.output(y);
    Ok(g)
}

/// A small CNN: two Conv3x3(pad 1)+ReLU+MaxPool2 stages (8 and 16 channels), Flatten and one
/// Linear whose width comes from shape inference (16 * 7 * 7 on MNIST). 9098 trainable
/// parameters on MNIST. Works for any image of at least 4x4.
pub(crate) fn mnist_cnn(name: &str, ctx: &ModelContext) -> Result<Graph> {
    let (ch, _, _) = ctx.image_chw(name, 4)?;
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let features = chain(
        &mut g,
        "seq_blocks",
        0,
        x,
        vec![conv2d(ch, 8, 3, 1), Op::Relu, max_pool2d(2), conv2d(8, 16, 3, 1), Op::Relu, max_pool2d(2), flatten()],
    );
    let width = probe_shape(name, &g, ctx, features)?.last().copied().unwrap_or(0);
    let y = chain(&mut g, "seq_blocks", 7, features, vec![linear(width, ctx.num_classes)]);
    g.output(y);
    Ok(g)
}

/// MASE's VGG7 for CIFAR (MASE c204fc94): six Conv3x3+BN2d(momentum 0.9)+ReLU blocks with three
/// MaxPool2d(2), `x.view(-1, 8192)`, classifier Linear(8192, 1024), ReLU, Linear(1024, 1024),
/// ReLU, and `last_layer = Linear(1024, c)`. 14,029,450 trainable parameters on CIFAR-10.
///
/// The momentum is PyTorch's (`running = 0.1 * running + 0.9 * batch`). The hard-coded 8192 =
/// 512 * 4 * 4 only fits 32x32 images, so other sizes are refused here rather than silently
/// mixing samples in the view.
pub(crate) fn vgg7(name: &str, ctx: &ModelContext) -> Result<Graph> {
    let (ch, h, w) = ctx.image_chw(name, 1)?;
    if (h, w) != (32, 32) {
        return Err(ctx.error(name, "vgg7 flattens with x.view(-1, 8192), which needs 32x32 images"));
    }
    let block = |i: usize, o: usize| [conv2d(i, o, 3, 1), bn2d(o, 0.9), Op::Relu];
    let mut features = Vec::with_capacity(21);
    features.extend(block(ch, 128));
    features.extend(block(128, 128));
    features.push(max_pool2d(2));
    features.extend(block(128, 256));
    features.extend(block(256, 256));
    features.push(max_pool2d(2));
    features.extend(block(256, 512));
    features.extend(block(512, 512));
    features.push(max_pool2d(2));
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let f = chain(&mut g, "feature_layers", 0, x, features);
    let v = g.call_method("view", Op::Reshape { shape: vec![DimArg::Const(-1), DimArg::Const(8192)] }, &[f]);
    let c = chain(&mut g, "classifier", 0, v, vec![linear(8192, 1024), Op::Relu, linear(1024, 1024), Op::Relu]);
    let y = g.call_module("last_layer", linear(1024, ctx.num_classes), &[c]);
    g.output(y);
    Ok(g)
}
