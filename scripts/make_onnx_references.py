#!/usr/bin/env python3
"""Reference outputs for mase-interop's ONNX tests, made once with onnxruntime.

Run from the repository root with a Python that has numpy, onnx and onnxruntime (and torch for
the Lightning checkpoint reference):

    python scripts/make_onnx_references.py [--shared ../shared/data/models]

It copies every ONNX model of shared/data/models into crates/interop/tests/fixtures/models/ and
writes, for each, crates/interop/tests/fixtures/refs/<name>.npz with 100 random inputs `x` and
onnxruntime's outputs `y`. The tests read these files; they need no Python.

- Files that fix the batch size (1, 8, 789444) are run with the first input dimension made
  symbolic, so the 100 inputs go through as one batch.
- QONNX files (custom domains onnx.brevitas, finn.custom_op.general, qonnx.custom_op.general)
  cannot run in onnxruntime as they are. Each quantizer is rewritten into standard operators
  that compute QONNX's reference formula exactly:
      Quant:        y = (round_half_even(clip(x / scale + zp, min_int, max_int)) - zp) * scale
      BipolarQuant: y = where(x >= 0, 1, -1) * scale
  (onnxruntime's Round rounds half to even, as QONNX's ROUND does.)
- Small one-operator models across opsets 6 to 21 (tests/fixtures/ops/) are written with
  onnx.helper and run in onnxruntime on 7 random inputs each.
- Small torch.save files (tests/fixtures/torch/) cover strided views, offsets, half types and
  a pickled module.
- The jsc-tiny Lightning checkpoint is evaluated with torch on 100 random inputs
  (refs/jsc-tiny_best.ckpt.npz).
- A model trained by mase-rs and exported to ONNX (tests/fixtures/trained/*.onnx, written by
  `cargo run -p mase-interop --example make_trained_fixture`) is run in onnxruntime on the inputs
  saved beside it; its outputs go to trained/<name>.ort.npz.
"""
import argparse
import pathlib
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper, TensorProto

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIX = ROOT / "crates/interop/tests/fixtures"
QDOMAINS = {"onnx.brevitas", "finn.custom_op.general", "qonnx.custom_op.general"}


def const_value(model, name):
    for t in model.graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    for n in model.graph.node:
        if n.op_type == "Constant" and n.output[0] == name:
            return numpy_helper.to_array(n.attribute[0].t)
    raise KeyError(name)


def lower_qonnx(model):
    """Replaces QONNX quantizers with standard ONNX operators computing the same values."""
    g = model.graph
    new_nodes = []
    extra = []
    for k, n in enumerate(g.node):
        if n.domain not in QDOMAINS:
            new_nodes.append(n)
            continue
        x, y = n.input[0], n.output[0]
        p = f"__q{k}"
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type in ("Quant", "IntQuant"):
            scale, zp = n.input[1], n.input[2]
            bits = float(const_value(model, n.input[3]))
            signed, narrow = int(attrs.get("signed", 1)), int(attrs.get("narrow", 0))
            mode = attrs.get("rounding_mode", b"ROUND")
            assert mode in (b"ROUND", "ROUND"), mode
            if signed:
                lo = -(2 ** (bits - 1)) + (1 if narrow else 0)
                hi = 2 ** (bits - 1) - 1
            else:
                lo = 0.0
                hi = 2 ** bits - 1 - (1 if narrow else 0)
            extra += [numpy_helper.from_array(np.array(lo, np.float32), p + "lo"), numpy_helper.from_array(np.array(hi, np.float32), p + "hi")]
            # Some files store the zero point as int64: cast both parameters to float.
            new_nodes += [
                helper.make_node("Cast", [n.input[1]], [p + "sc"], to=TensorProto.FLOAT),
                helper.make_node("Cast", [n.input[2]], [p + "zp"], to=TensorProto.FLOAT),
            ]
            scale, zp = p + "sc", p + "zp"
            new_nodes += [
                helper.make_node("Div", [x, scale], [p + "d"]),
                helper.make_node("Add", [p + "d", zp], [p + "a"]),
                helper.make_node("Max", [p + "a", p + "lo"], [p + "mx"]),
                helper.make_node("Min", [p + "mx", p + "hi"], [p + "c"]),
                helper.make_node("Round", [p + "c"], [p + "r"]),
                helper.make_node("Sub", [p + "r", zp], [p + "s"]),
                helper.make_node("Mul", [p + "s", scale], [y]),
            ]
        elif n.op_type == "BipolarQuant":
            scale = n.input[1]
            extra += [
                numpy_helper.from_array(np.array(0, np.float32), p + "zero"),
                numpy_helper.from_array(np.array(1, np.float32), p + "one"),
                numpy_helper.from_array(np.array(-1, np.float32), p + "mone"),
            ]
            new_nodes += [
                helper.make_node("GreaterOrEqual", [x, p + "zero"], [p + "ge"]),
                helper.make_node("Where", [p + "ge", p + "one", p + "mone"], [p + "sg"]),
                helper.make_node("Mul", [p + "sg", scale], [y]),
            ]
        else:
            raise NotImplementedError(n.op_type)
    del g.node[:]
    g.node.extend(new_nodes)
    g.initializer.extend(extra)
    # Standard opset high enough for GreaterOrEqual (12) and Where (9); the models' own operators
    # keep their semantics across these versions.
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx") and o.version < 12:
            o.version = 12
    keep = [o for o in model.opset_import if o.domain not in QDOMAINS]
    del model.opset_import[:]
    model.opset_import.extend(keep)
    if model.ir_version < 7:
        model.ir_version = 7
    return model


