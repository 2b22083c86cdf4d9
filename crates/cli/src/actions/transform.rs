//! `ch transform --config X.toml [--load CKPT]`: MASE's transform action
//! (doc/mase-semantics.md#transform-action). The model gets common and software metadata, the `[passes.*]` tables run in TOML
//! order, each `quantize` is followed by its summary (histogram on the terminal, CSVs under
//! `transform/quantize/`), and the transformed model (graph with its number formats, weights and
//! metadata) is saved as `transform/transformed_ckpt/model.ckpt`, which `ch test --load` and
//! `ch train --load` (quantization-aware training) take.

use crate::args::{InputSpecArgs, RunArgs, TransformArgs};
use crate::config::{merge_on_cpu, Settings};
use crate::hw_pass::{CliPasses, Layered, CLI_PASSES};
use crate::output::{Human, ProjectDirs};
use crate::plugins::{ExternalPasses, Plugins};
use crate::session;
use anyhow::{anyhow, bail, Context, Result};
use mase_io::{Checkpoint, Splits};
use mase_ir::{Graph, ParamStore, Rng};
use mase_passes::{run_pass, InputSource, PassContext, PassReport, PASSES};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// What `transform` and `analyze` start from: the model, its weights and its data.
pub(crate) struct Prepared {
    pub graph: Graph,
    pub params: ParamStore,
    /// The model's name for project folders and checkpoints.
    pub label: String,
    pub dataset: Option<String>,
    pub splits: Option<Splits>,
    /// Per-sample input shape recorded in a checkpoint (used when there is no data set).
    pub sample_shape: Option<Vec<usize>>,
    /// The data set's description, as checkpoints record it.
    pub dataset_info: Option<Value>,
}

/// The model from `--load` (graph and weights of the checkpoint, quantization included) or from
/// the zoo with fresh weights (seeded as `ch train` seeds them), and the data set when one is
/// named on the command line, in the config or in the checkpoint. Without a data set, `spec`
/// (`--input-shape`, `--num-classes`) describes the input, and passes that need samples draw
/// random ones of that shape.
pub(crate) fn prepare(s: &Settings, spec: &InputSpecArgs) -> Result<Prepared> {
    if let Some(path) = &s.load_name {
        let mut ck = session::read_checkpoint(path)?;
        let saved_model = ck.meta.get("model").and_then(Value::as_str).unwrap_or("").to_string();
        if let Some(m) = s.model.as_deref() {
            let named = Path::new(m).file_stem().and_then(|x| x.to_str()).unwrap_or(m);
            if !saved_model.is_empty() && named != saved_model {
                bail!("checkpoint {}: it holds model `{saved_model}`, not `{m}`", path.display());
            }
        }
        let dataset = s.dataset.clone().or_else(|| ck.meta.get("dataset").and_then(Value::as_str).map(str::to_string));
        let splits = dataset.as_deref().map(|d| session::load_data(s, d)).transpose()?;
        // A PyTorch/Lightning file has weights only: the named model takes them.
        session::adopt_weights(s, &mut ck, splits.as_ref().map(session::model_context).as_ref(), path)?;
        let saved_model = ck.meta.get("model").and_then(Value::as_str).unwrap_or("").to_string();
        let saved_info = ck.meta.get("dataset_info").filter(|v| !v.is_null()).cloned();
        let dataset_info = match &splits {
            Some(sp) => Some(serde_json::to_value(&sp.info)?),
            None => saved_info,
        };
        let sample_shape = dataset_info.as_ref().and_then(|i| i.get("sample_shape")).and_then(|v| serde_json::from_value(v.clone()).ok());
        let label = if saved_model.is_empty() { s.model.clone().unwrap_or_else(|| "model".into()) } else { saved_model };
        return Ok(Prepared { graph: ck.graph, params: ck.params, label, dataset, splits, sample_shape, dataset_info });
    }
    let Some(dataset) = s.dataset.clone() else {
        let ctx = session::context_without_data(s, spec.input_shape.as_deref(), spec.num_classes)?;
        let (graph, label) = session::resolve_graph(s, &ctx)?;
        let params = session::initial_params(s, &graph, &mut Rng::new(s.seed).fork(1))?;
        return Ok(Prepared {
            graph,
            params,
            label,
            dataset: None,
            splits: None,
            sample_shape: Some(ctx.sample_shape),
            dataset_info: None,
        });
    };
    let splits = session::load_data(s, &dataset)?;
    let ctx = session::model_context(&splits);
    let (graph, label) = session::resolve_graph(s, &ctx)?;
    // Stream 1 is the one `ch train` draws initial weights from, so an untrained transform
    // starts from the weights an untrained run would have.
    let params = session::initial_params(s, &graph, &mut Rng::new(s.seed).fork(1))?;
    Ok(Prepared {
        graph,
        params,
        label,
        dataset: Some(dataset),
        sample_shape: Some(splits.info.sample_shape.clone()),
        dataset_info: Some(serde_json::to_value(&splits.info)?),
        splits: Some(splits),
    })
}

