//! Model zoo of mase-rs.
