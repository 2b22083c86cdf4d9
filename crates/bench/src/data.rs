//! Seeded synthetic data shaped like the real data sets, so the benchmark needs no files.
//!
//! The values only have to look like the real sets (scales, offsets, class balance); the
//! PyTorch side (`bench/pytorch_ref.py`) draws its own numbers from the same distributions with
//! numpy, which is enough because the work per step does not depend on the values.

use mase_ir::Rng;

/// Rows of samples with class labels, stored flat in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// `rows * prod(sample_shape)` values.
    pub x: Vec<f32>,
    /// One class index per row.
    pub labels: Vec<u32>,
    /// Shape of one sample, without the batch dimension (`[16]`, `[1, 28, 28]`).
    pub sample_shape: Vec<usize>,
    pub num_classes: usize,
}

impl Dataset {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.labels.len()
    }

    /// Values in one sample.
    pub fn sample_numel(&self) -> usize {
        self.sample_shape.iter().product()
    }

    /// Number of whole batches of `batch` rows (a trailing partial batch is not used).
    pub fn num_batches(&self, batch: usize) -> usize {
        self.rows().checked_div(batch).unwrap_or(0)
    }

    /// The inputs and labels of batch `index` (taken modulo the number of whole batches, so the
    /// benchmark can cycle over the set), or `None` when the set holds no whole batch.
    pub fn batch(&self, index: usize, batch: usize) -> Option<(&[f32], &[u32])> {
        let nb = self.num_batches(batch);
        if nb == 0 {
            return None;
        }
        let b = index % nb;
        let f = self.sample_numel();
        Some((&self.x[b * batch * f..(b + 1) * batch * f], &self.labels[b * batch..(b + 1) * batch]))
    }

    /// The input shape of one batch: `[batch, ...sample_shape]`.
    pub fn batch_shape(&self, batch: usize) -> Vec<usize> {
        std::iter::once(batch).chain(self.sample_shape.iter().copied()).collect()
    }
}

/// Number of jet features and classes of MASE's jsc data set.
pub const JSC_FEATURES: usize = 16;
pub const JSC_CLASSES: usize = 5;

/// Jet-shaped rows: feature `j` is `z_j * (0.5 + 0.3 j) + 0.7 (j - 8)` for standard normal `z`
/// (so the input BatchNorm has real work to do), and the label is the argmax of `z` times a fixed
/// random 16x5 projection, as in `shared/reference/torch_bench.py`.
pub fn jsc_synthetic(rows: usize, seed: u64) -> Dataset {
    let mut r = Rng::new(seed);
    let proj: Vec<f32> = (0..JSC_FEATURES * JSC_CLASSES).map(|_| r.normal() as f32).collect();
    let mut x = Vec::with_capacity(rows * JSC_FEATURES);
    let mut labels = Vec::with_capacity(rows);
    let mut z = [0f32; JSC_FEATURES];
    for _ in 0..rows {
        for (j, zj) in z.iter_mut().enumerate() {
            *zj = r.normal() as f32;
            x.push(*zj * (0.5 + 0.3 * j as f32) + 0.7 * (j as f32 - 8.0));
        }
        let score = |c: usize| z.iter().enumerate().map(|(j, zj)| zj * proj[j * JSC_CLASSES + c]).sum::<f32>();
        let best = (0..JSC_CLASSES).map(|c| (c, score(c))).fold((0, f32::NEG_INFINITY), |b, s| if s.1 > b.1 { s } else { b });
        labels.push(best.0 as u32);
    }
    Dataset { x, labels, sample_shape: vec![JSC_FEATURES], num_classes: JSC_CLASSES }
}

/// MNIST-shaped rows: `[1, 28, 28]` pixels uniform in [0, 1) and labels uniform in 0..10.
pub fn mnist_synthetic(rows: usize, seed: u64) -> Dataset {
    image_synthetic(rows, seed, vec![1, 28, 28], 10, |r| r.uniform())
}

/// CIFAR-shaped rows: `[3, 32, 32]` standard normal values (normalised images) and labels
/// uniform in 0..10.
pub fn cifar_synthetic(rows: usize, seed: u64) -> Dataset {
    image_synthetic(rows, seed, vec![3, 32, 32], 10, |r| r.normal() as f32)
}