def dynamic_batch(model):
    init = {t.name for t in model.graph.initializer}
    for v in list(model.graph.input) + list(model.graph.output):
        if v.name in init:
            continue
        d = v.type.tensor_type.shape.dim[0]
        d.Clear()
        d.dim_param = "batch"
    # Shape annotations of intermediate values may also carry the fixed batch.
    del model.graph.value_info[:]
    return model


def data_input(model):
    init = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in init][0]


def run(path, rng):
    model = onnx.load(str(path))
    if any(n.domain in QDOMAINS for n in model.graph.node):
        model = lower_qonnx(model)
    inp = data_input(model)
    sample = [d.dim_value for d in inp.type.tensor_type.shape.dim[1:]]
    fixed = inp.type.tensor_type.shape.dim[0].dim_value
    if fixed:
        model = dynamic_batch(model)
    if "TFC" in path.name:
        x = rng.uniform(0.0, 1.0, size=[100] + sample).astype(np.float32)
    else:
        x = rng.normal(0.0, 1.0, size=[100] + sample).astype(np.float32)
    # The models flattened with Flatten(axis=0) (Keras conv exports) mix the batch into the
    # features; they are run one sample at a time, as their fixed batch of 1 says.
    per_sample = any(n.op_type == "Flatten" and any(a.name == "axis" and a.i == 0 for a in n.attribute) for n in model.graph.node)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    if per_sample:
        y = np.concatenate([sess.run(None, {inp.name: x[i : i + 1]})[0] for i in range(len(x))])
    else:
        y = sess.run(None, {inp.name: x})[0]
    return x, y.astype(np.float32)


def ckpt_reference(shared, rng):
    import torch

    ck = torch.load(shared / "mase_jsc/jsc-tiny_best.ckpt", map_location="cpu", weights_only=False)
    sd = {k[len("model."):]: v.float() for k, v in ck["state_dict"].items() if k.startswith("model.")}
    net = torch.nn.Sequential(torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Linear(16, 5), torch.nn.ReLU())
    net.load_state_dict({"seq_blocks." + k if False else k.replace("seq_blocks.", ""): v for k, v in sd.items()})
    net.eval()
    x = rng.normal(0.0, 1.0, size=(100, 16)).astype(np.float32)
    with torch.no_grad():
        y = net(torch.from_numpy(x)).numpy()
    np.savez(FIX / "refs/jsc-tiny_best.ckpt.npz", x=x, y=y.astype(np.float32))


