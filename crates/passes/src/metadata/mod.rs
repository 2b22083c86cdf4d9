//! Metadata passes: `init_metadata`, `add_common_metadata`, `add_software_metadata`,
//! `add_hardware_metadata`, and the format propagation they share with `quantize`.

pub mod classify;
pub mod common;
pub mod hardware;
pub mod init;
pub mod precision;
pub mod software;
