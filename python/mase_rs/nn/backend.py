"""Which engine runs `mg.model` on CPU tensors: mase-rs's Rust executor (`"rust"`, the default)
or PyTorch (`"torch"`, the path every other device takes).

>>> import mase_rs
>>> mase_rs.set_backend("torch"); mase_rs.get_backend()
'torch'
>>> mase_rs.set_backend("rust"); mase_rs.get_backend()
'rust'
"""

_BACKENDS = ("rust", "torch")
_backend = "rust"


def set_backend(name):
    """Selects the engine of `mg.model` on CPU tensors: `"rust"` runs forward and backward on
    mase-rs's executor (one autograd node over the whole graph); `"torch"` runs the module's
    PyTorch implementation, as on a GPU. Tensors on other devices always take PyTorch."""
    global _backend
    if name not in _BACKENDS:
        raise ValueError(f"set_backend: expected one of {', '.join(_BACKENDS)}, got {name!r}")
    _backend = name


def get_backend():
    """The engine `set_backend` selected (`"rust"` or `"torch"`)."""
    return _backend


class using:
    """Selects a backend for the duration of a `with` block, then restores the previous one.

    >>> import mase_rs
    >>> from mase_rs.nn.backend import using
    >>> with using("torch"):
    ...     mase_rs.get_backend()
    'torch'
    >>> mase_rs.get_backend()
    'rust'
    """

    def __init__(self, name):
        if name not in _BACKENDS:
            raise ValueError(f"using: expected one of {', '.join(_BACKENDS)}, got {name!r}")
        self.name = name
        self.previous = None

    def __enter__(self):
        global _backend
        self.previous, _backend = _backend, self.name
        return self

    def __exit__(self, *exc):
        global _backend
        _backend = self.previous
        return False
