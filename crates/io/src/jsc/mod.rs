//! MASE's jet-substructure data set (`jsc`): 16 high-level jet features, 5 classes.
//!
//! Sources, first found wins, all under `<data_dir>/jsc/`:
//! 1. MASE's cached download `processed-pythia82-lhc13-all-pt1-50k-r1_h022_e0175_t220_nonu_truth.z`
//!    (an HDF5 file despite its suffix) or any `*.h5`: the compound table `t_allpar_new`;
//! 2. OpenML's `hls4ml_lhc_jets_hlf` as `hls4ml_lhc_jets_hlf.csv` or `.arff` (string class labels).
//!
//! Preprocessing follows MASE (doc/mase-semantics.md#data-jsc): keep the 16 inputs and 5 one-hot labels,
//! drop exact duplicate rows keeping the first, split 80/20 with sklearn's
//! `train_test_split(test_size=0.2, random_state=42)` (numpy `RandomState(42).permutation`),
//! standardise with a `StandardScaler` fitted on the 80 %, label = argmax of the one-hot columns.
//! MASE validates on its training data (a bug); mase-rs holds out the last tenth of the 80 % (in
//! permutation order) as validation and trains on the rest. The test split is MASE's exactly.
//! Features are handled as float32, the type of MASE's table and of the tensors its models see, and
//! the scaler's arithmetic is scikit-learn's for float32 input (see [`Standardizer`]); the fixture
//! tests check the splits bit for bit against pandas 3.1 + scikit-learn 1.9 running MASE's steps.

pub(crate) mod h5;
pub(crate) mod text;

use crate::dataset::{Dataset, DatasetInfo, Splits};
use crate::nonfinite::{self, NonFinite};
use crate::numpy_random::RandomState;
use crate::standardize::Standardizer;
use crate::{IoError, Result};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The 16 input features, in MASE's order.
pub const JSC_FEATURES: [&str; 16] = [
    "j_zlogz",
    "j_c1_b0_mmdt",
    "j_c1_b1_mmdt",
    "j_c1_b2_mmdt",
    "j_c2_b1_mmdt",
    "j_c2_b2_mmdt",
    "j_d2_b1_mmdt",
    "j_d2_b2_mmdt",
    "j_d2_a1_b1_mmdt",
    "j_d2_a1_b2_mmdt",
    "j_m2_b1_mmdt",
    "j_m2_b2_mmdt",
    "j_n2_b1_mmdt",
    "j_n2_b2_mmdt",
    "j_mass_mmdt",
    "j_multiplicity",
];

/// The one-hot label columns, in MASE's class order (gluon, quark, W, Z, top).
pub const JSC_LABELS: [&str; 5] = ["j_g", "j_q", "j_w", "j_z", "j_t"];

/// OpenML's class letters in MASE's class order.
pub(crate) const OPENML_CLASSES: [&str; 5] = ["g", "q", "w", "z", "t"];

/// Values per raw row: 16 features, then 5 one-hot labels.
pub(crate) const ROW: usize = JSC_FEATURES.len() + JSC_LABELS.len();

/// MASE's cache file name for the CERNBox download.
pub const MASE_CACHE_NAME: &str = "processed-pythia82-lhc13-all-pt1-50k-r1_h022_e0175_t220_nonu_truth.z";
const OPENML_STEM: &str = "hls4ml_lhc_jets_hlf";

/// The 21 kept columns of every row of a source file, before any preprocessing.
#[derive(Clone, Debug, PartialEq)]
pub struct JscTable {
    /// Row-major, 21 values per row: the 16 features, then the 5 one-hot labels.
    pub rows: Vec<f32>,
}

impl JscTable {
    pub fn len(&self) -> usize {
        self.rows.len() / ROW
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.rows[i * ROW..(i + 1) * ROW]
    }
}

/// Reads the 21 columns from a file, choosing the reader by its name.
pub fn read_jsc_table(path: &Path) -> Result<JscTable> {
    Ok(read_with_lines(path)?.0)
}

/// [`read_jsc_table`] and, for the text forms, the line number of every row.
fn read_with_lines(path: &Path) -> Result<(JscTable, Option<Vec<usize>>)> {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    let base = name.strip_suffix(".gz").unwrap_or(&name);
    if base.ends_with(".csv") {
        text::read_csv(path).map(|(t, l)| (t, Some(l)))
    } else if base.ends_with(".arff") {
        text::read_arff(path).map(|(t, l)| (t, Some(l)))
    } else {
        h5::read(path).map(|t| (t, None))
    }
}

