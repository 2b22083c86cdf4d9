//! What trains and evaluates a graph for `ch train`, `ch test` and `ch search`: this crate's
//! [`Executor`] on the CPU, or a device engine — PyTorch on a GPU — that the Python package
//! registers when `ch` runs from it ([`register_device_opener`]).
//!
//! The trainer drives both through [`Engine`], so checkpoints, metrics, curves and `--resume`
//! are the same whichever runs the steps.

use crate::{ExecOptions, Executor, Optimizer, Result, RuntimeError, StepStats};
use mase_ir::{Graph, ParamStore};
use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

/// Where the steps run, from `--accelerator` / `accelerator = "..."` (Lightning's names).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Accelerator {
    /// This crate's executor on the CPU (`cpu`, and `auto`, MASE's default).
    #[default]
    Cpu,
    /// PyTorch on `device` (`cuda` for `gpu`/`cuda`, `mps`, or `cpu` for `torch-cpu`).
    Torch { device: String },
}

impl Accelerator {
    /// The names `FromStr` accepts, for error lines.
    pub const CHOICES: &'static str = "auto, cpu, gpu, cuda, mps, torch-cpu";

    /// The PyTorch device a torch engine runs on, `None` for the executor.
    pub fn torch_device(&self) -> Option<&str> {
        match self {
            Accelerator::Cpu => None,
            Accelerator::Torch { device } => Some(device),
        }
    }
}

impl serde::Serialize for Accelerator {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl FromStr for Accelerator {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Accelerator, String> {
        let device = match s {
            "auto" | "cpu" => return Ok(Accelerator::Cpu),
            "gpu" | "cuda" => "cuda",
            "mps" => "mps",
            "torch-cpu" => "cpu",
            other => return Err(format!("`{other}` is not an accelerator: expected one of {}", Accelerator::CHOICES)),
        };
        Ok(Accelerator::Torch { device: device.to_string() })
    }
}

impl fmt::Display for Accelerator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.torch_device() {
            None => f.write_str("cpu"),
            Some("cpu") => f.write_str("torch-cpu"),
            Some(device) => f.write_str(device),
        }
    }
}

/// Trains and evaluates one graph with cross-entropy, batch by batch.
pub trait Engine {
    /// The graph it runs.
    fn graph(&self) -> &Graph;

    /// The current parameters and buffers (a device engine copies them back).
    fn params(&mut self) -> Result<ParamStore>;

    /// Forward and backward of a train-mode batch, adding `weight` times its gradients to those
    /// held since the last step (gradient accumulation).
    fn accumulate_grad(&mut self, x: &[f32], x_shape: &[usize], labels: &[u32], weight: f32) -> Result<StepStats>;

    /// One optimizer step with the held gradients, which it then drops. `opt` gives the kind,
    /// hyper-parameters and learning rate; a device engine keeps its state on the device.
    fn step(&mut self, opt: &mut Optimizer) -> Result<()>;

    /// Loss and accuracy of an eval-mode batch.
    fn eval_batch(&mut self, x: &[f32], x_shape: &[usize], labels: &[u32]) -> Result<StepStats>;

    /// Writes the optimizer state a device engine holds into `opt` (for a checkpoint); the
    /// executor's state is `opt` itself.
    fn sync_optimizer(&mut self, opt: &mut Optimizer) -> Result<()>;

    /// [`Engine::accumulate_grad`] with weight 1 followed by [`Engine::step`].
    fn train_step(&mut self, x: &[f32], x_shape: &[usize], labels: &[u32], opt: &mut Optimizer) -> Result<StepStats> {
        let stats = self.accumulate_grad(x, x_shape, labels, 1.0)?;
        self.step(opt)?;
        Ok(stats)
    }
}

impl Engine for Executor {
    fn graph(&self) -> &Graph {
        Executor::graph(self)
    }

    fn params(&mut self) -> Result<ParamStore> {
        Ok(Executor::params(self))
    }

    fn accumulate_grad(&mut self, x: &[f32], x_shape: &[usize], labels: &[u32], weight: f32) -> Result<StepStats> {
        Executor::accumulate_grad(self, x, x_shape, labels, weight)
    }

