//! scikit-learn's small tabular data sets (iris, wine, breast_cancer) from their bundled CSV files.

use crate::dataset::{mod10_note, mod10_split, Dataset, DatasetInfo, Splits};
use crate::files::{find_first, gz_optional, read_text};
use crate::nonfinite::{self, NonFinite};
use crate::standardize::Standardizer;
use crate::{IoError, Result};
use std::path::Path;

/// The tabular data sets and the file names each may have (scikit-learn ships `wine_data.csv`).
pub(crate) const TABLES: [(&str, &[&str]); 3] =
    [("iris", &["iris.csv"]), ("wine", &["wine.csv", "wine_data.csv"]), ("breast_cancer", &["breast_cancer.csv"])];

/// A parsed table: f64 features row-major, labels, class names.
struct Table {
    features: usize,
    x: Vec<f64>,
    y: Vec<u32>,
    class_names: Vec<String>,
    /// The file's line number (from 1) of every row.
    lines: Vec<usize>,
}

/// Parses scikit-learn's format: first line `n_samples,n_features,class names...`, then rows of
/// `n_features` numbers and an integer label.
fn parse(path: &Path, text: &str) -> Result<Table> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let bad = |line: usize, reason: String| IoError::Parse { path: path.to_path_buf(), line, reason };
    let (_, head) = lines.next().ok_or_else(|| bad(1, "empty file".into()))?;
    let head: Vec<&str> = head.split(',').map(str::trim).collect();
    if head.len() < 3 {
        return Err(bad(1, "header must be `n_samples,n_features,class names...`".into()));
    }
    let n: usize = head[0].parse().map_err(|_| bad(1, format!("n_samples `{}` is not an integer", head[0])))?;
    let features: usize = head[1].parse().map_err(|_| bad(1, format!("n_features `{}` is not an integer", head[1])))?;
    let class_names: Vec<String> = head[2..].iter().map(|s| s.to_string()).collect();
    // The header's counts are only announced: room is reserved for no more rows and values than
    // the text can hold (a line per row, a byte per value), so a wrong header cannot make the
    // reader ask for unbounded memory.
    let rows = n.min(text.lines().count());
    let values = rows.saturating_mul(features).min(text.len());
    let mut t =
        Table { features, x: Vec::with_capacity(values), y: Vec::with_capacity(rows), class_names, lines: Vec::with_capacity(rows) };
    for (ln, line) in lines {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len().checked_sub(1) != Some(features) {
            return Err(bad(ln + 1, format!("{} fields, expected {} features and a label", fields.len(), features)));
        }
        for f in &fields[..features] {
            t.x.push(f.parse().map_err(|_| bad(ln + 1, format!("`{f}` is not a number")))?);
        }
        let label: u32 = fields[features].parse().map_err(|_| bad(ln + 1, format!("label `{}` is not an integer", fields[features])))?;
        if label as usize >= t.class_names.len() {
            return Err(bad(ln + 1, format!("label {label} but the header names {} classes", t.class_names.len())));
        }
        t.y.push(label);
        t.lines.push(ln + 1);
    }
    if t.y.len() != n {
        return Err(IoError::Format {
            path: path.to_path_buf(),
            reason: format!("header announces {n} samples, the file has {}", t.y.len()),
        });
    }
    Ok(t)
}

/// A table's rows as one data set, features rounded to f32 and not standardised.
pub(crate) fn parse_dataset(path: &Path, text: &str) -> Result<Dataset> {
    let t = parse(path, text)?;
    let mut d = Dataset::with_capacity(vec![t.features], t.y.len());
    for (row, &label) in t.x.chunks_exact(t.features.max(1)).zip(&t.y) {
        let row: Vec<f32> = row.iter().map(|&v| v as f32).collect();
        d.push(&row, label);
    }
    Ok(d)
}

