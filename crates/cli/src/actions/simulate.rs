//! `ch simulate DIR`: builds a design written by `ch emit` with Verilator, streams a data split
//! (or `--random N` samples) through it, and compares every output code with the integer
//! executor's (the golden model). Any mismatch is an error; the latency, initiation interval,
//! simulation speed and the accuracy of the simulated outputs are printed.

use crate::args::SimulateArgs;
use crate::output::Human;
use anyhow::{anyhow, bail, Result};
use mase_hw::{read_design, simulate};
use mase_io::DataOptions;
use serde_json::{json, Value};

pub fn run(args: &SimulateArgs) -> Result<()> {
    let human = Human { json: args.json };
    let dir = &args.dir;
    let design = read_design(dir)?;
    let ck = mase_io::load_checkpoint(&dir.join("model.ckpt"))?;
    let n_in = design.input_len();
    let (x, labels, source) = match args.random {
        Some(0) => bail!("--random: expected at least 1 sample"),
        Some(_) if args.samples.is_some() => bail!("--samples picks samples of a data split; --random N already says how many"),
        Some(n) => {
            let mut rng = mase_ir::Rng::new(0);
            let x: Vec<f32> = (0..n * n_in).map(|_| rng.normal() as f32).collect();
            (x, Vec::new(), format!("{n} random samples"))
        }
        None => {
            let saved = ck.meta.get("dataset").and_then(Value::as_str).map(str::to_string);
            let name = args.dataset.clone().or(saved).ok_or_else(|| anyhow!("no data set: pass --dataset or --random N"))?;
            let splits = mase_io::load_dataset(&name, &DataOptions { data_dir: args.data_dir.clone(), ..Default::default() })?;
            let split = args.split.as_deref().unwrap_or("test");
            let mut data = match split {
                "train" => splits.train,
                "val" | "validation" => splits.val,
                "test" => splits.test,
                other => bail!("--split `{other}`: expected train, val or test"),
            };
            match args.samples {
                Some(0) => bail!("--samples: expected at least 1 sample"),
                Some(k) if k < data.len() => data = data.subset(&(0..k).collect::<Vec<_>>()),
                _ => {}
            }
            if data.sample_len() != n_in {
                bail!("data set `{name}` has {} values per sample, the design takes {n_in}", data.sample_len());
            }
            let source = format!("{} samples of the `{name}` {split} split", data.len());
            (data.x, data.y, source)
        }
    };
    let n = x.len() / n_in.max(1);
    let shape: Vec<usize> = std::iter::once(n).chain(design.input_shape()).collect();
    let want = simulate::golden(&ck.graph, &ck.params, &design, &x, &shape)?;
    let inputs: Vec<Vec<i64>> = x.chunks(n_in).map(|r| design.input_codes(r)).collect();
    human.info(format!("building {} with Verilator...", dir.display()));
    simulate::build(dir)?;
    let r = simulate::run(dir, &design, &inputs, args.stall_seed.unwrap_or(0))?;
    let bad = simulate::mismatches(&want, &r.outputs);
    let accuracy = (!labels.is_empty()).then(|| simulate::accuracy(&r.outputs, &labels));
    let rate = n as f64 / r.seconds.max(1e-9);
    human.line(format!("{}: {source}, mismatches {} of {n}", design.model, bad.len()));
    human.line(format!(
        "latency {} cycles, initiation interval {:.2} cycles, {} cycles in all, {:.0} samples/s simulated",
        r.latency, r.initiation_interval, r.cycles, rate
    ));
    if let Some(a) = accuracy {
        human.line(format!("accuracy of the simulated outputs {a:.4}"));
    }
    human.result(&json!({
        "action": "simulate", "model": design.model, "samples": n, "mismatches": bad.len(),
        "latency_cycles": r.latency, "initiation_interval": r.initiation_interval, "cycles": r.cycles,
        "samples_per_second": rate, "accuracy": accuracy,
    }));
    if let Some((s, e, g)) = bad.first() {
        bail!("{} of {n} samples differ from the integer executor; first: sample {s}, expected {e:?}, simulated {g:?}", bad.len());
    }
    Ok(())
}
