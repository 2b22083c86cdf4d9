"""Every number format as a PyTorch function (`mase_rs.nn.quantizers`) against the Rust kernel
(`quantize_native`): the same bits on the CPU for every deterministic format, over the hard values
of the quant crate's property tests (`crates/quant/tests/common/mod.rs`) and random normals at
several scales; the straight-through gradient; the distribution of stochastic binary; one-line
errors for bad formats.

Skipped with one line when torch is missing, except under CI=true, where torch is required."""

import json
import math
import os
import random
import struct

import numpy as np
import pytest

try:
    import torch
except ImportError:
    if os.environ.get("CI") == "true":
        pytest.fail("torch is required under CI=true (scripts/python-tests.sh installs it)", pytrace=False)
    pytest.skip("torch is not installed: the torch format tests are skipped", allow_module_level=True)

from mase_rs import _native
from mase_rs.nn.quantizers import FORMATS, native_format_names, quantize, quantize_native

INF, NAN = float("inf"), float("nan")
F32_MAX, F32_MIN_POSITIVE = 3.4028234663852886e38, 2.0**-126


def from_bits(b):
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


def to_bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


def hard_values(rng, n, special=True):
    """The Rust property tests' generator (`hard_values`): ±0, halves and near-halves at many
    scales, powers of two and their neighbours, tiny and huge values, subnormals, values near the
    1e-8 pass-through threshold, random bit patterns, and ±inf, NaN, f32::MAX, the smallest normal."""
    out = []
    for _ in range(n):
        pick = rng.randrange(12)
        sign = 1.0 if rng.randrange(2) == 0 else -1.0
        scale = 2.0 ** (rng.randrange(40) - 20)
        if pick == 0:
            v = 0.0
        elif pick == 1:
            v = (rng.randrange(64) + 0.5) * scale
        elif pick == 2:
            v = scale
        elif pick == 3:
            v = from_bits(to_bits(scale) + (1 if rng.randrange(2) == 0 else -1))
        elif pick == 4:
            v = 10.0 ** (rng.randrange(20) - 12) * rng.random()
        elif pick == 5:
            v = from_bits(rng.randrange(1 << 23) + 1)
        elif pick == 6:
            v = 1e-8 * (0.9 + 0.2 * rng.random())
        elif pick == 7:
            v = from_bits(rng.getrandbits(32) & 0x7FFFFFFF)
        elif pick == 8 and special:
            v = [INF, NAN, F32_MAX, F32_MIN_POSITIVE][rng.randrange(4)]
        elif pick == 9:
            v = from_bits(to_bits((rng.randrange(64) + 0.5) * scale) + 1)
        else:
            v = rng.gauss(0.0, 1.0) * scale * 8.0
        out.append(v if math.isnan(v) else sign * v)
    return np.array(out, dtype=np.float32)


def inputs(shape, seed):
    """Hard values, then random normals at scales 1e-3, 1 and 1e3, each of `shape`."""
    n = math.prod(shape)
    rng = random.Random(seed)
    gen = np.random.default_rng(seed)
    yield hard_values(rng, n).reshape(shape)
    for scale in (1e-3, 1.0, 1e3):
        yield (gen.standard_normal(n) * scale).astype(np.float32).reshape(shape)


def boundary_values():
    """Every power of two of float32 (subnormal to 2^127), the odd multiples of half of them up to
    ±64.5, and sqrt(2) times each, with their neighbours: where exponents, `round(log2)` and
    rounding ties change."""
    out = []
    for e in range(-149, 128):
        for base in (2.0**e, math.sqrt(2.0) * 2.0**e):
            b = to_bits(np.float32(base)) if base < F32_MAX else 0x7F7FFFFF
            out += [from_bits(b + d) for d in (-1, 0, 1) if 0 < b + d < 0x7F800000]
    out += [k + 0.5 for k in range(-65, 65)]
    out = np.array(out, dtype=np.float32)
    return np.concatenate([out, -out])


def t(shape, data):
    return {"shape": list(shape), "data": [float(d) for d in data]}


def e4m3(scale, saturation, has_inf, mode):
    return {
        "name": "float_quant", "scale": scale, "exponent_bitwidth": 4.0, "mantissa_bitwidth": 3.0, "exponent_bias": 7.0,
        "max_val": 448.0, "has_inf": has_inf, "has_nan": not has_inf, "has_subnormal": True, "saturation": saturation,
        "rounding_mode": mode,
    }  # fmt: skip