def op_models(rng):
    """Small models, one or two operators each, across opsets 6 to 21: they cover the attributes
    and input forms the shared models do not (auto_pad, dilations, groups, legacy BatchNorm,
    pre-13 Softmax, Squeeze/Unsqueeze/Clip as attributes and as inputs, ...)."""
    out = FIX / "ops"
    out.mkdir(exist_ok=True)
    f32 = lambda *shape: rng.normal(0.0, 1.0, size=shape).astype(np.float32)
    init = lambda name, a: numpy_helper.from_array(np.asarray(a), name)
    I = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
    cases = []

    def case(name, opset, nodes, x_shape, inits, out_name="y"):
        cases.append((name, opset, nodes, x_shape, inits, out_name))

    N = "N"
    case("conv2d_same_upper_stride2", 13, [helper.make_node("Conv", ["x", "w", "b"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])], [N, 3, 7, 7], [init("w", f32(4, 3, 3, 3)), init("b", f32(4))])
    case("conv2d_same_lower", 11, [helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER", kernel_shape=[2, 2])], [N, 2, 5, 5], [init("w", f32(3, 2, 2, 2))])
    case("conv2d_dilation_group_pads", 9, [helper.make_node("Conv", ["x", "w", "b"], ["y"], dilations=[2, 1], group=2, pads=[0, 2, 1, 1], strides=[1, 2])], [N, 4, 8, 9], [init("w", f32(6, 2, 3, 3)), init("b", f32(6))])
    case("conv1d_valid_stride", 17, [helper.make_node("Conv", ["x", "w", "b"], ["y"], auto_pad="VALID", strides=[3])], [N, 2, 11], [init("w", f32(5, 2, 3)), init("b", f32(5))])
    case("maxpool_asym_pads", 12, [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[0, 1, 2, 1], strides=[2, 2])], [N, 2, 6, 7], [])
    case("maxpool1d_default_stride", 8, [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2])], [N, 3, 6], [])
    case("avgpool_count_pad", 10, [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2], count_include_pad=1)], [N, 2, 6, 6], [])
    case("avgpool_no_pad", 7, [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], [N, 3, 4, 6], [])
    case("global_avgpool", 21, [helper.make_node("GlobalAveragePool", ["x"], ["y"])], [N, 3, 4, 5], [])
    case("batchnorm_legacy_opset7", 7, [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], spatial=1, epsilon=1e-3)], [N, 3, 4], [init("s", f32(3)), init("b", f32(3)), init("m", f32(3)), init("v", np.abs(f32(3)) + 0.5)])
    case("batchnorm2d_opset15", 15, [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], momentum=0.8)], [N, 2, 3, 3], [init("s", f32(2)), init("b", f32(2)), init("m", f32(2)), init("v", np.abs(f32(2)) + 0.5)])
    case("softmax_opset11_coerced", 11, [helper.make_node("Softmax", ["x"], ["y"], axis=1)], [N, 3, 4], [])
    case("logsoftmax_opset13_axis1", 13, [helper.make_node("LogSoftmax", ["x"], ["y"], axis=1)], [N, 3, 4], [])
    case("activations", 14, [
        helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.2),
        helper.make_node("Selu", ["a"], ["b"]),
        helper.make_node("Tanh", ["b"], ["c"]),
        helper.make_node("Sigmoid", ["c"], ["d"]),
        helper.make_node("Sqrt", ["d"], ["e"]),
        helper.make_node("Relu", ["e"], ["y"]),
    ], [N, 5], [])
    case("clip_attrs_opset6", 6, [helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.75)], [N, 6], [])
    case("clip_inputs_opset13", 13, [helper.make_node("Clip", ["x", "", "hi"], ["y"])], [N, 6], [init("hi", np.array(0.25, np.float32))])
    case("squeeze_unsqueeze_attrs", 11, [helper.make_node("Unsqueeze", ["x"], ["a"], axes=[1, 3]), helper.make_node("Squeeze", ["a"], ["y"], axes=[3])], [N, 4, 2], [])
    case("squeeze_unsqueeze_inputs", 13, [helper.make_node("Unsqueeze", ["x", "ax"], ["a"]), helper.make_node("Squeeze", ["a", "sq"], ["y"])], [N, 4], [init("ax", np.array([2, 3], np.int64)), init("sq", np.array([3], np.int64))])
    case("transpose_default_perm", 9, [helper.make_node("Transpose", ["x"], ["a"], perm=[0, 2, 1]), helper.make_node("Transpose", ["a"], ["t"]), helper.make_node("Transpose", ["t"], ["y"], perm=[2, 1, 0])], [N, 3, 4], [])
    case("arith_broadcast", 13, [
        helper.make_node("Sub", ["c1", "x"], ["a"]),
        helper.make_node("Div", ["a", "c2"], ["b"]),
        helper.make_node("Mul", ["b", "b"], ["c"]),
        helper.make_node("Pow", ["c", "c3"], ["d"]),
        helper.make_node("Add", ["d", "x"], ["y"]),
    ], [N, 3, 4], [init("c1", f32(4)), init("c2", np.abs(f32(3, 1)) + 0.5), init("c3", np.array(1.5, np.float32))])
    case("gemm_transA_alpha_beta", 13, [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]), helper.make_node("Gemm", ["xt", "w", "c"], ["y"], transA=1, alpha=0.5, beta=2.0)], [N, 6], [init("w", f32(6, 3)), init("c", f32(1, 3))])
    case("gemm_transB_opset7", 7, [helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1)], [N, 5], [init("w", f32(2, 5)), init("c", f32(2))])
    case("matmul_dynamic_both", 13, [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]), helper.make_node("MatMul", ["x", "xt"], ["y"])], [N, 3, 4], [])
    case("matmul_batched_const", 13, [helper.make_node("MatMul", ["x", "w"], ["y"])], [N, 2, 3], [init("w", f32(3, 4))])
    case("concat_and_shape_flatten", 13, [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Concat", ["x", "r"], ["a"], axis=1),
        helper.make_node("Shape", ["a"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["nu"]),
        helper.make_node("Concat", ["nu", "m1"], ["shp"], axis=0),
        helper.make_node("Reshape", ["a", "shp"], ["y"]),
    ], [N, 2, 3], [init("i0", np.array(0, np.int64)), init("ax0", np.array([0], np.int64)), init("m1", np.array([-1], np.int64))])
    case("reshape_zero_copy_flatten_negative_axis", 13, [
        helper.make_node("Reshape", ["x", "shp"], ["a"]),
        helper.make_node("Flatten", ["a"], ["y"], axis=-3),
    ], [N, 6, 4], [init("shp", np.array([0, 3, -1, 2], np.int64))])
    case("constant_identity_dropout_cast", 12, [
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32))),
        helper.make_node("Identity", ["x"], ["a"]),
        helper.make_node("Dropout", ["a"], ["b"]),
        helper.make_node("Cast", ["b"], ["c"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["c", "k"], ["y"]),
    ], [N, 3], [])
    case("pad_constant_opset13", 13, [helper.make_node("Pad", ["x", "p", "v"], ["y"])], [N, 2, 3], [init("p", np.array([0, 1, 0, 0, 0, 2], np.int64)), init("v", np.array(0.5, np.float32))])
    for name, opset, nodes, x_shape, inits, out_name in cases:
        graph = helper.make_graph(nodes, name, [I("x", x_shape)], [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, None)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        x = rng.normal(0.0, 1.0, size=[7] + x_shape[1:]).astype(np.float32)
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        y = sess.run(None, {"x": x})[0].astype(np.float32)
        # The output's shape, batch left symbolic, from what onnxruntime computed.
        del model.graph.output[:]
        model.graph.output.append(I(out_name, [N] + list(y.shape[1:])))
        onnx.checker.check_model(model)
        path = out / f"{name}.onnx"
        onnx.save(model, str(path))
        np.savez(out / f"{name}.npz", x=x, y=y)
        print(f"ops/{name}.onnx (opset {opset}): {x.shape} -> {y.shape}")


def multi_io_models(rng):
    """Models with several inputs or outputs, and the exact GELU as torch.onnx writes it before
    opset 20 (`Div, Erf, Add, Mul, Mul`), each run in onnxruntime: `x0, x1, ...` are the inputs
    in graph order, `y0, y1, ...` onnxruntime's outputs."""
    import torch

    out = FIX / "multi_io"
    out.mkdir(exist_ok=True)
    f32 = lambda *shape: rng.normal(0.0, 1.0, size=shape).astype(np.float32)
    init = lambda name, a: numpy_helper.from_array(np.asarray(a), name)
    I = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
    const = lambda name, v: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.float32)))
    N = "N"
    models = {}
    # `forward(a, b)` returning `(a + b, relu(a @ w), a @ w)`: the matmul is returned and read.
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("MatMul", ["a", "w"], ["m"]),
        helper.make_node("Relu", ["m"], ["r"]),
    ]
    graph = helper.make_graph(nodes, "two_inputs_three_outputs", [I("a", [N, 3]), I("b", [N, 3])], [I("s", [N, 3]), I("r", [N, 4]), I("m", [N, 4])], [init("w", f32(3, 4))])
    models["two_inputs_three_outputs"] = (helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), [[3], [3]])
    # The exact GELU chain, its constants as an initializer (sqrt 2) and as `Constant` nodes.
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Div", ["h", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        const("one", 1.0),
        helper.make_node("Add", ["one", "e"], ["a"]),
        helper.make_node("Mul", ["a", "h"], ["m"]),
        const("half", 0.5),
        helper.make_node("Mul", ["m", "half"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "gelu_erf_chain", [I("x", [N, 5])], [I("y", [N, 4])], [init("w", f32(5, 4)), init("sqrt2", np.array(np.sqrt(2.0), np.float32))])
    models["gelu_erf_chain"] = (helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), [[5]])
    # nn.GELU as torch.onnx exports it at opset 17 (no Gelu operator before 20).
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.GELU(), torch.nn.Linear(5, 3)).eval()
    path = out / "torch_gelu_opset17.onnx"
    torch.onnx.export(net, (torch.zeros(2, 6),), str(path), opset_version=17, dynamo=False, input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    models["torch_gelu_opset17"] = (onnx.load(str(path)), [[6]])
    for name, (model, samples) in models.items():
        onnx.checker.check_model(model)
        xs = [rng.normal(0.0, 1.0, size=[7] + s).astype(np.float32) for s in samples]
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        feed = {i.name: x for i, x in zip(sess.get_inputs(), xs)}
        ys = sess.run(None, feed)
        onnx.save(model, str(out / f"{name}.onnx"))
        arrays = {f"x{k}": x for k, x in enumerate(xs)}
        arrays.update({f"y{k}": y.astype(np.float32) for k, y in enumerate(ys)})
        np.savez(out / f"{name}.npz", **arrays)
        print(f"multi_io/{name}.onnx: {[x.shape for x in xs]} -> {[y.shape for y in ys]} ({[n.op_type for n in model.graph.node]})")


def torch_fixtures():
    """Small torch.save files: strided views, offsets, half types, a pickled module."""
    import collections
    import torch

    d = FIX / "torch"
    d.mkdir(exist_ok=True)
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 8
    sd = collections.OrderedDict()
    sd["fc.weight"] = base[:, 1:4]
    sd["fc.weight_t"] = base.t()
    sd["fc.bias"] = torch.tensor([0.5, -1.25, 3.0, 1e-3])
    sd["half"] = torch.tensor([1.0, -2.0, 0.333251953125], dtype=torch.float16)
    sd["bf16"] = torch.tensor([1.0, -3.5], dtype=torch.bfloat16)
    sd["count"] = torch.tensor(7, dtype=torch.int64)
    sd["scalar"] = torch.tensor(2.5)
    torch.save(sd, d / "mixed_state_dict.pt")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    torch.save(net, d / "module.pt")
    np.savez(d / "module_state.npz", **{k: v.detach().numpy() for k, v in net.state_dict().items() if v.dtype == torch.float32})
    np.savez_compressed(
        d / "compressed.npz",
        a=np.arange(6, dtype=np.float64).reshape(2, 3),
        b=np.array([[1, 2], [3, 4]], dtype=np.int32).T,
        c=np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
    )


def trained_references():
    for path in sorted((FIX / "trained").glob("*.onnx")):
        data = np.load(path.with_suffix(".inputs.npz"))
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        y = sess.run(None, {name: data["x"]})[0]
        np.savez(path.with_suffix(".ort.npz"), y=y.astype(np.float32))
        print(f"{path.name}: onnxruntime outputs for {len(data['x'])} inputs")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(ROOT.parent / "shared/data/models"))
    ap.add_argument("--trained-only", action="store_true")
    a = ap.parse_args()
    shared = pathlib.Path(a.shared)
    if not a.trained_only:
        rng = np.random.default_rng(20240607)
        for path in sorted(shared.rglob("*.onnx")):
            shutil.copyfile(path, FIX / "models" / path.name)
            x, y = run(path, rng)
            np.savez(FIX / "refs" / (path.stem + ".npz"), x=x, y=y)
            print(f"{path.name}: x {x.shape} -> y {y.shape}")
        shutil.copyfile(shared / "mase_jsc/jsc-tiny_best.ckpt", FIX / "models/jsc-tiny_best.ckpt")
        shutil.copyfile(shared / "mase_jsc/jsc-tiny_best.state_dict.npz", FIX / "models/jsc-tiny_best.state_dict.npz")
        ckpt_reference(shared, rng)
        op_models(np.random.default_rng(7))
        torch_fixtures()
        multi_io_models(np.random.default_rng(11))
    if (FIX / "trained").is_dir():
        trained_references()


if __name__ == "__main__":
    main()
