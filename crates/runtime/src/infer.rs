//! Batch-parallel inference: an evaluation batch cut into one slice of rows per thread, each
//! slice run by a single-threaded replica of the executor.
//!
//! Why: the kernels of small models (the jsc taggers, MLPs such as tfc) are too small to share
//! out inside one layer, so a second thread only pays when each thread runs the whole forward
//! pass on its own rows. In evaluation no layer mixes samples (batch norm uses its running
//! statistics, dropout is off), so the rows of a slice come out as they would in the whole batch.
//!
//! Same bits as one thread: a slice has more than 64 rows, which keeps every matrix product of a
//! slice on the `gemm` crate's general path, where the summation blocks depend on the inner
//! dimension alone (see `gemm.rs`); every other kernel computes each row on its own. A graph is
//! cut only when that holds for all of it ([`batch_local`]): each value either carries the batch
//! as its leading dimension or does not depend on the batch at all, nothing reduces along the
//! batch, and no quantizer looks at more than one sample or draws random numbers.

use crate::executor::{ExecOptions, Executor};
use crate::slots::store_from_slots;
use crate::Result;
use mase_ir::{Graph, IndexItem, Op, OpFamily, QuantFormat, ValueInfo};
use mase_quant::Reach;
use rayon::prelude::*;

/// The fewest rows of a slice: more than the 64 below which `gemm` may take its small-matrix
/// paths, whose summation order differs.
pub(crate) const MIN_SLICE_ROWS: usize = 65;

/// Work of a batch (multiply-adds plus values written) below which waking the pool costs more
/// than a second thread saves. On a 2-core Zen 5 VM (2026-12-07), where waking a pool thread
/// takes tens of microseconds, a jsc-three-layer batch of 256 rows (about 1.2 M of work, 17 us
/// on one thread) ran at 6-15 M rows/s cut in two against 14-15 M whole, while tfc's (15 M of
/// work) ran 1.6x faster cut; the limit sits between them (it was `1 << 19`, which cut both).
const MIN_SPLIT_WORK: usize = 1 << 22;

/// The single-threaded copies of an executor that run the slices.
#[derive(Default)]
pub(crate) struct Replicas {
    execs: Vec<Executor>,
    /// The parameter generation of the executor that the replicas hold.
    synced: u64,
}

/// Whether a batch may be cut, decided once per per-sample input shape.
#[derive(Clone, Debug)]
pub(crate) struct Locality {
    pub features: Vec<usize>,
    /// Work per sample when the graph may be cut; `None` when it may not.
    pub work_per_row: Option<usize>,
}

/// Row counts of the slices of a batch of `rows` for `threads` threads, or `None` when the batch
/// is better run whole (too small, or too little work).
pub(crate) fn slices(rows: usize, threads: usize, work_per_row: usize) -> Option<Vec<usize>> {
    let t = threads.min(rows / MIN_SLICE_ROWS);
    if t < 2 || rows.saturating_mul(work_per_row) < MIN_SPLIT_WORK {
        return None;
    }
    Some((0..t).map(|i| rows / t + usize::from(i < rows % t)).collect())
}