/// The table without its rows that have a NaN or infinite feature (or the error of
/// [`NonFinite::Refuse`]), and how many rows were left out.
fn finite_table(path: &Path, table: JscTable, lines: Option<&[usize]>, policy: NonFinite) -> Result<(JscTable, usize)> {
    let value = |i: usize, j: usize| f64::from(table.row(i)[j]);
    let row_name = |i: usize| match lines {
        Some(l) => format!("line {}", l[i]),
        None => format!("row {i} of {}", h5::TABLE),
    };
    let column_name = |j: usize| JSC_FEATURES[j].to_string();
    let t = nonfinite::Table {
        path,
        rows: table.len(),
        features: JSC_FEATURES.len(),
        value: &value,
        row_name: &row_name,
        column_name: &column_name,
    };
    let Some(keep) = nonfinite::finite_rows(&t, policy)? else { return Ok((table, 0)) };
    let rows = keep.iter().flat_map(|&i| table.row(i).iter().copied()).collect();
    Ok((JscTable { rows }, table.len() - keep.len()))
}

/// The source file in `dir` (the `jsc/` folder), by the priority in the module documentation.
fn find_source(dir: &Path) -> Result<PathBuf> {
    let cache = dir.join(MASE_CACHE_NAME);
    if cache.is_file() {
        return Ok(cache);
    }
    let mut h5s: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "h5")).collect())
        .unwrap_or_default();
    h5s.sort();
    if let Some(p) = h5s.into_iter().next() {
        return Ok(p);
    }
    for ext in ["csv", "csv.gz", "arff", "arff.gz"] {
        let p = dir.join(format!("{OPENML_STEM}.{ext}"));
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(IoError::MissingData {
        dataset: "jsc".into(),
        dir: dir.to_path_buf(),
        expected: vec![
            format!("{MASE_CACHE_NAME} (MASE's HDF5 download)"),
            "a *.h5 file with the table t_allpar_new".into(),
            format!("{OPENML_STEM}.csv or {OPENML_STEM}.arff (OpenML data set 42468)"),
        ],
    })
}

/// Bit pattern of a value for duplicate detection with pandas' equality: `-0.0 == 0.0` and
/// `NaN == NaN`.
fn dedup_key(v: f32) -> u32 {
    if v == 0.0 {
        0
    } else if v.is_nan() {
        f32::NAN.to_bits()
    } else {
        v.to_bits()
    }
}

/// Indices of the rows to keep after pandas' `drop_duplicates()` (first occurrence kept, original order).
pub fn unique_rows(t: &JscTable) -> Vec<usize> {
    let mut seen: HashSet<[u32; ROW]> = HashSet::with_capacity(t.len());
    (0..t.len())
        .filter(|&i| {
            let mut key = [0u32; ROW];
            for (k, &v) in key.iter_mut().zip(t.row(i)) {
                *k = dedup_key(v);
            }
            seen.insert(key)
        })
        .collect()
}

/// `np.argmax` of the one-hot part of a row (the first maximum wins).
fn label_of(row: &[f32]) -> u32 {
    let oh = &row[JSC_FEATURES.len()..];
    let mut best = 0;
    for (k, &v) in oh.iter().enumerate() {
        if v > oh[best] {
            best = k;
        }
    }
    best as u32
}

/// MASE's two sets and mase-rs's train/validation cut of the first, as row indices of the
/// deduplicated table.
#[derive(Clone, Debug, PartialEq)]
pub struct JscSplitIndices {
    /// MASE's `X_test`: `perm[..ceil(0.2 n)]`.
    pub test: Vec<usize>,
    /// MASE's `X_train_val`: the rest of `perm`, in permutation order.
    pub train_val: Vec<usize>,
    /// How many of the last `train_val` rows are mase-rs's validation set: `ceil(0.1 * len)`.
    pub n_val: usize,
}

/// sklearn's `train_test_split(test_size=0.2, random_state=42)` over `n` rows.
pub fn jsc_split_indices(n: usize) -> JscSplitIndices {
    let perm = RandomState::new(42).permutation(n);
    // sklearn computes ceil(test_size * n) in floating point.
    let n_test = ((0.2f64 * n as f64).ceil() as usize).min(n);
    let train_val = perm[n_test..].to_vec();
    let n_val = train_val.len().div_ceil(10);
    JscSplitIndices { test: perm[..n_test].to_vec(), train_val, n_val }
}

