//! torchvision's MobileNetV2 (width 1.0). Module paths and state-dict names are torchvision's
//! (`features.0.0.weight`, `features.3.conv.1.1.running_mean`, `classifier.1.bias`), so a
//! checkpoint loads into `torchvision.models.mobilenet_v2(num_classes=...)` and back.
//!
//! The stem (`features.0.0`) has stride 2 as torchvision's for images larger than 32x32, and
//! stride 1 for images of at most 32x32 (CIFAR, MNIST): with torchvision's five halvings a 32x32
//! image would reach the last stages as 1x1 maps; with the stride-1 stem they are 2x2. The
//! weights have the same shapes either way, so the same checkpoint loads into torchvision's
//! model once its `features[0][0]` is `nn.Conv2d(3, 32, 3, 1, 1, bias=False)`.

use crate::context::ModelContext;
use crate::layers::bn2d;
use crate::Result;
use mase_ir::{ConvSpec, Graph, NodeId, Op};

/// The inverted-residual stages of MobileNetV2: expansion t, output channels c, repeats n and
/// the stride s of the first block (torchvision's `inverted_residual_setting`).
const STAGES: [(usize, usize, usize, usize); 7] =
    [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)];

/// The convolution of torchvision's `Conv2dNormActivation(i, o, k, stride, groups=groups)`: no
/// bias, padding `(k - 1) / 2`.
fn conv(i: usize, o: usize, k: usize, stride: usize, groups: usize) -> ConvSpec {
    ConvSpec { groups, bias: false, ..ConvSpec::new(2, i, o, k, stride, (k - 1) / 2) }
}

/// torchvision's `Conv2dNormActivation` at `path`: the convolution `spec` (`path.0`), BatchNorm
/// (`path.1`) and ReLU6 (`path.2`).
fn conv_bn_relu6(g: &mut Graph, path: &str, x: NodeId, spec: ConvSpec) -> NodeId {
    let o = spec.out_channels;
    let c = g.call_module(&format!("{path}.0"), Op::Conv2d(spec), &[x]);
    let b = g.call_module(&format!("{path}.1"), bn2d(o, 0.1), &[c]);
    g.call_module(&format!("{path}.2"), Op::Relu6, &[b])
}

/// torchvision's `InvertedResidual` at `path` (`features.3`): a 1x1 expansion to `i * t`
/// channels (none when t = 1), a 3x3 depthwise convolution of stride `stride`, a 1x1 linear
/// projection to `o` and its BatchNorm, all in `conv`; plus the input when the stride is 1 and
/// the width is kept (`x + self.conv(x)`).
fn inverted_residual(g: &mut Graph, path: &str, x: NodeId, i: usize, o: usize, stride: usize, t: usize) -> NodeId {
    let hidden = i * t;
    let mut k = 0;
    let mut y = x;
    if t != 1 {
        y = conv_bn_relu6(g, &format!("{path}.conv.0"), y, conv(i, hidden, 1, 1, 1));
        k = 1;
    }
    y = conv_bn_relu6(g, &format!("{path}.conv.{k}"), y, conv(hidden, hidden, 3, stride, hidden));
    y = g.call_module(&format!("{path}.conv.{}", k + 1), Op::Conv2d(conv(hidden, o, 1, 1, 1)), &[y]);
    y = g.call_module(&format!("{path}.conv.{}", k + 2), bn2d(o, 0.1), &[y]);
    if stride == 1 && i == o {
        y = g.call_function("operator.add", Op::Add, &[x, y]);
    }
    y
}

/// `mobilenet_v2`: `features.0` (3x3 conv to 32 channels, BN, ReLU6), seventeen inverted
/// residual blocks `features.1`-`features.17`, `features.18` (1x1 conv to 1280, BN, ReLU6),
/// `F.adaptive_avg_pool2d(x, (1, 1))`, `torch.flatten(x, 1)` and `classifier` = Dropout(0.2),
/// Linear(1280, classes). 2,236,682 trainable parameters on CIFAR-10, torchvision's count for the
/// same modules. The stem's stride is 1 for images of at most 32x32 and 2 otherwise (see the
/// module's documentation).
pub(crate) fn mobilenet_v2(name: &str, ctx: &ModelContext) -> Result<Graph> {
    let (ch, h, w) = ctx.image_chw(name, 8)?;
    let stem_stride = if h.max(w) <= 32 { 1 } else { 2 };
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let mut y = conv_bn_relu6(&mut g, "features.0", x, conv(ch, 32, 3, stem_stride, 1));
    let (mut width, mut index) = (32, 1);
    for (t, c, n, s) in STAGES {
        for r in 0..n {
            y = inverted_residual(&mut g, &format!("features.{index}"), y, width, c, if r == 0 { s } else { 1 }, t);
            width = c;
            index += 1;
        }
    }
    y = conv_bn_relu6(&mut g, &format!("features.{index}"), y, conv(width, 1280, 1, 1, 1));
    let p = g.call_function("torch.nn.functional.adaptive_avg_pool2d", Op::AdaptiveAvgPool2d { output_size: [1, 1] }, &[y]);
    let f = g.call_function("torch.flatten", Op::Flatten { start_dim: 1, end_dim: -1 }, &[p]);
    let d = g.call_module("classifier.0", Op::Dropout { p: 0.2 }, &[f]);
    let out = g.call_module("classifier.1", Op::Linear { in_features: 1280, out_features: ctx.num_classes, bias: true }, &[d]);
    g.output(out);
    Ok(g)
}
