//! A small Vision Transformer with torchvision's `VisionTransformer` structure and state-dict
//! names (`conv_proj`, `class_token`, `encoder.pos_embedding`,
//! `encoder.layers.encoder_layer_0.self_attention.in_proj_weight`, `...mlp.3`, `encoder.ln`,
//! `heads.head`), so that its checkpoint loads into `VisionTransformer(image_size, patch_size,
//! 6, 3, 192, 768, num_classes=...)` and back.
//!
//! Each `nn.MultiheadAttention` is spelled out as the ops PyTorch runs for it with
//! `need_weights=False` (as the Python tracer expands it): the input times the transposed packed
//! `in_proj_weight` plus `in_proj_bias`, the three `chunk` pieces viewed as `[N, heads, L, d]`,
//! `F.scaled_dot_product_attention` (what `F.multi_head_attention_forward` calls when no weights
//! are returned; as one op it needs no scale constant, which would be a tensor torchvision's
//! state dict lacks), the heads joined back to `[N, L, E]`, and `out_proj`. Quantize reaches the
//! projections by type (`matmul` for the packed input projection, `linear` for `out_proj`, the
//! MLP and the head) or by name.

use crate::context::ModelContext;
use crate::layers::chain;
use crate::Result;
use mase_ir::{items_at, ConvSpec, DimArg, Graph, IndexItem, Init, NodeId, Op};

/// Width, depth, heads and MLP width of `vit-tiny` (DeiT-tiny's width and heads at half its
/// depth).
const HIDDEN: usize = 192;
const LAYERS: usize = 6;
const HEADS: usize = 3;
const MLP: usize = 768;

/// torchvision's ViT layer norms: `partial(nn.LayerNorm, eps=1e-6)`.
fn layer_norm() -> Op {
    Op::LayerNorm { normalized_shape: vec![HIDDEN], eps: 1e-6, elementwise_affine: true, bias: true }
}

fn linear(in_features: usize, out_features: usize) -> Op {
    Op::Linear { in_features, out_features, bias: true }
}

/// `x.reshape(n, rest...)` with `n` the integer node `n`.
fn reshape(g: &mut Graph, x: NodeId, n: NodeId, rest: &[i64]) -> NodeId {
    let mut shape = vec![DimArg::Input(1)];
    shape.extend(rest.iter().map(|&d| DimArg::Const(d)));
    g.call_method("reshape", Op::Reshape { shape }, &[x, n])
}

fn transpose(g: &mut Graph, x: NodeId, dim0: i64, dim1: i64) -> NodeId {
    g.call_method("transpose", Op::Transpose { dim0, dim1 }, &[x])
}

/// `nn.MultiheadAttention(HIDDEN, HEADS, batch_first=True)` at `path` applied to `x` as
/// self-attention (see the module's documentation).
fn self_attention(g: &mut Graph, path: &str, x: NodeId) -> NodeId {
    let (e, h) = (HIDDEN, HEADS);
    let w = g.parameter(&format!("{path}.in_proj_weight"), vec![3 * e, e], true, Init::Xavier { fan_in: e, fan_out: 3 * e });
    let wt = transpose(g, w, 0, 1);
    let qkv = g.call_function("torch.matmul", Op::MatMul, &[x, wt]);
    let b = g.parameter(&format!("{path}.in_proj_bias"), vec![3 * e], true, Init::Zeros);
    let qkv = g.call_function("torch.add", Op::Add, &[qkv, b]);
    let n = g.call_method("size", Op::Size { dim: 0 }, &[x]);
    let heads: Vec<NodeId> = (0..3)
        .map(|part| {
            let items = items_at(-1, IndexItem::Chunk { chunks: 3, index: part });
            let piece = g.call_function("operator.getitem", Op::Index { items }, &[qkv]);
            let split = reshape(g, piece, n, &[-1, h as i64, (e / h) as i64]);
            transpose(g, split, 1, 2)
        })
        .collect();
    let sdpa = Op::ScaledDotProductAttention { mask: None, is_causal: false, scale: None };
    let a = g.call_function("torch.nn.functional.scaled_dot_product_attention", sdpa, &heads);
    let a = transpose(g, a, 1, 2);
    let a = reshape(g, a, n, &[-1, e as i64]);
    g.call_module(&format!("{path}.out_proj"), linear(e, e), &[a])
}

