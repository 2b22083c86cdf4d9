//! Trains two small float models with mase-rs, exports them to ONNX and saves inputs and outputs
//! for the interop tests (`tests/fixtures/trained/`). scripts/make_onnx_references.py then runs
//! the exported files in onnxruntime (`*.ort.npz`); the test compares the three.
//!
//! ```sh
//! cargo run --release -p mase-interop --example make_trained_fixture
//! python scripts/make_onnx_references.py --trained-only
//! ```

use mase_interop::{export_file, npy, ExportFormat, ExportOptions};
use mase_io::{load_dataset, DataOptions};
use mase_ir::{Rng, Tensor};
use mase_runtime::{init_params, ExecOptions, Executor, Mode, Optimizer, OptimizerKind};
use mase_zoo::{build_model, ModelContext};
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trained");
    std::fs::create_dir_all(&out)?;
    let splits = load_dataset("digits", &DataOptions { data_dir: None, ..Default::default() })?;
    let ctx = ModelContext::new(splits.info.sample_shape.clone(), splits.info.num_classes);
    for model in ["mnist-cnn", "tfc"] {
        let graph = build_model(model, &ctx)?;
        let params = init_params(&graph, &mut Rng::new(0));
        let mut exec = Executor::new(&graph, &params, ExecOptions { threads: 1, seed: 0 })?;
        let mut opt = Optimizer::new(OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }, 3e-3);
        let mut shape = vec![0];
        shape.extend(&splits.train.sample_shape);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for epoch in 0..5u64 {
            for idx in mase_io::batch_order(splits.train.len(), 32, Some(&mut Rng::new(epoch))) {
                splits.train.gather(&idx, &mut x, &mut y);
                shape[0] = idx.len();
                exec.train_step(&x, &shape, &y, &mut opt)?;
            }
        }
        let idx: Vec<usize> = (0..100).collect();
        splits.test.gather(&idx, &mut x, &mut y);
        shape[0] = 100;
        let ours = exec.forward(&x, &shape, Mode::Eval)?.to_vec();
        let out_shape = exec.output_shape(100)?;
        let trained = exec.params();
        let file = out.join(format!("{model}_digits.onnx"));
        export_file(
            &file,
            &graph,
            &trained,
            &ExportOptions { format: ExportFormat::Onnx, sample_shape: Some(splits.info.sample_shape.clone()) },
        )?;
        let xs = Tensor::new(shape.clone(), x.clone())?;
        std::fs::write(out.join(format!("{model}_digits.inputs.npz")), npy::write_npz(&[("x", &xs)]))?;
        std::fs::write(out.join(format!("{model}_digits.ours.npz")), npy::write_npz(&[("y", &Tensor::new(out_shape, ours)?)]))?;
        let acc = {
            let r = exec.eval_batch(&x, &shape, &y)?;
            r.correct as f64 / 100.0
        };
        println!("{model}: exported {} (accuracy on the 100 saved test samples {acc:.2})", file.display());
    }
    Ok(())
}