/// Applies MASE's preprocessing to a raw table; `source` is recorded in the info.
pub fn preprocess_jsc(table: &JscTable, source: &str) -> Splits {
    let keep = unique_rows(table);
    let n = keep.len();
    let s = jsc_split_indices(n);
    let feats = JSC_FEATURES.len();
    let row = |k: usize| &table.row(keep[k])[..feats];
    let fit_rows: Vec<&[f32]> = s.train_val.iter().map(|&k| row(k)).collect();
    let scaler = Standardizer::fit_f32(&fit_rows, feats);
    let make = |idx: &[usize]| {
        let mut d = Dataset::with_capacity(vec![feats], idx.len());
        let mut out = [0f32; 16];
        for &k in idx {
            scaler.transform_f32(row(k), &mut out);
            d.push(&out, label_of(table.row(keep[k])));
        }
        d
    };
    let cut = s.train_val.len() - s.n_val;
    Splits {
        info: DatasetInfo {
            name: "jsc".into(),
            num_classes: JSC_LABELS.len(),
            sample_shape: vec![feats],
            class_names: JSC_LABELS.iter().map(|s| s.to_string()).collect(),
            splits_note: format!(
                "{} rows, {n} after dropping duplicates; MASE's train_test_split(test_size=0.2, random_state=42): \
                 test = {} rows (as MASE), train+val = {} rows standardised by a StandardScaler fitted on them; \
                 validation = their last {} (MASE validates on its training data), train = the first {cut}",
                table.len(),
                s.test.len(),
                s.train_val.len(),
                s.n_val
            ),
            source: source.to_string(),
            dropped_nonfinite: 0,
        },
        train: make(&s.train_val[..cut]),
        val: make(&s.train_val[cut..]),
        test: make(&s.test),
    }
}

/// Loads jsc from `dir` (the `jsc/` folder); rows with a NaN or infinite feature are refused or
/// dropped (before deduplication) as `policy` says.
pub(crate) fn load(dir: &Path, policy: NonFinite) -> Result<Splits> {
    let path = find_source(dir)?;
    let (table, lines) = read_with_lines(&path)?;
    let (table, dropped) = finite_table(&path, table, lines.as_deref(), policy)?;
    if table.is_empty() {
        let reason = if dropped > 0 { "every row has a NaN or infinite feature" } else { "the table has no rows" };
        return Err(IoError::Format { path, reason: reason.into() });
    }
    let mut splits = preprocess_jsc(&table, &path.display().to_string());
    splits.info.dropped_nonfinite = dropped;
    Ok(splits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_follow_pandas_equality() {
        let mut rows = Vec::new();
        for v in [1.0f32, -0.0, 1.0, 0.0, f32::NAN, f32::NAN, 2.0] {
            rows.extend_from_slice(&[v; ROW]);
        }
        assert_eq!(unique_rows(&JscTable { rows }), [0, 1, 4, 6]);
    }

    #[test]
    fn non_finite_rows_of_the_hdf5_table_are_named_by_index() {
        // Row 1 has -inf in j_c1_b0_mmdt (column 1), row 2 NaN in j_multiplicity (column 15).
        let mut rows = vec![1.0f32; 3 * ROW];
        rows[ROW + 1] = f32::NEG_INFINITY;
        rows[2 * ROW + 15] = f32::NAN;
        let path = Path::new("jets.h5");
        let e = finite_table(path, JscTable { rows: rows.clone() }, None, NonFinite::Refuse).map(|_| ()).unwrap_err().to_string();
        assert!(e.starts_with("jets.h5, row 1 of t_allpar_new, column `j_c1_b0_mmdt`: -inf is not a finite number"), "{e}");
        let kept = finite_table(path, JscTable { rows }, None, NonFinite::Drop).map(|(t, n)| (t.len(), n)).ok();
        assert_eq!(kept, Some((1, 2)));
    }

    #[test]
    fn argmax_takes_first_maximum() {
        let mut r = [0f32; ROW];
        assert_eq!(label_of(&r), 0);
        r[16 + 3] = 1.0;
        assert_eq!(label_of(&r), 3);
        r[16 + 4] = 1.0;
        assert_eq!(label_of(&r), 3);
    }

    #[test]
    fn split_sizes() {
        // (n, test = ceil(0.2 n), val = ceil(0.1 (n - test)))
        for &(n, te, va) in &[(1000, 200, 80), (1001, 201, 80), (5, 1, 1), (1, 1, 0), (0, 0, 0), (830_000, 166_000, 66_400)] {
            let s = jsc_split_indices(n);
            assert_eq!((s.test.len(), s.train_val.len(), s.n_val), (te, n - te, va), "n={n}");
        }
        // The test split is the head of numpy's RandomState(42).permutation(1000).
        assert_eq!(&jsc_split_indices(1000).test[..4], [521, 737, 740, 660]);
    }
}