/// torchvision's `EncoderBlock` at `path`: `x = dropout(attention(ln_1(input))) + input`, then
/// `x + mlp(ln_2(x))` with `mlp` = Linear(E, MLP), GELU, Dropout, Linear(MLP, E), Dropout.
fn encoder_block(g: &mut Graph, path: &str, input: NodeId) -> NodeId {
    let y = g.call_module(&format!("{path}.ln_1"), layer_norm(), &[input]);
    let y = self_attention(g, &format!("{path}.self_attention"), y);
    let y = g.call_module(&format!("{path}.dropout"), Op::Dropout { p: 0.0 }, &[y]);
    let x = g.call_function("operator.add", Op::Add, &[y, input]);
    let y = g.call_module(&format!("{path}.ln_2"), layer_norm(), &[x]);
    let mlp = vec![linear(HIDDEN, MLP), Op::Gelu { tanh: false }, Op::Dropout { p: 0.0 }, linear(MLP, HIDDEN), Op::Dropout { p: 0.0 }];
    let y = chain(g, &format!("{path}.mlp"), 0, y, mlp);
    g.call_function("operator.add", Op::Add, &[x, y])
}

/// `vit-tiny`: torchvision's `VisionTransformer` with hidden width 192, 6 encoder blocks of 3
/// heads and MLP width 768, on square images cut into patches of 7 when the side is a multiple
/// of 7 (28x28 MNIST: 16 patches) and of 4 otherwise (32x32 CIFAR: 64 patches). 2,693,578
/// trainable parameters on CIFAR-10, torchvision's count for `VisionTransformer(32, 4, 6, 3,
/// 192, 768, num_classes=10)`. The class token starts at zero and the position embedding at
/// N(0, 0.02^2) as torchvision draws them; the modules take PyTorch's defaults (torchvision
/// re-draws some of them, which a checkpoint carries over either way).
pub(crate) fn vit_tiny(name: &str, ctx: &ModelContext) -> Result<Graph> {
    let (ch, h, w) = ctx.image_chw(name, 4)?;
    let patch = if h % 7 == 0 { 7 } else { 4 };
    if h != w || h % patch != 0 {
        return Err(ctx.error(name, "vit-tiny needs square images whose side is a multiple of 4 or 7 (its patch size)"));
    }
    let tokens = (h / patch) * (w / patch);
    let mut g = Graph::new();
    let x = g.placeholder("x");
    // `_process_input`: patches by a strided convolution, then `[N, E, T] -> [N, T, E]`.
    let n = g.call_method("size", Op::Size { dim: 0 }, &[x]);
    let mut conv = ConvSpec::new(2, ch, HIDDEN, patch, patch, 0);
    conv.bias = true;
    let p = g.call_module("conv_proj", Op::Conv2d(conv), &[x]);
    let p = reshape(&mut g, p, n, &[HIDDEN as i64, tokens as i64]);
    let p = g.call_method("permute", Op::Permute { dims: vec![0, 2, 1] }, &[p]);
    // The class token, expanded to the batch, in front of the patches.
    let cls = g.parameter("class_token", vec![1, 1, HIDDEN], true, Init::Zeros);
    let cls = g.call_method("expand", Op::Expand { shape: vec![DimArg::Input(1), DimArg::Const(-1), DimArg::Const(-1)] }, &[cls, n]);
    let tokens_in = g.call_function("torch.cat", Op::Concat { dim: 1 }, &[cls, p]);
    // The encoder: position embedding, dropout, the blocks, the final layer norm.
    let pos = g.parameter("encoder.pos_embedding", vec![1, tokens + 1, HIDDEN], true, Init::Gaussian { std: 0.02 });
    let mut y = g.call_function("operator.add", Op::Add, &[tokens_in, pos]);
    y = g.call_module("encoder.dropout", Op::Dropout { p: 0.0 }, &[y]);
    for i in 0..LAYERS {
        y = encoder_block(&mut g, &format!("encoder.layers.encoder_layer_{i}"), y);
    }
    y = g.call_module("encoder.ln", layer_norm(), &[y]);
    // The class token's output, then the head.
    let first = g.call_function("operator.getitem", Op::Index { items: vec![IndexItem::full(), IndexItem::Select(0)] }, &[y]);
    let out = g.call_module("heads.head", linear(HIDDEN, ctx.num_classes), &[first]);
    g.output(out);
    Ok(g)
}
