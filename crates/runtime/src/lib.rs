//! Static-graph executor of mase-rs.
