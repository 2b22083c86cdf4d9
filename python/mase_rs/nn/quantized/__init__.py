"""Quantized modules and functions: what a quantized node of `mg.model` is (MASE's
`quantized_modules` and `quantized_functions`)."""
