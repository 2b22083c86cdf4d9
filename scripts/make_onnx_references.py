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
    if (FIX / "trained").is_dir():
        trained_references()


if __name__ == "__main__":
    main()
