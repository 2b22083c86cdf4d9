"""Quantized modules with MASE's class names (`LinearInteger`, `Conv2dMinifloatIEEE`,
`ReLUBlockFP`, ...): a quantized `call_module` node of `mg.model` is one of these, a subclass of
the float module holding the node's formats.

`quant` holds the formats as mase-rs's graph records them (`data_in` per input, `weight`,
`bias`, `data_out`, `bypass`) and `config` MASE's config as the quantize pass was given it. The
forward quantizes the inputs, weight and bias, runs the float op, and quantizes the output, with
straight-through gradients, as mase-rs's executor does.

>>> import torch.nn as nn
>>> m = quantized_module(nn.Linear(4, 2), {"data_in": [None], "weight": {"name": "integer",
...     "width": 8, "frac_width": 4, "signed": True}, "bias": None, "data_out": None})
>>> type(m).__name__, isinstance(m, nn.Linear)
('LinearInteger', True)
"""

import copy
import json

import torch
import torch.nn as nn
import torch.nn.functional as F

# MASE's class-name suffix of each format (`LinearInteger`, `LinearMinifloatIEEE`, ...).
SUFFIX = {
    "integer": "Integer",
    "minifloat_denorm": "MinifloatDenorm",
    "minifloat_ieee": "MinifloatIEEE",
    "log": "Log",
    "block_fp": "BlockFP",
    "block_minifloat": "BlockMinifloat",
    "block_log": "BlockLog",
    "binary": "Binary",
    "ternary": "Ternary",
    "int_quant": "IntQuant",
    "bipolar_quant": "BipolarQuant",
    "float_quant": "FloatQuant",
}


def format_of(quant):
    """The format that names a quantized node's class: its weight's, else its first input's,
    else its output's."""
    for fmt in (quant.get("weight"), *(quant.get("data_in") or []), quant.get("data_out")):
        if fmt:
            return fmt["name"]
    return None


def suffix(name):
    """MASE's class-name suffix of the format `name` (CamelCase for formats MASE lacks)."""
    return SUFFIX.get(name) or "".join(p.capitalize() for p in name.split("_"))


def qz(x, fmt):
    """`x` fake-quantized to `fmt` (a format as mase-rs records it), or `x` when `fmt` is None."""
    if not fmt:
        return x
    from mase_rs.nn.quantizers import quantize

    return quantize(x, fmt)


class QuantizedModule:
    """Mixin of the quantized modules: quantizes operands around the float module's forward.

    Made as MASE makes them, `LinearInteger(16, 5, config={"data_in_width": 8, ...})` takes the
    float module's arguments and MASE's config (its keys as the quantize pass reads them; the
    format is the class's)."""

    quant: dict
    config: dict
    format_name: str = ""

    def __init__(self, *args, config=None, **kwargs):
        super().__init__(*args, **kwargs)
        from mase_rs import _native

        config = dict(config or {})
        config.setdefault("name", self.format_name)
        op = _module_op_json(self)
        text = _native.quant_from_config(json.dumps(op), json.dumps(config))
        self.quant = json.loads(text) if text else {"data_in": [], "weight": None, "bias": None, "data_out": None, "bypass": True}
        self.config = config

    def forward(self, x):
        q = self.quant
        if q.get("bypass"):
            return super().forward(x)
        ins = q.get("data_in") or [None]
        x = qz(x, ins[0])
        if isinstance(self, (nn.Linear, nn.Conv1d, nn.Conv2d)):
            w = qz(self.weight, q.get("weight"))
            b = qz(self.bias, q.get("bias")) if self.bias is not None else None
            y = F.linear(x, w, b) if isinstance(self, nn.Linear) else self._conv_forward(x, w, b)
        elif isinstance(self, (nn.BatchNorm1d, nn.BatchNorm2d)) and (q.get("weight") or q.get("bias")):
            y = _batch_norm(self, x, qz(self.weight, q.get("weight")), qz(self.bias, q.get("bias")))
        else:
            y = super().forward(x)
        return qz(y, q.get("data_out"))

    def extra_repr(self):
        return super().extra_repr()


def _batch_norm(m, x, w, b):
    use_batch = m.training or m.running_mean is None
    if m.training and m.num_batches_tracked is not None:
        m.num_batches_tracked.add_(1)
    return F.batch_norm(x, m.running_mean, m.running_var, w, b, use_batch, m.momentum, m.eps)


_CLASSES = {}


def quantized_class(base, fmt_name):
    """The quantized class of the float module class `base` for the format `fmt_name`
    (`LinearInteger` for `nn.Linear` and `integer`), made once."""
    key = (base, fmt_name)
    if key not in _CLASSES:
        name = f"{base.__name__}{suffix(fmt_name)}"
        attrs = {"__module__": __name__, "__qualname__": name, "format_name": fmt_name}
        cls = type(name, (QuantizedModule, base), attrs)
        _CLASSES[key] = cls
        globals().setdefault(name, cls)
    return _CLASSES[key]


def quantized_module(module, quant):
    """A quantized copy of the float `module` (its parameters shared) holding `quant` and its
    `config`. A module that is already quantized gets the float class of its base."""
    base = float_class(type(module))
    fmt = format_of(quant)
    if fmt is None:
        return module
    cls = quantized_class(base, fmt)
    m = copy.copy(module)
    m.__class__ = cls
    m.__dict__ = dict(module.__dict__)
    m.quant = copy.deepcopy(quant)
    m.config = copy.deepcopy(quant.get("config") or {})
    return m


def _module_op_json(m):
    from mase_rs.ir.graph.torch_fx import _module_table

    make = _module_table(nn).get(float_class(type(m)))
    if make is None:
        raise ValueError(f"{type(m).__name__}: mase-rs has no op for {float_class(type(m)).__name__}")
    return make(m)


def float_class(cls):
    """The float `torch.nn` class a (quantized) module class stands for."""
    if issubclass(cls, QuantizedModule):
        return next(c for c in cls.__mro__[1:] if not issubclass(c, QuantizedModule) and issubclass(c, nn.Module))
    return cls


# MASE's commonest classes, importable by name (`from mase_rs.nn.quantized.modules import
# LinearInteger`); any other pairing is made on first use.
for _base in (nn.Linear, nn.Conv1d, nn.Conv2d, nn.ReLU):
    for _fmt in SUFFIX:
        quantized_class(_base, _fmt)
del _base, _fmt

__all__ = ["QuantizedModule", "float_class", "format_of", "quantized_class", "quantized_module", "qz"]
