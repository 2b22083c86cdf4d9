//! The executor: a graph and its parameters compiled into plans, run forward and backward.

use crate::infer::{self, Locality, ReplicaSource, Replicas};
use crate::kernels::{Accum, Bwd, Fwd, NodeKernel};
use crate::loss::{cross_entropy, StepStats};
use crate::optim::Optimizer;
use crate::plan::Plan;
use crate::slots::{slots_from_store, store_from_slots, ParamSlot};
use crate::topo::{GradPlan, Topo};
use crate::{Result, RuntimeError};
use mase_ir::{ArgMeta, Graph, IrError, NodeId, Op, ParamStore, Rng};
use rayon::ThreadPool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Plans kept at once; an epoch needs two (full batches and the last, smaller one), and
/// evaluation with another batch size one more.
const MAX_PLANS: usize = 4;

/// Graph inputs whose batches [`Executor::forward_many`] gathers without allocating.
const MAX_INLINE_INPUTS: usize = 8;

/// Gives each executor an identity, so an optimizer can tell whether it is stepping the same
/// parameters as last time.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Training or evaluation behaviour of batch norm and dropout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Train,
    Eval,
}

/// How the executor runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecOptions {
    /// Worker threads for large kernels; 0 uses every core.
    pub threads: usize,
    /// Seed of the dropout masks.
    pub seed: u64,
}

/// How the executor computes convolutions. See `README.md`, "Convolution algorithms".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConvAlgo {
    /// Winograd (F(4x4, 3x3), or F(2x2, 3x3) for small outputs and short sums) for the stride-1
    /// 3x3 convolutions of the shape classes where it measured faster (forward and both
    /// gradients), the direct im2col + GEMM path otherwise. The results differ from the direct
    /// sums by rounding only (see the README for the bound).
    #[default]
    Fast,
    /// The direct im2col + GEMM path for every convolution.
    Exact,
    /// Winograd, with the same choice of tile as `Fast`, for every stride-1 3x3 convolution it
    /// applies to, whether or not it measured faster for the shape (for tests and measurements).
    Winograd,
}

impl ConvAlgo {
    /// Every algorithm with its name (`ch --conv-algo`, TOML `conv_algo`, Python `conv_algo`).
    pub const NAMES: [(&'static str, ConvAlgo); 3] =
        [("fast", ConvAlgo::Fast), ("exact", ConvAlgo::Exact), ("winograd", ConvAlgo::Winograd)];

    /// The algorithm of a name in [`ConvAlgo::NAMES`].
    pub fn from_name(name: &str) -> Option<ConvAlgo> {
        ConvAlgo::NAMES.iter().find(|(n, _)| *n == name).map(|&(_, a)| a)
    }

    /// The algorithm's name in [`ConvAlgo::NAMES`].
    pub fn name(self) -> &'static str {
        ConvAlgo::NAMES.iter().find(|(_, a)| *a == self).map_or("fast", |&(n, _)| n)
    }
}

/// Whether the executor fuses the epilogues of convolutions and linear layers (see `README.md`,
/// "Fused epilogues"). Both settings give the same bits; `Off` is for tests and measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fusion {
    /// Evaluation batches ([`Executor::infer`], [`Executor::eval_batch`]) run a following batch
    /// norm and ReLU in the convolution's or linear layer's output pass, and backward runs a
    /// ReLU's gradient inside the batch norm before it.
    #[default]
    On,
    /// Every node runs its own kernel.
    Off,
}

/// Which values a forward computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keep {
    /// Every node's value, for [`Executor::value`] (no fused epilogues).
    Every,
    /// The output only: an evaluation forward runs the plan's fused epilogues (`crate::fuse`).
    Output,
}

/// Runs one graph with its parameters: forward in either mode, cross-entropy, backward and
/// optimizer steps. It owns a copy of the graph, the parameters with their gradients, and one
/// compiled [`Plan`] per input shape seen recently.
pub struct Executor {
    pub(crate) graph: Graph,
    pub(crate) topo: Topo,
    pub(crate) params: Vec<ParamSlot>,
    grad_plan: GradPlan,
    pub(crate) plans: Vec<Plan>,
    /// Index in `plans` of the last forward's plan.
    pub(crate) current: Option<usize>,
    /// The thread pool of `threads > 1` (shared with the forward and backward passes, which run
    /// inside it: see [`Executor::run_forward`]).
    pub(crate) pool: Option<Arc<ThreadPool>>,
    pub(crate) rng: Rng,
    id: u64,
    keep_input_grad: bool,
    /// Per-sample input shape of the last batch.
    last_features: Option<Vec<usize>>,
    /// Quantized weight and bias copies of quantized nodes (`crate::quant`).
    pub(crate) quant: crate::quant::ExecQuant,
    seed: u64,
    /// Bumped whenever the parameters or buffers change, so replicas know to copy them again.
    generation: u64,
    /// Single-threaded copies that run slices of an evaluation batch (`crate::infer`).
    replicas: Replicas,
    /// Whether evaluation batches of the last per-sample shape may be cut into slices.
    locality: Option<Locality>,
    /// Whether the parameter gradients hold contributions not yet consumed by an optimizer step
    /// (gradient accumulation adds to them instead of writing them).
    grads_held: bool,
    /// The convolution algorithm of the plans.
    conv_algo: ConvAlgo,
    /// Whether the plans' fused epilogues run.
    fusion: Fusion,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("nodes", &self.graph.len())
            .field("params", &self.params.len())
            .field("plans", &self.plans.len())
            .finish()
    }
}

