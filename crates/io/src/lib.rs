//! Data sets and checkpoints of mase-rs.