def int_quant(scale, zp, bits, signed, narrow, mode):
    return {"name": "int_quant", "scale": scale, "zero_point": zp, "bit_width": bits, "signed": signed, "narrow": narrow, "rounding_mode": mode}


MODES = ["ROUND", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN"]


def integer(w, f, s):
    return {"name": "integer", "width": w, "frac_width": f, "signed": s}


def mini(name, w, e, b):
    return {"name": name, "width": w, "exponent_width": e, "exponent_bias": b}


def block(name, block_size, skip, **fields):
    return {"name": name, **fields, "block_size": block_size, "skip_first_dim": skip}


# The formats of the Rust property tests (`formats` in crates/quant/tests/common/mod.rs), one
# line per parameter set.
FORMATS_ANY_SHAPE = [
    integer(8, 4, True),
    integer(8, 4, False),
    integer(1, 0, True),
    integer(4, -2, True),
    integer(16, 8, True),
    integer(32, 16, True),
    integer(8, 8, False),
    integer(6, 9, True),
    mini("minifloat_denorm", 8, 4, None),
    mini("minifloat_denorm", 8, 4, 7),
    mini("minifloat_denorm", 4, 2, None),
    mini("minifloat_denorm", 32, 8, None),
    mini("minifloat_denorm", 6, 3, -2),
    mini("minifloat_ieee", 8, 4, None),
    mini("minifloat_ieee", 8, 4, 7),
    mini("minifloat_ieee", 4, 2, None),
    mini("minifloat_ieee", 16, 5, None),
    mini("minifloat_ieee", 32, 8, None),
    mini("minifloat_ieee", 8, 5, 200),
    {"name": "log", "width": 8, "exponent_bias": None},
    {"name": "log", "width": 8, "exponent_bias": 128},
    {"name": "log", "width": 2, "exponent_bias": None},
    {"name": "log", "width": 9, "exponent_bias": None},
    {"name": "log", "width": 5, "exponent_bias": -3},
    block("block_fp", [1, 16], True, width=7, exponent_width=8, exponent_bias=127),
    block("block_fp", [16], False, width=12, exponent_width=8, exponent_bias=None),
    block("block_fp", [2, 3], False, width=4, exponent_width=3, exponent_bias=None),
    block("block_fp", [3], True, width=5, exponent_width=4, exponent_bias=3),
    block("block_fp", [0, 2], False, width=8, exponent_width=8, exponent_bias=None),
    block("block_minifloat", [16], False, width=8, exponent_width=4, exponent_bias_width=4),
    block("block_minifloat", [2, 2], True, width=6, exponent_width=2, exponent_bias_width=2),
    block("block_minifloat", [5], False, width=8, exponent_width=3, exponent_bias_width=8),
    block("block_log", [16], False, width=8, exponent_bias_width=4),
    block("block_log", [3], True, width=4, exponent_bias_width=2),
    block("block_log", [2, 2], False, width=9, exponent_bias_width=6),
    {"name": "binary", "stochastic": False, "bipolar": True},
    {"name": "binary", "stochastic": False, "bipolar": False},
    {"name": "binary", "stochastic": True, "bipolar": False},
    {"name": "ternary", "scaling_factor": False, "threshold": None},
    {"name": "ternary", "scaling_factor": True, "threshold": None},
    {"name": "ternary", "scaling_factor": True, "threshold": 0.3},
    {"name": "ternary", "scaling_factor": False, "threshold": 0.0},
    {"name": "bipolar_quant", "scale": t([], [0.5])},
    e4m3(t([], [1.0]), True, False, "ROUND"),
    e4m3(t([], [0.1]), False, True, "FLOOR"),
    e4m3(t([], [3.0]), False, False, "CEIL"),
    e4m3(t([], [1.0]), True, False, "HALF_DOWN"),
    {**e4m3(t([], [1.0]), True, False, "ROUND"), "has_subnormal": False},
    {**e4m3(t([], [0.5]), False, True, "UP"), "exponent_bitwidth": 5.0, "mantissa_bitwidth": 2.0, "exponent_bias": 15.0, "max_val": 57344.0, "has_nan": True},
    {**e4m3(t([], [1.0]), True, False, "HALF_UP"), "exponent_bitwidth": 2.0, "mantissa_bitwidth": 1.0, "exponent_bias": 1.0, "max_val": 6.0, "has_nan": False},
    *[int_quant(t([], [0.1]), t([], [0.0]), 8.0, True, False, mode) for mode in MODES],
    *[int_quant(t([], [1.0 / 16.0]), t([], [3.0]), 4.0, False, True, mode) for mode in MODES],
    int_quant(t([], [0.25]), t([], [0.0]), 8.0, True, True, "ROUND"),
    int_quant(t([], [0.5]), t([], [0.0]), 1.0, True, False, "ROUND"),
    int_quant(t([], [0.03]), t([], [0.0]), 24.0, True, False, "ROUND"),
    int_quant(t([1], [0.2]), t([1, 1], [0.5]), 8.0, False, False, "HALF_UP"),
    # The OCP microscaling formats: every element format, blocks along the last and first axes.
    {"name": "mxint", "width": 8, "block_size": 32, "block_dim": -1},
    {"name": "mxint", "width": 4, "block_size": 3, "block_dim": 0},
    *[{"name": "mxfp", "exponent_width": e, "frac_width": m, "block_size": 32, "block_dim": -1} for e, m in [(4, 3), (5, 2), (3, 2), (2, 3), (2, 1)]],
    {"name": "mxfp", "exponent_width": 2, "frac_width": 1, "block_size": 2, "block_dim": 0},
    {"name": "mxfp", "exponent_width": 4, "frac_width": 3, "block_size": 5, "block_dim": 0},
]


def per_channel_formats(shape):
    """QONNX formats with scales per channel (first dimension) and per last dimension."""
    c, last = shape[0], shape[-1]
    pshape = [c] + [1] * (len(shape) - 1)
    lshape = [1] * (len(shape) - 1) + [last]
    per = [0.05 * (i + 1) for i in range(c)]
    zps = [i - 1.0 for i in range(c)]
    lper = [0.125 * (i + 1) for i in range(last)]
    return [
        int_quant(t(pshape, per), t(pshape, zps), 6.0, True, False, "HALF_UP"),
        int_quant(t(pshape, per), t([], [0.0]), 8.0, False, False, "ROUND"),
        {"name": "bipolar_quant", "scale": t(pshape, per)},
        e4m3(t(pshape, per), True, False, "ROUND"),
        int_quant(t(lshape, lper), t([], [1.0]), 5.0, True, True, "FLOOR"),
        int_quant(t(lshape, lper), t(pshape, zps), 7.0, True, False, "DOWN"),
    ]


# The shapes of the Rust property tests, two large ones (thousands of hard values each) and an
# empty tensor.
SHAPES = [(), (64,), (7, 13), (3, 5, 6), (2, 3, 4, 5), (1, 37), (5, 1), (4096,), (32, 128), (0, 3)]


def fmt_id(fmt):
    return json.dumps(fmt, separators=(",", ":"))


def assert_same_bits(x, got, want, context):
    """Equal bits, with every NaN equal to every NaN; the message shows the first difference."""
    assert got.shape == want.shape and got.dtype == want.dtype == torch.float32, context
    same = (got.view(torch.int32) == want.view(torch.int32)) | (torch.isnan(got) & torch.isnan(want))
    if not same.all():
        i = tuple((~same).nonzero()[0].tolist())
        raise AssertionError(f"{context}: at {i} x = {x[i].item()!r}: torch {got[i].item()!r}, rust {want[i].item()!r}")


def check_format(fmt, shape, seed, device="cpu"):
    for k, x in enumerate(inputs(shape, seed)):
        want = quantize_native(x, fmt)
        assert isinstance(want, np.ndarray)
        got = quantize(torch.from_numpy(x).to(device), fmt).cpu()
        assert_same_bits(torch.from_numpy(x), got, torch.from_numpy(want), f"{fmt_id(fmt)} shape {shape} input set {k}")


@pytest.mark.parametrize("fmt", FORMATS_ANY_SHAPE, ids=fmt_id)
def test_torch_formats_equal_the_rust_kernels_bit_for_bit(fmt):
    assert not _native.quant_draws_random(json.dumps(fmt))
    for n, shape in enumerate(SHAPES):
        check_format(fmt, shape, seed=n)


@pytest.mark.parametrize("fmt", FORMATS_ANY_SHAPE, ids=fmt_id)
def test_torch_formats_equal_the_rust_kernels_at_every_exponent_boundary(fmt):
    x = boundary_values()
    got = quantize(torch.from_numpy(x), fmt)
    assert_same_bits(torch.from_numpy(x), got, torch.from_numpy(quantize_native(x, fmt)), fmt_id(fmt))


@pytest.mark.parametrize("shape", [s for s in SHAPES if len(s) >= 2 and min(s) > 0], ids=str)
def test_per_channel_qonnx_scales_equal_the_rust_kernels(shape):
    for fmt in per_channel_formats(shape):
        check_format(fmt, shape, seed=len(shape))


def test_the_registry_covers_every_format_rust_knows():
    assert list(FORMATS) == native_format_names()
    assert {f["name"] for f in FORMATS_ANY_SHAPE} == set(FORMATS)


STOCHASTIC = {"name": "binary", "stochastic": True, "bipolar": True}
ALL_FORMATS = FORMATS_ANY_SHAPE + per_channel_formats((3, 5, 6)) + [STOCHASTIC]


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=fmt_id)
def test_the_gradient_is_the_straight_through_estimator(fmt):
    # The Rust training routes the gradient of a quantized operand unchanged to its float original
    # for every format (`mase_quant::ste_backward`, crates/runtime/src/quant.rs): no mask, not even
    # where a value saturates, and NaN gradients pass as they are.
    x = torch.from_numpy(next(inputs((3, 5, 6), seed=7))).requires_grad_()
    g = torch.randn(3, 5, 6, generator=torch.Generator().manual_seed(1))
    g[0, 0, 0] = NAN
    y = quantize(x, fmt)
    assert y.requires_grad
    y.backward(g)
    assert_same_bits(x.detach(), x.grad, g, fmt_id(fmt))


