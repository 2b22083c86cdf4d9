"""MaseGraph: lab 2's traversal, metadata reads and writes, forward, weights, copies."""

import copy

import numpy as np
import pytest
from reference import jsc_tiny_eval

import mase_rs
from mase_rs.passes.graph.utils import get_mase_op, get_mase_type, get_node_actual_target


def test_lab2_traversal_reads_mase_types_ops_and_precisions(jsc_tiny):
    # (name, fx op, target, mase_type, mase_op) as MASE's lab 2 prints them for jsc-tiny.
    expected = [
        ("x", "placeholder", "x", "placeholder", "placeholder"),
        ("seq_blocks_0", "call_module", "seq_blocks.0", "module", "batch_norm1d"),
        ("seq_blocks_1", "call_module", "seq_blocks.1", "module_related_func", "relu"),
        ("seq_blocks_2", "call_module", "seq_blocks.2", "module_related_func", "linear"),
        ("seq_blocks_3", "call_module", "seq_blocks.3", "module_related_func", "relu"),
        ("output", "output", "output", "output", "output"),
    ]
    got = [(n.name, n.op, n.target, get_mase_type(n), get_mase_op(n)) for n in jsc_tiny.fx_graph.nodes]
    assert got == expected
    fc = [n for n in jsc_tiny.nodes if n.name == "seq_blocks_2"][0]
    common = fc.meta["mase"].parameters["common"]
    assert common["args"]["data_in_0"]["shape"] == [8, 16]
    assert common["args"]["data_in_0"]["type"] == "float"
    assert common["args"]["data_in_0"]["precision"] == [32]
    assert common["args"]["weight"]["shape"] == [5, 16]
    assert common["results"]["data_out_0"]["shape"] == [8, 5]
    assert [a.name for a in fc.args] == ["seq_blocks_1"]
    assert [u.name for u in fc.users] == ["seq_blocks_3"]
    assert fc.module == {"op": "linear", "in_features": 16, "out_features": 5, "bias": True}
    target = get_node_actual_target(fc)
    try:
        import torch
    except ImportError:
        assert target == fc.module
    else:
        # With torch: the layer as a torch module holding the graph's weights, as chop returns it.
        assert isinstance(target, torch.nn.Linear) and (target.in_features, target.out_features) == (16, 5)
        np.testing.assert_array_equal(target.weight.detach().numpy(), jsc_tiny.state_dict()["seq_blocks.2.weight"])
    assert get_node_actual_target(jsc_tiny.nodes[0]) == "x"


def test_metadata_writes_reach_the_graph(jsc_tiny):
    node = jsc_tiny.nodes[2]
    node.meta["mase"].parameters["common"]["args"]["data_in_0"]["precision"] = [8, 4]
    node.meta["mase"].parameters["software"]["note"] = {"by": "test"}
    again = [n for n in jsc_tiny.nodes if n.name == node.name][0]
    assert again.meta["mase"]["common"]["args"]["data_in_0"]["precision"] == [8, 4]
    assert again.meta["mase"].parameters["software"]["note"] == {"by": "test"}


