"""PyTorch modules and functions of mase-rs: the number formats as torch functions
(`mase_rs.nn.quantizers`)."""
