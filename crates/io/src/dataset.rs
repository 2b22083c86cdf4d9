//! In-memory data sets, their descriptions, and batch orders.

use mase_ir::Rng;
use serde::{Deserialize, Serialize};

/// Samples and labels of one split, stored densely: sample `i` is
/// `x[i * sample_len .. (i + 1) * sample_len]` in row-major order of `sample_shape`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dataset {
    pub x: Vec<f32>,
    pub y: Vec<u32>,
    /// Shape of one sample without the batch dimension (`[1, 28, 28]`, `[16]`).
    pub sample_shape: Vec<usize>,
}

impl Dataset {
    /// An empty data set whose samples have `sample_shape`.
    pub fn empty(sample_shape: Vec<usize>) -> Dataset {
        Dataset { x: Vec::new(), y: Vec::new(), sample_shape }
    }

    /// A data set with room for `n` samples.
    pub fn with_capacity(sample_shape: Vec<usize>, n: usize) -> Dataset {
        let len: usize = sample_shape.iter().product();
        Dataset { x: Vec::with_capacity(n * len), y: Vec::with_capacity(n), sample_shape }
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.y.len()
    }

    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    /// Number of values in one sample (the product of `sample_shape`).
    pub fn sample_len(&self) -> usize {
        self.sample_shape.iter().product()
    }

    /// The values of sample `i`.
    ///
    /// Panics when `i >= self.len()`.
    pub fn sample(&self, i: usize) -> &[f32] {
        let l = self.sample_len();
        &self.x[i * l..(i + 1) * l]
    }

    /// Appends one sample. `values` must hold `sample_len()` values (an internal invariant of the
    /// loaders, which check sizes before they build samples).
    pub fn push(&mut self, values: &[f32], label: u32) {
        debug_assert_eq!(values.len(), self.sample_len(), "sample size must match sample_shape");
        self.x.extend_from_slice(values);
        self.y.push(label);
    }

    /// Copies the samples at `idx` into reusable buffers (cleared first): `x` row-major
    /// `[idx.len(), ...sample_shape]`, `y` the labels.
    ///
    /// Panics when an index is out of range: batch indices come from [`batch_order`] over
    /// `0..len()`, so an out-of-range index is a bug in the caller.
    pub fn gather(&self, idx: &[usize], x: &mut Vec<f32>, y: &mut Vec<u32>) {
        x.clear();
        y.clear();
        x.reserve(idx.len() * self.sample_len());
        y.reserve(idx.len());
        for &i in idx {
            x.extend_from_slice(self.sample(i));
            y.push(self.y[i]);
        }
    }

    /// A new data set made of the samples at `idx`, in that order (indices may repeat).
    ///
    /// Panics when an index is out of range, as [`Dataset::gather`] does.
    pub fn subset(&self, idx: &[usize]) -> Dataset {
        let mut out = Dataset { x: Vec::new(), y: Vec::new(), sample_shape: self.sample_shape.clone() };
        self.gather(idx, &mut out.x, &mut out.y);
        out
    }

    /// Number of samples of each class `0..num_classes` (labels outside the range are not counted).
    pub fn class_counts(&self, num_classes: usize) -> Vec<usize> {
        let mut c = vec![0; num_classes];
        for &l in &self.y {
            if let Some(slot) = c.get_mut(l as usize) {
                *slot += 1;
            }
        }
        c
    }
}

/// What a loaded data set is: the facts the CLI prints and records next to a trained model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatasetInfo {
    pub name: String,
    pub num_classes: usize,
    pub sample_shape: Vec<usize>,
    pub class_names: Vec<String>,
    /// One line: how train, validation and test were made.
    pub splits_note: String,
    /// The files read (or the generator used), comma-separated.
    pub source: String,
    /// Rows left out because a feature was NaN or infinite ([`crate::NonFinite::Drop`]).
    #[serde(default)]
    pub dropped_nonfinite: usize,
}

/// The three splits of a data set and its description.
#[derive(Clone, Debug, PartialEq)]
pub struct Splits {
    pub info: DatasetInfo,
    pub train: Dataset,
    pub val: Dataset,
    pub test: Dataset,
}

/// Batch index lists over `0..n`: shuffled with `rng` when it is given, sequential otherwise. The last
/// batch may be smaller (`drop_last = false`, as MASE's data loaders). A `batch_size` of 0 is read as 1
/// so that a bad setting cannot hang or panic here; the CLI rejects it before.
pub fn batch_order(n: usize, batch_size: usize, rng: Option<&mut Rng>) -> Vec<Vec<usize>> {
    let bs = batch_size.max(1);
    let mut order: Vec<usize> = (0..n).collect();
    if let Some(r) = rng {
        r.shuffle(&mut order);
    }
    order.chunks(bs).map(|c| c.to_vec()).collect()
}