/// Whether the graph's evaluation forward pass treats each sample on its own for inputs of
/// per-sample shape `features`, and if so its work per sample. Shapes are inferred at two batch
/// sizes: every value must keep its shape (a batch-free value, such as a constant) or carry the
/// batch as its leading dimension at both, and a value computed from a batch-carrying one must
/// carry the batch too.
pub(crate) fn batch_local(graph: &Graph, features: &[usize], constant_shape: &dyn Fn(&str) -> Option<Vec<usize>>) -> Option<usize> {
    let (a, b) = (MIN_SLICE_ROWS, MIN_SLICE_ROWS + 1);
    let shape_at = |n: usize| {
        let mut s = vec![n];
        s.extend_from_slice(features);
        graph.infer_shapes(&[s], constant_shape).ok()
    };
    let (sa, sb) = (shape_at(a)?, shape_at(b)?);
    let mut carries = vec![false; graph.len()];
    let mut work = 0usize;
    for (i, node) in graph.nodes().iter().enumerate() {
        let (ValueInfo::Tensor(x), ValueInfo::Tensor(y)) = (&sa[i], &sb[i]) else {
            // Integers (`x.size(0)`) follow the batch; the shapes they build are checked where used.
            carries[i] = true;
            continue;
        };
        let from_batch = matches!(node.op, Op::Input) || node.inputs.iter().any(|u| carries[u.0]);
        carries[i] = if x == y {
            false
        } else if x.first() == Some(&a) && y.first() == Some(&b) && x[1..] == y[1..] {
            true
        } else {
            return None;
        };
        if from_batch && !carries[i] && !matches!(node.op, Op::Output) {
            return None;
        }
        // Dims count against the input's rank (a reduction without keepdim drops some).
        let rank = node.inputs.first().map_or(x.len(), |u| sa[u.0].shape().len());
        if carries[i] && !row_wise(&node.op, rank) {
            return None;
        }
        if let Some(q) = node.quant.as_ref().filter(|q| q.is_active()) {
            let data = q.data_in.iter().flatten().chain(q.data_out.as_ref());
            let params = q.weight.iter().chain(q.bias.as_ref());
            if !data.into_iter().all(per_value) || !params.into_iter().all(deterministic) {
                return None;
            }
        }
        // Only values that carry the batch cost work per row; a batch-free value (a constant, which
        // may be a rank-0 scalar) is computed once.
        if carries[i] {
            let per_row = x[1..].iter().product::<usize>();
            work = work.saturating_add(per_row.saturating_mul(1 + inner_dim(&node.op, node.inputs.first().map(|u| sa[u.0].shape()))));
        }
    }
    Some(work.max(1))
}

/// Whether an op that carries the batch computes each row from the same row of its inputs, for
/// a first input of rank `rank`.
fn row_wise(op: &Op, rank: usize) -> bool {
    let touches_batch = |d: i64| d == 0 || d + rank as i64 == 0;
    match op {
        Op::Softmax { dim } | Op::LogSoftmax { dim } => !touches_batch(*dim),
        Op::Transpose { dim0, dim1 } => !touches_batch(*dim0) && !touches_batch(*dim1),
        Op::Permute { dims } => dims.first().is_some_and(|&d| touches_batch(d)),
        Op::Flatten { start_dim, .. } => !touches_batch(*start_dim) || rank == 1,
        Op::Concat { dim } => !touches_batch(*dim),
        // Stacking adds a dimension: the batch stays first unless the new one goes before it.
        Op::Stack { dim } => *dim != 0 && *dim + rank as i64 + 1 != 0,
        Op::Index { items } => index_keeps_batch(items, rank),
        // Without new leading dimensions, an expanded row comes from its own input row (or from
        // the only row of a batch-free input).
        Op::Expand { shape } => shape.len() == rank,
        Op::Repeat { repeats } => repeats.len() == rank && repeats.first() == Some(&1),
        // A reduction of every element (empty `dims`) mixes the batch; otherwise it is row-wise
        // when none of its dims is the batch's.
        Op::Mean(r) | Op::Sum(r) | Op::Amax(r) => !r.dims.is_empty() && !r.dims.iter().any(|&d| touches_batch(d)),
        // Row-wise when both operands and the output start with the same (batch) letter.
        Op::Einsum { equation } => mase_ir::Contraction::parse(equation).is_ok_and(|c| {
            let first = c.output.first();
            first.is_some() && c.operands.iter().all(|o| o.first() == first)
        }),
        // Query, key and value share their batch dimension (a mask, when there is one, mixes
        // no rows: the batch check of `batch_local` has seen its shape).
        Op::ScaledDotProductAttention { .. } => rank > 2,
        // Each id's row comes from the table alone.
        Op::Embedding { .. } => true,
        other => match other.family() {
            // Element-wise ops and per-sample layers (batch norm uses its running statistics in
            // evaluation, dropout is off).
            OpFamily::Graph | OpFamily::Linear | OpFamily::Conv | OpFamily::Norm | OpFamily::Pointwise => true,
            OpFamily::Pool | OpFamily::AdaptivePool | OpFamily::Binary | OpFamily::MatMul => true,
            // The other shape changes (view, size, pad), whose batch dimension the shape check of
            // `batch_local` has already seen kept first; softmax decides by its dim above.
            OpFamily::Shape | OpFamily::Softmax => true,
            // Decided by their dims above.
            OpFamily::Reduce => false,
            // Never run by the executor (`Plan::build` refuses it).
            OpFamily::Opaque => false,
            // Decided per op above.
            OpFamily::Attention | OpFamily::Embedding => false,
        },
    }
}

