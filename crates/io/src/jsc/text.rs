//! OpenML's `hls4ml_lhc_jets_hlf` (data set 42468) as CSV or ARFF: 16 named feature columns and a
//! `class` column with the letters g, q, t, w, z, mapped to MASE's class order [g, q, w, z, t].

use super::{JscTable, JSC_FEATURES, OPENML_CLASSES, ROW};
use crate::files::read_text;
use crate::{IoError, Result};
use std::path::Path;

const CLASS: &str = "class";

/// Removes surrounding single or double quotes and blanks.
fn unquote(s: &str) -> &str {
    let s = s.trim();
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner.trim();
        }
    }
    s
}

/// Where each needed column sits in a file's column list.
struct Layout {
    features: [usize; 16],
    class: usize,
    width: usize,
}

fn layout(path: &Path, line: usize, names: &[String]) -> Result<Layout> {
    let find = |want: &str| {
        names.iter().position(|n| n == want).ok_or_else(|| IoError::Parse {
            path: path.to_path_buf(),
            line,
            reason: format!("no column `{want}` (columns: {})", names.join(", ")),
        })
    };
    let mut features = [0usize; 16];
    for (slot, name) in features.iter_mut().zip(JSC_FEATURES) {
        *slot = find(name)?;
    }
    Ok(Layout { features, class: find(CLASS)?, width: names.len() })
}

/// Appends one data line as 16 features and a one-hot label in MASE's order.
fn push_row(path: &Path, line: usize, text: &str, lay: &Layout, rows: &mut Vec<f32>) -> Result<()> {
    let bad = |reason: String| IoError::Parse { path: path.to_path_buf(), line, reason };
    let fields: Vec<&str> = text.split(',').map(unquote).collect();
    if fields.len() != lay.width {
        return Err(bad(format!("{} fields, the header has {}", fields.len(), lay.width)));
    }
    for (&col, name) in lay.features.iter().zip(JSC_FEATURES) {
        let f = fields[col];
        let v: f32 = f.parse().map_err(|_| bad(format!("{name}: `{f}` is not a number")))?;
        rows.push(v);
    }
    let c = fields[lay.class];
    let k = OPENML_CLASSES
        .iter()
        .position(|l| l.eq_ignore_ascii_case(c))
        .ok_or_else(|| bad(format!("class `{c}` is not one of g, q, t, w, z")))?;
    rows.extend((0..OPENML_CLASSES.len()).map(|i| if i == k { 1.0 } else { 0.0 }));
    Ok(())
}

/// Reads OpenML's CSV form: a header line naming the columns, then one jet per line; with the
/// line number of every row.
pub(crate) fn read_csv(path: &Path) -> Result<(JscTable, Vec<usize>)> {
    parse_csv_lines(path, &read_text(path)?)
}

/// The text of OpenML's CSV form (see [`read_csv`]).
pub(crate) fn parse_csv(path: &Path, text: &str) -> Result<JscTable> {
    Ok(parse_csv_lines(path, text)?.0)
}

/// [`parse_csv`] and the file's line number (from 1) of every row.
pub(crate) fn parse_csv_lines(path: &Path, text: &str) -> Result<(JscTable, Vec<usize>)> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (hl, header) = lines.next().ok_or_else(|| IoError::Format { path: path.to_path_buf(), reason: "empty file".into() })?;
    let names: Vec<String> = header.split(',').map(|s| unquote(s).to_string()).collect();
    let lay = layout(path, hl + 1, &names)?;
    let (mut rows, mut numbers) = (Vec::new(), Vec::new());
    for (ln, l) in lines {
        push_row(path, ln + 1, l, &lay, &mut rows)?;
        numbers.push(ln + 1);
    }
    debug_assert_eq!(rows.len() % ROW, 0);
    Ok((JscTable { rows }, numbers))
}

/// Reads OpenML's ARFF form: `@attribute NAME TYPE` lines, `@data`, then comma-separated rows;
/// `%` starts a comment. With the line number of every row.
pub(crate) fn read_arff(path: &Path) -> Result<(JscTable, Vec<usize>)> {
    parse_arff_lines(path, &read_text(path)?)
}

/// The text of OpenML's ARFF form (see [`read_arff`]).
pub(crate) fn parse_arff(path: &Path, text: &str) -> Result<JscTable> {
    Ok(parse_arff_lines(path, text)?.0)
}

/// [`parse_arff`] and the file's line number (from 1) of every row.
fn parse_arff_lines(path: &Path, text: &str) -> Result<(JscTable, Vec<usize>)> {
    let mut names: Vec<String> = Vec::new();
    let mut lay: Option<Layout> = None;
    let (mut rows, mut numbers) = (Vec::new(), Vec::new());
    for (ln, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('%') {
            continue;
        }
        if let Some(lay) = &lay {
            if line.starts_with('{') {
                return Err(IoError::Parse { path: path.to_path_buf(), line: ln + 1, reason: "sparse ARFF rows are not supported".into() });
            }
            push_row(path, ln + 1, line, lay, &mut rows)?;
            numbers.push(ln + 1);
            continue;
        }
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("@attribute") {
            let rest = line["@attribute".len()..].trim();
            // The name is the first token, possibly quoted (and then possibly containing blanks).
            let name = match rest.chars().next() {
                Some(q @ ('\'' | '"')) => rest[1..].split(q).next().unwrap_or(""),
                _ => rest.split_whitespace().next().unwrap_or(""),
            };
            names.push(name.to_string());
        } else if lower.starts_with("@data") {
            lay = Some(layout(path, ln + 1, &names)?);
        } else if !lower.starts_with("@relation") {
            return Err(IoError::Parse { path: path.to_path_buf(), line: ln + 1, reason: format!("unexpected header line `{line}`") });
        }
    }
    if lay.is_none() {
        return Err(IoError::Format { path: path.to_path_buf(), reason: "no @data section".into() });
    }
    Ok((JscTable { rows }, numbers))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_errors() {
        assert_eq!(unquote(" 'g' "), "g");
        assert_eq!(unquote("\"j_zlogz\""), "j_zlogz");
        let names: Vec<String> = JSC_FEATURES.iter().map(|s| s.to_string()).chain(["class".to_string()]).collect();
        let lay = layout(Path::new("f.csv"), 1, &names).ok();
        let Some(lay) = lay else { panic!("layout of the full column list") };
        let mut rows = Vec::new();
        let good = format!("{},'t'", vec!["0.5"; 16].join(","));
        assert!(push_row(Path::new("f.csv"), 2, &good, &lay, &mut rows).is_ok());
        assert_eq!(&rows[16..], [0.0, 0.0, 0.0, 0.0, 1.0], "t is MASE's class 4");
        let cases = [
            (format!("{},x", vec!["0.5"; 16].join(",")), "class `x`"),
            ("1,2".to_string(), "2 fields"),
            (format!("{},g", vec!["a"; 16].join(",")), "j_zlogz: `a`"),
        ];
        for (line, want) in cases {
            let e = push_row(Path::new("f.csv"), 7, &line, &lay, &mut rows).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("f.csv, line 7") && e.contains(want), "{e}");
        }
        let e = layout(Path::new("f.csv"), 1, &names[1..]).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("no column `j_zlogz`"), "{e}");
    }
}