def test_no_grad_and_inputs_that_need_no_gradient_give_the_same_values():
    fmt = integer(8, 4, True)
    x = torch.from_numpy(next(inputs((7, 13), seed=3)))
    want = quantize(x, fmt)
    assert not want.requires_grad
    with torch.no_grad():
        got = quantize(x.clone().requires_grad_(), fmt)
    assert not got.requires_grad
    assert_same_bits(x, got, want, "no_grad")


def test_the_bits_do_not_depend_on_the_thread_count():
    # Row sums run in index order within a row whatever the threads; block maxima are exact.
    x = torch.from_numpy(next(inputs((8, 4096), seed=11)))
    fmts = [f for f in FORMATS_ANY_SHAPE if f["name"] in ("ternary", "binary", "block_fp", "block_log")]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = [quantize(x, f) for f in fmts]
        torch.set_num_threads(4)
        four = [quantize(x, f) for f in fmts]
    finally:
        torch.set_num_threads(threads)
    for f, a, b in zip(fmts, one, four):
        assert_same_bits(x, a, b, fmt_id(f))


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_every_format_runs_on_every_device_with_the_cpu_bits(device):
    # The per-row means of binary and ternary are summed in index order on the CPU; on a GPU the
    # order is the device's scan, so only the formats without a row sum are compared bit for bit
    # there.
    row_sums = {"binary", "ternary"}
    for fmt in FORMATS_ANY_SHAPE + per_channel_formats((3, 5, 6)):
        if device != "cpu" and fmt["name"] in row_sums and not fmt.get("bipolar"):
            x = torch.from_numpy(next(inputs((3, 5, 6), seed=5)))
            got = quantize(x.to(device), fmt).cpu()
            torch.testing.assert_close(got, torch.from_numpy(quantize_native(x.numpy(), fmt)), equal_nan=True)
            continue
        check_format(fmt, (3, 5, 6), seed=5, device=device)


