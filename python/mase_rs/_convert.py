"""Conversions between Python values and what the Rust side takes: JSON arguments, float32 arrays,
and back to the caller's array kind (numpy, or torch when the input was a torch tensor)."""

import json
import os
import sys

import numpy as np


def to_json(value, what):
    """`value` (dicts, lists, tuples, numbers, strings, None, numpy scalars) as JSON text."""

    def default(o):
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, os.PathLike):
            return os.fspath(o)
        if isinstance(o, (tuple, set)):
            return list(o)
        raise ValueError(f"{what}: {type(o).__name__} values cannot be passed to mase-rs")

    return json.dumps(value, default=default)


def is_torch(x):
    """Whether `x` is a torch tensor (without importing torch)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def is_torch_module(x):
    """Whether `x` is a `torch.nn.Module` (without importing torch when it is not loaded)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.nn.Module)


def is_torch_loaded():
    """Whether torch can be imported (importing it, once, when it is installed)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def to_numpy(x, what="input"):
    """`x` as a C-contiguous float32 numpy array (torch tensors are detached and moved to CPU)."""
    if is_torch(x):
        x = x.detach().cpu().numpy()
    if _is_complex(x):
        # numpy would only warn and drop the imaginary parts.
        raise TypeError(f"{what}: expected real numbers, got complex values ({np.asarray(x).dtype})")
    try:
        # Not np.ascontiguousarray, which makes a 0-d array (a scalar constant) 1-d.
        return np.asarray(x, dtype=np.float32, order="C")
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what}: expected an array of numbers ({e})") from None


def _is_complex(x):
    """Whether `x` holds complex numbers (False for what numpy cannot read as an array; the
    conversion then says what is wrong)."""
    try:
        return bool(np.iscomplexobj(x))
    except (TypeError, ValueError):
        return False


def like(out, template):
    """`out` (numpy) as the same kind of array as `template` (a torch tensor on its device)."""
    if is_torch(template):
        import torch

        t = torch.from_numpy(out)
        return t if template.device.type == "cpu" else t.to(template.device)
    return out
