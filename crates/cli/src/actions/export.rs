//! `ch export --load CKPT | --model-file F --format onnx|qonnx -o out.onnx`: a model as ONNX (a
//! float graph) or QONNX (its number formats as IntQuant/BipolarQuant/FloatQuant nodes), for
//! onnxruntime, FINN or hls4ml.

use crate::args::ExportArgs;
use crate::config::merge_on_cpu;
use crate::output::Human;
use crate::session;
use anyhow::{anyhow, bail, Context, Result};
use mase_interop::{export_file, ExportFormat, ExportOptions};
use mase_ir::Rng;
use serde_json::{json, Value};

/// Stream `ch train` draws initial weights from (an untrained zoo model exports those weights).
const INIT_STREAM: u64 = 1;

pub fn run(args: &ExportArgs) -> Result<()> {
    let human = Human { json: args.run.json };
    let merged = merge_on_cpu(&args.run, &human, "export")?;
    let s = merged.settings;
    let format = match args.format.to_ascii_lowercase().as_str() {
        "onnx" => ExportFormat::Onnx,
        "qonnx" => ExportFormat::Qonnx,
        other => bail!("export format `{other}` is not known: expected onnx or qonnx"),
    };
    let out = args.output.clone().ok_or_else(|| anyhow!("name the file to write with -o FILE.onnx"))?;
    let load_ctx = |dataset: Option<String>| -> Result<Option<mase_zoo::ModelContext>> {
        dataset.map(|d| session::load_data(&s, &d).map(|sp| session::model_context(&sp))).transpose()
    };
    let (graph, params, label, sample) = if let Some(path) = &s.load_name {
        let mut ck = session::read_checkpoint(path)?;
        let saved_data = ck.meta.get("dataset").and_then(Value::as_str).map(str::to_string);
        // A PyTorch/Lightning file holds no model: the named model takes its weights, sized by
        // the data set.
        let ctx = if ck.graph.is_empty() { load_ctx(s.dataset.clone().or(saved_data))? } else { None };
        session::adopt_weights(&s, &mut ck, ctx.as_ref(), path)?;
        let sample = ctx.map(|c| c.sample_shape).or_else(|| {
            ck.meta.get("dataset_info").and_then(|i| i.get("sample_shape")).and_then(|v| serde_json::from_value(v.clone()).ok())
        });
        let label = ck.meta.get("model").and_then(Value::as_str).unwrap_or("model").to_string();
        (ck.graph, ck.params, label, sample)
    } else if let Some(onnx) = session::onnx_model_file(&s) {
        let m = session::import_onnx(&onnx)?;
        let label = onnx.file_stem().and_then(|x| x.to_str()).unwrap_or("model").to_string();
        (m.graph, m.params, label, Some(m.sample_shape))
    } else {
        let ctx = load_ctx(s.dataset.clone())?.ok_or_else(|| {
            anyhow!("no weights given: pass --load CKPT, or --model-file model.onnx, or a data set for an untrained model")
        })?;
        let (graph, label) = session::resolve_graph(&s, &ctx)?;
        human.warn("no --load: the exported model has untrained initial weights");
        let params = session::initial_params(&s, &graph, &mut Rng::new(s.seed).fork(INIT_STREAM))?;
        (graph, params, label, Some(ctx.sample_shape))
    };
    export_file(&out, &graph, &params, &ExportOptions { format, sample_shape: sample })
        .with_context(|| format!("cannot export model `{label}`"))?;
    let quantized = graph.nodes().iter().filter(|n| n.quant.as_ref().is_some_and(|q| q.is_active())).count();
    human.line(format!(
        "Exported '{label}' ({} nodes, {quantized} quantized) as {} to {}",
        graph.len(),
        args.format.to_ascii_lowercase(),
        out.display()
    ));
    human.result(&json!({
        "action": "export",
        "model": label,
        "format": args.format.to_ascii_lowercase(),
        "output": std::path::absolute(&out).unwrap_or(out.clone()),
        "nodes": graph.len(),
        "quantized_nodes": quantized,
    }));
    Ok(())
}
