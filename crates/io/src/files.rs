//! Reading data files, transparently gunzipping `.gz` ones.

use crate::{IoError, Result};
use flate2::read::GzDecoder;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Reads a whole file; a name ending in `.gz` is decompressed.
pub(crate) fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let raw = std::fs::read(path).map_err(|source| IoError::Read { path: path.to_path_buf(), source })?;
    if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::with_capacity(raw.len() * 4);
        GzDecoder::new(raw.as_slice()).read_to_end(&mut out).map_err(|e| IoError::Decode {
            path: path.to_path_buf(),
            what: "bad gzip stream",
            source: Box::new(e),
        })?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Reads a whole text file (gunzipped when needed).
pub(crate) fn read_text(path: &Path) -> Result<String> {
    String::from_utf8(read_bytes(path)?).map_err(|e| IoError::Decode {
        path: path.to_path_buf(),
        what: "not UTF-8 text",
        source: Box::new(e),
    })
}

/// `dir/name` or, failing that, `dir/name.gz`.
pub(crate) fn find_maybe_gz(dir: &Path, name: &str) -> Option<PathBuf> {
    [dir.join(name), dir.join(format!("{name}.gz"))].into_iter().find(|p| p.is_file())
}

/// The first of `names` present in `dir` (each tried plain, then `.gz`).
pub(crate) fn find_first(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    names.iter().find_map(|n| find_maybe_gz(dir, n))
}

/// How an expected file is listed in a "missing data" error: `name[.gz]`.
pub(crate) fn gz_optional(name: &str) -> String {
    format!("{name}[.gz]")
}

/// Comma-separated display of the files a data set was read from.
pub(crate) fn source_list(paths: &[&Path]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}
