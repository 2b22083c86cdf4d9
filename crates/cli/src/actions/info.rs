//! `ch info`: the models and data sets this build knows (MASE's broken `--info`).

use anyhow::Result;

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
    Ok(())
}
