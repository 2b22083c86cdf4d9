//! Statistics of weights and activations: the statistic definitions and the profiling pass.

pub mod profile;
pub mod stat;
