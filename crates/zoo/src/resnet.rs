//! torchvision's ResNet-18 with the CIFAR stem: `conv1` is a 3x3 convolution of stride 1 and
//! padding 1 and there is no max pool, so 32x32 images reach `layer4` as 4x4 maps. Module paths,
//! node names and state-dict names are those torch.fx gives torchvision's `resnet18` with `conv1`
//! replaced by `nn.Conv2d(3, 64, 3, 1, 1, bias=False)` and `maxpool` by `nn.Identity()` (the
//! identity is left out of the graph: it owns nothing and computes nothing).

use crate::context::ModelContext;
use crate::layers::bn2d;
use crate::Result;
use mase_ir::{ConvSpec, Graph, NodeId, Op};

/// `nn.Conv2d(i, o, k, stride, padding, bias=False)`, as every ResNet convolution is.
fn conv(i: usize, o: usize, k: usize, stride: usize, padding: usize) -> Op {
    Op::Conv2d(ConvSpec { bias: false, ..ConvSpec::new(2, i, o, k, stride, padding) })
}

/// torchvision's `BasicBlock` at `path` (`layer2.0`): conv3x3, BN, ReLU, conv3x3, BN, plus the
/// input (through `downsample` = conv1x1 + BN when the stride or width changes), ReLU. The
/// block's one `relu` module is called twice, so its second node is `<path>_relu_1`.
fn basic_block(g: &mut Graph, path: &str, x: NodeId, i: usize, o: usize, stride: usize) -> NodeId {
    let m = |g: &mut Graph, name: &str, op: Op, input: NodeId| g.call_module(&format!("{path}.{name}"), op, &[input]);
    let c1 = m(g, "conv1", conv(i, o, 3, stride, 1), x);
    let b1 = m(g, "bn1", bn2d(o, 0.1), c1);
    let r1 = m(g, "relu", Op::Relu, b1);
    let c2 = m(g, "conv2", conv(o, o, 3, 1, 1), r1);
    let b2 = m(g, "bn2", bn2d(o, 0.1), c2);
    let identity = if stride != 1 || i != o {
        let d = m(g, "downsample.0", conv(i, o, 1, stride, 0), x);
        m(g, "downsample.1", bn2d(o, 0.1), d)
    } else {
        x
    };
    let sum = g.call_function("operator.add", Op::Add, &[b2, identity]);
    m(g, "relu", Op::Relu, sum)
}

/// `resnet18` with the CIFAR stem: conv1 (3x3, stride 1), bn1, relu, then `layer1`..`layer4` of
/// two BasicBlocks each (64, 128, 256, 512 channels; the first block of layers 2-4 halves the
/// maps), `avgpool` (adaptive, to 1x1), `torch.flatten(x, 1)` and `fc`. 11,173,962 trainable
/// parameters on CIFAR-10, torchvision's count for the same modules. Works for any image of at
/// least 8x8 (layer4 then sees 1x1 maps).
pub(crate) fn resnet18(name: &str, ctx: &ModelContext) -> Result<Graph> {
    let (ch, _, _) = ctx.image_chw(name, 8)?;
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let c = g.call_module("conv1", conv(ch, 64, 3, 1, 1), &[x]);
    let b = g.call_module("bn1", bn2d(64, 0.1), &[c]);
    let mut y = g.call_module("relu", Op::Relu, &[b]);
    let mut width = 64;
    for (layer, out) in [64, 128, 256, 512].into_iter().enumerate() {
        let stride = if layer == 0 { 1 } else { 2 };
        y = basic_block(&mut g, &format!("layer{}.0", layer + 1), y, width, out, stride);
        y = basic_block(&mut g, &format!("layer{}.1", layer + 1), y, out, out, 1);
        width = out;
    }
    let p = g.call_module("avgpool", Op::AdaptiveAvgPool2d { output_size: [1, 1] }, &[y]);
    let f = g.call_function("torch.flatten", Op::Flatten { start_dim: 1, end_dim: -1 }, &[p]);
    let fc = g.call_module("fc", Op::Linear { in_features: 512, out_features: ctx.num_classes, bias: true }, &[f]);
    g.output(fc);
    Ok(g)
}
