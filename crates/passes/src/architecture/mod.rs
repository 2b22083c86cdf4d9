//! Architecture transforms: passes that change the shapes of layers rather than their number
//! formats. `channel_multiplier` (MASE lab 4's `redefine_linear_transform_pass`, generalised to
//! convolutions and to every node whose shape follows a widened layer) is the first.

pub mod channel_multiplier;
mod resize;

pub use channel_multiplier::{
    channel_multiplier, widen_graph, widened_ops, ChannelArgs, LayerChange, LayerConfig, WidenMode, Widened, WidenedOps, WIDENABLE_OPS,
};