/// A pass context over the prepared model, writing under `out_dir`.
pub(crate) fn context(s: &Settings, p: &mut Prepared, out_dir: PathBuf) -> PassContext {
    let mut ctx = PassContext::new(std::mem::take(&mut p.params));
    ctx.inputs = match (p.splits.take(), &p.sample_shape) {
        (Some(splits), _) => InputSource::Data(Box::new(splits)),
        (None, Some(shape)) => InputSource::Random { sample_shape: shape.clone() },
        (None, None) => InputSource::None,
    };
    ctx.out_dir = Some(out_dir);
    ctx.batch_size = s.batch_size;
    ctx.seed = s.seed;
    ctx.threads = s.threads;
    ctx
}

/// TOML arguments as the JSON the pass registry takes (every string kept).
pub(crate) fn toml_to_json(v: &toml::Value) -> Value {
    mase_passes::interface::toml_to_json(v, &|s| Value::String(s.to_string()))
}

/// Runs a pass, turning its error into one line that names it.
pub(crate) fn run_named(name: &str, graph: &mut Graph, ctx: &mut PassContext, args: &Value) -> Result<PassReport> {
    Ok(run_pass(name, graph, ctx, args)?)
}

/// Writes a pass report as JSON: `<dir>/<stem>.json`.
pub(crate) fn write_report(dir: &Path, stem: &str, r: &PassReport) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(format!("{stem}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(r)?).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// One `[passes.<name>]` table of a config: the pass it runs and its arguments.
pub(crate) struct Step {
    /// The table's name, which its report files and JSON keep (`bitops_after`).
    pub name: String,
    /// The pass it runs: the table's `pass` key, else its name.
    pub pass: String,
    /// Whether the pass is the caller's ([`ExternalPasses`]) rather than the registry's.
    pub external: bool,
    pub args: Value,
}

impl Step {
    /// Runs the step's pass: the registry's, or the caller's.
    fn run(&self, graph: &mut Graph, ctx: &mut PassContext, external: Option<&dyn ExternalPasses>) -> Result<PassReport> {
        match external.filter(|_| self.external) {
            Some(x) => x.run(&self.pass, graph, ctx, &self.args).with_context(|| format!("pass `{}`", self.pass)),
            None => run_named(&self.pass, graph, ctx, &self.args),
        }
    }
}

/// The `[passes.*]` tables in TOML order. A table runs the pass it is named after, or the one
/// its `pass = "..."` key names, so one pass can run several times (`[passes.bitops]` before
/// quantize, `[passes.bitops_after] pass = "bitops"` after it). A name the registry does not know
/// runs the caller's pass of that name, if `external` has one.
pub(crate) fn pipeline(passes: &toml::Table, config: &Path, external: Option<&dyn ExternalPasses>) -> Result<Vec<Step>> {
    let known = || {
        let mut names: Vec<String> = PASSES.iter().map(|p| p.name.to_string()).collect();
        names.extend(external.map(|x| x.names()).unwrap_or_default());
        names.join(", ")
    };
    let mut steps = Vec::new();
    for (name, value) in passes {
        let toml::Value::Table(table) = value else {
            bail!("config {}: `passes.{name}` must be a table ([passes.{name}]), not a value", config.display());
        };
        let mut table = table.clone();
        let pass_name = match table.remove("pass") {
            None => name.clone(),
            Some(toml::Value::String(p)) => p,
            Some(other) => bail!("config {}: `passes.{name}.pass` must name a pass (a string), got {other}", config.display()),
        };
        let args = toml_to_json(&toml::Value::Table(table));
        if let Some(info) = mase_passes::find_pass(&pass_name) {
            steps.push(Step { name: name.clone(), pass: info.name.to_string(), external: false, args });
            continue;
        }
        if external.is_some_and(|x| x.knows(&pass_name)) {
            steps.push(Step { name: name.clone(), pass: pass_name, external: true, args });
            continue;
        }
        let via = if &pass_name == name { String::new() } else { format!(" (named by `passes.{name}.pass`)") };
        bail!("config {}: unknown pass `{pass_name}`{via}; known passes: {}", config.display(), known());
    }
    Ok(steps)
}

fn list_passes(human: &Human) {
    let mut t = mase_passes::table::Table::new(["Pass", "Arguments", "What it does"]);
    for p in PASSES {
        t.push([p.name, p.args.rsplit("::").next().unwrap_or(p.args).trim(), p.doc]);
    }
    for p in CLI_PASSES {
        t.push([p.name, p.args, p.doc]);
    }
    human.line(t.render(mase_passes::table::TableFormat::Simple));
    human.line("The keys of each pass's JSON report (with units): `ch transform --list-passes --json`, or doc/pass-reports.md.");
    let mut passes: Vec<Value> = PASSES.iter().map(|p| json!({"name": p.name, "args": p.args, "doc": p.doc, "report": p.report})).collect();
    passes.extend(CLI_PASSES.iter().map(|p| json!({"name": p.name, "args": p.args, "doc": p.doc, "report": p.report})));
    human.result(&json!({"action": "transform", "passes": passes}));
}

pub fn run(args: &TransformArgs, plugins: &Plugins<'_>) -> Result<()> {
    let a: &RunArgs = &args.run;
    let human = Human { json: a.json };
    if args.list_passes {
        list_passes(&human);
        return Ok(());
    }
    if a.config.is_none() {
        bail!("expected configuration via --config (a TOML file with [passes.*] tables)");
    }
    let merged = merge_on_cpu(a, &human, "transform")?;
    let s = merged.settings;
    let passes = merged.config.passes.clone().ok_or_else(|| {
        anyhow!(
            "config {}: no [passes] table: name the passes to run as [passes.<name>]",
            a.config.as_deref().unwrap_or(Path::new("")).display()
        )
    })?;
    let config_path = a.config.as_deref().unwrap_or(Path::new(""));
    // The pipeline is checked before the model is read; `ch`'s own passes learn the model's
    // name, data set and project folder after.
    let names_only = CliPasses { label: String::new(), dataset: None, dataset_info: None, hardware_dir: PathBuf::new() };
    pipeline(&passes, config_path, Some(&Layered { first: &names_only, then: plugins.passes }))?;
    if s.load_name.is_none() && session::onnx_model_file(&s).is_none() {
        human.warn("no --load: the passes run on the untrained initial weights (train first and pass --load best.ckpt)");
    }
    let mut p = prepare(&s, &args.spec)?;
    let dataset = p.dataset.clone().unwrap_or_else(|| "none".into());
    let dirs = ProjectDirs::new(&s.project_dir, s.project.as_deref(), &p.label, &s.task, &dataset);
    let cli_passes = CliPasses {
        label: p.label.clone(),
        dataset: p.dataset.clone(),
        dataset_info: p.dataset_info.clone(),
        hardware_dir: dirs.root.join("hardware"),
    };
    let external = Layered { first: &cli_passes, then: plugins.passes };
    let steps = pipeline(&passes, config_path, Some(&external))?;
    let out = dirs.software().join("transform");
    let reports_dir = out.join("reports");
    let label = p.label.clone();
    let dataset_info = p.dataset_info.clone();
    let mut graph = std::mem::take(&mut p.graph);
    let mut ctx = context(&s, &mut p, out.clone());
    human.info(format!("Transforming model '{label}'..."));
    for setup in ["init_metadata", "add_common_metadata", "add_software_metadata"] {
        run_named(setup, &mut graph, &mut ctx, &Value::Null)?;
    }
    let mut results = Vec::new();
    // Reports are numbered in pipeline order, so a pass named twice keeps both.
    let mut seq = 0;
    let mut stem = |pass: &str| {
        seq += 1;
        format!("{seq:02}_{pass}")
    };
    for (i, step) in steps.iter().enumerate() {
        let r = step.run(&mut graph, &mut ctx, Some(&external))?;
        for w in &r.warnings {
            human.warn(w);
        }
        // A caller's pass never has a registry name, so it takes the last arm.
        match step.pass.as_str() {
            "quantize" => {
                if args.explain {
                    human.line(format!("Resolved quantization config:\n{}", r.text));
                }
                write_report(&reports_dir, &stem(&step.name), &r)?;
                results.push(json!({"name": step.name, "pass": r.pass, "report": r.json}));
                // MASE summarises every quantize against the graph before it; a config that
                // names `summarize_quantization` itself before the next quantize gets that one
                // instead of a second copy of the histogram.
                let mut later = steps[i + 1..].iter().map(|st| st.pass.as_str()).take_while(|&p| p != "quantize");
                if later.any(|p| p == "summarize_quantization") {
                    continue;
                }
                let summary = run_named("summarize_quantization", &mut graph, &mut ctx, &json!({"save_dir": out.join("quantize")}))?;
                human.info(&summary.text);
                write_report(&reports_dir, &stem("summarize_quantization"), &summary)?;
                results.push(json!({"name": "summarize_quantization", "pass": "summarize_quantization", "report": summary.json}));
                continue;
            }
            "summarize_quantization" => human.info(&r.text),
            _ if !r.text.is_empty() => human.line(&r.text),
            _ => {}
        }
        write_report(&reports_dir, &stem(&step.name), &r)?;
        results.push(json!({"name": step.name, "pass": r.pass, "report": r.json}));
    }
    let ck_dir = out.join("transformed_ckpt");
    std::fs::create_dir_all(&ck_dir).with_context(|| format!("cannot create {}", ck_dir.display()))?;
    std::fs::write(ck_dir.join(mase_passes::interface::NODE_META_FILE), mase_passes::interface::node_meta_toml(&graph)?)
        .with_context(|| format!("cannot write {}", ck_dir.join(mase_passes::interface::NODE_META_FILE).display()))?;
    let ck_path = ck_dir.join("model.ckpt");
    let ck = Checkpoint {
        graph,
        params: ctx.params,
        optimizer_tensors: Vec::new(),
        meta: json!({
            "model": label,
            "dataset": p.dataset,
            "dataset_info": dataset_info,
            "transformed": true,
            "passes": steps.iter().map(|st| &st.name).collect::<Vec<_>>(),
            "settings": s,
        }),
    };
    mase_io::save_checkpoint(&ck_path, &ck)?;
    human.info(format!("Transformed model saved to {}", ck_path.display()));
    human.result(&json!({
        "action": "transform",
        "model": label,
        "dataset": p.dataset,
        "checkpoint": std::path::absolute(&ck_path).unwrap_or(ck_path.clone()),
        "transform_dir": std::path::absolute(&out).unwrap_or(out.clone()),
        "passes": results,
    }));
    Ok(())
}
