//! SGD, Adam and AdamW with PyTorch's update formulas (`torch.optim`, single-tensor path).
//!
//! Hyper-parameters are `f32` in the API but Python floats in PyTorch, so scalars such as the
//! bias corrections are computed in f64 from the decimal value the user wrote (`0.9`, not the
//! f32 nearest to it), then rounded to f32 where PyTorch's kernels round them.

use crate::slots::ParamSlot;
use crate::{Result, RuntimeError};
use mase_ir::ParamStore;
use serde::{Deserialize, Serialize};

/// Which optimizer, with its hyper-parameters (PyTorch's names and meanings).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum OptimizerKind {
    /// `torch.optim.SGD`; `weight_decay` is added to the gradient.
    Sgd { momentum: f32, dampening: f32, weight_decay: f32, nesterov: bool },
    /// `torch.optim.Adam`; `weight_decay` is L2, added to the gradient.
    Adam { beta1: f32, beta2: f32, eps: f32, weight_decay: f32 },
    /// `torch.optim.AdamW`; `weight_decay` is decoupled: `p *= 1 - lr * weight_decay` first.
    AdamW { beta1: f32, beta2: f32, eps: f32, weight_decay: f32 },
}

impl OptimizerKind {
    /// PyTorch's class name (`Adam`), as Lightning's `LearningRateMonitor` logs it (`lr-Adam`).
    pub fn name(&self) -> &'static str {
        match self {
            OptimizerKind::Sgd { .. } => "SGD",
            OptimizerKind::Adam { .. } => "Adam",
            OptimizerKind::AdamW { .. } => "AdamW",
        }
    }

    /// Names of the per-parameter state buffers, as in PyTorch's `optimizer.state`.
    pub fn buffer_names(&self) -> &'static [&'static str] {
        match self {
            OptimizerKind::Sgd { momentum, .. } if *momentum == 0.0 => &[],
            OptimizerKind::Sgd { .. } => &["momentum_buffer"],
            OptimizerKind::Adam { .. } | OptimizerKind::AdamW { .. } => &["exp_avg", "exp_avg_sq"],
        }
    }
}

/// Everything needed to resume an optimizer: the step count, the learning rate and the named
/// per-parameter buffers (`exp_avg.seq_blocks.2.weight`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OptimizerState {
    pub step: u64,
    pub lr: f32,
    pub buffers: Vec<(String, Vec<f32>)>,
}

/// State buffers of one parameter, in [`OptimizerKind::buffer_names`] order. Empty until the
/// first step that updates the parameter.
#[derive(Clone, Debug)]
struct Slot {
    name: String,
    bufs: Vec<Vec<f32>>,
}

/// The per-step scalars of an update, derived from the hyper-parameters, the lr and the step.
#[derive(Clone, Copy, Debug)]
enum Rule {
    Sgd { neg_lr: f32, momentum: f32, keep: f32, wd: f32, nesterov: bool },
    Adam { decay: Option<f32>, wd: f32, w1: f32, beta2: f32, w2: f32, neg_step: f32, bc2_sqrt: f32, eps: f32 },
}

/// An optimizer. `kind` and `lr` may be changed between steps (the LR schedule sets `lr`).
#[derive(Clone, Debug)]
pub struct Optimizer {
    pub kind: OptimizerKind,
    pub lr: f32,
    step: u64,
    slots: Vec<Slot>,
    /// The executor this optimizer last stepped and, for each of its parameter slots, the state
    /// slot that goes with it (`None` for parameters it does not update).
    binding: Option<(u64, Vec<Option<usize>>)>,
    /// Hyper-parameters widened to f64, cached so that steps do not re-parse them.
    widened: Option<(OptimizerKind, f32, [f64; 5])>,
}

/// The f64 value of the shortest decimal that rounds to `x` (`0.9f32` -> `0.9`), which is what
/// a user who wrote `0.9` in a config gave PyTorch.
fn decimal(x: f32) -> f64 {
    use std::io::Write;
    // Formatted on the stack: the lr changes every epoch and steps must not allocate.
    let mut buf = [0u8; 64];
    let mut cur = std::io::Cursor::new(&mut buf[..]);
    if write!(cur, "{x}").is_err() {
        return f64::from(x);
    }
    let len = cur.position() as usize;
    std::str::from_utf8(&buf[..len]).ok().and_then(|s| s.parse().ok()).unwrap_or(f64::from(x))
}

impl Optimizer {
    pub fn new(kind: OptimizerKind, lr: f32) -> Optimizer {
        Optimizer { kind, lr, step: 0, slots: Vec::new(), binding: None, widened: None }
    }

