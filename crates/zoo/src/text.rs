//! Sequence models: `bert-tiny`, a BERT-style encoder classifier with HuggingFace BERT's
//! module paths and state-dict names.

use crate::context::ModelContext;
use crate::layers::linear;
use crate::Result;
use mase_ir::{DimArg, Graph, IndexItem, Init, NodeId, Op};

/// The vocabulary bert-tiny embeds: token ids 0..16, the pixel counts of `digits-seq`.
pub(crate) const VOCAB: usize = 17;

/// The sizes of a BERT encoder (HuggingFace's `BertConfig` names).
#[derive(Clone, Copy, Debug)]
struct BertConfig {
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    max_position_embeddings: usize,
    type_vocab_size: usize,
    layer_norm_eps: f32,
}

/// bert-tiny: HuggingFace BERT (`BertForSequenceClassification`) with hidden size 128, 2 layers,
/// 2 heads, intermediate size 512, exact GELU and post-norm LayerNorm (eps 1e-12), over 1-D
/// samples `[L]` of token ids 0..16. The position embeddings have one row per position of the
/// data set's sequences (`max_position_embeddings = L`). Dropout is left out (BERT's 0.1 would
/// make training runs differ from evaluation), so train and eval mode compute the same.
/// 425,226 trainable parameters on digits-seq (L = 64, 10 classes).
pub(crate) fn bert_tiny(name: &str, ctx: &ModelContext) -> Result<Graph> {
    let len = match ctx.sample_shape.as_slice() {
        [l] if *l > 0 && ctx.num_classes > 0 => *l,
        _ => {
            return Err(
                ctx.error(name, "bert-tiny needs 1-D samples [sequence length] of token ids 0..16 (digits-seq) and at least one class")
            )
        }
    };
    let cfg = BertConfig {
        vocab_size: VOCAB,
        hidden_size: 128,
        num_hidden_layers: 2,
        num_attention_heads: 2,
        intermediate_size: 512,
        max_position_embeddings: len,
        type_vocab_size: 2,
        layer_norm_eps: 1e-12,
    };
    let mut g = Graph::new();
    let x = g.placeholder("input_ids");
    let mut h = embeddings(&mut g, &cfg, x);
    for i in 0..cfg.num_hidden_layers {
        h = encoder_layer(&mut g, &cfg, &format!("bert.encoder.layer.{i}"), h, len);
    }
    // BERT's pooler: the first token's hidden state through Linear and tanh.
    let first = g.call_function("operator.getitem", Op::Index { items: vec![IndexItem::full(), IndexItem::Select(0)] }, &[h]);
    let dense = g.call_module("bert.pooler.dense", linear(cfg.hidden_size, cfg.hidden_size), &[first]);
    let pooled = g.call_function("torch.tanh", Op::Tanh, &[dense]);
    let y = g.call_module("classifier", linear(cfg.hidden_size, ctx.num_classes), &[pooled]);
    g.output(y);
    Ok(g)
}

/// `nn.Embedding(n, d)` as a module.
fn embedding(num_embeddings: usize, embedding_dim: usize) -> Op {
    Op::Embedding { num_embeddings, embedding_dim, padding_idx: None, functional: false }
}

/// `nn.LayerNorm(d, eps)` as a module.
fn layer_norm(d: usize, eps: f32) -> Op {
    Op::LayerNorm { normalized_shape: vec![d], eps, elementwise_affine: true, bias: true }
}

/// `BertEmbeddings`: word, token-type (type 0 for every token) and position embeddings summed,
/// then LayerNorm. The position and token-type ids are the buffers BERT registers
/// (`position_ids = arange(L)`, `token_type_ids = 0`), shaped `[1, L]`.
fn embeddings(g: &mut Graph, cfg: &BertConfig, ids: NodeId) -> NodeId {
    let p = "bert.embeddings";
    let ids_shape = vec![1, cfg.max_position_embeddings];
    let words = g.call_module(&format!("{p}.word_embeddings"), embedding(cfg.vocab_size, cfg.hidden_size), &[ids]);
    let type_ids = g.parameter(&format!("{p}.token_type_ids"), ids_shape.clone(), false, Init::Zeros);
    let types = g.call_module(&format!("{p}.token_type_embeddings"), embedding(cfg.type_vocab_size, cfg.hidden_size), &[type_ids]);
    let sum = g.call_function("operator.add", Op::Add, &[words, types]);
    let pos_ids = g.parameter(&format!("{p}.position_ids"), ids_shape, false, Init::Arange);
    let pos = g.call_module(&format!("{p}.position_embeddings"), embedding(cfg.max_position_embeddings, cfg.hidden_size), &[pos_ids]);
    let sum = g.call_function("operator.add", Op::Add, &[sum, pos]);
    g.call_module(&format!("{p}.LayerNorm"), layer_norm(cfg.hidden_size, cfg.layer_norm_eps), &[sum])
}

/// `x.view(-1, L, heads, head_dim).permute(0, 2, 1, 3)`: `[B, L, hidden]` to one `[L, head_dim]`
/// matrix per sample and head.
fn split_heads(g: &mut Graph, cfg: &BertConfig, x: NodeId, len: usize) -> NodeId {
    let heads = cfg.num_attention_heads;
    let shape = [-1, len as i64, heads as i64, (cfg.hidden_size / heads) as i64].map(DimArg::Const).to_vec();
    let v = g.call_method("view", Op::Reshape { shape }, &[x]);
    g.call_method("permute", Op::Permute { dims: vec![0, 2, 1, 3] }, &[v])
}

/// One `BertLayer` under `prefix`: self-attention (`F.scaled_dot_product_attention` with scale
/// `1 / sqrt(head_dim)`, as BERT's SDPA attention), output dense, residual and LayerNorm, then
/// the GELU feed-forward block with its residual and LayerNorm.
fn encoder_layer(g: &mut Graph, cfg: &BertConfig, prefix: &str, h: NodeId, len: usize) -> NodeId {
    let d = cfg.hidden_size;
    let proj = |g: &mut Graph, which: &str| {
        let y = g.call_module(&format!("{prefix}.attention.self.{which}"), linear(d, d), &[h]);
        split_heads(g, cfg, y, len)
    };
    let (q, k, v) = (proj(g, "query"), proj(g, "key"), proj(g, "value"));
    let sdpa = Op::ScaledDotProductAttention { mask: None, is_causal: false, scale: None };
    let a = g.call_function("torch.nn.functional.scaled_dot_product_attention", sdpa, &[q, k, v]);
    let a = g.call_method("permute", Op::Permute { dims: vec![0, 2, 1, 3] }, &[a]);
    let a = g.call_method("reshape", Op::Reshape { shape: [-1, len as i64, d as i64].map(DimArg::Const).to_vec() }, &[a]);
    let a = g.call_module(&format!("{prefix}.attention.output.dense"), linear(d, d), &[a]);
    let a = g.call_function("operator.add", Op::Add, &[a, h]);
    let a = g.call_module(&format!("{prefix}.attention.output.LayerNorm"), layer_norm(d, cfg.layer_norm_eps), &[a]);
    let i = g.call_module(&format!("{prefix}.intermediate.dense"), linear(d, cfg.intermediate_size), &[a]);
    let i = g.call_function("torch.nn.functional.gelu", Op::Gelu { tanh: false }, &[i]);
    let o = g.call_module(&format!("{prefix}.output.dense"), linear(cfg.intermediate_size, d), &[i]);
    let o = g.call_function("operator.add", Op::Add, &[o, a]);
    g.call_module(&format!("{prefix}.output.LayerNorm"), layer_norm(d, cfg.layer_norm_eps), &[o])
}