def test_stochastic_binary_draws_from_the_rust_distribution():
    assert _native.quant_draws_random(json.dumps(STOCHASTIC))
    # P(+1) = p = clamp((x + 1) / 2, 0, 1): the mean of the output is 2p - 1 for torch's draws and
    # for Rust's (200000 draws per value: the mean's standard deviation is at most 0.0023).
    xs = torch.tensor([-2.0, -0.5, 0.0, 0.25, 0.9, 1.0, 3.0]).repeat(200_000, 1)
    expected = torch.tensor([-1.0, -0.5, 0.0, 0.25, 0.9, 1.0, 1.0])
    got = quantize(xs, STOCHASTIC, generator=torch.Generator().manual_seed(0))
    rust = torch.from_numpy(quantize_native(xs.numpy(), STOCHASTIC, seed=5))
    for out in (got, rust):
        assert set(out.unique().tolist()) <= {-1.0, 1.0}
        torch.testing.assert_close(out.mean(dim=0), expected, atol=0.012, rtol=0)
    # p = 1 is always +1 (the draws lie in [0, 1)); the same generator seed gives the same draws.
    assert (got[:, 5:] == 1).all() and (rust[:, 5:] == 1).all()
    again = quantize(xs, STOCHASTIC, generator=torch.Generator().manual_seed(0))
    assert torch.equal(got, again)


