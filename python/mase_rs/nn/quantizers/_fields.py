"""Reading a format as the IR serialises a `QuantFormat` (serde JSON: tag `name`, snake_case
fields) with the checks of the Rust `validate` functions. Every error is one `ValueError` line
naming the format and the field, worded as the Rust errors are
(`integer format: width = 0: must be between 1 and 32`)."""

import math
from decimal import Decimal
from types import SimpleNamespace

from ._bits import f32

ROUNDING_MODES = ("ROUND", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN")


def param_error(fmt_name, field, value, reason):
    """The Rust `QuantError::Param` message as a `ValueError`."""
    return ValueError(f"{fmt_name} format: `{field}` = {_show(value)}: {reason}")


def _show(v):
    """A value as Rust's `Display` writes it: `true`, `NaN`, `inf`, a float32 in its shortest
    decimal form without an exponent (`0`, `2.5`, `0.1`)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if not isinstance(v, float):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    for digits in range(1, 10):
        text = f"{v:.{digits}g}"
        if f32(float(text)) == v:
            break
    return format(Decimal(text), "f")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _tensor(name, field, v):
    """A QONNX parameter tensor `{"shape": [...], "data": [...]}` as (shape, float32 values)."""
    if not isinstance(v, dict) or set(v) != {"shape", "data"}:
        raise ValueError(f"{name} format: `{field}`: expected a tensor {{\"shape\": [...], \"data\": [...]}}, got {v!r}")
    shape, data = v["shape"], v["data"]
    if not (isinstance(shape, list) and all(_is_int(d) and d >= 0 for d in shape)):
        raise ValueError(f"{name} format: `{field}`: `shape` must be a list of sizes, got {shape!r}")
    if not (isinstance(data, list) and all(_is_number(d) for d in data)):
        raise ValueError(f"{name} format: `{field}`: `data` must be a list of numbers, got {data!r}")
    if math.prod(shape) != len(data):
        raise ValueError(
            f"{name} format: `{field}` of shape {shape} does not broadcast to a tensor of shape {shape}: "
            "the parameter's values do not match its shape"
        )
    return tuple(shape), [f32(d) for d in data]


# Field kinds: how a JSON value is checked and converted (f32 fields are rounded to float32, as
# serde reads them into `f32`).
_KINDS = {
    "u32": (lambda v: _is_int(v) and 0 <= v < 2**32, "an integer >= 0", int),
    "i32": (lambda v: _is_int(v) and -(2**31) <= v < 2**31, "an integer", int),
    "usize": (lambda v: _is_int(v) and 0 <= v < 2**64, "an integer >= 0", int),
    "i64": (lambda v: _is_int(v) and -(2**63) <= v < 2**63, "an integer", int),
    "bool": (lambda v: isinstance(v, bool), "true or false", bool),
    "f32": (_is_number, "a number", f32),
    "opt_i32": (lambda v: v is None or (_is_int(v) and -(2**31) <= v < 2**31), "an integer or null", lambda v: v),
    "opt_f32": (lambda v: v is None or _is_number(v), "a number or null", lambda v: None if v is None else f32(v)),
    "sizes": (lambda v: isinstance(v, list) and all(_is_int(d) and d >= 0 for d in v), "a list of sizes >= 0", list),
    "rounding": (lambda v: v in ROUNDING_MODES, "one of " + ", ".join(ROUNDING_MODES), str),
}

# Optional fields (`Option<...>` in Rust) may be left out and read as None.
_OPTIONAL = ("opt_i32", "opt_f32")


def read(fmt, name, fields):
    """The fields of `fmt` (a dict) as a namespace, each checked against its kind
    (`fields`: field name -> kind); unknown and missing fields are errors."""
    for key in fmt:
        if key != "name" and key not in fields:
            raise ValueError(f"{name} format: unknown field `{key}`; the fields are {', '.join(fields)}")
    out = {}
    for field, kind in fields.items():
        if field not in fmt:
            if kind in _OPTIONAL:
                out[field] = None
                continue
            raise ValueError(f"{name} format: missing field `{field}`")
        v = fmt[field]
        if kind == "tensor":
            out[field] = _tensor(name, field, v)
            continue
        ok, expected, convert = _KINDS[kind]
        if not ok(v):
            raise ValueError(f"{name} format: `{field}` = {v!r}: expected {expected}")
        out[field] = convert(v)
    return SimpleNamespace(**out)


def check_param(name, field, tensor, positive):
    """A QONNX parameter: at least one value, all finite, and positive where asked."""
    _, data = tensor
    if not data:
        raise param_error(name, field, "[]", "needs at least one value")
    for v in data:
        if not math.isfinite(v) or (positive and v <= 0):
            raise param_error(name, field, v, "values must be finite and positive" if positive else "values must be finite")


def check_broadcast(name, field, tensor, shape):
    """A QONNX parameter broadcasts to data of `shape` (NumPy's rules, or a single value)."""
    pshape, data = tensor

    def err(reason):
        return ValueError(
            f"{name} format: `{field}` of shape {list(pshape)} does not broadcast to a tensor of shape {list(shape)}: {reason}"
        )

    if len(data) == 1:
        return
    if len(pshape) > len(shape):
        raise err("the parameter has more dimensions than the data")
    lead = len(shape) - len(pshape)
    for d, n in enumerate(pshape):
        if n != 1 and n != shape[lead + d]:
            raise err(f"dimension {d} is {n}, the data has {shape[lead + d]}")


def check_block_size(name, block_size):
    if not block_size:
        raise param_error(name, "block_size", "[]", "must name at least one block dimension")


def check_bias_width(name, exponent_bias_width):
    if exponent_bias_width > 8:
        raise param_error(name, "exponent_bias_width", exponent_bias_width, "must be at most 8")


def check_bias(name, bias):
    if bias is not None and abs(bias) > 256:
        raise param_error(name, "exponent_bias", bias, "must be between -256 and 256")