/// Leaves out the rows with a NaN or infinite feature, or refuses the first such value, as
/// `policy` says; returns how many rows were left out.
fn drop_nonfinite(path: &Path, t: &mut Table, policy: NonFinite) -> Result<usize> {
    let f = t.features;
    let keep = {
        let value = |i: usize, j: usize| t.x[i * f + j];
        let row_name = |i: usize| format!("line {}", t.lines[i]);
        let column_name = |j: usize| format!("field {}", j + 1);
        let table = nonfinite::Table { path, rows: t.y.len(), features: f, value: &value, row_name: &row_name, column_name: &column_name };
        nonfinite::finite_rows(&table, policy)?
    };
    let Some(keep) = keep else { return Ok(0) };
    let dropped = t.y.len() - keep.len();
    t.x = keep.iter().flat_map(|&i| t.x[i * f..(i + 1) * f].iter().copied()).collect();
    t.y = keep.iter().map(|&i| t.y[i]).collect();
    t.lines = keep.iter().map(|&i| t.lines[i]).collect();
    Ok(dropped)
}

/// Loads `<dir>/<file>` for the table `name`; the `i % 10` split, features standardised with the
/// training split's mean and population standard deviation. Rows with a NaN or infinite feature
/// are refused or dropped (before the split) as `policy` says.
pub(crate) fn load(name: &str, dir: &Path, policy: NonFinite) -> Result<Splits> {
    let files = TABLES.iter().find(|(n, _)| *n == name).map(|(_, f)| *f).unwrap_or(&[]);
    let path = find_first(dir, files).ok_or_else(|| IoError::MissingData {
        dataset: name.into(),
        dir: dir.to_path_buf(),
        expected: files.iter().map(|f| gz_optional(f)).collect(),
    })?;
    let mut t = parse(&path, &read_text(&path)?)?;
    let dropped = drop_nonfinite(&path, &mut t, policy)?;
    let f = t.features;
    let [tr, va, te] = mod10_split(t.y.len());
    let train_rows: Vec<&[f64]> = tr.iter().map(|&i| &t.x[i * f..(i + 1) * f]).collect();
    let scaler = Standardizer::fit_f64(&train_rows, f);
    let make = |idx: &[usize]| {
        let mut d = Dataset::with_capacity(vec![f], idx.len());
        let mut row = vec![0f32; f];
        for &i in idx {
            scaler.transform_f64(&t.x[i * f..(i + 1) * f], &mut row);
            d.push(&row, t.y[i]);
        }
        d
    };
    let n = t.y.len();
    Ok(Splits {
        info: DatasetInfo {
            name: name.into(),
            num_classes: t.class_names.len(),
            sample_shape: vec![f],
            class_names: t.class_names.clone(),
            splits_note: format!("{}; standardised with the training split's mean and std", mod10_note(&format!("scikit-learn {name}"), n)),
            source: path.display().to_string(),
            dropped_nonfinite: dropped,
        },
        train: make(&tr),
        val: make(&va),
        test: make(&te),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_name_line() {
        let p = Path::new("t.csv");
        let cases = [
            ("2,1,a,b\n1.5,0\n2.5,2\n", "line 3: label 2 but the header names 2 classes"),
            ("2,1,a,b\n1.5,0\n", "header announces 2 samples, the file has 1"),
            ("x,1,a,b\n", "line 1: n_samples `x`"),
            ("1,2,a,b\n1.5,0\n", "line 2: 2 fields"),
            ("18446744073709551615,18446744073709551615,a,b\n1.5,0\n", "line 2: 2 fields, expected 18446744073709551615 features"),
        ];
        for (text, want) in cases {
            let e = parse(p, text).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(want), "{e}");
        }
        let t = parse(p, "2,1,a,b\n1.5,0\n2.5,1\n").ok().map(|t| (t.x, t.y, t.class_names));
        assert_eq!(t, Some((vec![1.5, 2.5], vec![0, 1], vec!["a".to_string(), "b".to_string()])));
    }
}