def test_forward_matches_numpy_reference(jsc_tiny, jsc_batch):
    sd = jsc_tiny.state_dict()
    out = jsc_tiny.model(jsc_batch)
    assert isinstance(out, np.ndarray) and out.shape == (64, 5)
    np.testing.assert_allclose(out, jsc_tiny_eval(sd, jsc_batch), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(jsc_tiny(x=jsc_batch), out)


def test_train_mode_uses_batch_statistics_and_updates_running_stats(jsc_tiny, jsc_batch):
    before = jsc_tiny.state_dict()
    jsc_tiny.model.train()
    out = jsc_tiny(jsc_batch)
    # Batch norm in train mode normalises with the batch's mean and biased variance.
    bn = (jsc_batch - jsc_batch.mean(0)) / np.sqrt(jsc_batch.var(0) + 1e-5)
    h = np.maximum(bn * before["seq_blocks.0.weight"] + before["seq_blocks.0.bias"], 0.0)
    ref = np.maximum(h @ before["seq_blocks.2.weight"].T + before["seq_blocks.2.bias"], 0.0)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    # PyTorch's update: momentum 0.1, unbiased variance.
    after = jsc_tiny.state_dict()
    np.testing.assert_allclose(after["seq_blocks.0.running_mean"], 0.9 * before["seq_blocks.0.running_mean"] + 0.1 * jsc_batch.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(after["seq_blocks.0.running_var"], 0.9 * before["seq_blocks.0.running_var"] + 0.1 * jsc_batch.var(0, ddof=1), rtol=1e-5, atol=1e-6)


def test_state_dict_round_trip_and_load(jsc_tiny, jsc_batch):
    sd = jsc_tiny.state_dict()
    assert sd["seq_blocks.2.weight"].dtype == np.float32 and sd["seq_blocks.2.weight"].shape == (5, 16)
    sd["seq_blocks.2.weight"] = np.full((5, 16), 0.5, np.float32)
    sd["seq_blocks.2.bias"] = np.arange(5, dtype=np.float32)
    jsc_tiny.load_state_dict(sd)
    np.testing.assert_array_equal(jsc_tiny.state_dict()["seq_blocks.2.bias"], np.arange(5, dtype=np.float32))
    np.testing.assert_allclose(jsc_tiny(jsc_batch), jsc_tiny_eval(sd, jsc_batch), rtol=1e-5, atol=1e-5)


def test_deepcopy_is_independent(jsc_tiny, jsc_batch):
    before = jsc_tiny(jsc_batch)
    other = copy.deepcopy(jsc_tiny)
    sd = other.state_dict()
    sd["seq_blocks.2.weight"] *= 2
    other.load_state_dict(sd)
    other.nodes[2].meta["mase"].parameters["software"]["mark"] = 1
    other, _ = mase_rs.quantize_transform_pass(other, {"by": "type", "linear": {"config": {"name": "integer", "data_in_width": 4, "data_in_frac_width": 2, "weight_width": 4, "weight_frac_width": 2, "bias_width": 4, "bias_frac_width": 2}}})
    assert not np.array_equal(other(jsc_batch), before)
    np.testing.assert_array_equal(jsc_tiny(jsc_batch), before)
    assert "mark" not in jsc_tiny.nodes[2].meta["mase"].parameters["software"]


def test_checkpoint_round_trip(jsc_tiny, jsc_batch, tmp_path):
    path = tmp_path / "best.ckpt"
    jsc_tiny.save(path)
    back = mase_rs.MaseGraph(model=str(path))
    back.model.eval()
    np.testing.assert_array_equal(back(jsc_batch), jsc_tiny(jsc_batch))
    assert [n.name for n in back.nodes] == [n.name for n in jsc_tiny.nodes]


def test_conv_algo_selects_how_the_executor_convolves():
    from mase_rs.dataset import DatasetInfo

    info = DatasetInfo(name="cifar-shaped", num_classes=10, sample_shape=(3, 32, 32))
    mg = mase_rs.MaseGraph(mase_rs.get_model("vgg7", "cls", info, seed=1), conv_algo="exact")
    mg.model.eval()
    x = np.random.default_rng(0).normal(size=(2, 3, 32, 32)).astype(np.float32)
    assert mg.conv_algo == "exact"
    exact = np.asarray(mg(x))
    mg.conv_algo = "winograd"
    assert mg.conv_algo == "winograd"
    winograd = np.asarray(mg(x))
    # Winograd ran (other roundings) and agrees with the direct sums to float32 rounding.
    assert not np.array_equal(exact, winograd)
    np.testing.assert_allclose(winograd, exact, rtol=1e-4, atol=1e-5)
    # A copy keeps the setting; the default is "fast".
    assert mase_rs.MaseGraph(mg).conv_algo == "winograd"
    assert mase_rs.MaseGraph(mase_rs.get_model("vgg7", "cls", info, seed=1)).conv_algo == "fast"
