//! `ch info`: what this build knows — models, data sets, number formats, passes and the building
//! blocks of a search (MASE's `--info` is broken). Every list comes from the registry that the
//! other actions use, so it cannot drift from what they accept.

use anyhow::Result;
use mase_passes::PASSES;
use mase_search::runner::{HW_RUNNERS, SW_RUNNERS};
use mase_search::sampler::SAMPLERS;
use mase_search::space::SPACES;

pub fn run() -> Result<()> {
    println!("Models:");
    for name in mase_zoo::model_names() {
        let desc = mase_zoo::model_info(name).map(|i| i.description).unwrap_or("");
        println!("  {name:<18} {desc}");
    }
    println!("  (or a model file: --model-file path.toml, see doc/model-files.md)");
    println!("Data sets:");
    for name in mase_io::dataset_names() {
        println!("  {name}");
    }
    println!("Graph ops (MASE's `mase_op`, which `by = \"type\"` configs name; torch.fx, ONNX and model files reach them):");
    let ops: Vec<&str> = mase_ir::Op::examples()
        .iter()
        .filter(|op| !matches!(op.family(), mase_ir::OpFamily::Graph | mase_ir::OpFamily::Opaque))
        .map(|op| op.mase_op())
        .collect();
    println!("  {}", ops.join(", "));
    println!("ONNX operators (`--model-file x.onnx`; QONNX's Quant, BipolarQuant, FloatQuant and Trunc too):");
    println!("  {}", mase_interop::supported_onnx_ops().collect::<Vec<_>>().join(", "));
    println!("Number formats (quantize config `name`):");
    for (name, doc) in mase_quant::formats() {
        println!("  {name:<18} {doc}");
    }
    println!("Passes (`[passes.NAME]` of ch transform; details: ch transform --list-passes):");
    for p in PASSES {
        println!("  {:<30} {}", p.name, p.doc);
    }
    for p in crate::hw_pass::CLI_PASSES {
        println!("  {:<30} {}", p.name, p.doc);
    }
    println!("Search spaces (`[search.search_space] name`):");
    for (name, doc, _) in SPACES {
        println!("  {name:<52} {doc}");
    }
    println!("Samplers (`[search.strategy.setup] sampler`):");
    for (names, doc, _) in SAMPLERS {
        println!("  {:<18} {doc}{}", names[0], aliases(&names[1..]));
    }
    println!("Runners (`[search.strategy.sw_runner.NAME]`, `[search.strategy.hw_runner.NAME]`):");
    for (kind, table) in [("sw", SW_RUNNERS), ("hw", HW_RUNNERS)] {
        for (name, doc, _) in table {
            println!("  {kind} {name:<22} {doc}");
        }
    }
    Ok(())
}

fn aliases(names: &[&str]) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!(" (also: {})", names.join(", "))
    }
}
