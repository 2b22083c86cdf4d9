//! `add_hardware_metadata` (doc/mase-semantics.md#hardware-metadata): toolchain, interface,
//! parallelism and Verilog parameters of every node that has hardware of its own.
//!
//! MASE indexes its two-entry parallelism `[1, 4]` by `rank - 1 - dim`, which raises for tensors
//! of rank 3 or more. Here the two entries apply to the two innermost dimensions (as MASE does
//! for rank 2), a rank-1 tensor keeps MASE's `par[0]`, and outer dimensions get parallelism 1.

use super::common::io_nodes;
use crate::{PassContext, PassError, PassReport, Result};
use mase_ir::{ArgMeta, Graph, NodeId};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// Arguments of `add_hardware_metadata`: none.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HardwareArgs {}

/// MASE's `parallelism` of every node.
const PARALLELISM: [i64; 2] = [1, 4];

/// The internal IP of an op (MASE's `INTERNAL_COMP`): module name and source files.
fn internal_ip(mase_op: &str) -> Option<(&'static str, &'static [&'static str])> {
    match mase_op {
        "linear" => Some((
            "fixed_linear",
            &[
                "cast/rtl/fixed_cast.sv",
                "fixed_arithmetic/rtl/fixed_dot_product.sv",
                "fixed_arithmetic/rtl/fixed_vector_mult.sv",
                "fixed_arithmetic/rtl/fixed_accumulator.sv",
                "fixed_arithmetic/rtl/fixed_adder_tree.sv",
                "fixed_arithmetic/rtl/fixed_adder_tree_layer.sv",
                "fixed_arithmetic/rtl/fixed_mult.sv",
                "common/rtl/register_slice.sv",
                "common/rtl/join2.sv",
                "common/rtl/skid_buffer.sv",
                "linear/rtl/fixed_linear.sv",
            ],
        )),
        "relu" => Some(("fixed_relu", &["activations/rtl/fixed_relu.sv"])),
        _ => None,
    }
}

/// Parallelism of dimension `d` (0 = innermost) of a tensor of rank `rank`.
pub fn parallelism_of_dim(rank: usize, d: usize) -> i64 {
    match (rank, d) {
        (1, 0) => PARALLELISM[0],
        (_, 0) => PARALLELISM[1],
        (_, 1) => PARALLELISM[0],
        _ => 1,
    }
}

/// The pass. Needs `add_common_metadata`.
pub fn add_hardware_metadata(graph: &mut Graph, _ctx: &mut PassContext, _args: &HardwareArgs) -> Result<PassReport> {
    if let Some(n) = graph.nodes().iter().find(|n| n.meta.common.mase_type.is_none()) {
        return Err(PassError::MissingMeta {
            pass: "add_hardware_metadata".into(),
            node: n.name.clone(),
            what: "common metadata".into(),
            needed: "add_common_metadata".into(),
        });
    }
    for n in graph.nodes_mut() {
        n.meta.hardware.insert("is_implicit".into(), false.into());
        n.meta.hardware.insert("device_id".into(), 0.into());
    }
    let (_, _, implicit) = io_nodes(graph);
    for &m in &implicit {
        graph.node_mut(m).meta.hardware.insert("is_implicit".into(), true.into());
    }
    let mut sources: Vec<Value> = Vec::new();
    for id in graph.ids().collect::<Vec<_>>() {
        graph.node_mut(id).meta.hardware.insert("parallelism".into(), json!(PARALLELISM));
        if implicit.contains(&id) {
            continue;
        }
        let (component, vp) = component_and_params(graph, id);
        if let Some(Value::Array(files)) = component.get("dependence_files") {
            sources.extend(files.iter().cloned());
        }
        let hw = &mut graph.node_mut(id).meta.hardware;
        for (k, v) in component {
            hw.insert(k, v);
        }
        hw.insert("verilog_param".into(), Value::Object(vp));
    }
    graph.meta.hardware.insert("verilog_sources".into(), Value::Array(sources.clone()));
    Ok(PassReport::new("add_hardware_metadata", json!({"hardware_nodes": graph.len() - implicit.len(), "verilog_sources": sources})))
}

/// `add_component_source` and `add_verilog_param` of one node.
fn component_and_params(graph: &Graph, id: NodeId) -> (Map<String, Value>, Map<String, Value>) {
    let n = graph.node(id);
    let c = &n.meta.common;
    let mut comp = Map::new();
    let mut interface = Map::new();
    for (k, v) in &c.args {
        if !k.contains("data_in") {
            let entry = match v {
                ArgMeta::Tensor(_) => json!({"storage": "BRAM", "transpose": false}),
                ArgMeta::Config(_) => json!({}),
            };
            interface.insert(k.clone(), entry);
        }
    }
    comp.insert("interface".into(), Value::Object(interface));
    match internal_ip(c.mase_op.as_deref().unwrap_or("")) {
        Some((module, files)) => {
            comp.insert("toolchain".into(), "INTERNAL".into());
            comp.insert("module".into(), module.into());
            comp.insert("dependence_files".into(), json!(files));
        }
        None => {
            comp.insert("toolchain".into(), "HLS".into());
            comp.insert("module".into(), Value::Null);
            comp.insert("dependence_files".into(), json!([]));
        }
    }
    comp.insert("device_id".into(), (-1).into());
    let mut vp = Map::new();
    for (name, v) in c.args.iter().chain(c.results.iter()) {
        let a = name.to_uppercase();
        match v {
            ArgMeta::Tensor(t) => {
                for (i, p) in t.precision.iter().enumerate() {
                    vp.insert(format!("{a}_PRECISION_{i}"), p.clone());
                }
                let rank = t.shape.len();
                for d in 0..rank {
                    vp.insert(format!("{a}_TENSOR_SIZE_DIM_{d}"), t.shape[rank - 1 - d].into());
                    vp.insert(format!("{a}_PARALLELISM_DIM_{d}"), parallelism_of_dim(rank, d).into());
                }
            }
            ArgMeta::Config(Value::Bool(b)) => {
                vp.insert(a, (*b as i64).into());
            }
            ArgMeta::Config(x) => {
                vp.insert(a, x.clone());
            }
        }
    }
    (comp, vp)
}