impl Executor {
    /// Checks the graph against the parameters (names and shapes) and prepares to run it.
    pub fn new(graph: &Graph, params: &ParamStore, opts: ExecOptions) -> Result<Executor> {
        mase_ir::validate(graph, Some(params))?;
        let mut slots = slots_from_store(params);
        let topo = Topo::new(graph, &slots)?;
        let grad_plan = GradPlan::new(graph, &topo, &slots, false);
        let quant = crate::quant::ExecQuant::new(graph, &topo, &slots, opts.seed)?;
        for (s, &r) in slots.iter_mut().zip(&grad_plan.reached) {
            s.reached = r;
        }
        let threads = if opts.threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { opts.threads };
        let pool = if threads > 1 {
            Some(Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .map_err(|e| RuntimeError::ThreadPool { threads, source: std::sync::Arc::new(e) })?,
            ))
        } else {
            None
        };
        Ok(Executor {
            graph: graph.clone(),
            topo,
            params: slots,
            grad_plan,
            plans: Vec::new(),
            current: None,
            pool,
            rng: Rng::new(opts.seed),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            keep_input_grad: false,
            last_features: None,
            quant,
            seed: opts.seed,
            generation: 0,
            replicas: Replicas::default(),
            locality: None,
            grads_held: false,
            conv_algo: ConvAlgo::default(),
            fusion: Fusion::default(),
        })
    }

    /// The graph being run.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Runs the graph on a batch `x` of shape `x_shape` (`[N, ...features]`) and returns the
    /// output values (row-major, shape [`Executor::output_shape`]`(N)`). In [`Mode::Train`]
    /// batch norm uses batch statistics and updates its running statistics, dropout is active,
    /// and the activations are kept for backward.
    pub fn forward(&mut self, x: &[f32], x_shape: &[usize], mode: Mode) -> Result<&[f32]> {
        let p = self.prepare(x_shape, x.len(), mode, "forward")?;
        self.run_forward(p, &[x], mode, Keep::Every)?;
        Ok(&self.plans[p].vals[self.topo.storage[self.topo.output]])
    }

    /// An evaluation forward on this executor's own thread pool that keeps only the output, so
    /// it runs the fused epilogues (the replicas of `crate::infer` run their slices with it).
    pub(crate) fn forward_output(&mut self, x: &[f32], x_shape: &[usize]) -> Result<&[f32]> {
        let p = self.prepare(x_shape, x.len(), Mode::Eval, "forward")?;
        self.run_forward(p, &[x], Mode::Eval, Keep::Output)?;
        Ok(&self.plans[p].vals[self.topo.storage[self.topo.output]])
    }

    /// Runs the graph in evaluation mode on a batch and returns the output values, the same bits
    /// as [`Executor::forward`] in [`Mode::Eval`]. With a thread pool, a batch large enough is cut
    /// into one slice of rows per thread, each run whole by a single-threaded copy of the
    /// executor (`crate::infer`), so the values of the other nodes are not kept:
    /// [`Executor::value`] answers `None` after such a batch. A batch run whole runs the fused
    /// epilogues (a convolution or linear layer computes the batch norm and ReLU that follow it
    /// in its own output pass, see `doc/runtime.md`), so `value` answers `None` for the nodes
    /// whose values the fused chains skip.
    pub fn infer(&mut self, x: &[f32], x_shape: &[usize]) -> Result<&[f32]> {
        let p = self.prepare(x_shape, x.len(), Mode::Eval, "infer")?;
        self.run_infer(p, x)?;
        Ok(&self.plans[p].vals[self.topo.storage[self.topo.output]])
    }

    /// Shape of the output for a batch of `batch` samples of the last input shape (or, before
    /// any batch, the shape the graph's metadata or first layer implies).
    pub fn output_shape(&self, batch: usize) -> Result<Vec<usize>> {
        let mut shape = vec![batch];
        shape.extend(self.feature_shape()?);
        let consts = |name: &str| self.params.iter().find(|s| s.name == name).map(|s| s.shape.clone());
        let infos = self.graph.infer_shapes(&[shape], &consts)?;
        Ok(infos[self.topo.output].shape().to_vec())
    }

    /// Forward in training mode, mean cross-entropy against `labels` (class indices), and
    /// backward. Gradients are written (not accumulated) into the gradient buffers. Returns the
    /// loss and the number of samples whose arg-max is the label.
    pub fn loss_and_grad(&mut self, x: &[f32], x_shape: &[usize], labels: &[u32]) -> Result<StepStats> {
        self.grads_held = false;
        self.accumulate_grad(x, x_shape, labels, 1.0)
    }

    /// Gradient accumulation, as Lightning's `accumulate_grad_batches` does it: forward in
    /// training mode and backward of `weight` times the mean cross-entropy, with the parameter
    /// gradients added to those held since the last [`Executor::step`] (written, when none are
    /// held). Lightning's weight is `1 / accumulate_grad_batches`. The returned loss is the
    /// unweighted mean cross-entropy.
    pub fn accumulate_grad(&mut self, x: &[f32], x_shape: &[usize], labels: &[u32], weight: f32) -> Result<StepStats> {
        let p = self.prepare(x_shape, x.len(), Mode::Train, "training")?;
        let classes = self.check_labels(p, labels)?;
        self.run_forward(p, &[x], Mode::Train, Keep::Every)?;
        let out = self.topo.storage[self.topo.output];
        let plan = &mut self.plans[p];
        plan.ensure_grads();
        let stats = cross_entropy(&plan.vals[out], classes, labels, Some(&mut plan.grads[out]));
        if weight != 1.0 {
            plan.grads[out].iter_mut().for_each(|g| *g *= weight);
        }
        self.run_backward(p);
        self.grads_held = true;
        Ok(stats)
    }

    /// One optimizer step on the gradients held (from [`Executor::loss_and_grad`] or
    /// [`Executor::accumulate_grad`]); the next backward writes fresh gradients.
    pub fn step(&mut self, opt: &mut Optimizer) -> Result<()> {
        opt.step_slots(self.id, &mut self.params)?;
        self.quant.params_changed();
        self.generation += 1;
        self.grads_held = false;
        Ok(())
    }

    /// [`Executor::loss_and_grad`] followed by one optimizer step.
    pub fn train_step(&mut self, x: &[f32], x_shape: &[usize], labels: &[u32], opt: &mut Optimizer) -> Result<StepStats> {
        let stats = self.loss_and_grad(x, x_shape, labels)?;
        self.step(opt)?;
        Ok(stats)
    }

    /// Forward in evaluation mode and the loss and accuracy against `labels`; no gradients.
    pub fn eval_batch(&mut self, x: &[f32], x_shape: &[usize], labels: &[u32]) -> Result<StepStats> {
        let p = self.prepare(x_shape, x.len(), Mode::Eval, "evaluation")?;
        let classes = self.check_labels(p, labels)?;
        self.run_infer(p, x)?;
        let out = self.topo.storage[self.topo.output];
        Ok(cross_entropy(&self.plans[p].vals[out], classes, labels, None))
    }

    /// Backward from a gradient of the output (same length as the output) after a forward in
    /// training mode, for losses other than cross-entropy. Gradients are written, not
    /// accumulated.
    pub fn backward(&mut self, output_grad: &[f32]) -> Result<()> {
        self.require_single("backward")?;
        let p = self.current.filter(|&p| self.plans[p].trained).ok_or(RuntimeError::NoTrainingForward)?;
        let out = self.topo.storage[self.topo.output];
        let plan = &mut self.plans[p];
        if output_grad.len() != plan.vals[out].len() {
            return Err(RuntimeError::OutputGradLength { expected: plan.vals[out].len(), got: output_grad.len() });
        }
        plan.ensure_grads();
        plan.grads[out].copy_from_slice(output_grad);
        self.grads_held = false;
        self.run_backward(p);
        self.grads_held = true;
        Ok(())
    }

    /// Runs the graph on one batch per graph input (in placeholder order, each `(values,
    /// shape)`, the batch first); the outputs are then read with [`Executor::output`]. A forward
    /// in [`Mode::Train`] keeps the activations for [`Executor::backward_many`]. Single-input,
    /// single-output graphs may use this too; training and evaluation against labels take
    /// graphs with one input and one output only.
    pub fn forward_many(&mut self, xs: &[(&[f32], &[usize])], mode: Mode) -> Result<()> {
        let p = self.prepare_many(xs, mode)?;
        // At most a few inputs: the slices are gathered on the stack.
        let mut data: [&[f32]; MAX_INLINE_INPUTS] = [&[]; MAX_INLINE_INPUTS];
        if xs.len() <= MAX_INLINE_INPUTS {
            for (d, (x, _)) in data.iter_mut().zip(xs) {
                *d = x;
            }
            return self.run_forward(p, &data[..xs.len()], mode, Keep::Every);
        }
        let data: Vec<&[f32]> = xs.iter().map(|(x, _)| *x).collect();
        self.run_forward(p, &data, mode, Keep::Every)
    }

    /// Number of graph inputs (placeholders).
    pub fn input_count(&self) -> usize {
        self.topo.inputs.len()
    }

    /// Number of values the graph returns.
    pub fn output_count(&self) -> usize {
        self.topo.outputs.len()
    }

    /// Shape and values of output `k` after the last forward (`None` before any forward, for
    /// `k` out of range, or for a value a fused evaluation forward did not keep).
    pub fn output(&self, k: usize) -> Option<(&[usize], &[f32])> {
        self.value(NodeId(*self.topo.outputs.get(k)?))
    }

    /// Backward from one gradient per output (in output order, each the length of its output)
    /// after a [`Executor::forward_many`] in training mode. Where two outputs are the same value,
    /// or one output is read by the nodes computing another, the gradients are summed.
    /// Parameter and input gradients are written, not accumulated.
    pub fn backward_many(&mut self, output_grads: &[&[f32]]) -> Result<()> {
        let p = self.current.filter(|&p| self.plans[p].trained).ok_or(RuntimeError::NoTrainingForward)?;
        let outputs = &self.topo.outputs;
        if output_grads.len() != outputs.len() {
            return Err(RuntimeError::OutputGrads { expected: outputs.len(), got: output_grads.len() });
        }
        let plan = &mut self.plans[p];
        for (k, (&o, g)) in outputs.iter().zip(output_grads).enumerate() {
            let expected = plan.vals[self.topo.storage[o]].len();
            if g.len() != expected {
                return Err(RuntimeError::OutputGradLengthOf { index: k, expected, got: g.len() });
            }
        }
        plan.ensure_grads();
        for (k, (&o, g)) in outputs.iter().zip(output_grads).enumerate() {
            let s = self.topo.storage[o];
            // The first output stored in a buffer writes it, later ones add (in output order).
            if outputs[..k].iter().any(|&e| self.topo.storage[e] == s) {
                plan.grads[s].iter_mut().zip(g.iter()).for_each(|(d, v)| *d += v);
            } else {
                plan.grads[s].copy_from_slice(g);
            }
        }
        self.grads_held = false;
        self.run_backward(p);
        self.grads_held = true;
        Ok(())
    }

    /// Gradient with respect to graph input `k` from the last backward, when
    /// [`Executor::set_keep_input_grad`] asked for it; `None` also when nothing differentiable
    /// reads that input (PyTorch leaves its `.grad` unset then).
    pub fn input_grad_of(&self, k: usize) -> Option<&[f32]> {
        let plan = &self.plans[self.current?];
        let s = self.topo.storage[*self.topo.inputs.get(k)?];
        (self.keep_input_grad && !plan.grads.is_empty() && self.grad_plan.written[s]).then(|| plan.grads[s].as_slice())
    }

    /// Current values of all parameters and buffers, in state-dict order.
    pub fn params(&self) -> ParamStore {
        store_from_slots(&self.params)
    }

    /// Replaces every parameter and buffer with the tensor of the same name in `p`, checking
    /// shapes. Entries of `p` that the executor does not hold are ignored.
    pub fn load_params(&mut self, p: &ParamStore) -> Result<()> {
        for s in &self.params {
            let t = p
                .get(&s.name)
                .ok_or_else(|| RuntimeError::Param { name: s.name.clone(), reason: "missing from the parameters to load".into() })?;
            if t.shape != s.shape {
                return Err(RuntimeError::Param {
                    name: s.name.clone(),
                    reason: format!("shape {:?} expected, got {:?}", s.shape, t.shape),
                });
            }
        }
        for s in &mut self.params {
            if let Some(t) = p.get(&s.name) {
                s.data.copy_from_slice(&t.data);
            }
        }
        self.quant.params_changed();
        self.generation += 1;
        Ok(())
    }

    /// Replaces the values of one parameter or buffer, keeping the compiled plans.
    pub fn set_param(&mut self, name: &str, data: &[f32]) -> Result<()> {
        let s = self
            .params
            .iter_mut()
            .find(|s| s.name == name)
            .ok_or_else(|| RuntimeError::Param { name: name.to_string(), reason: "not a parameter of the graph".into() })?;
        if s.data.len() != data.len() {
            return Err(RuntimeError::Param {
                name: name.to_string(),
                reason: format!("{} values expected, got {}", s.data.len(), data.len()),
            });
        }
        s.data.copy_from_slice(data);
        self.quant.params_changed();
        self.generation += 1;
        Ok(())
    }

    /// The current values of one parameter or buffer.
    pub fn param(&self, name: &str) -> Option<&[f32]> {
        self.params.iter().find(|s| s.name == name).map(|s| s.data.as_slice())
    }

    /// Shape of the input batch of the last forward.
    pub fn last_input_shape(&self) -> Option<&[usize]> {
        Some(self.plans.get(self.current?)?.x_shape.as_slice())
    }

    /// Gradients of the trainable parameters from the last backward, in state-dict order.
    pub fn grads(&self) -> Vec<(String, Vec<f32>)> {
        self.params.iter().filter(|s| s.trainable).map(|s| (s.name.clone(), s.grad.clone())).collect()
    }

    /// Whether backward also computes the gradient of the graph input (off by default, since
    /// training does not need it). See [`Executor::input_grad`].
    pub fn set_keep_input_grad(&mut self, keep: bool) {
        if keep != self.keep_input_grad {
            self.keep_input_grad = keep;
            self.grad_plan = GradPlan::new(&self.graph, &self.topo, &self.params, keep);
        }
    }

    /// Selects the convolution algorithm ([`ConvAlgo::Fast`] by default). Changing it drops the
    /// compiled plans, so the next batch compiles its plan with the new choice.
    pub fn set_conv_algo(&mut self, algo: ConvAlgo) {
        if algo != self.conv_algo {
            self.conv_algo = algo;
            self.plans.clear();
            self.current = None;
            self.replicas = Replicas::default();
        }
    }

    /// Selects whether epilogues are fused ([`Fusion::On`] by default). The results are the same
    /// bits either way.
    pub fn set_fusion(&mut self, fusion: Fusion) {
        if fusion != self.fusion {
            self.fusion = fusion;
            self.replicas = Replicas::default();
        }
    }

    /// Whether epilogues are fused.
    pub fn fusion(&self) -> Fusion {
        self.fusion
    }

    /// The convolution algorithm the plans use.
    pub fn conv_algo(&self) -> ConvAlgo {
        self.conv_algo
    }

    /// Gradient of the loss with respect to the input batch from the last backward, when
    /// [`Executor::set_keep_input_grad`] asked for it.
    pub fn input_grad(&self) -> Option<&[f32]> {
        let plan = &self.plans[self.current?];
        (self.keep_input_grad && !plan.grads.is_empty()).then(|| plan.grads[self.topo.storage[self.topo.input]].as_slice())
    }

    /// Shape and values of a node's output from the last forward (`None` for integer-valued
    /// nodes or before any forward), e.g. for collecting activation statistics.
    pub fn value(&self, node: NodeId) -> Option<(&[usize], &[f32])> {
        let plan = &self.plans[self.current?];
        let s = *self.topo.storage.get(node.0)?;
        if plan.fused && plan.fusion.stale[s] {
            return None;
        }
        self.topo.is_tensor[node.0].then(|| (plan.shapes[node.0].as_slice(), plan.vals[s].as_slice()))
    }

    /// Refuses a graph with several inputs or outputs in a call that takes one of each.
    fn require_single(&self, call: &'static str) -> Result<()> {
        let (inputs, outputs) = (self.topo.inputs.len(), self.topo.outputs.len());
        if inputs != 1 || outputs != 1 {
            return Err(RuntimeError::NotSingle { call, inputs, outputs });
        }
        Ok(())
    }

    /// Checks the batch of a single-input, single-output call (`call` names it in the error),
    /// selects (or compiles) the plan for its shape, and returns its index.
    pub(crate) fn prepare(&mut self, x_shape: &[usize], x_len: usize, mode: Mode, call: &'static str) -> Result<usize> {
        self.require_single(call)?;
        if x_shape.first().is_none_or(|&n| n == 0) {
            return Err(RuntimeError::EmptyBatch { shape: x_shape.to_vec() });
        }
        let expected = x_shape.iter().product::<usize>();
        if x_len != expected {
            return Err(RuntimeError::InputLength { shape: x_shape.to_vec(), expected, got: x_len });
        }
        self.select_plan(std::slice::from_ref(&x_shape), mode)
    }

    /// Checks one batch per graph input and selects (or compiles) the plan for their shapes.
    fn prepare_many(&mut self, xs: &[(&[f32], &[usize])], mode: Mode) -> Result<usize> {
        if xs.len() != self.topo.inputs.len() {
            return Err(RuntimeError::InputBatches { expected: self.topo.inputs.len(), got: xs.len() });
        }
        for (k, (x, shape)) in xs.iter().enumerate() {
            if shape.first().is_none_or(|&n| n == 0) {
                return Err(RuntimeError::EmptyBatch { shape: shape.to_vec() });
            }
            let expected = shape.iter().product::<usize>();
            if x.len() != expected {
                let input = self.graph.node(NodeId(self.topo.inputs[k])).name.clone();
                return Err(RuntimeError::InputLengthOf { index: k, input, shape: shape.to_vec(), expected, got: x.len() });
            }
        }
        // At most a few inputs: the shapes are compared without collecting them.
        let p = self.plans.iter().position(|p| p.in_shapes.len() == xs.len() && p.in_shapes.iter().zip(xs).all(|(a, (_, b))| a == b));
        match p {
            Some(p) => self.select_plan_at(p, mode),
            None => {
                let shapes: Vec<&[usize]> = xs.iter().map(|(_, s)| *s).collect();
                self.select_plan(&shapes, mode)
            }
        }
    }

    /// The plan for input batches of `shapes` (compiled when new), checked for `mode`.
    fn select_plan(&mut self, shapes: &[&[usize]], mode: Mode) -> Result<usize> {
        let x_shape = shapes[0];
        let p = match self
            .plans
            .iter()
            .position(|p| p.in_shapes.len() == shapes.len() && p.in_shapes.iter().zip(shapes).all(|(a, b)| a == b))
        {
            Some(p) => p,
            None => {
                let threads = self.pool.as_ref().map_or(1, |p| p.current_num_threads());
                let owned: Vec<Vec<usize>> = shapes.iter().map(|s| s.to_vec()).collect();
                let plan = Plan::build(&self.graph, &self.topo, &self.params, &owned, threads, self.conv_algo)
                    .map_err(|e| self.explain(e, x_shape))?;
                if self.plans.len() >= MAX_PLANS {
                    self.plans.remove(0);
                    // Indices have shifted; the next forward sets the current plan again.
                    self.current = None;
                }
                self.plans.push(plan);
                self.plans.len() - 1
            }
        };
        self.select_plan_at(p, mode)
    }

    /// Checks plan `p` for `mode` and records its per-sample shape.
    fn select_plan_at(&mut self, p: usize, mode: Mode) -> Result<usize> {
        let x_shape = &self.plans[p].x_shape;
        if mode == Mode::Train {
            if let Some(e) = &self.plans[p].train_blocker {
                return Err(e.clone());
            }
        }
        if self.last_features.as_deref() != Some(&x_shape[1..]) {
            self.last_features = Some(x_shape[1..].to_vec());
        }
        Ok(p)
    }

    /// Turns a shape error at a layer fed directly by the graph input into one that says what
    /// the input should look like.
    fn explain(&self, e: RuntimeError, x_shape: &[usize]) -> RuntimeError {
        let RuntimeError::Ir(IrError::ShapeMismatch { node, .. }) = &e else { return e };
        let Some(id) = self.graph.find(node) else { return e };
        let n = self.graph.node(id);
        if n.inputs.first().map(|u| self.topo.storage[u.0]) != Some(self.topo.storage[self.topo.input]) {
            return e;
        }
        let (got, expected, what) = match &n.op {
            Op::Linear { in_features, .. } => (x_shape.last().copied(), *in_features, "features"),
            Op::BatchNorm1d(s) => (x_shape.get(1).copied(), s.num_features, "features"),
            Op::BatchNorm2d(s) => (x_shape.get(1).copied(), s.num_features, "channels"),
            Op::Conv1d(c) | Op::Conv2d(c) => (x_shape.get(1).copied(), c.in_channels, "channels"),
            _ => return e,
        };
        match got {
            Some(got) if got != expected => {
                RuntimeError::InputFeatures { input: self.graph.node(NodeId(self.topo.input)).name.clone(), what, got, expected }
            }
            _ => e,
        }
    }

    /// Per-sample input shape: the last batch's, else the placeholder's metadata, else what the
    /// first layer reading the input implies (a linear layer or a batch norm on `[N, C]`).
    fn feature_shape(&self) -> Result<Vec<usize>> {
        if let Some(s) = &self.last_features {
            return Ok(s.clone());
        }
        let input = self.graph.node(NodeId(self.topo.input));
        if let Some(ArgMeta::Tensor(t)) = input.meta.common.results.get("data_out_0") {
            if t.shape.len() > 1 {
                return Ok(t.shape[1..].to_vec());
            }
        }
        for u in self.graph.users(NodeId(self.topo.input)) {
            match &self.graph.node(u).op {
                Op::Linear { in_features, .. } => return Ok(vec![*in_features]),
                Op::BatchNorm1d(s) => return Ok(vec![s.num_features]),
                _ => {}
            }
        }
        Err(RuntimeError::UnknownInputShape { input: input.name.clone() })
    }

    /// Checks labels against the output of plan `p` and returns the number of classes.
    fn check_labels(&self, p: usize, labels: &[u32]) -> Result<usize> {
        let plan = &self.plans[p];
        let shape = &plan.shapes[self.topo.output];
        let (batch, classes) = match shape.as_slice() {
            [n, c] => (*n, *c),
            _ => {
                let node =
                    self.graph.node(NodeId(self.topo.output)).inputs.first().map(|u| self.graph.node(*u).name.clone()).unwrap_or_default();
                return Err(RuntimeError::LossShape { node, shape: shape.clone() });
            }
        };
        if labels.len() != batch {
            return Err(RuntimeError::LabelCount { got: labels.len(), batch });
        }
        if let Some((index, &label)) = labels.iter().enumerate().find(|(_, &l)| l as usize >= classes) {
            return Err(RuntimeError::LabelOutOfRange { index, label, classes });
        }
        Ok(classes)
    }

    /// The pool, when plan `p` has a value large enough for the kernels to share their work out
    /// ([`crate::par::PAR_MIN_WORK`] elements or more; below that every kernel stays on the
    /// calling thread).
    fn pool_for(&self, p: usize) -> Option<Arc<ThreadPool>> {
        self.pool.clone().filter(|_| self.plans[p].vals.iter().any(|v| v.len() >= crate::par::PAR_MIN_WORK))
    }

    /// The forward pass of plan `p`, on one of the pool's threads when its kernels use the
    /// pool ([`Executor::pool_for`]). A kernel shares its work out with `install` or a parallel
    /// iterator, which from inside the pool run on it directly; from the calling thread every
    /// one of them would hand its work to the pool and wait for it, two thread switches per
    /// kernel. On a 2-core Zen 5 VM those switches made tfc's training step slower on two
    /// threads than on one (485 against 455 us; 392 us run inside the pool). The small taggers,
    /// whose kernels never use the pool, stay on the calling thread: one hand-over per pass
    /// made jsc-three-layer's step 1.8x slower.
    fn run_forward(&mut self, p: usize, xs: &[&[f32]], mode: Mode, keep: Keep) -> Result<()> {
        match self.pool_for(p) {
            Some(pool) => pool.install(|| self.run_forward_here(p, xs, mode, keep)),
            None => self.run_forward_here(p, xs, mode, keep),
        }
    }

    fn run_forward_here(&mut self, p: usize, xs: &[&[f32]], mode: Mode, keep: Keep) -> Result<()> {
        let Plan { vals, kerns, trained, ins, quant, fusion, fused, .. } = &mut self.plans[p];
        for (&input, x) in self.topo.inputs.iter().zip(xs) {
            vals[self.topo.storage[input]].copy_from_slice(x);
        }
        let train = mode == Mode::Train;
        let fuse = !train && keep == Keep::Output && self.fusion == Fusion::On;
        for (i, kern) in kerns.iter_mut().enumerate() {
            if matches!(kern, NodeKernel::Nop) || (fuse && fusion.inside[i]) {
                continue;
            }
            // The head of a fused chain writes the chain's last value.
            let (out, epilogue) = match fusion.heads[i].as_mut().filter(|_| fuse) {
                Some(c) => (c.last, Some(&mut c.epilogue)),
                None => (i, None),
            };
            // A fused chain runs its nodes' output quantizers itself.
            let chain = epilogue.is_some();
            // Quantized nodes read quantized copies of their inputs and parameters.
            quant[i].inputs(vals, &mut self.quant.rng);
            self.quant.swap_in(i, &mut self.params);
            // The output buffer is lent out so the kernel can read every other buffer.
            let mut y = std::mem::take(&mut vals[out]);
            let mut cx = Fwd {
                vals,
                ins: &ins[i],
                params: &mut self.params,
                train,
                pool: self.pool.as_deref(),
                rng: &mut self.rng,
                epilogue,
                params_generation: Some(self.generation),
            };
            kern.forward(&mut cx, &mut y);
            self.quant.swap_out(i, &mut self.params);
            if !chain {
                quant[out].output(vals, &mut y, &mut self.quant.rng);
            }
            vals[out] = y;
            if let Some(bad) = kern.take_bad_id() {
                self.current = None;
                return Err(bad_id_error(&self.graph, i, bad));
            }
        }
        *trained = train;
        *fused = fuse;
        self.current = Some(p);
        if train {
            // Batch norm has updated its running statistics.
            self.generation += 1;
        }
        Ok(())
    }

    /// Evaluation forward of plan `p`: cut into slices run by the replicas when the pool, the
    /// graph and the batch allow it (`crate::infer`), else [`Executor::run_forward`].
    fn run_infer(&mut self, p: usize, x: &[f32]) -> Result<()> {
        let threads = self.pool.as_ref().map_or(1, |pool| pool.current_num_threads());
        let rows = if threads > 1 { self.work_per_row(p).and_then(|w| infer::slices(self.plans[p].x_shape[0], threads, w)) } else { None };
        let (Some(rows), Some(pool)) = (rows, &self.pool) else {
            return self.run_forward(p, &[x], Mode::Eval, Keep::Output);
        };
        let source = ReplicaSource {
            graph: &self.graph,
            params: &self.params,
            generation: self.generation,
            seed: self.seed,
            conv_algo: self.conv_algo,
            fusion: self.fusion,
        };
        let plan = &mut self.plans[p];
        let out = self.topo.storage[self.topo.output];
        self.replicas.run(source, pool, x, &plan.x_shape, &rows, &mut plan.vals[out])?;
        plan.trained = false;
        // The other values of the plan were not computed.
        self.current = None;
        Ok(())
    }

    /// Work per sample of an evaluation forward, when batches of plan `p`'s per-sample shape
    /// may be cut into slices.
    fn work_per_row(&mut self, p: usize) -> Option<usize> {
        let features = &self.plans[p].x_shape[1..];
        if self.locality.as_ref().is_none_or(|l| l.features != features) {
            let consts = |name: &str| self.params.iter().find(|s| s.name == name).map(|s| s.shape.clone());
            let work_per_row = infer::batch_local(&self.graph, features, &consts);
            self.locality = Some(Locality { features: features.to_vec(), work_per_row });
        }
        self.locality.as_ref().and_then(|l| l.work_per_row)
    }

    /// Copies the parameters and buffers of an executor of the same graph.
    pub(crate) fn copy_params_from(&mut self, src: &[ParamSlot]) {
        for (d, s) in self.params.iter_mut().zip(src) {
            d.data.copy_from_slice(&s.data);
        }
        self.quant.params_changed();
        self.generation += 1;
    }

    /// The backward pass of plan `p`, on the pool as [`Executor::run_forward`].
    fn run_backward(&mut self, p: usize) {
        match self.pool_for(p) {
            Some(pool) => pool.install(|| self.run_backward_here(p)),
            None => self.run_backward_here(p),
        }
    }

    fn run_backward_here(&mut self, p: usize) {
        let Plan { vals, grads, kerns, ins: read, quant, fusion, .. } = &mut self.plans[p];
        let pool = self.pool.as_deref();
        // While accumulating, every parameter gradient adds to the one held.
        let held = self.grads_held;
        let fuse = self.fusion == Fusion::On;
        for i in (0..kerns.len()).rev() {
            let g = &self.grad_plan.nodes[i];
            // A ReLU whose batch norm runs its backward (`crate::fuse`) is skipped.
            if !g.active || (fuse && fusion.relu_in_norm[i]) {
                continue;
            }
            // A batch norm with its ReLU fused in reads the ReLU's output gradient and output.
            let (dy, relu_out) = match fusion.norm_relu[i].filter(|_| fuse) {
                Some(k) => (&grads[k], Some(vals[k].as_slice())),
                None => (&grads[i], None),
            };
            // Kernels read the (quantized) operands they saw in forward and their unquantized
            // output; each input's gradient goes to the float original (straight-through).
            let (ins, grad_ins) = (&read[i], &self.topo.ins[i]);
            let y = quant[i].output.as_ref().map_or(i, |q| q.raw);
            self.quant.swap_in(i, &mut self.params);
            let param_acc = if held { g.param_acc.map(|_| Accum::Add) } else { g.param_acc };
            let mut cx = Bwd { vals, ins, y: &vals[y], dy, params: &mut self.params, param_acc, pool, relu_out };
            kerns[i].backward_params(&mut cx);
            for (k, acc) in g.input_acc.iter().enumerate() {
                let Some(acc) = *acc else { continue };
                let s = grad_ins[k];
                let mut dx = std::mem::take(&mut grads[s]);
                let (dy, relu_out) = match fusion.norm_relu[i].filter(|_| fuse) {
                    Some(r) => (&grads[r], Some(vals[r].as_slice())),
                    None => (&grads[i], None),
                };
                let cx = Bwd { vals, ins, y: &vals[y], dy, params: &mut self.params, param_acc: None, pool, relu_out };
                kerns[i].backward_input(&cx, k, &mut dx, acc);
                grads[s] = dx;
            }
            self.quant.swap_out(i, &mut self.params);
        }
    }
}

/// The error of an embedding id that is not a row of node `i`'s table.
pub(crate) fn bad_id_error(graph: &Graph, i: usize, bad: crate::kernels::attention::BadId) -> RuntimeError {
    let node = graph.node(NodeId(i)).name.clone();
    RuntimeError::EmbeddingId { node, index: bad.index, value: bad.value, num_embeddings: bad.num_embeddings }
}