    /// Steps taken so far.
    pub fn step_count(&self) -> u64 {
        self.step
    }

    /// A snapshot for checkpoints.
    pub fn state(&self) -> OptimizerState {
        let names = self.kind.buffer_names();
        let mut buffers = Vec::new();
        for s in &self.slots {
            for (b, data) in names.iter().zip(&s.bufs) {
                buffers.push((format!("{b}.{}", s.name), data.clone()));
            }
        }
        OptimizerState { step: self.step, lr: self.lr, buffers }
    }

    /// Restores a snapshot taken by [`Optimizer::state`] for the same kind of optimizer.
    pub fn load_state(&mut self, s: OptimizerState) -> Result<()> {
        let names = self.kind.buffer_names();
        let mut slots: Vec<Slot> = Vec::new();
        for (full, data) in s.buffers {
            let Some((k, param)) =
                names.iter().enumerate().find_map(|(k, b)| full.strip_prefix(b).and_then(|r| r.strip_prefix('.')).map(|p| (k, p)))
            else {
                return Err(RuntimeError::OptimizerState {
                    name: full,
                    reason: format!("not a state buffer of {} (expected {names:?})", self.kind.name()),
                });
            };
            let at = match slots.iter().position(|sl| sl.name == param) {
                Some(i) => i,
                None => {
                    slots.push(Slot { name: param.to_string(), bufs: vec![Vec::new(); names.len()] });
                    slots.len() - 1
                }
            };
            slots[at].bufs[k] = data;
        }
        for sl in &slots {
            if let Some(k) = sl.bufs.iter().position(|b| b.len() != sl.bufs[0].len() || b.is_empty()) {
                return Err(RuntimeError::OptimizerState {
                    name: format!("{}.{}", names[k], sl.name),
                    reason: "missing, empty, or of a different length than its partner buffer".into(),
                });
            }
        }
        self.slots = slots;
        self.step = s.step;
        self.lr = s.lr;
        self.binding = None;
        Ok(())
    }

    /// One step over parameters held in a store, with gradients as [`crate::Executor::grads`]
    /// returns them. Parameters without a gradient entry are left alone.
    pub fn step(&mut self, params: &mut ParamStore, grads: &[(String, Vec<f32>)]) -> Result<()> {
        // Check everything first so that an error leaves the parameters untouched.
        let mut targets = Vec::with_capacity(grads.len());
        for (name, g) in grads {
            let t = params.get(name).ok_or_else(|| RuntimeError::Param {
                name: name.clone(),
                reason: "has a gradient but is not in the parameter store".into(),
            })?;
            if t.data.len() != g.len() {
                return Err(RuntimeError::Param {
                    name: name.clone(),
                    reason: format!("gradient has {} values, the parameter {}", g.len(), t.data.len()),
                });
            }
            targets.push(self.slot_for(name, g.len())?);
        }
        self.step += 1;
        let rule = self.rule();
        for ((name, g), slot) in grads.iter().zip(targets) {
            if let Some(t) = params.get_mut(name) {
                update(rule, &mut t.data, g, &mut self.slots[slot].bufs);
            }
        }
        Ok(())
    }

    /// One step over the executor's slots: every trainable parameter that the loss reaches.
    pub(crate) fn step_slots(&mut self, key: u64, params: &mut [ParamSlot]) -> Result<()> {
        if !matches!(&self.binding, Some((k, order)) if *k == key && order.len() == params.len()) {
            let mut order = Vec::with_capacity(params.len());
            for p in params.iter() {
                order.push(if p.trainable && p.reached { Some(self.slot_for(&p.name, p.data.len())?) } else { None });
            }
            self.binding = Some((key, order));
        }
        self.step += 1;
        let rule = self.rule();
        let Some((_, order)) = &self.binding else { return Ok(()) };
        for (p, o) in params.iter_mut().zip(order) {
            if let Some(s) = *o {
                update(rule, &mut p.data, &p.grad, &mut self.slots[s].bufs);
            }
        }
        Ok(())
    }

    /// The state slot of parameter `name` (created empty when new), checking that its buffers
    /// fit a parameter of `len` values.
    fn slot_for(&mut self, name: &str, len: usize) -> Result<usize> {
        let at = match self.slots.iter().position(|s| s.name == name) {
            Some(i) => i,
            None => {
                self.slots.push(Slot { name: name.to_string(), bufs: Vec::new() });
                self.slots.len() - 1
            }
        };
        if let Some(b) = self.slots[at].bufs.iter().find(|b| b.len() != len) {
            return Err(RuntimeError::OptimizerState {
                name: name.to_string(),
                reason: format!("state buffers have {} values, the parameter has {len}", b.len()),
            });
        }
        Ok(at)
    }