/// Whether a subscript reads the batch dimension (the first) whole and keeps it first.
fn index_keeps_batch(items: &[IndexItem], rank: usize) -> bool {
    match items.first() {
        None => true,
        Some(IndexItem::Ellipsis) => items.iter().filter(|i| !matches!(i, IndexItem::Ellipsis | IndexItem::NewAxis)).count() < rank,
        Some(first) => *first == IndexItem::full(),
    }
}

/// The length of the sum behind each output value (1 for element-wise ops), for the work estimate.
fn inner_dim(op: &Op, x: Option<&[usize]>) -> usize {
    match op {
        Op::Linear { in_features, .. } => *in_features,
        Op::Conv1d(c) | Op::Conv2d(c) => c.in_channels / c.groups.max(1) * c.kernel.iter().product::<usize>(),
        Op::MatMul => x.and_then(|s| s.last().copied()).unwrap_or(1),
        // Two products over the head size and the key length.
        Op::ScaledDotProductAttention { .. } => x.and_then(|s| s.last().copied()).unwrap_or(1) * 2,
        // An estimate only: a pooling window or a norm counts as one operation per value.
        _ => 1,
    }
}

/// Whether a format quantizes each value of a data tensor without looking at other samples or
/// drawing random numbers.
fn per_value(f: &QuantFormat) -> bool {
    let within_a_sample = match mase_quant::reach(f) {
        Reach::Value | Reach::Row => true,
        Reach::Tensor => false,
    };
    within_a_sample && deterministic(f)
}

/// Whether a format draws no random numbers (replicas would draw different ones).
fn deterministic(f: &QuantFormat) -> bool {
    !mase_quant::draws_random(f)
}

impl Replicas {
    /// Runs the slices `rows` of the batch `x` on the replicas, in parallel on `pool`, and writes
    /// their outputs, in order, to `out`.
    pub(crate) fn run(
        &mut self,
        main: ReplicaSource<'_>,
        pool: &rayon::ThreadPool,
        x: &[f32],
        x_shape: &[usize],
        rows: &[usize],
        out: &mut [f32],
    ) -> Result<()> {
        self.sync(&main, rows.len())?;
        let per_row_in: usize = x_shape[1..].iter().product();
        let per_row_out = out.len() / x_shape[0];
        // Slice `k` reads rows `start..start + r` of `x` and writes the same rows of `out`.
        let mut jobs = Vec::with_capacity(rows.len());
        let (mut start, mut rest) = (0, out);
        for &r in rows {
            let (dst, tail) = rest.split_at_mut(r * per_row_out);
            jobs.push((start, r, dst));
            (start, rest) = (start + r, tail);
        }
        pool.install(|| {
            self.execs[..rows.len()].par_iter_mut().zip(jobs).try_for_each(|(exec, (start, r, dst))| -> Result<()> {
                let mut shape = x_shape.to_vec();
                shape[0] = r;
                dst.copy_from_slice(exec.forward_output(&x[start * per_row_in..(start + r) * per_row_in], &shape)?);
                Ok(())
            })
        })
    }

    /// Makes `count` replicas holding the executor's current parameters.
    fn sync(&mut self, main: &ReplicaSource<'_>, count: usize) -> Result<()> {
        if self.synced != main.generation {
            for exec in &mut self.execs {
                exec.copy_params_from(main.params);
            }
            self.synced = main.generation;
        }
        if self.execs.len() < count {
            let store = store_from_slots(main.params);
            while self.execs.len() < count {
                let mut exec = Executor::new(main.graph, &store, ExecOptions { threads: 1, seed: main.seed })?;
                exec.set_conv_algo(main.conv_algo);
                exec.set_fusion(main.fusion);
                self.execs.push(exec);
            }
        }
        Ok(())
    }
}

/// What the replicas are made from: the executor's graph, parameters and their generation.
pub(crate) struct ReplicaSource<'a> {
    pub graph: &'a Graph,
    pub params: &'a [crate::slots::ParamSlot],
    pub generation: u64,
    pub seed: u64,
    pub conv_algo: crate::executor::ConvAlgo,
    pub fusion: crate::executor::Fusion,
}
