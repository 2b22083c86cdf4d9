//! What a pass returns besides its changes to the graph, and how arguments become typed structs.

use crate::{PassError, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The result of one pass: a JSON value for machines, text for people (tables; empty when the
/// pass has nothing to show), the files it wrote and warnings.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PassReport {
    pub pass: String,
    pub json: Value,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub text: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<PathBuf>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl PassReport {
    /// A report of `pass` holding `json`.
    pub fn new(pass: &str, json: Value) -> PassReport {
        PassReport { pass: pass.to_string(), json, ..PassReport::default() }
    }

    /// The same report with human-readable text.
    pub fn with_text(mut self, text: impl Into<String>) -> PassReport {
        self.text = text.into();
        self
    }
}

/// MASE writes `"NA"` in TOML where Python has `None`; a top-level `"NA"` argument counts as
/// absent. Nested values are left as written, for the parsers that give `"NA"` a meaning there
/// (a quantization config's `frac_width = "NA"` is `width // 2`).
pub(crate) fn na_to_null(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().filter(|(_, x)| x.as_str() != Some("NA")).map(|(k, x)| (k.clone(), x.clone())).collect())
        }
        other => other.clone(),
    }
}

/// Reads the arguments of `pass` into its typed struct. `null` counts as "no arguments", and
/// top-level `"NA"` values as absent keys; unknown keys are rejected by the struct's
/// `deny_unknown_fields`.
pub fn parse_args<A: DeserializeOwned>(pass: &str, args: &Value) -> Result<A> {
    let v = match args {
        Value::Null => Value::Object(Default::default()),
        v => na_to_null(v),
    };
    serde_json::from_value(v).map_err(|source| {
        // serde reports a key that `deny_unknown_fields` rejects only in its message.
        if source.to_string().starts_with("unknown field") {
            PassError::UnknownArg { pass: pass.to_string(), source }
        } else {
            PassError::ArgsCause { pass: pass.to_string(), what: String::new(), source: Box::new(source) }
        }
    })
}

/// Writes `text` to `path`, creating its folder.
pub(crate) fn write_file(path: &Path, text: &str) -> Result<PathBuf> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| PassError::file(dir, "cannot create folder", e))?;
    }
    std::fs::write(path, text).map_err(|e| PassError::file(path, "cannot write", e))?;
    Ok(path.to_path_buf())
}
