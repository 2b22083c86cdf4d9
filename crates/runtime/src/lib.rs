//! Static-graph executor of mase-rs.
//!
//! [`Executor`] compiles an [`mase_ir::Graph`] and its [`mase_ir::ParamStore`] into a plan per
//! input shape (one preallocated buffer per value and per gradient, one kernel per node) and runs
//! forward and backward kernels without allocating per step. Around it: mean cross-entropy,
//! SGD/Adam/AdamW with PyTorch's formulas ([`Optimizer`]), the cosine learning-rate schedule
//! ([`cosine_lr`]) and PyTorch's default initialisation ([`init_params`]).
//!
//! ```
//! use mase_ir::{Graph, NormSpec, Op, Rng};
//! use mase_runtime::{init_params, ExecOptions, Executor, Optimizer, OptimizerKind};
//!
//! let mut g = Graph::new();
//! let x = g.placeholder("x");
//! let bn = g.call_module("seq_blocks.0", Op::BatchNorm1d(NormSpec::new(4)), &[x]);
//! let fc = g.call_module("seq_blocks.1", Op::Linear { in_features: 4, out_features: 3, bias: true }, &[bn]);
//! g.output(fc);
//! let params = init_params(&g, &mut Rng::new(0));
//! let mut exec = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 0 }).unwrap();
//! let mut opt = Optimizer::new(OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }, 1e-3);
//! let xs: Vec<f32> = (0..8).map(|i| i as f32).collect();
//! let stats = exec.train_step(&xs, &[2, 4], &[0, 2], &mut opt).unwrap();
//! assert_eq!(stats.count, 2);
//! ```

mod engine;
mod error;
mod executor;
mod fuse;
mod gemm;
mod gemm_isa;
mod infer;
mod init;
mod integer;
mod kernels;
mod loss;
mod optim;
mod par;
mod plan;
mod quant;
mod schedule;
mod slots;
mod topo;

pub use engine::{open_engine, register_device_opener, Accelerator, DeviceOpener, DeviceRequest, Engine};
pub use error::{Result, RuntimeError};
pub use executor::{ConvAlgo, ExecOptions, Executor, Fusion, Mode};
pub use gemm::{gemm, gemm_with, in_gemm_library, Mat, MatMut};
pub use gemm_isa::GemmIsa;
pub use init::{init_params, init_tensor};
pub use integer::{bipolar_code, bipolar_fixed, run_integer, shift_right_rne, IntegerNode, IntegerReport, IntegerRun};
pub use kernels::norm::batch_norm_eval_coefficients;
pub use loss::StepStats;
pub use optim::{Optimizer, OptimizerKind, OptimizerState};
pub use schedule::cosine_lr;