    fn step(&mut self, opt: &mut Optimizer) -> Result<()> {
        Executor::step(self, opt)
    }

    fn eval_batch(&mut self, x: &[f32], x_shape: &[usize], labels: &[u32]) -> Result<StepStats> {
        Executor::eval_batch(self, x, x_shape, labels)
    }

    fn sync_optimizer(&mut self, _opt: &mut Optimizer) -> Result<()> {
        Ok(())
    }
}

/// What a device engine is opened on.
pub struct DeviceRequest<'a> {
    pub graph: &'a Graph,
    pub params: &'a ParamStore,
    /// The PyTorch device (`cuda`, `mps`, `cpu`).
    pub device: &'a str,
    /// The accelerator it stands for, as error lines name it (`torch-cpu` for the device `cpu`).
    pub accelerator: &'a Accelerator,
    /// The run's seed (dropout draws on the device).
    pub seed: u64,
    /// `--threads`: PyTorch's CPU threads (0 leaves PyTorch's default, every core).
    pub threads: usize,
}

/// Opens a device engine; registered once per process by the Python package.
pub type DeviceOpener = fn(&DeviceRequest<'_>) -> Result<Box<dyn Engine>>;

static DEVICE_OPENER: OnceLock<DeviceOpener> = OnceLock::new();

/// Makes `--accelerator gpu` (and the other PyTorch devices) available in this process. The
/// first registration wins.
pub fn register_device_opener(opener: DeviceOpener) {
    // A second registration (the module imported twice) keeps the first, which is the same.
    let _ = DEVICE_OPENER.set(opener);
}

/// The engine for `accelerator`: the executor on the CPU, or the registered device engine. A
/// process without one (the `ch` binary, built without Python) refuses in one line.
pub fn open_engine(graph: &Graph, params: &ParamStore, opts: ExecOptions, accelerator: &Accelerator) -> Result<Box<dyn Engine>> {
    let Some(device) = accelerator.torch_device() else {
        return Ok(Box::new(Executor::new(graph, params, opts)?));
    };
    let Some(open) = DEVICE_OPENER.get() else {
        return Err(RuntimeError::Accelerator {
            accelerator: accelerator.to_string(),
            reason: "this `ch` binary was built without Python; run the `ch` of the Python package \
                     (`pip install mase_rs torch`), which hands the model to PyTorch, or pass \
                     --accelerator cpu to run on mase-rs's executor"
                .into(),
        });
    };
    open(&DeviceRequest { graph, params, device, accelerator, seed: opts.seed, threads: opts.threads })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accelerator_names_parse_as_lightning_spells_them() {
        for (name, want) in [
            ("auto", Ok(Accelerator::Cpu)),
            ("cpu", Ok(Accelerator::Cpu)),
            ("gpu", Ok(Accelerator::Torch { device: "cuda".into() })),
            ("cuda", Ok(Accelerator::Torch { device: "cuda".into() })),
            ("mps", Ok(Accelerator::Torch { device: "mps".into() })),
            ("torch-cpu", Ok(Accelerator::Torch { device: "cpu".into() })),
            ("tpu", Err("`tpu` is not an accelerator: expected one of auto, cpu, gpu, cuda, mps, torch-cpu".to_string())),
        ] {
            assert_eq!(name.parse::<Accelerator>(), want, "{name}");
        }
        assert_eq!(Accelerator::Torch { device: "cpu".into() }.to_string(), "torch-cpu");
        assert_eq!(Accelerator::Torch { device: "cuda".into() }.to_string(), "cuda");
    }

    #[test]
    fn a_process_without_a_device_engine_refuses_in_one_line() {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        g.output(x);
        let err = open_engine(&g, &ParamStore::new(), ExecOptions { threads: 1, seed: 0 }, &"gpu".parse().unwrap())
            .err()
            .expect("no device engine is registered in this test binary");
        assert_eq!(
            err.to_string(),
            "accelerator `cuda`: this `ch` binary was built without Python; run the `ch` of the Python package \
             (`pip install mase_rs torch`), which hands the model to PyTorch, or pass --accelerator cpu to run on \
             mase-rs's executor"
        );
    }
}