/// Index lists of the rule used for the small shipped data sets: sample `i` goes to test when
/// `i % 10 == 9`, to validation when `i % 10 == 8`, and to training otherwise.
pub(crate) fn mod10_split(n: usize) -> [Vec<usize>; 3] {
    let mut out = [Vec::new(), Vec::new(), Vec::new()];
    for i in 0..n {
        let k = match i % 10 {
            9 => 2,
            8 => 1,
            _ => 0,
        };
        out[k].push(i);
    }
    out
}

/// The `splits_note` of [`mod10_split`].
pub(crate) fn mod10_note(what: &str, n: usize) -> String {
    let [tr, va, te] = mod10_split(n).map(|v| v.len());
    format!("{what} ({n} samples) split by index: i % 10 == 9 -> test ({te}), i % 10 == 8 -> validation ({va}), else train ({tr})")
}

/// Builds the three splits of a whole data set with [`mod10_split`].
pub(crate) fn split_mod10(all: &Dataset) -> (Dataset, Dataset, Dataset) {
    let [tr, va, te] = mod10_split(all.len());
    (all.subset(&tr), all.subset(&va), all.subset(&te))
}

/// Size of the validation hold-out carved from the end of an official training set: 5,000 samples
/// for full-size sets (MNIST's 60,000, CIFAR-10's 50,000), a tenth (rounded up) for small sets, so
/// that shortened copies of the data stay usable.
pub(crate) fn holdout_len(n: usize) -> usize {
    if n >= 50_000 {
        5_000
    } else {
        n.div_ceil(10)
    }
}

/// `["0", "1", ...]`.
pub(crate) fn numbered_classes(n: usize) -> Vec<String> {
    (0..n).map(|i| i.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy() -> Dataset {
        Dataset { x: (0..12).map(|v| v as f32).collect(), y: vec![0, 1, 2, 1], sample_shape: vec![1, 3] }
    }

    #[test]
    fn gather_and_subset_copy_rows() {
        let d = toy();
        assert_eq!((d.len(), d.sample_len(), d.is_empty()), (4, 3, false));
        let (mut x, mut y) = (vec![99.0], vec![7]);
        d.gather(&[3, 0, 3], &mut x, &mut y);
        assert_eq!(x, [9.0, 10.0, 11.0, 0.0, 1.0, 2.0, 9.0, 10.0, 11.0]);
        assert_eq!(y, [1, 0, 1]);
        let s = d.subset(&[2]);
        assert_eq!((s.x, s.y, s.sample_shape), (vec![6.0, 7.0, 8.0], vec![2], vec![1, 3]));
        assert_eq!(d.class_counts(3), [1, 2, 1]);
    }

    #[test]
    fn batch_order_cases() {
        // (n, batch size, expected batch sizes)
        let cases: &[(usize, usize, &[usize])] = &[(10, 4, &[4, 4, 2]), (8, 4, &[4, 4]), (3, 10, &[3]), (0, 4, &[]), (2, 0, &[1, 1])];
        for &(n, bs, sizes) in cases {
            let b = batch_order(n, bs, None);
            assert_eq!(b.iter().map(|v| v.len()).collect::<Vec<_>>(), sizes, "n={n} bs={bs}");
            assert_eq!(b.concat(), (0..n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn shuffled_batches_are_a_seeded_permutation() {
        let a = batch_order(100, 32, Some(&mut Rng::new(3)));
        let b = batch_order(100, 32, Some(&mut Rng::new(3)));
        assert_eq!(a, b);
        let mut all = a.concat();
        assert_ne!(all, (0..100).collect::<Vec<_>>());
        all.sort_unstable();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
        assert_eq!(a.iter().map(|v| v.len()).collect::<Vec<_>>(), [32, 32, 32, 4]);
    }

    #[test]
    fn mod10_rule_counts() {
        // (n, train, val, test)
        for &(n, tr, va, te) in &[(10_000, 8_000, 1_000, 1_000), (1_797, 1_439, 179, 179), (150, 120, 15, 15), (9, 8, 1, 0)] {
            let [a, b, c] = mod10_split(n);
            assert_eq!((a.len(), b.len(), c.len()), (tr, va, te), "n={n}");
        }
        assert_eq!(mod10_split(20)[2], [9, 19]);
        assert_eq!(holdout_len(60_000), 5_000);
        assert_eq!(holdout_len(50_000), 5_000);
        assert_eq!(holdout_len(11), 2);
    }
}