def rust_message(fmt, shape=(2, 4)):
    with pytest.raises(ValueError) as e:
        quantize_native(np.zeros(shape, dtype=np.float32), fmt)
    return str(e.value)


def torch_message(fmt, shape=(2, 4)):
    with pytest.raises(ValueError) as e:
        quantize(torch.zeros(shape), fmt)
    return str(e.value)


# Formats Rust's `validate` refuses: the torch quantizer raises the same one-line message.
SAME_MESSAGE = [
    (integer(0, 0, True), "integer format: `width` = 0: must be between 1 and 32"),
    (integer(8, 65, True), "integer format: `frac_width` = 65: must be at most 64"),
    (mini("minifloat_denorm", 12, 9, None), "minifloat_denorm format: `exponent_width` = 9: must be between 1 and 8 (an f32 carrier has 8 exponent bits)"),
    (mini("minifloat_ieee", 4, 4, None), "minifloat_ieee format: `exponent_width` = 4: must be smaller than `width` = 4 (one bit is the sign)"),
    (mini("minifloat_ieee", 8, 4, 300), "minifloat_ieee format: `exponent_bias` = 300: must be between -256 and 256"),
    ({"name": "log", "width": 10, "exponent_bias": None}, "log format: `width` = 10: must be between 2 and 9 (a sign bit and 1 to 8 exponent bits)"),
    (block("block_fp", [], False, width=8, exponent_width=8, exponent_bias=None), "block_fp format: `block_size` = []: must name at least one block dimension"),
    (block("block_minifloat", [4], False, width=8, exponent_width=4, exponent_bias_width=9), "block_minifloat format: `exponent_bias_width` = 9: must be at most 8"),
    (block("block_log", [4], False, width=1, exponent_bias_width=2), "block_log format: `width` = 1: must be between 2 and 9 (a sign bit and 1 to 8 exponent bits)"),
    ({"name": "ternary", "scaling_factor": True, "threshold": -0.5}, "ternary format: `threshold` = -0.5: must be a finite number >= 0"),
    (int_quant(t([], [0.1]), t([], [0.0]), 2.5, True, False, "ROUND"), "int_quant format: `bit_width` = 2.5: must be an integer between 1 and 32"),
    (int_quant(t([], [0.0]), t([], [0.0]), 8.0, True, False, "ROUND"), "int_quant format: `scale` = 0: values must be finite and positive"),
    (int_quant(t([3], [1, 2, 3]), t([], [0.0]), 8.0, True, False, "ROUND"), "int_quant format: `scale` of shape [3] does not broadcast to a tensor of shape [2, 4]: dimension 0 is 3, the data has 4"),
    ({"name": "bipolar_quant", "scale": t([], [-1.0])}, "bipolar_quant format: `scale` = -1: values must be finite and positive"),
    ({**e4m3(t([], [1.0]), True, False, "ROUND"), "mantissa_bitwidth": 24.0}, "float_quant format: `mantissa_bitwidth` = 24: must be an integer between 0 and 23"),
    ({**e4m3(t([], [1.0]), True, False, "ROUND"), "max_val": 0.0}, "float_quant format: `max_val` = 0: must be finite and positive"),
    ({**e4m3(t([], [1.0]), False, False, "ROUND"), "has_nan": False}, "float_quant format: `saturation` = false: a non-saturating format needs `has_inf` or `has_nan` for out-of-range values"),
]


@pytest.mark.parametrize("fmt,message", SAME_MESSAGE, ids=[m.split(":")[0] + " " + m.split("`")[1] for _, m in SAME_MESSAGE])
def test_bad_formats_raise_the_rust_message(fmt, message):
    assert rust_message(fmt) == message
    assert torch_message(fmt) == message


