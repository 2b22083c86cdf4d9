"""PyTorch implementations of mase-rs's ops and number formats (MASE's `chop.nn`): what
`mg.model` runs on devices other than the CPU, or on the CPU with `set_backend("torch")`. The
number formats are torch functions in `mase_rs.nn.quantizers`."""

from mase_rs.nn.backend import get_backend, set_backend

__all__ = ["get_backend", "set_backend"]