/// Sequences of `len` token ids uniform in 0..17 (digits-seq's vocabulary) as whole-number
/// floats, and labels uniform in 0..`num_classes`.
pub fn seq_synthetic(rows: usize, len: usize, num_classes: usize, seed: u64) -> Dataset {
    image_synthetic(rows, seed, vec![len], num_classes, |r| r.below(17) as f32)
}

fn image_synthetic(
    rows: usize,
    seed: u64,
    sample_shape: Vec<usize>,
    num_classes: usize,
    mut pixel: impl FnMut(&mut Rng) -> f32,
) -> Dataset {
    let mut r = Rng::new(seed);
    let n: usize = sample_shape.iter().product();
    let x = (0..rows * n).map(|_| pixel(&mut r)).collect();
    let labels = (0..rows).map(|_| r.below(num_classes as u64) as u32).collect();
    Dataset { x, labels, sample_shape, num_classes }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_std(v: impl Iterator<Item = f32>) -> (f64, f64) {
        let v: Vec<f64> = v.map(f64::from).collect();
        let m = v.iter().sum::<f64>() / v.len() as f64;
        (m, (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64).sqrt())
    }

    #[test]
    fn jsc_features_have_the_documented_scale_and_offset() {
        let d = jsc_synthetic(20_000, 7);
        assert_eq!((d.rows(), d.x.len(), d.sample_shape.clone()), (20_000, 20_000 * 16, vec![16]));
        // One line per feature: (index, expected mean 0.7 (j - 8), expected std 0.5 + 0.3 j).
        for j in [0usize, 5, 8, 15] {
            let (m, s) = mean_std(d.x.iter().skip(j).step_by(16).copied());
            let (em, es) = (0.7 * (j as f64 - 8.0), 0.5 + 0.3 * j as f64);
            assert!((m - em).abs() < 0.05 * es, "feature {j}: mean {m}, expected {em}");
            assert!((s / es - 1.0).abs() < 0.03, "feature {j}: std {s}, expected {es}");
        }
        // An argmax over 5 projections of a symmetric variable hits every class.
        let mut counts = [0usize; 5];
        d.labels.iter().for_each(|&c| counts[c as usize] += 1);
        assert!(counts.iter().all(|&c| c > 1000), "{counts:?}");
    }

    #[test]
    fn same_seed_same_data_other_seed_other_data() {
        assert_eq!(jsc_synthetic(64, 3), jsc_synthetic(64, 3));
        assert_ne!(jsc_synthetic(64, 3).x, jsc_synthetic(64, 4).x);
        assert_eq!(mnist_synthetic(4, 1), mnist_synthetic(4, 1));
    }

    #[test]
    fn image_sets_have_their_shapes_and_ranges() {
        let m = mnist_synthetic(10, 1);
        assert_eq!((m.x.len(), m.batch_shape(5)), (10 * 784, vec![5, 1, 28, 28]));
        assert!(m.x.iter().all(|v| (0.0..1.0).contains(v)) && m.labels.iter().all(|&c| c < 10));
        let c = cifar_synthetic(8, 1);
        assert_eq!((c.x.len(), c.batch_shape(8)), (8 * 3072, vec![8, 3, 32, 32]));
        let (mean, std) = mean_std(c.x.iter().copied());
        assert!(mean.abs() < 0.03 && (std - 1.0).abs() < 0.03, "{mean} {std}");
        let s = seq_synthetic(200, 64, 10, 1);
        assert_eq!((s.x.len(), s.batch_shape(4)), (200 * 64, vec![4, 64]));
        // Every token id of 0..17 occurs, and only those.
        let mut seen = [false; 17];
        assert!(s.x.iter().all(|&v| v.fract() == 0.0 && (0.0..17.0).contains(&v)));
        s.x.iter().for_each(|&v| seen[v as usize] = true);
        assert!(seen.iter().all(|&b| b) && s.labels.iter().all(|&c| c < 10));
    }

    #[test]
    fn batches_cycle_over_whole_batches() {
        let d = jsc_synthetic(10, 1);
        assert_eq!(d.num_batches(4), 2);
        let (x0, y0) = d.batch(0, 4).expect("a whole batch");
        let (x2, y2) = d.batch(2, 4).expect("wraps around");
        assert_eq!((x0, y0), (x2, y2));
        assert_eq!((x0.len(), &d.x[..64]), (64, x0));
        let (x1, _) = d.batch(1, 4).expect("second batch");
        assert_eq!(x1, &d.x[64..128]);
        assert!(d.batch(0, 11).is_none() && d.batch(0, 0).is_none());
    }
}