    /// The scalars of the current step (call after incrementing `step`).
    fn rule(&mut self) -> Rule {
        let w = match self.widened {
            Some((k, lr, w)) if k == self.kind && lr == self.lr => w,
            _ => {
                let w = match self.kind {
                    OptimizerKind::Sgd { momentum, dampening, weight_decay, .. } => {
                        [decimal(momentum), decimal(dampening), decimal(weight_decay), 0.0, 0.0]
                    }
                    OptimizerKind::Adam { beta1, beta2, eps, weight_decay } | OptimizerKind::AdamW { beta1, beta2, eps, weight_decay } => {
                        [decimal(beta1), decimal(beta2), decimal(eps), decimal(weight_decay), 0.0]
                    }
                };
                let w = [w[0], w[1], w[2], w[3], decimal(self.lr)];
                self.widened = Some((self.kind, self.lr, w));
                w
            }
        };
        let lr = w[4];
        match self.kind {
            OptimizerKind::Sgd { nesterov, .. } => {
                Rule::Sgd { neg_lr: (-lr) as f32, momentum: w[0] as f32, keep: (1.0 - w[1]) as f32, wd: w[2] as f32, nesterov }
            }
            OptimizerKind::Adam { .. } | OptimizerKind::AdamW { .. } => {
                let (beta1, beta2, eps, wd) = (w[0], w[1], w[2], w[3]);
                let t = self.step as f64;
                let bc1 = 1.0 - beta1.powf(t);
                let bc2 = 1.0 - beta2.powf(t);
                let decoupled = matches!(self.kind, OptimizerKind::AdamW { .. });
                Rule::Adam {
                    decay: decoupled.then_some((1.0 - lr * wd) as f32),
                    wd: if decoupled { 0.0 } else { wd as f32 },
                    w1: (1.0 - beta1) as f32,
                    beta2: beta2 as f32,
                    w2: (1.0 - beta2) as f32,
                    neg_step: (-(lr / bc1)) as f32,
                    bc2_sqrt: bc2.sqrt() as f32,
                    eps: eps as f32,
                }
            }
        }
    }
}

/// `torch.lerp(a, b, w)` as PyTorch computes it (two forms for numerical symmetry).
#[inline(always)]
fn lerp(a: f32, b: f32, w: f32) -> f32 {
    if w.abs() < 0.5 {
        a + w * (b - a)
    } else {
        b - (b - a) * (1.0 - w)
    }
}

/// Updates one parameter in place. `bufs` is empty before the parameter's first step.
fn update(rule: Rule, p: &mut [f32], g: &[f32], bufs: &mut Vec<Vec<f32>>) {
    match rule {
        Rule::Sgd { neg_lr, momentum, keep, wd, nesterov } => {
            let first = bufs.is_empty();
            if momentum != 0.0 && first {
                bufs.push(vec![0.0; p.len()]);
            }
            for i in 0..p.len() {
                let mut d = g[i];
                if wd != 0.0 {
                    d += wd * p[i];
                }
                if momentum != 0.0 {
                    let buf = &mut bufs[0][i];
                    // PyTorch's momentum buffer starts as a copy of the first gradient.
                    *buf = if first { d } else { *buf * momentum + keep * d };
                    d = if nesterov { d + momentum * *buf } else { *buf };
                }
                p[i] += neg_lr * d;
            }
        }
        Rule::Adam { decay, wd, w1, beta2, w2, neg_step, bc2_sqrt, eps } => {
            if bufs.is_empty() {
                bufs.push(vec![0.0; p.len()]);
                bufs.push(vec![0.0; p.len()]);
            }
            let (m, v) = bufs.split_at_mut(1);
            if let Some(f) = decay {
                p.iter_mut().for_each(|x| *x *= f);
            }
            let step = |p: &mut f32, g: f32, m: &mut f32, v: &mut f32| {
                *m = lerp(*m, g, w1);
                *v = *v * beta2 + w2 * g * g;
                let denom = v.sqrt() / bc2_sqrt + eps;
                *p += neg_step * *m / denom;
            };
            let it = p.iter_mut().zip(g).zip(m[0].iter_mut().zip(v[0].iter_mut()));
            // Separate loops keep the weight-decay test out of the vectorised body.
            if wd != 0.0 {
                it.for_each(|((p, &g), (m, v))| {
                    let g = g + wd * *p;
                    step(p, g, m, v)
                });
            } else {
                it.for_each(|((p, &g), (m, v))| step(p, g, m, v));
            }
        }
    }
}
