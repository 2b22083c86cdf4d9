"""Passes under MASE's names: the registry's coverage, quantization on the grid, reports."""

import numpy as np
import pytest
from reference import integer_quantize, jsc_tiny_eval

import mase_rs
from mase_rs import _native
from mase_rs.passes.graph import analysis, transforms


def int_config(width, frac):
    keys = ("data_in", "weight", "bias")
    cfg = {"name": "integer"}
    for k in keys:
        cfg[f"{k}_width"], cfg[f"{k}_frac_width"] = width, frac
    return {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": cfg}}


def test_every_registry_pass_has_its_mase_name():
    names = {n for n, _doc, _args in _native.pass_list()}
    exposed = {n for n in mase_rs.PASSES}
    for name in names:
        assert mase_rs.passes.graph.mase_name(name) in exposed
        assert hasattr(mase_rs, mase_rs.passes.graph.mase_name(name))
    for mase in [
        "init_metadata_analysis_pass",
        "add_common_metadata_analysis_pass",
        "add_software_metadata_analysis_pass",
        "add_hardware_metadata_analysis_pass",
        "report_graph_analysis_pass",
        "report_node_meta_param_analysis_pass",
        "report_node_type_analysis_pass",
        "profile_statistics_analysis_pass",
        "flops_analysis_pass",
        "bitops_analysis_pass",
        "verify_quantization_analysis_pass",
        "summarize_quantization_analysis_pass",
    ]:
        assert hasattr(analysis, mase), mase
    for mase in ["quantize_transform_pass", "redefine_linear_transform_pass", "save_node_meta_param_interface_pass"]:
        assert hasattr(transforms, mase), mase


@pytest.mark.parametrize("width,frac", [(8, 4), (4, 2)])
def test_quantize_by_type_puts_linear_on_the_integer_grid(jsc_tiny, jsc_batch, width, frac):
    ori = mase_rs.MaseGraph(model=jsc_tiny)
    sd = jsc_tiny.state_dict()
    mg, info = mase_rs.quantize_transform_pass(jsc_tiny, int_config(width, frac))
    assert info["quantized"] == 1
    fc = mg.nodes[3]
    assert fc.meta["mase"].parameters["common"]["args"]["weight"]["type"] == "integer"
    assert fc.meta["mase"].parameters["common"]["args"]["weight"]["precision"] == [width, frac]
    want = jsc_tiny_eval(sd, jsc_batch, quant=(width, frac))
    np.testing.assert_allclose(mg(jsc_batch), want, rtol=1e-5, atol=1e-5)
    # The weights stay float in the state dict; the grid is applied when the model runs.
    np.testing.assert_array_equal(mg.state_dict()["seq_blocks.2.weight"], sd["seq_blocks.2.weight"])
    assert not np.array_equal(integer_quantize(sd["seq_blocks.2.weight"], width, frac), sd["seq_blocks.2.weight"])
    _, summary = mase_rs.summarize_quantization_analysis_pass(ori, mg)
    changed = {r["ori_name"]: (r["original_type"], r["quantized_type"]) for r in summary["table"] if r["changed"]}
    assert changed == {"seq_blocks_2": ("Linear", "LinearInteger")}


def test_verify_quantization_reports_weights_on_grid(jsc_tiny):
    mg, _ = mase_rs.quantize_transform_pass(jsc_tiny, int_config(8, 4))
    mg, info = mase_rs.verify_quantization_analysis_pass(mg, {})
    assert info["off_grid"] == 0
    assert [(g["node"], g["tensor"], g["values"]) for g in info["grid"]] == [("seq_blocks_2", "weight", 80), ("seq_blocks_2", "bias", 5)]
    sample = info["values"]["seq_blocks_2"]
    np.testing.assert_array_equal(np.float32(sample["quantized"]), integer_quantize(np.float32(sample["float"]), 8, 4))


def test_profile_statistics_with_input_generator(jsc_tiny):
    dm = mase_rs.MaseDataModule(name="jsc", batch_size=8, model_name="jsc-tiny", num_workers=0)
    gen = mase_rs.InputGenerator(data_module=dm, task="cls", which_dataloader="train")
    assert next(iter(gen))["x"].shape == (8, 16)
    mg, _ = mase_rs.add_software_metadata_analysis_pass(jsc_tiny, None)
    args = {
        "by": "type",
        "target_weight_nodes": ["linear"],
        "target_activation_nodes": ["relu"],
        "weight_statistics": {"variance_precise": {"device": "cpu", "dims": "all"}},
        "activation_statistics": {"range_quantile": {"device": "cpu", "dims": "all", "quantile": 0.97}},
        "input_generator": gen,
        "num_samples": 32,
    }
    mg, _ = mase_rs.profile_statistics_analysis_pass(mg, args)
    fc_sw = mg.nodes[3].meta["mase"].parameters["software"]
    var = fc_sw["args"]["weight"]["stat"]["variance_precise"]["variance"]
    # MASE's variance_precise is torch.var: the unbiased estimate.
    np.testing.assert_allclose(var, np.var(mg.state_dict()["seq_blocks.2.weight"], ddof=1), rtol=1e-5)


def test_flops_of_the_linear_layer(jsc_tiny):
    _, info = mase_rs.flops_analysis_pass(jsc_tiny, None)
    fc = [n for n in info["nodes"] if n["name"] == "seq_blocks_2"][0]
    # One multiply-add per weight of Linear(16, 5) per sample; 16 * 5 weights and 5 biases.
    assert (fc["flops"], fc["params"]) == (16 * 5, 16 * 5 + 5)
    assert info["total"]["params"] == 117  # the zoo's count for jsc-tiny on jsc