# Formats serde refuses (unknown name, missing or mistyped fields): both raise a ValueError on one
# line naming the name or field, in their own words.
NAMES_THE_FIELD = [
    ({"name": "fixed_point", "width": 8}, "`fixed_point`"),
    ({"name": "integer", "width": 8, "signed": True}, "`frac_width`"),
    ({"name": "integer", "width": "8", "frac_width": 4, "signed": True}, "8"),
    ({"name": "binary", "stochastic": 1, "bipolar": True}, "1"),
    ({"name": "int_quant", "scale": t([], [0.1]), "zero_point": t([], [0.0]), "bit_width": 8.0, "signed": True, "narrow": False, "rounding_mode": "NEAREST"}, "NEAREST"),
]


@pytest.mark.parametrize("fmt,needle", NAMES_THE_FIELD, ids=[n for _, n in NAMES_THE_FIELD])
def test_malformed_formats_raise_one_line_naming_the_field(fmt, needle):
    for message in (rust_message(fmt), torch_message(fmt)):
        assert needle in message and "\n" not in message


def test_unknown_fields_and_wrong_inputs_are_refused():
    assert torch_message({**integer(8, 4, True), "frac": 3}) == "integer format: unknown field `frac`; the fields are width, frac_width, signed"
    with pytest.raises(TypeError, match="expected a float32 tensor, got torch.float64"):
        quantize(torch.zeros(3, dtype=torch.float64), integer(8, 4, True))
    with pytest.raises(TypeError, match="the format must be a dict"):
        quantize(torch.zeros(3), "integer")


def test_one_sgd_step_in_rust_moves_the_weights_as_the_torch_estimator_does():
    # The Rust training's rule, observed rather than read: a linear layer with 8/4 integer input
    # and weight formats, some weights far outside the format's range [-8, 7.9375] (a masked
    # estimator would leave them where they are), trained one SGD step by mase-rs and by torch
    # through `quantize`.
    import mase_rs
    from mase_rs import DatasetInfo, MaseGraph

    gen = torch.Generator().manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 3))
    with torch.no_grad():
        module[0].weight.copy_(torch.randn(3, 4, generator=gen) * 4)
        module[0].weight[0, :2] = torch.tensor([20.0, -30.0])
    x = torch.randn(16, 4, generator=gen) * 6
    y = torch.randint(0, 3, (16,), generator=gen)
    info = DatasetInfo(name="test", num_classes=3, sample_shape=(4,))
    mg = MaseGraph(model=module, dataset_info=info)
    mg, _ = mase_rs.init_metadata_analysis_pass(mg, None)
    mg, _ = mase_rs.add_common_metadata_analysis_pass(mg, {"dummy_in": {"x": x}, "add_value": False})
    cfg = {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8, "weight_frac_width": 4}
    mg, _ = mase_rs.quantize_transform_pass(mg, {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": cfg}})
    mg.fit((x, y), epochs=1, batch_size=16, lr=0.5, optimizer="sgd", shuffle=False)

    fmt = integer(8, 4, True)
    w = module[0].weight.detach().clone().requires_grad_()
    b = module[0].bias.detach().clone().requires_grad_()
    loss = torch.nn.functional.cross_entropy(torch.nn.functional.linear(quantize(x, fmt), quantize(w, fmt), b), y)
    loss.backward()
    assert w.grad[0, :2].abs().min() > 1e-3
    torch.testing.assert_close(mg.state_dict()["0.weight"], w.detach() - 0.5 * w.grad, atol=1e-6, rtol=0)
    torch.testing.assert_close(mg.state_dict()["0.bias"], b.detach() - 0.5 * b.grad, atol=1e-6, rtol=0)


def test_quantize_native_reads_views_in_row_major_order():
    # A transposed view is quantized as the tensor it shows (block_fp's blocks run along rows).
    x = next(inputs((7, 13), seed=2))
    fmt = block("block_fp", [4], True, width=5, exponent_width=8, exponent_bias=None)
    got = quantize_native(x.T, fmt)
    assert np.array_equal(got, quantize_native(np.ascontiguousarray(x.T), fmt), equal_nan=True)
    assert_same_bits(torch.from_numpy(x.T.copy()), torch.from_numpy(got), quantize(torch.from_numpy(x).T, fmt), fmt_id(fmt))
