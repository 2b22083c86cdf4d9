"""Checks of arguments at the Python boundary. Each raises `TypeError` (the wrong kind of value)
or `ValueError` (a value out of range) with one line that names the argument and what was
expected, as `ch` refuses its flags."""

import math
import numbers


def integer(value, what, minimum):
    """`value` as an int of at least `minimum` (`bool` is refused: `True` is no count)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what}: expected an integer >= {minimum}, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{what}={value}: expected an integer >= {minimum}")
    return int(value)


def number(value, what, positive):
    """`value` as a finite float, greater than 0 when `positive`, else at least 0."""
    expected = "a finite number > 0" if positive else "a finite number >= 0"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what}: expected {expected}, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise ValueError(f"{what}={v}: expected {expected}")
    return v


def mapping(value, what, expected):
    """`value` (None for none) as a dict; anything else is a `TypeError` saying `expected`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{what}: expected {expected}, got {type(value).__name__} {value!r}")
    return value
