//! Rows whose features are NaN or infinite. A model fed such a row gives NaN (as PyTorch does),
//! which shows up as a quietly wrong loss in testing and as a diverged run in training, so the
//! loaders of data sets with float features (jsc, the tabular CSVs, digits) look at every feature
//! once, as they read the file, and refuse the first non-finite one, naming the file, the row and
//! the column. Asked to ([`NonFinite::Drop`]), they drop such rows instead and count them in
//! [`crate::DatasetInfo::dropped_nonfinite`]. MNIST and CIFAR-10 store bytes, which are always
//! finite.

use crate::{IoError, Result};
use std::path::Path;

/// What a loader does with a row that has a NaN or infinite feature.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NonFinite {
    /// Fail with an error naming the file, the row and the column of the first such value.
    #[default]
    Refuse,
    /// Leave such rows out (before any deduplication, split or standardisation).
    Drop,
}

/// A table of `rows` rows being checked: how to read feature `j` of row `i`, and how to name a
/// row and a column in the error.
pub(crate) struct Table<'a> {
    pub path: &'a Path,
    pub rows: usize,
    pub features: usize,
    pub value: &'a dyn Fn(usize, usize) -> f64,
    pub row_name: &'a dyn Fn(usize) -> String,
    pub column_name: &'a dyn Fn(usize) -> String,
}

/// The rows to keep: `None` when every feature is finite (keep all); under
/// [`NonFinite::Drop`] the indices of the rows whose features are all finite.
pub(crate) fn finite_rows(t: &Table<'_>, policy: NonFinite) -> Result<Option<Vec<usize>>> {
    let bad_column = |i: usize| (0..t.features).find(|&j| !(t.value)(i, j).is_finite());
    let Some(first) = (0..t.rows).find(|&i| bad_column(i).is_some()) else { return Ok(None) };
    match policy {
        NonFinite::Refuse => {
            let j = bad_column(first).unwrap_or(0);
            Err(IoError::NonFinite {
                path: t.path.to_path_buf(),
                row: (t.row_name)(first),
                column: (t.column_name)(j),
                value: (t.value)(first, j),
            })
        }
        NonFinite::Drop => Ok(Some((0..t.rows).filter(|&i| bad_column(i).is_none()).collect())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_the_first_non_finite_value_or_keeps_the_finite_rows() {
        let x = [1.0, 2.0, 3.0, f64::INFINITY, 5.0, f64::NAN, 7.0, 8.0];
        let value = |i: usize, j: usize| x[i * 2 + j];
        let row_name = |i: usize| format!("line {}", i + 2);
        let column_name = |j: usize| ["a", "b"][j].to_string();
        let t = Table { path: Path::new("t.csv"), rows: 4, features: 2, value: &value, row_name: &row_name, column_name: &column_name };
        let e = finite_rows(&t, NonFinite::Refuse).map(|_| ()).unwrap_err().to_string();
        assert!(e.starts_with("t.csv, line 3, column `b`: inf is not a finite number"), "{e}");
        assert_eq!(finite_rows(&t, NonFinite::Drop).ok(), Some(Some(vec![0, 3])));
        let finite = Table { rows: 1, ..t };
        assert_eq!(finite_rows(&finite, NonFinite::Refuse).ok(), Some(None));
    }
}
