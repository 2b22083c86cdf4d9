//! The jet-substructure (jsc) family (doc/mase-semantics.md#models-jsc). Every model is
//! `seq_blocks = nn.Sequential(...)` applied to `x`, so fx names the nodes `x, seq_blocks_0, ...,
//! output`. Input widths come from the data set's feature count and output widths from its class
//! count (16 and 5 for jsc).

use crate::context::ModelContext;
use crate::layers::{bn1d, linear, seq_blocks_model};
use crate::Result;
use mase_ir::{Graph, Op};

/// `JSC_Tiny`: BN, ReLU, Linear(f, c), ReLU. 117 trainable parameters on jsc.
pub(crate) fn jsc_tiny(name: &str, ctx: &ModelContext) -> Result<Graph> {
    let (f, c) = (ctx.features_1d(name)?, ctx.num_classes);
    Ok(seq_blocks_model(vec![bn1d(f), Op::Relu, linear(f, c), Op::Relu]))
}

/// `JSC_Toy`: three Linear+BN+ReLU stages of widths 8, 8, c after an input BN. 327 on jsc.
pub(crate) fn jsc_toy(name: &str, ctx: &ModelContext) -> Result<Graph> {
    let (f, c) = (ctx.features_1d(name)?, ctx.num_classes);
    Ok(seq_blocks_model(vec![
        bn1d(f),
        Op::Relu,
        linear(f, 8),
        bn1d(8),
        Op::Relu,
        linear(8, 8),
        bn1d(8),
        Op::Relu,
        linear(8, c),
        bn1d(c),
        Op::Relu,
    ]))
}

/// `JSC_S` with MASE's constructor bug fixed: widths come from the data set instead of a failing
/// `info["num_features"]` lookup. The middle BatchNorms MASE creates but never registers are
/// left out, as they are absent from MASE's module list. 5615 on jsc.
pub(crate) fn jsc_s(name: &str, ctx: &ModelContext) -> Result<Graph> {
    let (f, c) = (ctx.features_1d(name)?, ctx.num_classes);
    Ok(seq_blocks_model(vec![
        bn1d(f),
        Op::Relu,
        linear(f, 64),
        bn1d(64),
        Op::Relu,
        linear(64, 32),
        Op::Relu,
        linear(32, 32),
        Op::Relu,
        linear(32, 32),
        Op::Relu,
        linear(32, c),
        bn1d(c),
        Op::Relu,
    ]))
}

/// Lab 4's three-linear network: BN, ReLU, then three Linear+ReLU stages (16, 16, c); the Linears
/// are `seq_blocks_2`, `_4` and `_6`. 661 on jsc.
pub(crate) fn jsc_three_linear(name: &str, ctx: &ModelContext) -> Result<Graph> {
    let (f, c) = (ctx.features_1d(name)?, ctx.num_classes);
    Ok(seq_blocks_model(vec![bn1d(f), Op::Relu, linear(f, 16), Op::Relu, linear(16, 16), Op::Relu, linear(16, c), Op::Relu]))
}

/// hls4ml's jet tagger (`three_layer_model`): 64, 32, 32 hidden units with ReLU and plain logits
/// at the end (hls4ml's softmax is left to the loss). 4389 on jsc.
pub(crate) fn jsc_three_layer(name: &str, ctx: &ModelContext) -> Result<Graph> {
    let (f, c) = (ctx.features_1d(name)?, ctx.num_classes);
    Ok(seq_blocks_model(vec![linear(f, 64), Op::Relu, linear(64, 32), Op::Relu, linear(32, 32), Op::Relu, linear(32, c)]))
}
